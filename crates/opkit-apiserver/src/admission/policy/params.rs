//! A binding's params (kube's `CollectParams`): the object `paramRef` names, or those
//! its selector picks, of the policy's `paramKind`, read at each request.

use opkit_apimachinery::selector::LabelSelector;
use serde_json::Value;

use super::model::{Binding, Policy};
use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::storage::ListRange;

/// The params to evaluate the policy with: `[None]` for a policy without params;
/// empty when none is found and the binding allows that. The error is kube's.
pub(crate) async fn collect(
    view: StoreView<'_>,
    policy: &Policy,
    binding: &Binding,
    request_namespace: &str,
) -> Result<Vec<Option<Value>>, String> {
    let (Some((api_version, kind)), Some(param_ref)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version.as_str()));
    let Some(info) = view.catalog().snapshot().by_kind(group, version, kind) else {
        return Err(format!("failed to find resource referenced by paramKind: '{api_version}, Kind={kind}'"));
    };
    let namespace = if !info.namespaced {
        String::new()
    } else if let Some(ns) = &param_ref.namespace {
        ns.clone()
    } else if request_namespace.is_empty() {
        return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
    } else {
        request_namespace.to_string()
    };
    let mut params = Vec::new();
    if let Some(name) = &param_ref.name {
        if let Some(p) = view.stored(&info.id, &namespace, name).await.map_err(|e| e.message)? {
            params.push(Some(p));
        }
    } else {
        let selector = param_ref.selector.clone().unwrap_or_else(LabelSelector::default);
        let range = ListRange { namespace: info.namespaced.then(|| namespace.clone()), ..Default::default() };
        let page = view.list(&info.id, &range, &mut |_| true).await.map_err(|e| e.to_string())?;
        for raw in &page.items {
            let p = parse_stored(raw).map_err(|e| e.message)?;
            if selector.matches(p["metadata"]["labels"].as_object()) {
                params.push(Some(p));
            }
        }
    }
    if params.is_empty() && param_ref.deny_when_missing {
        return Err("no params found for policy binding with `Deny` parameterNotFoundAction".into());
    }
    Ok(params)
}
