//! operator-sdk's `run bundle`, `run bundle-upgrade` and `cleanup`, from bundle
//! directories instead of images: the bundles' file-based catalog is stored (gzipped) in a
//! ConfigMap served by a CatalogSource `<package>-catalog`; an OperatorGroup
//! `operator-sdk-og` is made when the namespace has none; a Subscription
//! `<csv-with-dashes>-sub` with Manual approval is made and its InstallPlan approved, as
//! operator-sdk does; then the CSV is waited on until it has succeeded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use opkit_olm_bundle::Bundle;
use serde_json::{Value, json};

use crate::controllers::csv::{PHASE_FAILED, PHASE_SUCCEEDED};
use crate::fbc::{self, CONFIG_MAP_KEY, Catalog, Entry};
use crate::types::{
    CatalogSource, CatalogSourceSpec, ClusterServiceVersion, Condition, InstallPlan, OperatorGroup, OperatorGroupSpec,
    Subscription, SubscriptionSpec, find_condition,
};
use crate::{FIELD_MANAGER, OlmError};

/// The OperatorGroup `run bundle` makes when a namespace has none (operator-sdk's name).
pub const OPERATOR_GROUP: &str = "operator-sdk-og";
/// Label on the ConfigMap holding a `run bundle` catalog: the CatalogSource's name.
pub(crate) const CATALOG_LABEL: &str = "catalog.opkit.dev/catalog-source";

/// How to run a bundle.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The namespace the operator is installed in.
    pub namespace: String,
    /// The install mode: `AllNamespaces`, `OwnNamespace` or `SingleNamespace=NS` (default:
    /// AllNamespaces when the CSV supports it, else OwnNamespace), as operator-sdk's flag.
    pub install_mode: Option<String>,
    /// How long to wait for the CSV to succeed.
    pub timeout: Duration,
}

/// What `run bundle` installed.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    /// The package.
    pub package: String,
    /// The CSV that succeeded.
    pub csv: String,
    /// The namespace.
    pub namespace: String,
    /// The CatalogSource.
    pub catalog_source: String,
    /// The Subscription.
    pub subscription: String,
    /// Seconds from the start to the CSV's success.
    pub seconds: f64,
}

/// The Subscription name operator-sdk gives a CSV's subscription.
pub(crate) fn subscription_name(csv: &str) -> String {
    format!("{}-sub", csv.replace('.', "-"))
}

/// The CatalogSource name `run bundle` uses for a package.
pub(crate) fn catalog_source_name(package: &str) -> String {
    format!("{package}-catalog")
}

