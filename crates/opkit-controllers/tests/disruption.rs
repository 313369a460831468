//! The disruption controller against a real opkit API server: PodDisruptionBudget status
//! (healthy, desired, expected, allowed disruptions and the DisruptionAllowed condition)
//! for minAvailable and maxUnavailable budgets over a Deployment's pods.

use crate::common;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams};
use opkit_testenv::TestEnv;

use common::{Error, kubectl, wait};

const DEPLOYMENT_AND_BUDGETS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: min-two}
spec: {minAvailable: 2, selector: {matchLabels: {app: web}}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: half}
spec: {maxUnavailable: "50%", selector: {matchLabels: {app: web}}}
"#;

/// (currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed, condition reason)
fn counts(b: &PodDisruptionBudget) -> (i32, i32, i32, i32, String) {
    let s = b.status.clone().unwrap_or_default();
    let reason = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed")
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    (s.current_healthy, s.desired_healthy, s.expected_pods, s.disruptions_allowed, reason)
}

#[tokio::test]
async fn budgets_report_allowed_disruptions_as_pods_come_and_go() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    env.apply_yaml(DEPLOYMENT_AND_BUDGETS).await?;
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    let is = |want: (i32, i32, i32, i32, &'static str)| {
        move |b: Option<&PodDisruptionBudget>| {
            b.is_some_and(|b| {
                let c = counts(b);
                (c.0, c.1, c.2, c.3, c.4.as_str()) == want
            })
        }
    };
    wait(&budgets, "min-two", is((3, 2, 3, 1, "SufficientPods"))).await?;
    // 50% of 3 rounds up to 2 unavailable: 1 must stay healthy.
    wait(&budgets, "half", is((3, 1, 3, 2, "SufficientPods"))).await?;
    let table = kubectl(&env, &["get", "pdb", "min-two", "--no-headers"]).await?;
    let cols: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(
        &cols[..4],
        ["min-two", "2", "N/A", "1"],
        "NAME MIN-AVAILABLE MAX-UNAVAILABLE ALLOWED-DISRUPTIONS: {table}"
    );

    // Scaled down to 2: the minAvailable budget allows nothing more.
    kubectl(&env, &["scale", "deployment/web", "--replicas=2"]).await?;
    wait(&budgets, "min-two", is((2, 2, 2, 0, "InsufficientPods"))).await?;
    budgets
        .patch("min-two", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"minAvailable": 1}})))
        .await?;
    wait(&budgets, "min-two", is((2, 1, 2, 1, "SufficientPods"))).await?;
    Ok(())
}
