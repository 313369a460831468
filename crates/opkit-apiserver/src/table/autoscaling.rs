//! The Table printer for horizontal pod autoscalers (kube's `formatHPAMetrics`).

use serde_json::Value;

use super::Printer;
use super::util::{age, age_col, arr, at, col, i, int, name, name_col, s, st};

/// The printer of autoscaling/horizontalpodautoscalers.
pub(crate) fn horizontalpodautoscalers() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col(
                "Reference",
                "string",
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
            ),
            col(
                "Targets",
                "string",
                "metrics contains the specifications for which to use to calculate the desired replica count.",
            ),
            col(
                "MinPods",
                "string",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
            ),
            col(
                "MaxPods",
                "string",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up.",
            ),
            col(
                "Replicas",
                "string",
                "currentReplicas is current number of replicas of pods managed by this autoscaler.",
            ),
            age_col(),
        ],
        hpa_row,
    ))
}

/// A metric's target/current quantity (`averageValue` or `value`) as printed, or `<unknown>`.
fn qty(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(q)) => q.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<unknown>".into(),
    }
}

/// kube's `formatHPAMetrics` over autoscaling/v2 JSON (v1 `targetCPUUtilizationPercentage` mapped to a cpu metric).
fn hpa_targets(o: &Value) -> String {
    let mut specs: Vec<Value> = arr(o, "spec.metrics").to_vec();
    let mut statuses: Vec<Value> = arr(o, "status.currentMetrics").to_vec();
    if specs.is_empty()
        && let Some(t) = at(o, "spec.targetCPUUtilizationPercentage").and_then(Value::as_i64)
    {
        specs.push(serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": t}}}));
        if let Some(c) = at(o, "status.currentCPUUtilizationPercentage").and_then(Value::as_i64) {
            statuses.push(serde_json::json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": c}}}));
        }
    }
    if specs.is_empty() {
        return "<none>".into();
    }
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(idx, spec)| {
            let status = statuses.get(idx);
            let cur = |src: &str, field: &str| qty(status.and_then(|st| at(st, &format!("{src}.current.{field}"))));
            match s(spec, "type") {
                ty @ ("External" | "Object" | "Pods") => {
                    let src = match ty {
                        "External" => "external",
                        "Object" => "object",
                        _ => "pods",
                    };
                    let avg = at(spec, &format!("{src}.target.averageValue"));
                    if ty == "Pods" || avg.is_some() {
                        let suffix = if ty == "Pods" { "" } else { " (avg)" };
                        format!("{}/{}{suffix}", cur(src, "averageValue"), qty(avg))
                    } else {
                        format!("{}/{}", cur(src, "value"), qty(at(spec, &format!("{src}.target.value"))))
                    }
                }
                ty @ ("Resource" | "ContainerResource") => {
                    let src = if ty == "Resource" { "resource" } else { "containerResource" };
                    let rname = s(spec, &format!("{src}.name"));
                    if let Some(avg) = at(spec, &format!("{src}.target.averageValue")) {
                        format!("{rname}: {}/{}", cur(src, "averageValue"), qty(Some(avg)))
                    } else {
                        let current = status
                            .and_then(|st| at(st, &format!("{src}.current.averageUtilization")))
                            .and_then(Value::as_i64)
                            .map_or("<unknown>".to_string(), |u| format!("{u}%"));
                        let target = at(spec, &format!("{src}.target.averageUtilization"))
                            .and_then(Value::as_i64)
                            .map_or("<auto>".to_string(), |u| format!("{u}%"));
                        format!("{rname}: {current}/{target}")
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    if list.len() > 2 { format!("{} + {} more...", list[..2].join(", "), list.len() - 2) } else { list.join(", ") }
}

fn hpa_row(o: &Value, now: i64) -> Vec<Value> {
    let min = at(o, "spec.minReplicas").and_then(Value::as_i64).map_or("<unset>".to_string(), |m| m.to_string());
    vec![
        name(o),
        st(format!("{}/{}", s(o, "spec.scaleTargetRef.kind"), s(o, "spec.scaleTargetRef.name"))),
        st(hpa_targets(o)),
        st(min),
        i(int(o, "spec.maxReplicas", 0)),
        i(int(o, "status.currentReplicas", 0)),
        age(o, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hpa_targets_and_replicas() {
        let hpa = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]},
            "status": {"currentReplicas": 2, "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}}]}});
        let row = hpa_row(&hpa, 0);
        assert_eq!(
            row[1..6].to_vec(),
            vec![json!("Deployment/web"), json!("cpu: 12%/80%"), json!("<unset>"), json!(5), json!(2)]
        );
    }
}