/// Installs the operator of bundle directory `dir` through OLM and waits for its CSV to
/// succeed. `progress` gets operator-sdk's log lines.
pub async fn run_bundle(
    client: &Client,
    bundle: &Bundle,
    options: &RunOptions,
    progress: &dyn Fn(&str),
) -> Result<Installed, OlmError> {
    let start = Instant::now();
    let ns = options.namespace.as_str();
    let catalog = Catalog::from_bundles(std::slice::from_ref(bundle))?;
    let package = fbc::package_of(bundle)?.to_string();
    let source = catalog_source_name(&package);
    write_catalog(client, ns, &source, &catalog).await?;
    progress(&format!("Created CatalogSource: {source}"));
    ensure_operator_group(client, ns, bundle, options.install_mode.as_deref(), progress).await?;
    let csv = fbc::csv_name(bundle)?.to_string();
    let channel = match bundle.default_channel() {
        Some(channel) => channel,
        None => fbc::channels_of(bundle)?.swap_remove(0),
    };
    let subscription = subscription_name(&csv);
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let mut sub = Subscription::new(
        &subscription,
        SubscriptionSpec {
            source: source.clone(),
            source_namespace: ns.into(),
            name: package.clone(),
            channel: Some(channel),
            starting_csv: Some(csv.clone()),
            install_plan_approval: Some("Manual".into()),
            extra: Default::default(),
        },
    );
    sub.metadata.namespace = Some(ns.into());
    subs.create(&PostParams::default(), &sub).await?;
    progress(&format!("Created Subscription: {subscription}"));
    let plan = approve_plan(client, ns, &subscription, &csv, deadline(start, options.timeout), progress).await?;
    wait_installed(client, ns, &plan, &csv, deadline(start, options.timeout), progress).await?;
    progress(&format!("OLM has successfully installed {csv:?}"));
    Ok(Installed {
        package,
        csv,
        namespace: ns.into(),
        catalog_source: source,
        subscription,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Upgrades the operator installed by `run bundle` to bundle directory `dir`: the new
/// bundle joins the catalog, replacing the installed CSV in the subscription's channel,
/// and the upgrade's InstallPlan is approved; waits until the new CSV has succeeded
/// (and OLM has removed the old one).
pub async fn run_bundle_upgrade(
    client: &Client,
    bundle: &Bundle,
    options: &RunOptions,
    progress: &dyn Fn(&str),
) -> Result<Installed, OlmError> {
    let start = Instant::now();
    let ns = options.namespace.as_str();
    let package = fbc::package_of(bundle)?.to_string();
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let sub = subs
        .list(&ListParams::default())
        .await?
        .into_iter()
        .find(|s| s.spec.name == package)
        .ok_or_else(|| {
            OlmError::Install(format!(
                "no existing operator found in the cluster to upgrade: no Subscription for package {package:?} in namespace {ns:?}; use `run bundle` first"
            ))
        })?;
    let installed = sub
        .status
        .as_ref()
        .and_then(|s| s.installed_csv.clone().or_else(|| s.current_csv.clone()))
        .ok_or_else(|| OlmError::Install(format!("subscription {} has no installed CSV yet", sub.name_any())))?;
    let csv = fbc::csv_name(bundle)?.to_string();
    if csv == installed {
        return Err(OlmError::Install(format!("{csv} is already installed")));
    }
    let source = sub.spec.source.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &sub.spec.source_namespace);
    let cm = config_maps
        .get_opt(&source)
        .await?
        .ok_or_else(|| OlmError::Install(format!("the catalog ConfigMap {source} of the subscription is gone")))?;
    let binary = cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
    let mut catalog = Catalog::from_config_map(&cm.data.unwrap_or_default(), &binary, &format!("ConfigMap {source}"))?;
    let mut added = Catalog::from_bundles(std::slice::from_ref(bundle))?;
    let channel = match sub.spec.channel.clone() {
        Some(channel) => channel,
        None => fbc::channels_of(bundle)?.swap_remove(0),
    };
    let entry = Entry { replaces: Some(installed.clone()), ..added.channels[0].entries[0].clone() };
    match catalog.channels.iter_mut().find(|c| c.package == package && c.name == channel) {
        Some(c) => {
            c.entries.retain(|e| e.name != csv);
            c.entries.push(entry);
        }
        None => return Err(OlmError::Install(format!("channel {channel} is not in the catalog of {source}"))),
    }
    catalog.bundles.retain(|b| b.name != csv);
    catalog.bundles.append(&mut added.bundles);
    write_catalog(client, &sub.spec.source_namespace, &source, &catalog).await?;
    progress(&format!("Updated CatalogSource: {source} with {csv}"));
    let subscription = sub.name_any();
    let plan = approve_plan(client, ns, &subscription, &csv, deadline(start, options.timeout), progress).await?;
    wait_installed(client, ns, &plan, &csv, deadline(start, options.timeout), progress).await?;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let gone = kube::runtime::wait::await_condition(csvs, &installed, |c: Option<&ClusterServiceVersion>| c.is_none());
    tokio::time::timeout_at(deadline(start, options.timeout).into(), gone)
        .await
        .map_err(|_| OlmError::Timeout(format!("the replaced ClusterServiceVersion {ns}/{installed} to be removed")))?
        .map_err(|e| OlmError::Timeout(e.to_string()))?;
    progress(&format!("Successfully upgraded to {csv:?}"));
    Ok(Installed {
        package,
        csv,
        namespace: ns.into(),
        catalog_source: source,
        subscription,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn deadline(start: Instant, timeout: Duration) -> Instant {
    start + timeout
}

/// Writes a catalog into ConfigMap `source` (gzipped, under [`CONFIG_MAP_KEY`]) and the
/// CatalogSource `source` serving it (server-side apply).
pub async fn write_catalog(client: &Client, ns: &str, source: &str, catalog: &Catalog) -> Result<(), OlmError> {
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(source.into());
    cm.metadata.labels = Some(BTreeMap::from([(CATALOG_LABEL.to_string(), source.to_string())]));
    cm.binary_data = Some(BTreeMap::from([(CONFIG_MAP_KEY.to_string(), ByteString(catalog.to_gzip()?))]));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut body = serde_json::to_value(&cm).map_err(|e| OlmError::Catalog(e.to_string()))?;
    body["apiVersion"] = json!("v1");
    body["kind"] = json!("ConfigMap");
    config_maps.patch(source, &params, &Patch::Apply(&body)).await?;
    let sources: Api<CatalogSource> = Api::namespaced(client.clone(), ns);
    let mut catalog_source = CatalogSource::new(
        source,
        CatalogSourceSpec {
            source_type: "configmap".into(),
            config_map: Some(source.into()),
            display_name: Some(source.into()),
            extra: serde_json::Map::from_iter([("publisher".to_string(), json!("operator-sdk"))]),
        },
    );
    catalog_source.metadata.namespace = Some(ns.into());
    sources.patch(source, &params, &Patch::Apply(&catalog_source)).await?;
    Ok(())
}

/// Makes `operator-sdk-og` unless the namespace has an OperatorGroup.
async fn ensure_operator_group(
    client: &Client,
    ns: &str,
    bundle: &Bundle,
    install_mode: Option<&str>,
    progress: &dyn Fn(&str),
) -> Result<(), OlmError> {
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    if !groups.list(&ListParams::default()).await?.items.is_empty() {
        return Ok(());
    }
    let supported = |mode: &str| bundle.csv.supports_install_mode(mode);
    let targets = match install_mode {
        Some("AllNamespaces") => Vec::new(),
        Some("OwnNamespace") => vec![ns.to_string()],
        Some(mode) => match mode.strip_prefix("SingleNamespace=").or_else(|| mode.strip_prefix("MultiNamespace=")) {
            Some(list) => list.split(',').map(str::to_string).collect(),
            None => {
                return Err(OlmError::Install(format!(
                    "install mode {mode:?}: use AllNamespaces, OwnNamespace or SingleNamespace=NS"
                )));
            }
        },
        None if supported("AllNamespaces") => Vec::new(),
        None if supported("OwnNamespace") => vec![ns.to_string()],
        None => {
            return Err(OlmError::Install(format!(
                "the CSV {} supports neither AllNamespaces nor OwnNamespace; pass --install-mode",
                bundle.csv.name()
            )));
        }
    };
    let mut group =
        OperatorGroup::new(OPERATOR_GROUP, OperatorGroupSpec { target_namespaces: targets, extra: Default::default() });
    group.metadata.namespace = Some(ns.into());
    groups.create(&PostParams::default(), &group).await?;
    progress(&format!("OperatorGroup {OPERATOR_GROUP:?} created"));
    Ok(())
}

/// Waits until CSV `csv` has succeeded, or fails as soon as InstallPlan `plan` has.
async fn wait_installed(
    client: &Client,
    ns: &str,
    plan: &str,
    csv: &str,
    deadline: Instant,
    progress: &dyn Fn(&str),
) -> Result<(), OlmError> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let failed = |p: Option<&InstallPlan>| p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.phase == "Failed");
    let plan_failed = async {
        match kube::runtime::wait::await_condition(plans, plan, failed).await {
            Ok(Some(p)) => {
                let message =
                    p.status.iter().flat_map(|s| &s.conditions).find_map(|c| c.message.clone()).unwrap_or_default();
                OlmError::Install(format!("InstallPlan {ns}/{plan} failed: {message}"))
            }
            Ok(None) => OlmError::Install(format!("InstallPlan {ns}/{plan} was deleted")),
            Err(e) => OlmError::Install(e.to_string()),
        }
    };
    tokio::select! {
        result = wait_csv(client, ns, csv, deadline, progress) => result,
        error = plan_failed => Err(error),
    }
}

/// Waits for the subscription's InstallPlan for `csv`, approves it and returns its name.
async fn approve_plan(
    client: &Client,
    ns: &str,
    subscription: &str,
    csv: &str,
    deadline: Instant,
    progress: &dyn Fn(&str),
) -> Result<String, OlmError> {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    let planned = |s: Option<&Subscription>| {
        s.and_then(|s| s.status.as_ref()).is_some_and(|st| {
            st.current_csv.as_deref() == Some(csv) && st.install_plan_ref.is_some()
                || find_condition(&st.conditions, "ResolutionFailed").is_some_and(Condition::is_true)
        })
    };
    let found =
        tokio::time::timeout_at(deadline.into(), kube::runtime::wait::await_condition(subs, subscription, planned))
            .await
            .map_err(|_| OlmError::Timeout(format!("an InstallPlan for {csv} in Subscription {ns}/{subscription}")))?
            .map_err(|e| OlmError::Timeout(e.to_string()))?;
    let status = found.and_then(|s| s.status).unwrap_or_default();
    if status.current_csv.as_deref() != Some(csv) {
        let message =
            find_condition(&status.conditions, "ResolutionFailed").and_then(|c| c.message.clone()).unwrap_or_default();
        return Err(OlmError::Install(format!("resolution failed: {message}")));
    }
    let plan = status.install_plan_ref.as_ref().and_then(|r| r.get("name")).and_then(Value::as_str).unwrap_or_default();
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    let patch = json!({"spec": {"approved": true}});
    plans.patch(plan, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    progress(&format!("Approved InstallPlan {plan} for the Subscription: {subscription}"));
    Ok(plan.to_string())
}

/// Waits until CSV `name` has succeeded, reporting each phase it passes through.
pub(crate) async fn wait_csv(
    client: &Client,
    ns: &str,
    name: &str,
    deadline: Instant,
    progress: &dyn Fn(&str),
) -> Result<(), OlmError> {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    progress(&format!("Waiting for ClusterServiceVersion \"{ns}/{name}\" to reach 'Succeeded' phase"));
    progress(&format!("  Waiting for ClusterServiceVersion \"{ns}/{name}\" to appear"));
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    let config = kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut stream = std::pin::pin!(kube::runtime::watcher::watcher(csvs, config).applied_objects());
    let mut last = (String::new(), String::new());
    let watching = async {
        while let Some(event) = stream.next().await {
            let csv = event.map_err(|e| OlmError::Install(e.to_string()))?;
            let status = csv.status.unwrap_or_default();
            let phase = status.phase.unwrap_or_default();
            if phase.is_empty() {
                continue;
            }
            // The reason and message change within a phase (Installing names what it waits
            // for): a timeout reports the latest.
            let reason = format!("{}: {}", status.reason.unwrap_or_default(), status.message.unwrap_or_default());
            if phase == last.0 {
                last.1 = reason;
                continue;
            }
            progress(&format!("  Found ClusterServiceVersion \"{ns}/{name}\" phase: {phase}"));
            last = (phase.clone(), reason);
            if phase == PHASE_SUCCEEDED {
                return Ok(());
            }
        }
        Err(OlmError::Install("the watch of ClusterServiceVersions ended".into()))
    };
    match tokio::time::timeout_at(deadline.into(), watching).await {
        Ok(result) => result,
        Err(_) if last.0 == PHASE_FAILED => Err(OlmError::Install(format!("csv failed: {}", last.1))),
        Err(_) => Err(OlmError::Timeout(format!(
            "ClusterServiceVersion {ns}/{name} to reach 'Succeeded' phase (last phase: {}, {})",
            if last.0.is_empty() { "none" } else { &last.0 },
            last.1
        ))),
    }
}

/// What `cleanup` deleted.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Removed {
    /// `kind "name"` of each object deleted, in order.
    pub deleted: Vec<String>,
}

/// Removes an operator installed through OLM (operator-sdk's `cleanup`): its
/// Subscriptions, CSVs, the CRDs they own, the subscriptions' InstallPlans (of every
/// version installed), its CatalogSource and catalog
/// ConfigMap, and `operator-sdk-og` when nothing else uses it; waits until they are gone.
pub async fn cleanup(
    client: &Client,
    package: &str,
    ns: &str,
    timeout: Duration,
    progress: &dyn Fn(&str),
) -> Result<Removed, OlmError> {
    cleanup_with(client, package, ns, timeout, &CleanupOptions::default(), progress).await
}

/// What [`cleanup_with`] deletes besides the operator itself, as operator-sdk's `cleanup`
/// flags choose (both by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupOptions {
    /// The CRDs the CSVs own, and so their objects (`--delete-crds`).
    pub delete_crds: bool,
    /// `operator-sdk-og`, when nothing else uses it (`--delete-operator-groups`).
    pub delete_operator_groups: bool,
}

impl Default for CleanupOptions {
    fn default() -> Self {
        CleanupOptions { delete_crds: true, delete_operator_groups: true }
    }
}

/// [`cleanup`], deleting the CRDs and the OperatorGroup only as `options` say.
pub async fn cleanup_with(
    client: &Client,
    package: &str,
    ns: &str,
    timeout: Duration,
    options: &CleanupOptions,
    progress: &dyn Fn(&str),
) -> Result<Removed, OlmError> {
    let installed = OperatorObjects::read(client, package, ns).await?;
    let mut remover = Remover { deadline: Instant::now() + timeout, removed: Removed::default(), progress };
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    for sub in &installed.subscriptions {
        remover.remove(&subs, &sub.name_any()).await?;
    }
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    for csv in &installed.csvs {
        remover.remove(&csvs, &csv.name_any()).await?;
    }
    if options.delete_crds {
        remove_owned_crds(client, &installed, &mut remover).await?;
    }
    remove_install_plans(client, ns, &installed, &mut remover).await?;
    remove_catalogs(client, &installed, &mut remover).await?;
    let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), ns);
    let others = csvs.list(&ListParams::default()).await?.items.len();
    if options.delete_operator_groups && others == 0 && groups.get_opt(OPERATOR_GROUP).await?.is_some() {
        remover.remove(&groups, OPERATOR_GROUP).await?;
    }
    progress(&format!("Operator {package:?} uninstalled"));
    Ok(remover.removed)
}

