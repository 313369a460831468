//! ValidatingAdmissionPolicy and its bindings, as kube-apiserver's plugin evaluates them:
//! Deny with params, Warn (kubectl prints it), Audit, failure policies, messages,
//! variables, selectors, validation of the objects, type checking in status, and
//! Gateway API's safe-upgrades policy applied with kubectl.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use opkit_testenv::TestEnv;
use serde_json::{Value, json};

use crate::common::{env, expect_status, within};
use crate::pod_streaming::run_kubectl;

fn policy_resource(kind: &str, version: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("admissionregistration.k8s.io", version, kind))
}

/// Creates a ValidatingAdmissionPolicy from its JSON.
async fn create_policy(env: &TestEnv, policy: Value) {
    let api: Api<DynamicObject> = Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1"));
    let obj: DynamicObject = serde_json::from_value(policy).expect("policy JSON");
    within("create policy", api.create(&PostParams::default(), &obj)).await.expect("create policy");
}

/// Creates a ValidatingAdmissionPolicyBinding from its JSON.
async fn create_binding(env: &TestEnv, binding: Value) {
    let api: Api<DynamicObject> =
        Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicyBinding", "v1"));
    let obj: DynamicObject = serde_json::from_value(binding).expect("binding JSON");
    within("create binding", api.create(&PostParams::default(), &obj)).await.expect("create binding");
}

fn policy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

/// Rules matching creates and updates of Deployments.
fn deployment_rules() -> Value {
    json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]})
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("deployment JSON")
}

async fn create_deployment(env: &TestEnv, ns: &str, name: &str, replicas: i32) -> Result<Deployment, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(env.client(), ns);
    within("create deployment", api.create(&PostParams::default(), &deployment(name, replicas))).await
}

async fn create_namespace(env: &TestEnv, name: &str, labels: Value) {
    let api: Api<Namespace> = Api::all(env.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("ns");
    within("create namespace", api.create(&PostParams::default(), &ns)).await.expect("create namespace");
}

/// A file in the environment's own directory, for `kubectl apply -f`.
fn write_manifest(env: &TestEnv, name: &str, yaml: &str) -> PathBuf {
    let path = env.kubeconfig_path().parent().expect("kubeconfig dir").join(name);
    std::fs::write(&path, yaml).expect("write manifest");
    path
}

/// The replicas limit of Deployments in a ConfigMap param.
async fn replicas_limit_policy(env: &TestEnv, not_found: &str, failure_policy: &str) {
    create_policy(
        env,
        policy(
            "replica-limit",
            json!({
                "failurePolicy": failure_policy,
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": deployment_rules(),
                "validations": [{
                    "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                    "messageExpression": "'replicas must be no greater than ' + params.data.maxReplicas",
                    "reason": "Invalid",
                }],
            }),
        ),
    )
    .await;
    create_binding(
        env,
        binding(
            "replica-limit-default",
            json!({
                "policyName": "replica-limit",
                "validationActions": ["Deny"],
                "paramRef": {"name": "replica-limits", "namespace": "default", "parameterNotFoundAction": not_found},
            }),
        ),
    )
    .await;
}

async fn set_limit(env: &TestEnv, max: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "replica-limits"},
        "data": {"maxReplicas": max}});
    within("apply the param", cms.patch("replica-limits", &PatchParams::apply("test").force(), &Patch::Apply(&cm)))
        .await
        .expect("apply param");
}

