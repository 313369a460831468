//! CRUD on a `#[derive(CustomResource)]` type (FlightTicket) and on DynamicObject.

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::discovery::{Discovery, Scope};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::common::{FlightTicket, env_with_flights, expect_status, flight, rv_num};

#[tokio::test]
async fn flight_ticket_typed_crud() {
    let env = env_with_flights().await;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");

    let created = api.create(&PostParams::default(), &flight("f1", "AMS", "SFO", 2)).await.expect("create");
    assert_eq!(created.spec.from, "AMS");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());

    let got = api.get("f1").await.expect("get");
    assert_eq!(got.spec, created.spec);

    let mut changed = got.clone();
    changed.spec.number = 3;
    let replaced = api.replace("f1", &PostParams::default(), &changed).await.expect("replace");
    assert_eq!(replaced.spec.number, 3);
    assert!(rv_num(&replaced.metadata) > rv_num(&created.metadata));

    let patched = api
        .patch("f1", &PatchParams::default(), &Patch::Merge(json!({"spec": {"to": "LIS"}})))
        .await
        .expect("merge patch");
    assert_eq!((patched.spec.from.as_str(), patched.spec.to.as_str(), patched.spec.number), ("AMS", "LIS", 3));

    api.create(&PostParams::default(), &flight("f2", "LIS", "OPO", 1)).await.expect("create f2");
    let list = api.list(&ListParams::default()).await.expect("list");
    let names: Vec<String> = list.items.iter().map(|f| f.name_any()).collect();
    assert_eq!(names, ["f1", "f2"]);

    api.delete("f1", &DeleteParams::default()).await.expect("delete");
    expect_status(api.get("f1").await, 404, "NotFound");
    assert_eq!(api.list(&ListParams::default()).await.expect("list").items.len(), 1);
}

#[tokio::test]
async fn flight_ticket_unknown_fields_are_pruned() {
    let env = env_with_flights().await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(env.client(), "default", &ApiResource::erase::<FlightTicket>(&()));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "flights.com/v1",
        "kind": "FlightTicket",
        "metadata": {"name": "pruned"},
        "spec": {"from": "A", "to": "B", "number": 1, "bogus": true}
    }))
    .expect("dynamic object");
    let created = api.create(&PostParams::default(), &obj).await.expect("create");
    assert!(created.data["spec"].get("bogus").is_none(), "unknown field pruned: {}", created.data);
    assert_eq!(created.data["spec"]["number"], 1);
}

#[tokio::test]
async fn dynamic_object_access_via_discovery() {
    let env = env_with_flights().await;
    let discovery = Discovery::new(env.client()).run().await.expect("discovery");
    let gvk = GroupVersionKind::gvk("flights.com", "v1", "FlightTicket");
    let (ar, caps) = discovery.resolve_gvk(&gvk).expect("FlightTicket discovered");
    assert_eq!(ar.plural, "flighttickets");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert_eq!(ar, ApiResource::erase::<FlightTicket>(&()));

    let resources = env.client().list_api_group_resources("flights.com/v1").await.expect("resource list");
    let ft = resources.resources.iter().find(|r| r.name == "flighttickets").expect("flighttickets listed");
    assert_eq!(ft.short_names.as_deref(), Some(&["ft".to_string()][..]));
    assert!(ft.namespaced);
    assert!(resources.resources.iter().any(|r| r.name == "flighttickets/status"), "status subresource listed");

    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ar);
    let obj = DynamicObject::new("dyn", &ar).data(json!({"spec": {"from": "X", "to": "Y", "number": 4}}));
    let created = api.create(&PostParams::default(), &obj).await.expect("create dynamic");
    assert_eq!(created.types.as_ref().map(|t| t.kind.as_str()), Some("FlightTicket"));
    assert_eq!(created.data["spec"]["number"], 4);

    // The typed API sees what the dynamic API wrote, and vice versa.
    let typed: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    assert_eq!(typed.get("dyn").await.expect("typed get").spec.to, "Y");
    typed.create(&PostParams::default(), &flight("typed", "P", "Q", 9)).await.expect("typed create");
    let listed = api.list(&ListParams::default()).await.expect("dynamic list");
    let mut names: Vec<String> = listed.items.iter().map(|o| o.name_any()).collect();
    names.sort();
    assert_eq!(names, ["dyn", "typed"]);

    let patched = api
        .patch(
            "dyn",
            &PatchParams::apply("dyn-test").force(),
            &Patch::Apply(json!({
                "apiVersion": FlightTicket::api_version(&()),
                "kind": "FlightTicket",
                "metadata": {"name": "dyn"},
                "spec": {"from": "X", "to": "Z", "number": 4}
            })),
        )
        .await
        .expect("apply dynamic");
    assert_eq!(patched.data["spec"]["to"], "Z");
    api.delete("dyn", &DeleteParams::default()).await.expect("delete dynamic");
    expect_status(api.get("dyn").await, 404, "NotFound");
}