/// What an operator installed through OLM consists of: the Subscriptions to its package,
/// and the CSVs they installed or are installing.
struct OperatorObjects {
    subscriptions: Vec<Subscription>,
    /// The names of the subscriptions' installed and current CSVs.
    csv_names: Vec<String>,
    /// Those CSVs that exist.
    csvs: Vec<ClusterServiceVersion>,
}

impl OperatorObjects {
    /// Reads the Subscriptions to `package` in `ns` and the CSVs they name.
    async fn read(client: &Client, package: &str, ns: &str) -> Result<OperatorObjects, OlmError> {
        let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
        let subscriptions: Vec<Subscription> =
            subs.list(&ListParams::default()).await?.into_iter().filter(|s| s.spec.name == package).collect();
        let mut csv_names: Vec<String> = Vec::new();
        for sub in &subscriptions {
            let status = sub.status.clone().unwrap_or_default();
            csv_names.extend(status.installed_csv.into_iter().chain(status.current_csv));
        }
        csv_names.sort();
        csv_names.dedup();
        let api: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
        let mut csvs = Vec::new();
        for name in &csv_names {
            if let Some(csv) = api.get_opt(name).await? {
                csvs.push(csv);
            }
        }
        Ok(OperatorObjects { subscriptions, csv_names, csvs })
    }
}