#[tokio::test]
async fn deny_with_a_configmap_param_limits_deployment_replicas() {
    let env = env().await;
    replicas_limit_policy(&env, "Deny", "Fail").await;
    set_limit(&env, "5").await;

    create_deployment(&env, "default", "small", 3).await.expect("3 replicas pass");
    let s = expect_status(create_deployment(&env, "default", "big", 10).await, 422, "Invalid");
    let why = "ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-default' denied request: \
               replicas must be no greater than 5";
    assert_eq!(s.message, format!("deployments.apps \"big\" is forbidden: {why}"));
    let details = s.details.expect("details");
    assert_eq!((details.group.as_str(), details.kind.as_str(), details.name.as_str()), ("apps", "deployments", "big"));
    assert_eq!(details.causes.first().map(|c| c.message.as_str()), Some(why));

    // The param is read at each request: a higher limit admits the same Deployment.
    set_limit(&env, "20").await;
    create_deployment(&env, "default", "big", 10).await.expect("10 replicas pass a limit of 20");

    // An update is checked too.
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let scale = json!({"spec": {"replicas": 30}});
    let s = expect_status(
        within("patch", api.patch("big", &PatchParams::default(), &Patch::Merge(&scale))).await,
        422,
        "Invalid",
    );
    assert!(s.message.ends_with("denied request: replicas must be no greater than 20"), "{}", s.message);

    // A changed policy is used at once: its compiled form is rebuilt after the write.
    let policies: Api<DynamicObject> = Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1"));
    let change = json!({"spec": {"validations": [{"expression": "object.spec.replicas <= 2", "reason": "Forbidden"}]}});
    within("patch policy", policies.patch("replica-limit", &PatchParams::default(), &Patch::Merge(&change)))
        .await
        .expect("patch policy");
    let s = expect_status(create_deployment(&env, "default", "three", 3).await, 403, "Forbidden");
    assert!(s.message.ends_with("denied request: failed expression: object.spec.replicas <= 2"), "{}", s.message);
}

#[tokio::test]
async fn a_missing_param_follows_the_not_found_action_and_the_failure_policy() {
    // Deny + Fail: the request is denied, as kube words it.
    let env = env().await;
    replicas_limit_policy(&env, "Deny", "Fail").await;
    let s = expect_status(create_deployment(&env, "default", "web", 1).await, 422, "Invalid");
    assert_eq!(
        s.message,
        "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding \
         'replica-limit-default' denied request: failed to configure binding: no params found for policy \
         binding with `Deny` parameterNotFoundAction"
    );

    // Deny + Ignore: admitted.
    let env = crate::common::env().await;
    replicas_limit_policy(&env, "Deny", "Ignore").await;
    create_deployment(&env, "default", "web", 100).await.expect("failurePolicy Ignore admits");

    // Allow: the policy is not evaluated without a param.
    let env = crate::common::env().await;
    replicas_limit_policy(&env, "Allow", "Fail").await;
    create_deployment(&env, "default", "web", 100).await.expect("parameterNotFoundAction Allow admits");
}

#[tokio::test]
async fn warn_is_printed_by_kubectl_and_the_object_is_admitted() {
    let env = env().await;
    create_policy(
        &env,
        policy(
            "replicas-warn",
            json!({
                "matchConstraints": deployment_rules(),
                "validations": [{"expression": "object.spec.replicas <= 2", "message": "keep it small"}],
            }),
        ),
    )
    .await;
    create_binding(
        &env,
        binding("replicas-warn", json!({"policyName": "replicas-warn", "validationActions": ["Warn", "Audit"]})),
    )
    .await;
    let manifest = serde_json::to_string(&deployment("warned", 4)).expect("yaml");
    let path = write_manifest(&env, "warned.json", &manifest);
    let (ok, stdout, stderr) = run_kubectl("1.33", &env, &["apply", "-f", path.to_str().expect("path")]).await;
    assert!(ok, "kubectl apply failed: {stderr}");
    assert!(stdout.contains("deployment.apps/warned created"), "{stdout}");
    assert!(
        stderr.contains(
            "Warning: Validation failed for ValidatingAdmissionPolicy 'replicas-warn' with binding 'replicas-warn': keep it small"
        ),
        "{stderr}"
    );
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    within("get", api.get("warned")).await.expect("stored");
}

