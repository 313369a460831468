// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The FlightTicket webhooks served over HTTPS and called by an in-process control plane
//! (opkit-testenv), configured from config/webhook/manifests.yaml (what `make manifests`
//! writes from the markers) with the server's URL and CA, as `make run` configures them:
//!
//! - the webhook server serves the markers' paths and `/convert`;
//! - a ticket to where it departs is denied with the validating webhook's field error;
//! - the defaulting webhook books economy;
//! - a ticket is read at v1 and at v2 through the conversion webhook.
//!
//! The API server calls webhooks with the admission work of issue 12; before it, this test
//! fails at the denial.

use std::net::SocketAddr;
use std::time::Duration;

use flightticket::api::flights_v1::{FlightTicket, FlightTicketSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use opkit::webhook::{CA_FILE, WebhookServer};
use opkit::{Manager, ManagerOptions};
use opkit_testenv::TestEnv;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The operator's webhook server on 127.0.0.1 with a development certificate; its address,
/// the CA (PEM) and the directory holding them.
async fn serve(
    env: &TestEnv,
    stop: &CancellationToken,
) -> Result<(SocketAddr, String, tempfile::TempDir), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    let server = WebhookServer::new()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .dev_certs(dir.path().to_owned(), vec!["127.0.0.1".into()]);
    let server = flightticket::webhook::setup(&mgr, server);
    assert_eq!(
        server.paths(),
        ["/mutate-flights-com-v1-flightticket", "/validate-flights-com-v1-flightticket", "/convert"]
    );
    let addr = server.start(stop.clone()).await?;
    let ca = std::fs::read_to_string(dir.path().join(CA_FILE))?;
    Ok((addr, ca, dir))
}

/// config/webhook/manifests.yaml with every webhook called at `https://<addr><path>`,
/// trusting `ca`.
fn configurations(addr: SocketAddr, ca: &str) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let text = include_str!("../config/webhook/manifests.yaml");
    let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(ca.as_bytes().to_vec()))?;
    let mut out = Vec::new();
    for doc in text.split("---\n").filter(|d| !d.trim().is_empty()) {
        let mut config: Value = serde_saphyr::from_str(doc)?;
        for w in config["webhooks"].as_array_mut().into_iter().flatten() {
            let path = w["clientConfig"]["service"]["path"].as_str().unwrap_or("/").to_owned();
            w["clientConfig"] = json!({"url": format!("https://{addr}{path}"), "caBundle": ca_bundle});
        }
        out.push(config);
    }
    Ok(out)
}

fn ticket(name: &str, from: &str, to: &str) -> FlightTicket {
    let mut t = FlightTicket::new(name, FlightTicketSpec { from: from.into(), to: to.into(), number: 2, class: None });
    t.metadata.namespace = Some("default".into());
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_calls_the_flightticket_webhooks() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let (addr, ca, _certs) = serve(&env, &stop).await?;
    let ca_bundle = serde_json::to_value(k8s_openapi::ByteString(ca.as_bytes().to_vec()))?;

    // The CRD converts through the webhook, as config/crd/patches/webhook_in_flighttickets.yaml
    // (with `make run`'s URL).
    let mut crds = flightticket::api::crds();
    for crd in &mut crds {
        let mut value = serde_json::to_value(&*crd)?;
        value["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://{addr}/convert"), "caBundle": ca_bundle}}});
        *crd = serde_json::from_value::<CustomResourceDefinition>(value)?;
    }
    env.install_crds(crds).await?;
    for config in configurations(addr, &ca)? {
        let yaml = serde_saphyr::to_string(&config)?;
        env.apply_yaml(&yaml).await?;
    }

    let tickets: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let denied = tickets.create(&PostParams::default(), &ticket("nowhere", "Mumbai", "Mumbai")).await;
    match denied {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(
                status.message,
                r#"admission webhook "vflightticket-v1.kb.io" denied the request: FlightTicket.flights.com "nowhere" is invalid: spec.to: Invalid value: "Mumbai": must differ from spec.from"#
            );
        }
        other => return Err(format!("a ticket to where it departs was not denied: {other:?}").into()),
    }

    let created = tickets.create(&PostParams::default(), &ticket("trip", "Mumbai", "London")).await?;
    assert_eq!(created.spec.class.as_deref(), Some("economy"), "the defaulting webhook books economy");

    let gvk = GroupVersionKind::gvk("flights.com", "v2", "FlightTicket");
    let v2: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &ApiResource::from_gvk(&gvk));
    let at_v2 = tokio::time::timeout(Duration::from_secs(30), v2.get("trip")).await??;
    assert_eq!(
        at_v2.data["spec"],
        json!({"departure": "Mumbai", "arrival": "London", "seats": 2, "class": "economy"}),
        "read at v2 through the conversion webhook"
    );
    assert_eq!(tickets.get("trip").await?.spec, created.spec);
    Ok(())
}