/// Deletes objects one at a time, waiting for each to go, and reports each deletion.
struct Remover<'a> {
    deadline: Instant,
    removed: Removed,
    progress: &'a dyn Fn(&str),
}

impl Remover<'_> {
    /// Deletes `name`, waits until it is gone and reports `kind "name" deleted`.
    async fn remove<K>(&mut self, api: &Api<K>, name: &str) -> Result<(), OlmError>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
        K::DynamicType: Default,
    {
        delete(api, name, self.deadline).await?;
        let line = format!("{} {name:?} deleted", K::kind(&Default::default()).to_lowercase());
        (self.progress)(&line);
        self.removed.deleted.push(line);
        Ok(())
    }
}

/// Removes the CRDs the CSVs own that exist.
async fn remove_owned_crds(
    client: &Client,
    installed: &OperatorObjects,
    remover: &mut Remover<'_>,
) -> Result<(), OlmError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for csv in &installed.csvs {
        for owned in &csv.spec.customresourcedefinitions.owned {
            if crds.get_opt(&owned.name).await?.is_some() {
                remover.remove(&crds, &owned.name).await?;
            }
        }
    }
    Ok(())
}

/// Removes every InstallPlan of the subscriptions (those of replaced versions too), which
/// the garbage collector would otherwise remove some time later.
async fn remove_install_plans(
    client: &Client,
    ns: &str,
    installed: &OperatorObjects,
    remover: &mut Remover<'_>,
) -> Result<(), OlmError> {
    let sub_uids: Vec<String> = installed.subscriptions.iter().filter_map(|s| s.uid()).collect();
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    for plan in plans.list(&ListParams::default()).await? {
        let of_a_subscription = plan.owner_references().iter().any(|r| sub_uids.contains(&r.uid));
        if of_a_subscription || plan.spec.cluster_service_version_names.iter().any(|n| installed.csv_names.contains(n))
        {
            remover.remove(&plans, &plan.name_any()).await?;
        }
    }
    Ok(())
}

