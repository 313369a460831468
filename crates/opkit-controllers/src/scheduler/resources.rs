//! Resource quantities and pod resource requests, as the scheduler's NodeResourcesFit
//! plugin counts them: amounts are kept in milli-units (`"100m"` cpu is 100, `"1Ki"`
//! memory is 1 024 000), a pod requests the larger of its app containers' sum and its
//! largest init container, plus its overhead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Resource amounts by name (`cpu`, `memory`, extended resources), in milli-units.
pub type Resources = BTreeMap<String, i128>;

/// The cpu the scheduler assumes for scoring a container that requests none (100m).
pub const DEFAULT_MILLI_CPU: i128 = 100;
/// The memory the scheduler assumes for scoring a container that requests none (200Mi),
/// in milli-bytes.
pub const DEFAULT_MEMORY: i128 = 200 * 1024 * 1024 * 1000;

/// Parses a Kubernetes quantity (`"100m"`, `"1.5"`, `"128Mi"`, `"1G"`, `"1e3"`) into
/// milli-units, rounding up. Returns `None` when it is not a quantity.
pub fn parse_milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let (sign, q) = match q.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, q.strip_prefix('+').unwrap_or(q)),
    };
    let end = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let (num, suffix) = q.split_at(end);
    if num.is_empty() || num == "." {
        return None;
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if frac_part.contains('.') {
        return None;
    }
    // The number as a fraction digits / 10^scale.
    let digits: String = format!("{int_part}{frac_part}");
    let mut value: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let mut scale: i32 = i32::try_from(frac_part.len()).ok()?;
    // Multiply by the suffix: (binary multiplier, decimal exponent).
    let (mult, exp): (i128, i32) = match suffix {
        "" => (1, 0),
        "n" => (1, -9),
        "u" => (1, -6),
        "m" => (1, -3),
        "k" => (1, 3),
        "M" => (1, 6),
        "G" => (1, 9),
        "T" => (1, 12),
        "P" => (1, 15),
        "E" => (1, 18),
        "Ki" => (1 << 10, 0),
        "Mi" => (1 << 20, 0),
        "Gi" => (1 << 30, 0),
        "Ti" => (1 << 40, 0),
        "Pi" => (1 << 50, 0),
        "Ei" => (1 << 60, 0),
        s if s.starts_with(['e', 'E']) => (1, s[1..].parse().ok()?),
        _ => return None,
    };
    value = value.checked_mul(mult)?;
    // Milli-units: one more factor of 10^3.
    scale -= exp + 3;
    if scale <= 0 {
        let factor = 10i128.checked_pow(u32::try_from(-scale).ok()?)?;
        Some(sign * value.checked_mul(factor)?)
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(scale).ok()?)?;
        Some(sign * ((value + divisor - 1) / divisor))
    }
}

/// The value of a quantity in milli-units, zero when unparsable.
pub fn milli(q: &Quantity) -> i128 {
    parse_milli(&q.0).unwrap_or(0)
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
pub fn pod_requests(pod: &Pod) -> Resources {
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
pub fn pod_score_requests(pod: &Pod) -> (i128, i128) {
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
pub fn allocatable(node: &k8s_openapi::api::core::v1::Node) -> Resources {
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
    fn parses_quantities() {
        assert_eq!(parse_milli("100m"), Some(100));
        assert_eq!(parse_milli("1"), Some(1000));
        assert_eq!(parse_milli("0.5"), Some(500));
        assert_eq!(parse_milli("1Ki"), Some(1_024_000));
        assert_eq!(parse_milli("32Gi"), Some(32 * (1i128 << 30) * 1000));
        assert_eq!(parse_milli("1G"), Some(1_000_000_000_000));
        assert_eq!(parse_milli("1e3"), Some(1_000_000));
        assert_eq!(parse_milli("1n"), Some(1), "rounds up");
        assert_eq!(parse_milli("abc"), None);
        assert_eq!(parse_milli("1Qi"), None);
        assert_eq!(parse_milli(""), None);
    }

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
