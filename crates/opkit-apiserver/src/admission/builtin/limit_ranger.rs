//! LimitRanger (kube's `LimitRanger` plugin): the namespace's LimitRanges give new pods'
//! containers their default requests and limits (`defaultRequest`, `default`, noted in the
//! `kubernetes.io/limit-ranger` annotation), and bound containers, pods and
//! PersistentVolumeClaims (`min`, `max`, `maxLimitRequestRatio`) with kube's messages.

use std::collections::BTreeMap;

use opkit_apimachinery::quantity::{canonical, parse_milli};
use serde_json::{Map, Value, json};

use super::super::{Attributes, Operation, Verdict};
use crate::error::{ApiError, ApiResult};
use crate::registry::parse_stored;
use crate::registry::view::StoreView;
use crate::storage::ResourceId;

/// The annotation naming what LimitRanger set on a pod.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The LimitRanges of the request's namespace, by name.
fn limit_ranges(view: StoreView<'_>, namespace: &str) -> Vec<Value> {
    view.values(&ResourceId::new("", "limitranges"))
        .into_iter()
        .filter(|((ns, _), _)| ns == namespace)
        .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
        .collect()
}

/// The items of the LimitRanges of one type (`Container`, `Pod`, `PersistentVolumeClaim`).
fn items<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    ranges.iter().flat_map(|r| r["spec"]["limits"].as_array().into_iter().flatten()).filter(move |i| i["type"] == kind)
}

fn is(attrs: &Attributes<'_>, resource: &str) -> bool {
    attrs.target.info.group.is_empty() && attrs.target.info.resource == resource && attrs.subresource.is_none()
}

/// Sets the defaults of the namespace's LimitRanges on a new pod's containers.
pub(super) fn mutate(view: StoreView<'_>, attrs: &Attributes<'_>, pod: &mut Value) -> Verdict {
    if attrs.operation != Operation::Create || !is(attrs, "pods") {
        return Verdict::default();
    }
    let ranges = limit_ranges(view, attrs.target.namespace.as_deref().unwrap_or_default());
    let mut notes = Vec::new();
    for range in &ranges {
        let (mut requests, mut limits) = (Map::new(), Map::new());
        for item in items(std::slice::from_ref(range), "Container") {
            if let Some(d) = item["defaultRequest"].as_object() {
                requests.extend(d.clone());
            }
            if let Some(d) = item["default"].as_object() {
                limits.extend(d.clone());
            }
        }
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        for (list, prefix) in [("containers", "container"), ("initContainers", "init container")] {
            let Some(containers) = pod["spec"][list].as_array_mut() else { continue };
            for c in containers {
                notes.extend(merge_defaults(c, &requests, &limits, prefix));
            }
        }
    }
    if notes.is_empty() {
        return Verdict::default();
    }
    if !pod["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = json!({});
    }
    pod["metadata"]["annotations"][ANNOTATION] = json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    Verdict { mutated: true, ..Verdict::default() }
}

/// kube's `mergeContainerResources`: what a container lacks is set; returns the notes
/// (`cpu, memory request for container c`). A limit without a request stands for the
/// request too, as kube's pod defaulting sets it before admission.
fn merge_defaults(
    c: &mut Value,
    requests: &Map<String, Value>,
    limits: &Map<String, Value>,
    prefix: &str,
) -> Vec<String> {
    let name = c["name"].as_str().unwrap_or_default().to_string();
    if !c["resources"].is_object() {
        c["resources"] = json!({});
    }
    let resources = &mut c["resources"];
    for part in ["requests", "limits"] {
        if !resources[part].is_object() {
            resources[part] = json!({});
        }
    }
    let given_limits = resources["limits"].as_object().cloned().unwrap_or_default();
    for (k, v) in given_limits {
        if resources["requests"].get(&k).is_none() {
            resources["requests"][&k] = v;
        }
    }
    let mut set = |part: &str, defaults: &Map<String, Value>| -> Vec<String> {
        let mut names = Vec::new();
        for (k, v) in defaults {
            if resources[part].get(k).is_none() {
                resources[part][k] = v.clone();
                names.push(k.clone());
            }
        }
        names.sort();
        names
    };
    let set_limits = set("limits", limits);
    let set_requests = set("requests", requests);
    for part in ["requests", "limits"] {
        if resources[part].as_object().is_some_and(Map::is_empty) {
            resources.as_object_mut().map(|r| r.remove(part));
        }
    }
    let mut notes = Vec::new();
    if !set_requests.is_empty() {
        notes.push(format!("{} request for {prefix} {name}", set_requests.join(", ")));
    }
    if !set_limits.is_empty() {
        notes.push(format!("{} limit for {prefix} {name}", set_limits.join(", ")));
    }
    notes
}

/// A resource list as milli-units with the text kube prints for each value.
type Amounts = BTreeMap<String, (i128, String)>;

fn amounts(list: &Value) -> Amounts {
    list.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            let milli = parse_milli(&text)?;
            Some((k.clone(), (milli, canonical(&text).unwrap_or(text))))
        })
        .collect()
}

