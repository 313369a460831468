//! The flowcontrol status controller against a real opkit API server: a FlowSchema that
//! names a missing PriorityLevelConfiguration is `Dangling` (`True`, `NotFound`) until the
//! level is created (`False`, `Found`) and again once it is deleted; kubectl shows it in
//! the MISSINGPL column.

use crate::common;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use kube::api::{Api, DeleteParams};
use opkit_testenv::TestEnv;

use common::{Error, kubectl, wait};

const SCHEMA: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: my-operator}
spec:
  priorityLevelConfiguration: {name: operators}
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: ServiceAccount, serviceAccount: {name: controller, namespace: system}}]
    resourceRules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"]}]
"#;

const LEVEL: &str = r#"
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: operators}
spec: {type: Limited, limited: {limitResponse: {type: Reject}}}
"#;

/// (status, reason) of the schema's Dangling condition.
fn dangling(fs: &FlowSchema) -> Option<(String, String)> {
    let conditions = fs.status.as_ref()?.conditions.as_ref()?;
    let c = conditions.iter().find(|c| c.type_.as_deref() == Some("Dangling"))?;
    Some((c.status.clone()?, c.reason.clone()?))
}

fn is(status: &'static str, reason: &'static str) -> impl Fn(Option<&FlowSchema>) -> bool {
    move |fs| fs.and_then(dangling).is_some_and(|(s, r)| s == status && r == reason)
}

#[tokio::test]
async fn flow_schemas_report_whether_their_priority_level_exists() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let schemas: Api<FlowSchema> = Api::all(env.client());
    wait(&schemas, "global-default", is("False", "Found")).await?;

    env.apply_yaml(SCHEMA).await?;
    let fs = wait(&schemas, "my-operator", is("True", "NotFound")).await?;
    let message = fs.status.and_then(|s| s.conditions).and_then(|c| c.into_iter().next()).and_then(|c| c.message);
    assert_eq!(
        message.as_deref(),
        Some(
            "This FlowSchema references the PriorityLevelConfiguration object named \"operators\" but there is no such object"
        )
    );
    let row = kubectl(&env, &["get", "flowschema", "my-operator", "--no-headers"]).await?;
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        (cols[1], cols[2], cols[3], cols.last().copied()),
        ("operators", "1000", "ByUser", Some("True")),
        "{row}"
    );

    env.apply_yaml(LEVEL).await?;
    wait(&schemas, "my-operator", is("False", "Found")).await?;

    let levels: Api<PriorityLevelConfiguration> = Api::all(env.client());
    levels.delete("operators", &DeleteParams::default()).await?;
    wait(&schemas, "my-operator", is("True", "NotFound")).await?;
    Ok(())
}
