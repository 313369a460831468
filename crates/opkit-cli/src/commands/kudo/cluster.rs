//! `opkit kudo install|upgrade|update|uninstall` and the cluster client all `kudo`
//! commands use (`--kubeconfig`, `--context`, `--namespace`).

use std::time::Duration;

use kube::Client;
use opkit_kudo::client::{self, InstallOptions};
use opkit_kudo::plan::state;
use serde_json::json;

use super::args::{KudoClusterArgs, KudoInstallArgs, KudoUninstallArgs, KudoUpdateArgs, KudoUpgradeArgs};
use super::parameters;
use crate::commands::CliError;
use crate::output::Output;

/// A client and the namespace (`--namespace`, else the context's, else `default`).
pub(super) async fn client(args: &KudoClusterArgs) -> Result<(Client, String), CliError> {
    let config = crate::commands::kubeconfig::config(args.kubeconfig.as_deref(), args.context.clone()).await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(|e| CliError::Kubeconfig(e.to_string()))?;
    Ok((client, namespace))
}

/// Waits for `plan` to end after an action; FATAL_ERROR fails.
async fn wait_plan(
    client: &Client,
    ns: &str,
    instance: &str,
    plan: &str,
    previous: Option<&str>,
    wait_time: Duration,
    out: &mut Output,
) -> Result<(), CliError> {
    out.waiting(&format!("waiting for plan {plan} of {ns}/{instance}"));
    let status = client::wait_for_plan(client, ns, instance, plan, previous, wait_time).await?;
    out.done_waiting();
    if status.status == state::FATAL_ERROR {
        return Err(CliError::ClusterRequest(format!(
            "plan {plan} of {ns}/{instance} failed: {}",
            if status.message.is_empty() { "FATAL_ERROR" } else { &status.message }
        )));
    }
    out.step(&format!("plan {plan} of {ns}/{instance} is COMPLETE"));
    Ok(())
}

/// `opkit kudo install`.
pub(super) async fn install(args: KudoInstallArgs, out: &mut Output) -> Result<(), CliError> {
    let pkg = opkit_kudo::load(&args.package)?;
    let params = parameters(&args.params)?;
    let (client, namespace) = client(&args.cluster).await?;
    let options = InstallOptions {
        namespace: namespace.clone(),
        instance: args.instance.clone(),
        parameters: params,
        skip_instance: args.skip_instance,
    };
    let installed = client::install(&client, &pkg, &options).await?;
    let mut lines = Vec::new();
    for dep in &installed.dependencies {
        lines.push(format!("operatorversion.kudo.dev/{dep} installed (dependency)"));
    }
    lines.push(format!("operator.kudo.dev/{} installed", installed.operator));
    lines.push(format!("operatorversion.kudo.dev/{} installed", installed.operator_version));
    if let Some(instance) = &installed.instance {
        lines.push(format!("instance.kudo.dev/{instance} created"));
        if args.wait.wait {
            wait_plan(&client, &namespace, instance, "deploy", None, args.wait.wait_time.get(), out).await?;
        }
    }
    out.result(&lines.join("\n"), json!({"namespace": namespace, "installed": installed}));
    Ok(())
}

/// `opkit kudo upgrade`.
pub(super) async fn upgrade(args: KudoUpgradeArgs, out: &mut Output) -> Result<(), CliError> {
    let pkg = opkit_kudo::load(&args.package)?;
    let params = parameters(&args.params)?;
    let (client, namespace) = client(&args.cluster).await?;
    let before = client::instance(&client, &namespace, &args.instance)
        .await?
        .map(|i| client::plan_statuses(&i))
        .unwrap_or_default();
    let ov = client::upgrade(&client, &pkg, &namespace, &args.instance, &params).await?;
    if args.wait.wait {
        let plan = ["upgrade", "update", "deploy"]
            .into_iter()
            .find(|p| pkg.operator.plans.contains_key(*p))
            .unwrap_or("deploy");
        let previous = before.get(plan).map(|p| p.uid.clone());
        wait_plan(&client, &namespace, &args.instance, plan, previous.as_deref(), args.wait.wait_time.get(), out)
            .await?;
    }
    out.result(
        &format!("instance.kudo.dev/{} upgraded to operatorversion.kudo.dev/{ov}", args.instance),
        json!({"namespace": namespace, "instance": args.instance, "operatorVersion": ov}),
    );
    Ok(())
}

/// `opkit kudo update`.
pub(super) async fn update(args: KudoUpdateArgs, out: &mut Output) -> Result<(), CliError> {
    let params = parameters(&args.params)?;
    if params.is_empty() {
        return Err(CliError::Usage("give at least one parameter with -p NAME=VALUE or -P FILE".into()));
    }
    let (client, namespace) = client(&args.cluster).await?;
    let instance = client::instance(&client, &namespace, &args.instance)
        .await?
        .ok_or_else(|| CliError::ClusterRequest(format!("instance {namespace}/{} does not exist", args.instance)))?;
    let before = client::plan_statuses(&instance);
    client::update(&client, &namespace, &args.instance, &params).await?;
    if args.wait.wait {
        let ov = client::operator_version_of(&client, &namespace, &instance).await?;
        let declared: Vec<opkit_kudo::params::Parameter> = ov
            .data
            .pointer("/spec/parameters")
            .and_then(|v| v.as_array())
            .map(|ps| ps.iter().map(opkit_kudo::params::from_api).collect())
            .unwrap_or_default();
        let has_plan = |p: &str| ov.data.pointer(&format!("/spec/plans/{p}")).is_some();
        let plan = params
            .keys()
            .map(|k| opkit_kudo::params::trigger_plan(declared.iter().find(|p| &p.name == k), has_plan))
            .next()
            .unwrap_or_else(|| "update".into());
        let previous = before.get(&plan).map(|p| p.uid.clone());
        wait_plan(&client, &namespace, &args.instance, &plan, previous.as_deref(), args.wait.wait_time.get(), out)
            .await?;
    }
    out.result(
        &format!("instance.kudo.dev/{} updated", args.instance),
        json!({"namespace": namespace, "instance": args.instance, "parameters": params}),
    );
    Ok(())
}

/// `opkit kudo uninstall`.
pub(super) async fn uninstall(args: KudoUninstallArgs, out: &mut Output) -> Result<(), CliError> {
    let (client, namespace) = client(&args.cluster).await?;
    client::uninstall(&client, &namespace, &args.instance).await?;
    if args.wait {
        out.waiting(&format!("waiting for instance {namespace}/{} to be deleted", args.instance));
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::namespaced_with(client.clone(), &namespace, &opkit_kudo::resources::api_resource("Instance"));
        let gone = kube::runtime::wait::await_condition(api, &args.instance, |o: Option<&kube::api::DynamicObject>| {
            o.is_none()
        });
        tokio::time::timeout(Duration::from_secs(300), gone)
            .await
            .map_err(|_| {
                CliError::ClusterRequest(format!("instance {namespace}/{} was not deleted within 300s", args.instance))
            })?
            .map_err(|e| CliError::ClusterRequest(e.to_string()))?;
        out.done_waiting();
    }
    out.result(
        &format!("instance.kudo.dev/{} deleted", args.instance),
        json!({"namespace": namespace, "instance": args.instance, "deleted": true}),
    );
    Ok(())
}