#[tokio::test]
async fn variables_message_expression_and_match_conditions() {
    let env = env().await;
    create_policy(
        &env,
        policy(
            "image-registry",
            json!({
                "matchConstraints": deployment_rules(),
                "matchConditions": [{"name": "not-exempt", "expression": "!('exempt' in object.metadata.labels)"}],
                "variables": [
                    {"name": "containers", "expression": "object.spec.template.spec.containers"},
                    {"name": "foreign", "expression": "variables.containers.filter(c, !c.image.startsWith('registry.local/')).map(c, c.name)"},
                ],
                "validations": [{
                    "expression": "size(variables.foreign) == 0",
                    "messageExpression": "'containers ' + variables.foreign.join(', ') + ' use images from outside registry.local'",
                }],
            }),
        ),
    )
    .await;
    create_binding(
        &env,
        binding("image-registry", json!({"policyName": "image-registry", "validationActions": ["Deny"]})),
    )
    .await;
    let s = expect_status(create_deployment(&env, "default", "web", 1).await, 422, "Invalid");
    assert!(
        s.message.ends_with("denied request: containers c use images from outside registry.local"),
        "{}",
        s.message
    );

    // A match condition that is false skips the policy.
    let mut exempt = deployment("exempt", 1);
    exempt.metadata.labels.get_or_insert_default().insert("exempt".into(), "yes".into());
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    within("create", api.create(&PostParams::default(), &exempt)).await.expect("exempt deployment admitted");
}

#[tokio::test]
async fn namespace_selector_narrows_the_policy() {
    let env = env().await;
    create_namespace(&env, "prod", json!({"env": "prod"})).await;
    create_namespace(&env, "dev", json!({"env": "dev"})).await;
    let mut rules = deployment_rules();
    rules["namespaceSelector"] = json!({"matchLabels": {"env": "prod"}});
    create_policy(
        &env,
        policy(
            "prod-replicas",
            json!({"matchConstraints": rules, "validations": [{"expression": "object.spec.replicas >= 2",
                "message": "production needs two replicas"}]}),
        ),
    )
    .await;
    create_binding(
        &env,
        binding("prod-replicas", json!({"policyName": "prod-replicas", "validationActions": ["Deny"]})),
    )
    .await;
    create_deployment(&env, "dev", "one", 1).await.expect("dev is not selected");
    let s = expect_status(create_deployment(&env, "prod", "one", 1).await, 422, "Invalid");
    assert!(s.message.ends_with("denied request: production needs two replicas"), "{}", s.message);

    // A binding's own matchResources narrows further.
    let bindings: Api<DynamicObject> =
        Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicyBinding", "v1"));
    let narrow = json!({"spec": {"matchResources": {"objectSelector": {"matchLabels": {"app": "checked"}}}}});
    within("patch binding", bindings.patch("prod-replicas", &PatchParams::default(), &Patch::Merge(&narrow)))
        .await
        .expect("patch binding");
    create_deployment(&env, "prod", "two", 1).await.expect("object selector excludes it");
}