/// Removes the subscriptions' CatalogSources and the catalog ConfigMaps `run bundle`
/// made for them.
async fn remove_catalogs(
    client: &Client,
    installed: &OperatorObjects,
    remover: &mut Remover<'_>,
) -> Result<(), OlmError> {
    let mut sources: Vec<(String, String)> =
        installed.subscriptions.iter().map(|s| (s.spec.source_namespace.clone(), s.spec.source.clone())).collect();
    sources.sort();
    sources.dedup();
    for (source_ns, source) in sources {
        let catalog_sources: Api<CatalogSource> = Api::namespaced(client.clone(), &source_ns);
        if catalog_sources.get_opt(&source).await?.is_some() {
            remover.remove(&catalog_sources, &source).await?;
        }
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &source_ns);
        if config_maps.get_opt(&source).await?.is_some_and(|cm| cm.labels().contains_key(CATALOG_LABEL)) {
            remover.remove(&config_maps, &source).await?;
        }
    }
    Ok(())
}

/// Deletes an object and waits until it is gone.
async fn delete<K>(api: &Api<K>, name: &str, deadline: Instant) -> Result<(), OlmError>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => {}
        Err(e) if opkit::status::is_not_found(&e) => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    let gone = kube::runtime::wait::await_condition(api.clone(), name, |o: Option<&K>| o.is_none());
    tokio::time::timeout_at(deadline.into(), gone)
        .await
        .map_err(|_| OlmError::Timeout(format!("{} {name} to be deleted", K::kind(&Default::default()))))?
        .map_err(|e| OlmError::Timeout(e.to_string()))?;
    Ok(())
}
