//! Pod resource requests, as the scheduler's NodeResourcesFit plugin counts them: amounts
//! are kept in milli-units (`"100m"` cpu is 100, `"1Ki"` memory is 1 024 000; quantities
//! are parsed by `opkit_apimachinery::quantity`), a pod requests the larger of its app containers' sum and its
//! largest init container, plus its overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use opkit_apimachinery::quantity;

/// Resource amounts by name (`cpu`, `memory`, extended resources), in milli-units.
pub(crate) type Resources = BTreeMap<String, i128>;

/// The cpu the scheduler assumes for scoring a container that requests none (100m).
pub(crate) const DEFAULT_MILLI_CPU: i128 = 100;
/// The memory the scheduler assumes for scoring a container that requests none (200Mi),
/// in milli-bytes.
pub(crate) const DEFAULT_MEMORY: i128 = 200 * 1024 * 1024 * 1000;

/// The value of a quantity in milli-units, zero when it is not a quantity (the API server
/// validates quantities, so that only happens for objects written around it).
pub(crate) fn milli(q: &Quantity) -> i128 {
    quantity::milli(q).unwrap_or(0)
}

fn add(into: &mut Resources, from: &BTreeMap<String, Quantity>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += milli(v);
    }
}

fn container_requests(c: &Container) -> Resources {
    let mut r = Resources::new();
    if let Some(res) = &c.resources {
        // Requests default to limits when only limits are given.
        if let Some(limits) = &res.limits {
            add(&mut r, limits);
        }
        if let Some(req) = &res.requests {
            for (k, v) in req {
                r.insert(k.clone(), milli(v));
            }
        }
    }
    r
}

/// What `pod` requests: the larger (per resource) of its containers' sum and each init
/// container, plus its overhead.
pub(crate) fn pod_requests(pod: &Pod) -> Resources {
    let mut total = Resources::new();
    let Some(spec) = &pod.spec else { return total };
    for c in &spec.containers {
        for (k, v) in container_requests(c) {
            *total.entry(k).or_insert(0) += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in container_requests(c) {
            let e = total.entry(k).or_insert(0);
            *e = (*e).max(v);
        }
    }
    if let Some(overhead) = &spec.overhead {
        add(&mut total, overhead);
    }
    total
}

/// The cpu and memory used for scoring: like [`pod_requests`], but containers requesting
/// none count as [`DEFAULT_MILLI_CPU`] / [`DEFAULT_MEMORY`].
pub(crate) fn pod_score_requests(pod: &Pod) -> (i128, i128) {
    let Some(spec) = &pod.spec else { return (0, 0) };
    let (mut cpu, mut mem) = (0, 0);
    for c in &spec.containers {
        let r = container_requests(c);
        cpu += r.get("cpu").copied().filter(|v| *v != 0).unwrap_or(DEFAULT_MILLI_CPU);
        mem += r.get("memory").copied().filter(|v| *v != 0).unwrap_or(DEFAULT_MEMORY);
    }
    (cpu, mem)
}

/// A node's allocatable resources in milli-units.
pub(crate) fn allocatable(node: &k8s_openapi::api::core::v1::Node) -> Resources {
    let mut r = Resources::new();
    if let Some(a) = node.status.as_ref().and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref())) {
        add(&mut r, a);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_requests_sum_containers_and_max_init() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"limits": {"cpu": "1"}}}
                ],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]
            }
        }))
        .unwrap_or_default();
        let r = pod_requests(&pod);
        assert_eq!(r.get("cpu"), Some(&2000));
        assert_eq!(r.get("memory").copied(), Some((1i128 << 30) * 1000));
        let (cpu, mem) = pod_score_requests(&pod);
        assert_eq!(cpu, 1500);
        assert_eq!(mem, (1i128 << 30) * 1000 + DEFAULT_MEMORY);
    }
}