#[tokio::test]
async fn invalid_policies_and_bindings_are_refused_with_kubes_field_errors() {
    let env = env().await;
    let api: Api<DynamicObject> = Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1"));
    let bad = |spec: Value| serde_json::from_value::<DynamicObject>(policy("bad", spec)).expect("json");

    let s = expect_status(
        within(
            "create",
            api.create(
                &PostParams::default(),
                &bad(json!({"matchConstraints": deployment_rules(), "validations": [{"expression": "object.spec.replicas <"}]})),
            ),
        )
        .await,
        422,
        "Invalid",
    );
    let cause = &s.details.expect("details").causes[0];
    assert_eq!(cause.field, "spec.validations[0].expression");
    assert!(cause.message.contains("compilation failed: ERROR: <input>"), "{cause:?}");

    let s = expect_status(
        within(
            "create",
            api.create(
                &PostParams::default(),
                &bad(json!({"matchConstraints": deployment_rules(), "validations": [{"expression": "params.x == 1"}]})),
            ),
        )
        .await,
        422,
        "Invalid",
    );
    assert!(
        s.message.contains(
            "spec.validations[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"
        ),
        "{}",
        s.message
    );

    let s = expect_status(
        within("create", api.create(&PostParams::default(), &bad(json!({"validations": [{"expression": "true"}]}))))
            .await,
        422,
        "Invalid",
    );
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: spec.matchConstraints: Required value"
    );

    let bindings: Api<DynamicObject> =
        Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicyBinding", "v1"));
    let both = serde_json::from_value::<DynamicObject>(binding(
        "both",
        json!({"policyName": "p", "validationActions": ["Deny", "Warn"]}),
    ))
    .expect("json");
    let s = expect_status(within("create", bindings.create(&PostParams::default(), &both)).await, 422, "Invalid");
    assert!(s.message.contains("spec.validationActions: Invalid value"), "{}", s.message);
    assert!(s.message.contains("must not contain both Deny and Warn"), "{}", s.message);

    let both_refs = serde_json::from_value::<DynamicObject>(binding(
        "refs",
        json!({"policyName": "p", "validationActions": ["Deny"],
            "paramRef": {"name": "x", "selector": {}, "parameterNotFoundAction": "Deny"}}),
    ))
    .expect("json");
    let s = expect_status(within("create", bindings.create(&PostParams::default(), &both_refs)).await, 422, "Invalid");
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"refs\" is invalid: \
         [spec.paramRef.name: Forbidden: name and selector are mutually exclusive, \
         spec.paramRef.selector: Forbidden: name and selector are mutually exclusive]"
    );

    let s = expect_status(
        within("create", api.create(&PostParams::default(), &bad(json!({"matchConstraints": deployment_rules()}))))
            .await,
        422,
        "Invalid",
    );
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: \
         [spec.validations: Required value: validations or auditAnnotations must contain at least one item, \
         spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item]"
    );
}

#[tokio::test]
async fn type_checking_is_written_to_the_policy_status() {
    let env = env().await;
    create_policy(
        &env,
        policy(
            "typo",
            json!({"matchConstraints": deployment_rules(), "validations": [
                {"expression": "object.spec.replicas > 0"},
                {"expression": "object.spec.replicaz > 0"},
            ]}),
        ),
    )
    .await;
    let api: Api<DynamicObject> = Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1"));
    let status = within("the type checker's status", async {
        let mut watch = std::pin::pin!(kube::runtime::watcher::watch_object(api.clone(), "typo"));
        loop {
            use futures::StreamExt;
            let Some(Ok(Some(obj))) = watch.next().await else { continue };
            let status = obj.data["status"].clone();
            if status["observedGeneration"] == 1 {
                return status;
            }
        }
    })
    .await;
    let warnings = status["typeChecking"]["expressionWarnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{status}");
    assert_eq!(warnings[0]["fieldRef"], "spec.validations[1].expression");
    let text = warnings[0]["warning"].as_str().unwrap_or_default();
    assert!(text.starts_with("apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'"), "{text}");
}

#[tokio::test]
async fn kubectl_get_prints_kubes_columns() {
    let env = env().await;
    replicas_limit_policy(&env, "Deny", "Fail").await;
    let (ok, stdout, stderr) = run_kubectl("1.33", &env, &["get", "validatingadmissionpolicies"]).await;
    assert!(ok, "{stderr}");
    let rows: Vec<Vec<&str>> = stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"], "{stdout}");
    assert_eq!(rows[1][..3], ["replica-limit", "1", "v1/ConfigMap"], "{stdout}");
    let (ok, stdout, stderr) = run_kubectl("1.33", &env, &["get", "validatingadmissionpolicybindings"]).await;
    assert!(ok, "{stderr}");
    let rows: Vec<Vec<&str>> = stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"], "{stdout}");
    assert_eq!(rows[1][..3], ["replica-limit-default", "replica-limit", "default/replica-limits"], "{stdout}");
}

