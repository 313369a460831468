//! Drift repair (beyond KUDO, whose users asked for it in kudo#217): with no plan
//! active, the objects the last completed plan applied (its Apply tasks and enabled
//! Toggle tasks, less what its Delete tasks removed) are applied again with the
//! parameters it ran with. An object that was deleted, or changed in a field the plan
//! sets, is restored; each restoration is a `DriftRepaired` event on the Instance.

use kube::api::DynamicObject;
use opkit::Context;
use opkit::events::EventType;
use serde_json::Value;

use super::apply::{api_for, apply_objects, describe};
use super::step::StepMeta;
use super::tasks::{self, render_files};
use super::{Engine, InstanceView, OperatorVersion, publish};
use crate::plan::state;

/// The last completed plan other than `cleanup`.
fn last_completed(inst: &InstanceView) -> Option<&crate::plan::PlanStatus> {
    inst.plan_status
        .values()
        .filter(|p| p.status == state::COMPLETE && p.name != "cleanup")
        .max_by(|a, b| a.last_updated_timestamp.cmp(&b.last_updated_timestamp))
}

/// Restores what drifted from the last completed plan.
pub(crate) async fn repair(engine: &Engine, ctx: &Context<DynamicObject>, inst: &InstanceView, ov: &OperatorVersion) {
    let Some(status) = last_completed(inst) else { return };
    let Some(plan) = ov.plans.get(&status.name) else { return };
    let given = inst.snapshot.clone().unwrap_or_default().parameters;
    let Ok(params) = crate::params::effective(&ov.parameters, &given) else { return };
    let pipes = super::pipe::pipe_names(&inst.name, &status.name, plan, ov);
    // (step meta, objects) to re-apply, in plan order; later Delete tasks remove earlier ones.
    let mut wanted: Vec<(StepMeta, Value)> = Vec::new();
    for phase in &plan.phases {
        for step in &phase.steps {
            let meta = StepMeta {
                instance: inst.object.clone(),
                plan: status.name.clone(),
                phase: phase.name.clone(),
                step: step.name.clone(),
                uid: status.uid.clone(),
            };
            let vars = tasks::variables(ov, &meta, &params, &pipes);
            for task_name in &step.tasks {
                let Some(task) = ov.tasks.iter().find(|t| &t.name == task_name) else { continue };
                let on = match task.kind.as_str() {
                    "Apply" => Some(true),
                    "Delete" => Some(false),
                    "Toggle" => {
                        let v = params.get(&task.spec.parameter).cloned().flatten().unwrap_or_default();
                        Some(matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "t"))
                    }
                    _ => None,
                };
                let Some(on) = on else { continue };
                let Ok(objects) = render_files(ov, &task.spec.resources, &vars) else { return };
                for obj in objects {
                    wanted.retain(|(_, o)| describe(o) != describe(&obj));
                    if on {
                        wanted.push((meta.clone(), obj));
                    }
                }
            }
        }
    }
    let namespace = inst.namespace.clone();
    for (meta, obj) in wanted {
        let Ok((api, _)) = api_for(engine, &ctx.client, &namespace, &obj).await else { continue };
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
        let Ok(before) = api.get_opt(&name).await else { continue };
        let before_rv = before.as_ref().and_then(|b| b.metadata.resource_version.clone());
        let what = describe(&obj);
        let Ok(applied) = apply_objects(engine, &ctx.client, &meta, ov, vec![obj]).await else { continue };
        let after_rv = applied.first().and_then(|a| a.pointer("/metadata/resourceVersion")).and_then(Value::as_str);
        let note = match (&before_rv, after_rv) {
            (None, _) => format!("{what} was deleted; restored to plan {}'s state", status.name),
            (Some(b), Some(a)) if b != a => format!("{what} was changed; restored to plan {}'s state", status.name),
            _ => continue,
        };
        tracing::info!(instance = %inst.name, %note, "drift repaired");
        publish(ctx, &inst.object, EventType::Normal, "DriftRepaired", "RepairDrift", note);
    }
}
