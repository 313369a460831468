//! The status subresource: generation moves with spec changes only, the main resource
//! ignores status, and `/status` writes change only status.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{FlightTicket, FlightTicketStatus, env, env_with_flights, flight};

fn state(ft: &FlightTicket) -> Option<&str> {
    ft.status.as_ref().and_then(|s| s.state.as_deref())
}

#[tokio::test]
async fn generation_and_status_rules_for_a_custom_resource() {
    let env = env_with_flights().await;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let mut initial = flight("g", "A", "B", 1);
    initial.status = Some(FlightTicketStatus { state: Some("ignored-on-create".into()) });
    let created = api.create(&PostParams::default(), &initial).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(state(&created), None, "status is dropped on create when the status subresource is enabled");

    // replace_status: only status changes; spec edits in the body are ignored.
    let mut body = created.clone();
    body.status = Some(FlightTicketStatus { state: Some("booked".into()) });
    body.spec.number = 7;
    let written = api.replace_status("g", &PostParams::default(), &body).await.expect("replace_status");
    assert_eq!(state(&written), Some("booked"));
    assert_eq!(written.spec.number, 1, "spec changes through /status are ignored");
    assert_eq!(written.metadata.generation, Some(1), "status changes do not bump generation");

    // patch_status.
    let patched = api
        .patch_status("g", &PatchParams::default(), &Patch::Merge(json!({"status": {"state": "checked-in"}})))
        .await
        .expect("patch_status");
    assert_eq!(state(&patched), Some("checked-in"));
    assert_eq!(patched.metadata.generation, Some(1));
    assert_eq!(state(&api.get_status("g").await.expect("get_status")), Some("checked-in"));

    // The main resource ignores status but a spec change bumps generation.
    let mut main = api.get("g").await.expect("get");
    main.status = Some(FlightTicketStatus { state: Some("hacked".into()) });
    main.spec.to = "C".into();
    let updated = api.replace("g", &PostParams::default(), &main).await.expect("replace");
    assert_eq!(state(&updated), Some("checked-in"), "status through the main resource is ignored");
    assert_eq!(updated.spec.to, "C");
    assert_eq!(updated.metadata.generation, Some(2), "spec change bumps generation");

    // Status-only patch on the main resource: nothing changes, generation stays.
    let same = api
        .patch("g", &PatchParams::default(), &Patch::Merge(json!({"status": {"state": "hacked-again"}})))
        .await
        .expect("patch main with status");
    assert_eq!(state(&same), Some("checked-in"));
    assert_eq!(same.metadata.generation, Some(2));

    // Metadata-only change: generation stays.
    let labelled = api
        .patch("g", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .expect("label patch");
    assert_eq!(labelled.metadata.generation, Some(2), "metadata changes do not bump generation");

    // A second spec change bumps again.
    let bumped = api
        .patch("g", &PatchParams::default(), &Patch::Merge(json!({"spec": {"number": 2}})))
        .await
        .expect("spec patch");
    assert_eq!(bumped.metadata.generation, Some(3));
    assert_eq!(state(&bumped), Some("checked-in"));
}

#[tokio::test]
async fn deployment_status_subresource() {
    let env = env().await;
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))
    .expect("deployment");
    let created = api.create(&PostParams::default(), &d).await.expect("create");
    assert_eq!(created.metadata.generation, Some(1));

    let with_status = api
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 1, "replicas": 1, "readyReplicas": 1}})),
        )
        .await
        .expect("patch_status");
    let st = with_status.status.clone().expect("status");
    assert_eq!((st.observed_generation, st.ready_replicas), (Some(1), Some(1)));
    assert_eq!(with_status.metadata.generation, Some(1));

    let mut main = with_status.clone();
    main.status = Some(DeploymentStatus { ready_replicas: Some(99), ..Default::default() });
    let replaced = api.replace("d", &PostParams::default(), &main).await.expect("replace main");
    assert_eq!(replaced.status.and_then(|s| s.ready_replicas), Some(1), "status via main resource ignored");
    assert_eq!(replaced.metadata.generation, Some(1), "no spec change, no generation bump");

    let scaled =
        api.patch("d", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}}))).await.expect("scale");
    assert_eq!(scaled.metadata.generation, Some(2));
}