#[tokio::test]
async fn policies_are_served_at_v1beta1_too() {
    let env = env().await;
    create_policy(
        &env,
        policy("p", json!({"matchConstraints": deployment_rules(), "validations": [{"expression": "true"}]})),
    )
    .await;
    let beta: Api<DynamicObject> =
        Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1beta1"));
    let got = within("get v1beta1", beta.get("p")).await.expect("get at v1beta1");
    assert_eq!(got.types.map(|t| t.api_version).as_deref(), Some("admissionregistration.k8s.io/v1beta1"));
    assert_eq!(got.data["spec"]["failurePolicy"], "Fail", "defaulted");
    assert_eq!(got.data["spec"]["matchConstraints"]["matchPolicy"], "Equivalent", "defaulted");
}

#[tokio::test]
async fn gateway_api_safe_upgrades_policy_applies_with_kubectl_and_denies_old_bundles() {
    let env = env().await;
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gateway_api_safe_upgrades.yaml");
    let (ok, stdout, stderr) = run_kubectl("1.33", &env, &["apply", "-f", fixture.to_str().expect("path")]).await;
    assert!(ok, "kubectl apply failed: {stderr}");
    assert!(
        stdout.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/safe-upgrades.gateway.networking.k8s.io created"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "validatingadmissionpolicybinding.admissionregistration.k8s.io/safe-upgrades.gateway.networking.k8s.io created"
        ),
        "{stdout}"
    );

    let crd = |version: &str, channel: &str| {
        format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gateways.gateway.networking.k8s.io
  annotations:
    gateway.networking.k8s.io/bundle-version: {version}
    gateway.networking.k8s.io/channel: {channel}
spec:
  group: gateway.networking.k8s.io
  names: {{kind: Gateway, listKind: GatewayList, plural: gateways, singular: gateway}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"#
        )
    };
    let old = write_manifest(&env, "old.yaml", &crd("v1.2.0", "standard"));
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["apply", "-f", old.to_str().expect("path")]).await;
    assert!(!ok, "an old bundle must be denied");
    assert!(
        stderr.contains(
            "ValidatingAdmissionPolicy 'safe-upgrades.gateway.networking.k8s.io' with binding \
             'safe-upgrades.gateway.networking.k8s.io' denied request: Installing CRDs with version before v1.5.0 is \
             prohibited by default."
        ),
        "{stderr}"
    );

    let current = write_manifest(&env, "current.yaml", &crd("v1.5.1", "standard"));
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["apply", "-f", current.to_str().expect("path")]).await;
    assert!(ok, "the current bundle is admitted: {stderr}");

    let experimental = write_manifest(&env, "experimental.yaml", &crd("v1.5.1", "experimental"));
    let (ok, _, stderr) = run_kubectl("1.33", &env, &["apply", "-f", experimental.to_str().expect("path")]).await;
    assert!(!ok, "experimental over standard must be denied");
    assert!(
        stderr.contains("Installing experimental CRDs on top of standard channel CRDs is prohibited by default."),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_authorizer_variable_checks_the_requesting_user_with_rbac() {
    let env = env().await;
    within(
        "service account and its role",
        env.apply_yaml(
            r#"apiVersion: v1
kind: ServiceAccount
metadata: {name: deployer, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-writer, namespace: default}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: cm-writer, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-writer}
subjects:
- {kind: ServiceAccount, name: deployer, namespace: default}
"#,
        ),
    )
    .await
    .expect("RBAC applied");
    create_policy(
        &env,
        policy(
            "secret-readers-only",
            json!({
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "validations": [{
                    "expression": "authorizer.requestResource.check('create').allowed() && \
                        authorizer.group('').resource('secrets').namespace(request.namespace).check('get').allowed()",
                    "messageExpression": "'user ' + request.userInfo.username + ' may not read secrets'",
                }],
            }),
        ),
    )
    .await;
    create_binding(
        &env,
        binding("secret-readers-only", json!({"policyName": "secret-readers-only", "validationActions": ["Deny"]})),
    )
    .await;

    let deployer = within("deployer client", env.service_account_client("default", "deployer")).await.expect("client");
    let cms: Api<ConfigMap> = Api::namespaced(deployer, "default");
    let cm = crate::common::config_map("settings", &[("a", "b")]);
    let s = expect_status(within("create", cms.create(&PostParams::default(), &cm)).await, 422, "Invalid");
    assert!(
        s.message.ends_with("denied request: user system:serviceaccount:default:deployer may not read secrets"),
        "{}",
        s.message
    );

    within(
        "grant get secrets",
        env.apply_yaml(
            r#"apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: cm-writer, namespace: default}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [create]}
- {apiGroups: [""], resources: [secrets], verbs: [get]}
"#,
        ),
    )
    .await
    .expect("role updated");
    within("create", cms.create(&PostParams::default(), &cm)).await.expect("a secret reader may create it");
}

