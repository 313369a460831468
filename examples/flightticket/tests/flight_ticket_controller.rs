// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! Tests of the FlightTicket controller against an in-process control plane (opkit-testenv):
//! a real API server with garbage collection and simulated nodes and pods.
//!
//! - the controller books the sample (status subresource: phase, booked,
//!   observedGeneration, `Ready`), follows spec changes and rejects same-airport tickets;
//! - the API server enforces the CRD schema: `number` outside 1..=10 is a 422 naming
//!   `spec.number`;
//! - `kubectl get` at v1 prints the FROM/TO/NUMBER printer columns.

use std::time::Duration;

use flightticket::api::flights_v1::{CONDITION_READY, FlightTicket, FlightTicketPhase, FlightTicketSpec};
use kube::api::{Api, Patch, PatchParams, PostParams};
use opkit::status::{find_condition, is_condition_false, is_condition_true};
use opkit::{Manager, ManagerOptions};
use opkit_testenv::{TestEnv, wait_for};
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(30);

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A ticket named `name` in `default`.
fn ticket(name: &str, from: &str, to: &str, number: i32) -> FlightTicket {
    let mut t = FlightTicket::new(name, FlightTicketSpec { from: from.into(), to: to.into(), number, class: None });
    t.metadata.namespace = Some("default".into());
    t
}

/// Waits until the ticket's status describes its current generation and has the given phase.
async fn wait_for_phase(
    api: &Api<FlightTicket>,
    name: &str,
    phase: FlightTicketPhase,
) -> Result<FlightTicket, Box<dyn std::error::Error>> {
    let reconciled = move |t: Option<&FlightTicket>| {
        t.and_then(|t| t.status.as_ref().map(|s| (s, t.metadata.generation)))
            .is_some_and(|(s, generation)| s.phase == Some(phase) && s.observed_generation == generation)
    };
    let described = format!("to be {phase} at its current generation");
    let ticket = wait_for(api, name, &described, reconciled, TIMEOUT).await?;
    Ok(ticket.ok_or_else(|| format!("FlightTicket {name} was deleted"))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_books_the_sample_and_follows_changes() -> TestResult {
    let env = TestEnv::start().await?;
    env.install_crds(flightticket::api::crds()).await?;
    let mgr = Manager::new(env.client(), ManagerOptions::default());
    flightticket::controller::setup(&mgr)?;
    let stop = CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));

    env.apply_yaml(include_str!("../config/samples/flights_v1_flightticket.yaml")).await?;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");
    let booked = wait_for_phase(&api, "flightticket-sample", FlightTicketPhase::Booked).await?;
    let status = booked.status.unwrap_or_default();
    assert!(status.booked);
    assert_eq!(status.observed_generation, Some(1));
    assert!(is_condition_true(&status.conditions, CONDITION_READY), "{:?}", status.conditions);
    let ready = find_condition(&status.conditions, CONDITION_READY).ok_or("no Ready condition")?;
    assert_eq!((ready.reason.as_str(), ready.observed_generation), ("Booked", Some(1)));
    assert_eq!(ready.message, "booked 2 seats from Mumbai to London");

    // A spec change bumps the generation; the controller reports it.
    let patch = serde_json::json!({"spec": {"number": 5}});
    api.patch("flightticket-sample", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let rebooked = wait_for_phase(&api, "flightticket-sample", FlightTicketPhase::Booked).await?;
    assert_eq!(rebooked.metadata.generation, Some(2));
    let status = rebooked.status.unwrap_or_default();
    assert_eq!(status.observed_generation, Some(2));
    let ready = find_condition(&status.conditions, CONDITION_READY).ok_or("no Ready condition")?;
    assert_eq!((ready.message.as_str(), ready.observed_generation), ("booked 5 seats from Mumbai to London", Some(2)));

    // A flight to where it departs is rejected, with Ready=False.
    api.create(&PostParams::default(), &ticket("nowhere", "Seoul", "Seoul", 1)).await?;
    let rejected = wait_for_phase(&api, "nowhere", FlightTicketPhase::Rejected).await?;
    let status = rejected.status.unwrap_or_default();
    assert!(!status.booked);
    assert!(is_condition_false(&status.conditions, CONDITION_READY), "{:?}", status.conditions);

    stop.cancel();
    running.await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn number_outside_1_to_10_is_rejected_with_422() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    env.install_crds(flightticket::api::crds()).await?;
    let api: Api<FlightTicket> = Api::namespaced(env.client(), "default");

    for (name, number, bound) in [("zero", 0, "greater than or equal to 1"), ("eleven", 11, "less than or equal to 10")]
    {
        let err = match api.create(&PostParams::default(), &ticket(name, "Mumbai", "London", number)).await {
            Ok(t) => return Err(format!("number {number} was accepted: {t:?}").into()),
            Err(kube::Error::Api(status)) => status,
            Err(e) => return Err(format!("number {number}: not an API error: {e}").into()),
        };
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{err:?}");
        assert!(err.message.contains(&format!("FlightTicket.flights.com \"{name}\" is invalid")), "{}", err.message);
        assert!(err.message.contains("spec.number"), "{}", err.message);
        assert!(err.message.contains(bound), "{}", err.message);
        let causes = err.details.map(|d| d.causes).unwrap_or_default();
        assert!(causes.iter().any(|c| c.field == "spec.number" && c.reason == "FieldValueInvalid"), "{causes:?}");
        assert!(api.get_opt(name).await?.is_none(), "{name} was stored");
    }
    // The bounds themselves are valid.
    api.create(&PostParams::default(), &ticket("one", "Mumbai", "London", 1)).await?;
    api.create(&PostParams::default(), &ticket("ten", "Mumbai", "London", 10)).await?;
    // An update out of range is rejected too.
    let patch = serde_json::json!({"spec": {"number": 11}});
    match api.patch("ten", &PatchParams::default(), &Patch::Merge(&patch)).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("spec.number"), "{}", status.message);
        }
        other => return Err(format!("patch to number 11: {other:?}").into()),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_ft_prints_the_columns() -> TestResult {
    let env = TestEnv::builder().without_controllers().start().await?;
    env.install_crds(flightticket::api::crds()).await?;
    env.apply_yaml(include_str!("../config/samples/flights_v1_flightticket.yaml")).await?;

    let kubeconfig = env.kubeconfig_path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            // v2 is the preferred version; without the conversion webhook (not served here)
            // the v1 columns are read at v1.
            .args(["get", "flighttickets.v1.flights.com", "--namespace", "default"])
            .output()
    })
    .await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "kubectl failed: {}", String::from_utf8_lossy(&output.stderr));
    let rows: Vec<Vec<&str>> = stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows,
        vec![vec!["NAME", "FROM", "TO", "NUMBER"], vec!["flightticket-sample", "Mumbai", "London", "2"]],
        "{stdout}"
    );
    Ok(())
}

/// `config/crd/bases` holds what `opkit generate` writes for `api::crds()` today: a
/// `---`-prefixed YAML document per CRD, named `<group>_<plural>.yaml`.
#[test]
fn generated_crd_is_up_to_date() -> TestResult {
    let crds = flightticket::api::crds();
    assert_eq!(crds.len(), 1);
    for crd in crds {
        let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/crd/bases").join(&file);
        let on_disk = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut manifest = serde_json::to_value(&crd)?;
        opkit::crd::normalize_manifest(&mut manifest);
        let expected = format!("---\n{}", serde_saphyr::to_string(&manifest)?);
        assert!(on_disk == expected, "{file} is stale: run `opkit generate` (make manifests)");
    }
    Ok(())
}
