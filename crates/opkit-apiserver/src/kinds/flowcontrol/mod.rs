//! flowcontrol.apiserver.k8s.io FlowSchemas and PriorityLevelConfigurations (kube's
//! `flowschema` and `prioritylevelconfiguration` strategies): kube's v1 defaults and
//! validation, the rule that the mandatory `exempt` and `catch-all` objects keep their
//! fixed specs, and the Tables. The objects are served and stored; requests are not yet
//! queued by them (API Priority and Fairness is not enforced). [`bootstrap`] creates
//! kube's mandatory and suggested configuration at start-up.

mod bootstrap;
mod validation;

pub(crate) use bootstrap::bootstrap;

use serde_json::{Value, json};

use super::Strategy;
use super::defaulting::{default, obj_mut};
use crate::schema::FieldError;
use crate::table::{self, Printer};

/// The strategy of flowcontrol.apiserver.k8s.io/v1 FlowSchemas.
pub(in crate::kinds) struct FlowSchemas;

/// The strategy of flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfigurations.
pub(in crate::kinds) struct PriorityLevelConfigurations;

impl Strategy for FlowSchemas {
    /// kube's `SetDefaults_FlowSchemaSpec`: a zero `matchingPrecedence` is 1000.
    fn default(&self, obj: &mut Value, _creating: bool) {
        let spec = obj_mut(obj, "spec");
        if spec.get("matchingPrecedence").and_then(Value::as_i64).unwrap_or(0) == 0 {
            spec.insert("matchingPrecedence".into(), json!(1000));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let mut errs = validation::flow_schema_spec(name, &obj["spec"]);
        errs.extend(validation::fixed_spec(name, &obj["spec"], bootstrap::mandatory_flow_schema));
        errs.extend(validation::conditions(&obj["status"]));
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::flowcontrol::flowschemas())
    }
}

impl Strategy for PriorityLevelConfigurations {
    /// kube's v1 defaults: a Limited level has 30 nominal shares, lends 0 %, and queues
    /// with 64 queues, hands of 8 and 50 requests per queue; an Exempt level has 0 shares
    /// and lends 0 %.
    fn default(&self, obj: &mut Value, _creating: bool) {
        default_levels(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let mut errs = validation::priority_level_spec(name, &obj["spec"]);
        errs.extend(validation::fixed_spec(name, &obj["spec"], bootstrap::mandatory_priority_level));
        errs.extend(validation::conditions(&obj["status"]));
        errs
    }

    fn table(&self) -> Option<Printer> {
        Some(table::flowcontrol::prioritylevelconfigurations())
    }
}

/// Fills the v1 defaults of a PriorityLevelConfiguration's spec.
fn default_levels(obj: &mut Value) {
    let spec = &mut obj["spec"];
    match spec["type"].as_str() {
        Some("Limited") if spec["limited"].is_object() => {
            let limited = &mut spec["limited"];
            let queue = limited["limitResponse"]["type"] == "Queue";
            if let Some(limited) = limited.as_object_mut() {
                default(limited, "nominalConcurrencyShares", json!(30));
                default(limited, "lendablePercent", json!(0));
            }
            let response = &mut limited["limitResponse"];
            if queue && response["queuing"].is_object() {
                let queuing = obj_mut(response, "queuing");
                for (key, value) in [("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)] {
                    if queuing.get(key).and_then(Value::as_i64).unwrap_or(0) == 0 {
                        queuing.insert(key.into(), json!(value));
                    }
                }
            }
        }
        Some("Exempt") => {
            let exempt = obj_mut(spec, "exempt");
            default(exempt, "nominalConcurrencyShares", json!(0));
            default(exempt, "lendablePercent", json!(0));
        }
        _ => {}
    }
}