#[tokio::test]
async fn equivalent_match_policy_sees_the_object_at_the_rules_version() {
    let env = env().await;
    let rules = |match_policy: &str| {
        json!({"matchPolicy": match_policy, "resourceRules": [{"apiGroups": ["autoscaling"], "apiVersions": ["v2"],
            "operations": ["CREATE"], "resources": ["horizontalpodautoscalers"]}]})
    };
    create_policy(
        &env,
        policy(
            "hpa-v2",
            json!({"matchConstraints": rules("Equivalent"), "validations": [{
                "expression": "false",
                "messageExpression": "'seen at ' + request.kind.version + ' with ' + string(size(object.spec.metrics)) + ' metric'",
            }]}),
        ),
    )
    .await;
    create_binding(&env, binding("hpa-v2", json!({"policyName": "hpa-v2", "validationActions": ["Deny"]}))).await;
    let v1 = ApiResource::from_gvk(&GroupVersionKind::gvk("autoscaling", "v1", "HorizontalPodAutoscaler"));
    let hpas: Api<DynamicObject> = Api::namespaced_with(env.client(), "default", &v1);
    let hpa = |name: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}))
        .expect("hpa")
    };
    // A v1 request matches a v2 rule, and the policy sees the v2 object (one CPU metric).
    let s = expect_status(within("create", hpas.create(&PostParams::default(), &hpa("a"))).await, 422, "Invalid");
    assert!(s.message.ends_with("denied request: seen at v2 with 1 metric"), "{}", s.message);

    // With matchPolicy Exact, the v1 request does not match.
    let policies: Api<DynamicObject> = Api::all_with(env.client(), &policy_resource("ValidatingAdmissionPolicy", "v1"));
    let exact = json!({"spec": {"matchConstraints": rules("Exact")}});
    within("patch", policies.patch("hpa-v2", &PatchParams::default(), &Patch::Merge(&exact))).await.expect("patch");
    within("create", hpas.create(&PostParams::default(), &hpa("b"))).await.expect("Exact does not match v1");
}

#[tokio::test]
async fn audit_actions_write_the_validation_failure_to_the_audit_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("audit.log");
    let cfg =
        opkit_apiserver::ServerConfig { audit_log: Some(path.clone()), ..opkit_apiserver::ServerConfig::in_memory() };
    let env = TestEnv::builder().server(cfg).without_controllers().start().await.expect("env");
    create_policy(
        &env,
        policy(
            "replicas-audit",
            json!({
                "matchConstraints": deployment_rules(),
                "validations": [{"expression": "object.spec.replicas <= 2", "message": "keep it small"}],
            }),
        ),
    )
    .await;
    create_binding(
        &env,
        binding("replicas-audit", json!({"policyName": "replicas-audit", "validationActions": ["Audit"]})),
    )
    .await;
    create_deployment(&env, "default", "audited", 4).await.expect("Audit alone admits");

    let log = std::fs::read_to_string(&path).expect("audit log");
    let created = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "deployments")
        .expect("the create's event");
    let failure =
        created["annotations"]["validation.policy.admission.k8s.io/validation_failure"].as_str().unwrap_or_default();
    assert!(failure.contains("keep it small") && failure.contains("replicas-audit"), "{created}");
}