/// Refuses pods and PersistentVolumeClaims outside the namespace's LimitRanges.
pub(super) fn validate(view: StoreView<'_>, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<()> {
    let pods = is(attrs, "pods") && attrs.operation == Operation::Create;
    let claims =
        is(attrs, "persistentvolumeclaims") && matches!(attrs.operation, Operation::Create | Operation::Update);
    if !pods && !claims {
        return Ok(());
    }
    let ranges = limit_ranges(view, attrs.target.namespace.as_deref().unwrap_or_default());
    if ranges.is_empty() {
        return Ok(());
    }
    let mut errors = Vec::new();
    if pods {
        let containers: Vec<&Value> = ["containers", "initContainers"]
            .into_iter()
            .flat_map(|l| obj["spec"][l].as_array().into_iter().flatten())
            .collect();
        for item in items(&ranges, "Container") {
            for c in &containers {
                let requests = amounts(&c["resources"]["requests"]);
                let limits = amounts(&c["resources"]["limits"]);
                errors.extend(check_item(item, "Container", &requests, &limits));
            }
        }
        let (requests, limits) = pod_totals(obj);
        for item in items(&ranges, "Pod") {
            errors.extend(check_item(item, "Pod", &requests, &limits));
        }
    } else {
        let requests = amounts(&obj["spec"]["resources"]["requests"]);
        for item in items(&ranges, "PersistentVolumeClaim") {
            for (k, (enforced, text)) in amounts(&item["min"]) {
                match requests.get(&k) {
                    None => errors.push(format!(
                        "minimum {k} usage per PersistentVolumeClaim is {text}.  No request is specified"
                    )),
                    Some((req, req_text)) if *req < enforced => errors.push(format!(
                        "minimum {k} usage per PersistentVolumeClaim is {text}, but request is {req_text}"
                    )),
                    _ => {}
                }
            }
            for (k, (enforced, text)) in amounts(&item["max"]) {
                match requests.get(&k) {
                    None => errors.push(format!(
                        "maximum {k} usage per PersistentVolumeClaim is {text}.  No request is specified"
                    )),
                    Some((req, req_text)) if *req > enforced => errors.push(format!(
                        "maximum {k} usage per PersistentVolumeClaim is {text}, but request is {req_text}"
                    )),
                    _ => {}
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let why = if errors.len() == 1 { errors.remove(0) } else { format!("[{}]", errors.join(", ")) };
    Err(ApiError::forbidden_object("", &attrs.target.info.resource, attrs.name, &why))
}

/// A pod's requests and limits: the sum over its containers, at least the largest init
/// container's (kube's `podRequests` / `podLimits`).
pub(super) fn pod_totals(pod: &Value) -> (Amounts, Amounts) {
    let total = |part: &str| {
        let mut sum: BTreeMap<String, i128> = BTreeMap::new();
        for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
            for (k, (v, _)) in amounts(&c["resources"][part]) {
                *sum.entry(k).or_default() += v;
            }
        }
        for c in pod["spec"]["initContainers"].as_array().into_iter().flatten() {
            for (k, (v, _)) in amounts(&c["resources"][part]) {
                let e = sum.entry(k).or_default();
                *e = (*e).max(v);
            }
        }
        sum.into_iter()
            .map(|(k, v)| {
                let binary = k.contains("memory") || k.contains("storage");
                let text = opkit_apimachinery::quantity::format_milli(v, binary);
                (k, (v, text))
            })
            .collect::<Amounts>()
    };
    (total("requests"), total("limits"))
}

/// kube's `minConstraint`, `maxConstraint` and `limitRequestRatioConstraint` for one
/// LimitRange item.
fn check_item(item: &Value, kind: &str, requests: &Amounts, limits: &Amounts) -> Vec<String> {
    let mut errors = Vec::new();
    for (k, (enforced, text)) in amounts(&item["min"]) {
        match (requests.get(&k), limits.get(&k)) {
            (None, _) => errors.push(format!("minimum {k} usage per {kind} is {text}.  No request is specified")),
            (Some((req, req_text)), _) if *req < enforced => {
                errors.push(format!("minimum {k} usage per {kind} is {text}, but request is {req_text}"))
            }
            (_, Some((lim, lim_text))) if *lim < enforced => {
                errors.push(format!("minimum {k} usage per {kind} is {text}, but limit is {lim_text}"))
            }
            _ => {}
        }
    }
    for (k, (enforced, text)) in amounts(&item["max"]) {
        match (requests.get(&k), limits.get(&k)) {
            (_, None) => errors.push(format!("maximum {k} usage per {kind} is {text}.  No limit is specified")),
            (_, Some((lim, lim_text))) if *lim > enforced => {
                errors.push(format!("maximum {k} usage per {kind} is {text}, but limit is {lim_text}"))
            }
            (Some((req, req_text)), _) if *req > enforced => {
                errors.push(format!("maximum {k} usage per {kind} is {text}, but request is {req_text}"))
            }
            _ => {}
        }
    }
    for (k, (enforced, text)) in amounts(&item["maxLimitRequestRatio"]) {
        let req = requests.get(&k).map(|r| r.0).filter(|r| *r != 0);
        let lim = limits.get(&k).map(|l| l.0).filter(|l| *l != 0);
        match (req, lim) {
            (None, _) => errors.push(format!(
                "{k} max limit to request ratio per {kind} is {text}, but no request is specified or request is 0"
            )),
            (_, None) => errors.push(format!(
                "{k} max limit to request ratio per {kind} is {text}, but no limit is specified or limit is 0"
            )),
            (Some(req), Some(lim)) => {
                // Ratios compared in milli-units, as kube compares them.
                if lim * 1000 > enforced * req {
                    #[allow(clippy::cast_precision_loss)]
                    let ratio = lim as f64 / req as f64;
                    errors.push(format!(
                        "{k} max limit to request ratio per {kind} is {text}, but provided ratio is {ratio:.6}"
                    ));
                }
            }
        }
    }
    errors
}
