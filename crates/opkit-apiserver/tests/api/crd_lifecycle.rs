//! CRD lifecycle: a new CRD is served at once with Established and NamesAccepted true;
//! deleting it removes its objects and stops serving the resource.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};

use crate::common::{FlightTicket, env, expect_status, flight, within};

fn condition(crd: &CustomResourceDefinition, kind: &str) -> Option<String> {
    crd.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == kind).map(|c| c.status.clone())
}

async fn create_and_establish(crds: &Api<CustomResourceDefinition>) -> CustomResourceDefinition {
    let name = "flighttickets.flights.com";
    crds.create(&PostParams::default(), &FlightTicket::crd()).await.expect("create CRD");
    within("Established", await_condition(crds.clone(), name, conditions::is_crd_established())).await.expect("await");
    let crd = crds.get(name).await.expect("get CRD");
    assert_eq!(condition(&crd, "Established").as_deref(), Some("True"));
    assert_eq!(condition(&crd, "NamesAccepted").as_deref(), Some("True"));
    let accepted = crd.status.as_ref().and_then(|s| s.accepted_names.as_ref()).expect("acceptedNames");
    assert_eq!(accepted.kind, "FlightTicket");
    assert_eq!(accepted.plural, "flighttickets");
    assert_eq!(accepted.short_names.as_deref(), Some(&["ft".to_string()][..]));
    crd
}

#[tokio::test]
async fn crd_is_served_once_established_and_removed_with_its_objects() {
    let env = env().await;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let tickets: Api<FlightTicket> = Api::namespaced(client.clone(), "default");
    expect_status(tickets.list(&ListParams::default()).await, 404, "NotFound");

    let crd = create_and_establish(&crds).await;
    // Served immediately: create and list work without waiting for anything else.
    for n in ["t1", "t2", "t3"] {
        tickets.create(&PostParams::default(), &flight(n, "A", "B", 1)).await.expect("create ticket");
    }
    assert_eq!(tickets.list(&ListParams::default()).await.expect("list").items.len(), 3);
    let groups = client.list_api_groups().await.expect("groups");
    assert!(groups.groups.iter().any(|g| g.name == "flights.com"), "group discoverable");

    let uid = crd.metadata.uid.clone().expect("uid");
    crds.delete("flighttickets.flights.com", &DeleteParams::default()).await.expect("delete CRD");
    within("CRD removal", await_condition(crds.clone(), "flighttickets.flights.com", conditions::is_deleted(&uid)))
        .await
        .expect("await deletion");

    expect_status(tickets.get("t1").await, 404, "NotFound");
    expect_status(tickets.list(&ListParams::default()).await, 404, "NotFound");
    let groups = client.list_api_groups().await.expect("groups");
    assert!(!groups.groups.iter().any(|g| g.name == "flights.com"), "group no longer discoverable");

    // Recreating the CRD brings back an empty resource: the objects were really deleted.
    create_and_establish(&crds).await;
    assert!(
        tickets.list(&ListParams::default()).await.expect("list").items.is_empty(),
        "objects of a deleted CRD must not come back"
    );
}

#[tokio::test]
async fn crd_deletion_waits_for_object_finalizers() {
    let env = env().await;
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let tickets: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let crd = create_and_establish(&crds).await;
    let mut held = flight("held", "A", "B", 1);
    held.metadata.finalizers = Some(vec!["flights.com/hold".into()]);
    tickets.create(&PostParams::default(), &held).await.expect("create");

    crds.delete("flighttickets.flights.com", &DeleteParams::default()).await.expect("delete CRD");
    // The CRD is terminating, and the object is being deleted but kept by its finalizer.
    let terminating = crds.get("flighttickets.flights.com").await.expect("CRD still present");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let obj = within(
        "the object to get a deletionTimestamp",
        await_condition(tickets.clone(), "held", |o: Option<&FlightTicket>| {
            o.is_some_and(|o| o.metadata.deletion_timestamp.is_some())
        }),
    )
    .await
    .expect("await");
    assert!(obj.is_some());

    let mut release = tickets.get("held").await.expect("get");
    release.metadata.finalizers = None;
    tickets.replace("held", &PostParams::default(), &release).await.expect("release finalizer");
    let uid = crd.metadata.uid.clone().expect("uid");
    within("CRD removal", await_condition(crds.clone(), "flighttickets.flights.com", conditions::is_deleted(&uid)))
        .await
        .expect("await deletion");
}
