//! The shard label's guard: a ValidatingAdmissionPolicy, applied by the coordinator, that
//! refuses an update moving a reconciled object from one shard to another without the
//! drain handshake (timebertt's design guards the label with a webhook). Changing the
//! shard label is allowed only while the object carries the drain label, which its shard
//! acknowledges once no reconcile of it runs; so no user, script or second coordinator
//! can make two shards reconcile one object at once. Setting the label on an object that
//! has none, and keeping it, stay allowed.

use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

use super::ShardingConfig;

/// The field manager of the guard's objects.
const FIELD_MANAGER: &str = "opkit-sharding";

/// The policy and binding name of `cfg`'s ring: `opkit-shard-guard-<ring>.<namespace>`.
pub(super) fn name(cfg: &ShardingConfig) -> String {
    format!("opkit-shard-guard-{}.{}", cfg.ring, cfg.namespace)
}

/// The CEL expression: the shard label is unchanged, or was absent, or the drain label
/// was set.
fn expression(cfg: &ShardingConfig) -> String {
    let (shard, drain) = (cfg.shard_label(), cfg.drain_label());
    format!(
        "!has(oldObject.metadata.labels) || !('{shard}' in oldObject.metadata.labels) \
         || '{drain}' in oldObject.metadata.labels \
         || (has(object.metadata.labels) && '{shard}' in object.metadata.labels \
             && object.metadata.labels['{shard}'] == oldObject.metadata.labels['{shard}'])"
    )
}

/// The ValidatingAdmissionPolicy over the updates of every reconciled sharded kind.
pub(super) fn policy(cfg: &ShardingConfig) -> Value {
    let rules: Vec<Value> = cfg
        .kinds()
        .iter()
        .filter(|k| k.hashed)
        .map(|k| {
            json!({"apiGroups": [k.resource.group], "apiVersions": ["*"], "resources": [k.resource.plural],
                   "operations": ["UPDATE"]})
        })
        .collect();
    let message = format!(
        "the label {} names the shard reconciling this object; to move it, set {}=true first \
         (the shard lets go of it), then change or remove the label",
        cfg.shard_label(),
        cfg.drain_label()
    );
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name(cfg)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": expression(cfg), "message": message, "reason": "Forbidden"}],
        },
    })
}

/// Its binding: deny.
pub(super) fn binding(cfg: &ShardingConfig) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name(cfg)},
        "spec": {"policyName": name(cfg), "validationActions": ["Deny"]},
    })
}

/// Applies the policy and its binding (server-side apply). A cluster that does not serve
/// them, or an operator not allowed to write them, leaves the label unguarded: logged.
pub(super) async fn install(client: &kube::Client, cfg: &ShardingConfig) {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let objects = [
        ("ValidatingAdmissionPolicy", "validatingadmissionpolicies", policy(cfg)),
        ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", binding(cfg)),
    ];
    for (kind, plural, object) in objects {
        let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, plural));
        if let Err(e) = api.patch(&name(cfg), &params, &Patch::Apply(&object)).await {
            tracing::warn!(ring = %cfg.ring, error = %e,
                "the shard label is not guarded: applying the {kind} failed (grant create and patch on {plural}); \
                 a user who rewrites the label bypasses the drain handshake");
            return;
        }
    }
}
