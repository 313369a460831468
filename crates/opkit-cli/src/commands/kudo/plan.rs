//! `opkit kudo plan status|history|trigger|cancel|retry`.

use kube::ResourceExt;
use opkit_kudo::Plan;
use opkit_kudo::client;
use serde_json::json;

use super::args::{KudoPlanArgs, KudoPlanNameArgs};
use super::cluster::client as cluster_client;
use crate::commands::CliError;
use crate::output::Output;

async fn read(args: &KudoPlanArgs) -> Result<(kube::Client, String, kube::api::DynamicObject), CliError> {
    let (client, ns) = cluster_client(&args.cluster).await?;
    let instance = client::instance(&client, &ns, &args.instance)
        .await?
        .ok_or_else(|| CliError::ClusterRequest(format!("instance {ns}/{} does not exist", args.instance)))?;
    Ok((client, ns, instance))
}

/// `plan status`: KUDO's tree, or `{"planStatus": …}` with `-o json`.
pub(super) async fn status(args: KudoPlanArgs, out: &mut Output) -> Result<(), CliError> {
    let (client, ns, mut instance) = read(&args).await?;
    if args.wait {
        let active = instance
            .data
            .pointer("/spec/planExecution/planName")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        if !active.is_empty() {
            client::wait_for_plan(&client, &ns, &args.instance, &active, None, std::time::Duration::from_secs(300))
                .await?;
            instance = read(&args).await?.2;
        }
    }
    let ov = client::operator_version_of(&client, &ns, &instance).await?;
    let plans: std::collections::BTreeMap<String, Plan> =
        ov.data.pointer("/spec/plans").cloned().and_then(|p| serde_json::from_value(p).ok()).unwrap_or_default();
    let statuses = client::plan_statuses(&instance);
    let active = instance.data.pointer("/spec/planExecution/planName").and_then(|v| v.as_str()).unwrap_or_default();
    let tree = opkit_kudo::plan::status_tree(&instance.name_any(), &ns, &ov.name_any(), active, &plans, &statuses);
    out.result(tree.trim_end(), json!({"planStatus": statuses}));
    Ok(())
}

/// `plan history`.
pub(super) async fn history(args: KudoPlanArgs, out: &mut Output) -> Result<(), CliError> {
    let (_, ns, instance) = read(&args).await?;
    let history = opkit_kudo::plan::history_of(instance.annotations());
    let mut text = format!("History of plans for {:?} in namespace {ns:?}:\n", args.instance);
    if history.is_empty() {
        text.push_str("no plan has run yet\n");
    }
    for h in &history {
        text.push_str(&format!(
            "{} {} [{}] started {}{}{} (uid {}){}\n",
            h.plan,
            if h.reason.is_empty() { String::new() } else { format!("({})", h.reason) },
            h.status,
            h.started,
            if h.finished.is_empty() { String::new() } else { format!(", ended {}", h.finished) },
            "",
            h.uid,
            if h.message.is_empty() { String::new() } else { format!(": {}", h.message) }
        ));
    }
    out.result(text.trim_end(), json!({"instance": args.instance, "namespace": ns, "history": history}));
    Ok(())
}

fn plan_name(args: &KudoPlanNameArgs) -> Result<String, CliError> {
    args.name.clone().ok_or_else(|| CliError::Usage("--name PLAN is required".into()))
}

/// `plan trigger`.
pub(super) async fn trigger(args: KudoPlanNameArgs, out: &mut Output) -> Result<(), CliError> {
    let plan = plan_name(&args)?;
    let (client, ns) = cluster_client(&args.cluster).await?;
    let before =
        client::instance(&client, &ns, &args.instance).await?.map(|i| client::plan_statuses(&i)).unwrap_or_default();
    client::trigger(&client, &ns, &args.instance, &plan).await?;
    if args.wait.wait {
        let previous = before.get(&plan).map(|p| p.uid.clone());
        let status =
            client::wait_for_plan(&client, &ns, &args.instance, &plan, previous.as_deref(), args.wait.wait_time.get())
                .await?;
        if status.status != opkit_kudo::plan::state::COMPLETE {
            return Err(CliError::ClusterRequest(format!(
                "plan {plan} of {ns}/{} ended {}: {}",
                args.instance, status.status, status.message
            )));
        }
    }
    out.result(
        &format!("Triggered {plan} plan for {ns}/{} instance", args.instance),
        json!({"instance": args.instance, "namespace": ns, "plan": plan}),
    );
    Ok(())
}

/// `plan cancel`.
pub(super) async fn cancel(args: KudoPlanNameArgs, out: &mut Output) -> Result<(), CliError> {
    let (client, ns) = cluster_client(&args.cluster).await?;
    let plan = client::cancel(&client, &ns, &args.instance, args.name.as_deref()).await?;
    if args.wait.wait {
        client::wait_for_plan(&client, &ns, &args.instance, &plan, None, args.wait.wait_time.get()).await?;
    }
    out.result(
        &format!("Cancelled {plan} plan of {ns}/{} instance", args.instance),
        json!({"instance": args.instance, "namespace": ns, "plan": plan}),
    );
    Ok(())
}

/// `plan retry`.
pub(super) async fn retry(args: KudoPlanNameArgs, out: &mut Output) -> Result<(), CliError> {
    let plan = plan_name(&args)?;
    let (client, ns) = cluster_client(&args.cluster).await?;
    client::retry(&client, &ns, &args.instance, &plan).await?;
    out.result(
        &format!("Retrying {plan} plan of {ns}/{} instance", args.instance),
        json!({"instance": args.instance, "namespace": ns, "plan": plan}),
    );
    Ok(())
}
