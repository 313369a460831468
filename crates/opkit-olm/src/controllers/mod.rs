//! OLM's controllers, each an opkit controller in its own module: [`csv`] (the
//! ClusterServiceVersion's phases and install strategy), [`operator_group`] (target
//! namespaces), [`catalog_source`] (serving a file-based catalog), [`subscription`]
//! (resolution into InstallPlans), [`install_plan`] (creating a plan's resources) and
//! [`operator_condition`] (the operator's access to its OperatorCondition, its status,
//! and the `Upgradeable` check).
//! [`setup`] registers them all on a manager, with the state they share ([`Olm`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use opkit::{Cache, Controller, Manager, Request};

use crate::OlmError;
use crate::fbc::Catalog;
use crate::objects::Resources;
use crate::types::{
    CatalogSource, ClusterServiceVersion, Condition, InstallPlan, OperatorCondition, OperatorGroup, Subscription,
};

pub(crate) mod catalog_source;
pub(crate) mod csv;
pub(crate) mod install_plan;
pub(crate) mod operator_condition;
pub(crate) mod operator_group;
pub(crate) mod subscription;
pub(crate) mod webhooks;

/// What OLM's controllers share: resolved kinds and the catalogs read so far.
pub(crate) struct Olm {
    /// Kinds resolved through discovery.
    pub resources: Resources,
    /// Catalogs by CatalogSource `namespace/name`, with the resourceVersion of the
    /// ConfigMap they were read from.
    pub catalogs: Mutex<HashMap<String, (String, Arc<Catalog>)>>,
}

/// Registers OLM's controllers on `mgr`. OLM's CRDs must be installed ([`crate::crds::install`]).
pub fn setup(mgr: &Manager) -> Result<(), OlmError> {
    let olm = Arc::new(Olm { resources: Resources::new(mgr.client()), catalogs: Mutex::default() });
    let cache = mgr.cache();
    setup_csv(mgr, &olm, cache)?;
    Controller::new(mgr, operator_condition::reconcile)
        .named("operatorcondition")
        .with_state(olm.clone())
        .owns::<k8s_openapi::api::rbac::v1::Role>()
        .owns::<k8s_openapi::api::rbac::v1::RoleBinding>()
        .build()?;
    setup_operator_group(mgr, &olm, cache)?;
    setup_catalog_source(mgr, &olm, cache)?;
    setup_subscription(mgr, &olm, cache)?;
    Controller::new(mgr, install_plan::reconcile)
        .named("installplan")
        .with_state(olm)
        .max_concurrent_reconciles(4)
        .build()?;
    Ok(())
}

/// Registers the ClusterServiceVersion controller: a CSV is reconciled again when its
/// namespace's OperatorGroup changes, while Pending when a CRD changes, when a CSV that
/// replaces it changes, and when the OperatorCondition of the CSV it replaces changes.
fn setup_csv(mgr: &Manager, olm: &Arc<Olm>, cache: &Cache) -> Result<(), OlmError> {
    let csvs_of_namespace = {
        let cache = cache.clone();
        move |ns: &str| -> Vec<Request> {
            cache.list_in::<ClusterServiceVersion>(ns).iter().map(|c| Request::from_object(c.as_ref())).collect()
        }
    };
    let pending_csvs = {
        let cache = cache.clone();
        move |_: &CustomResourceDefinition| -> Vec<Request> {
            cache
                .list::<ClusterServiceVersion>()
                .iter()
                .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(csv::PHASE_PENDING))
                .map(|c| Request::from_object(c.as_ref()))
                .collect()
        }
    };
    let replacing = {
        let cache = cache.clone();
        // The CSV a new one replaces learns of it, and of its success.
        move |new: &ClusterServiceVersion| -> Vec<Request> {
            let ns = new.namespace().unwrap_or_default();
            let mut requests: Vec<Request> = std::iter::once(&new.spec.replaces)
                .filter(|old| !old.is_empty() && cache.get::<ClusterServiceVersion>(old, Some(&ns)).is_some())
                .map(|old| Request::new(old.as_str(), Some(&ns)))
                .collect();
            requests.push(Request::from_object(new));
            requests
        }
    };
    // The CSVs that replace the one an OperatorCondition is about learn of its changes.
    let replacing_condition_of = {
        let cache = cache.clone();
        move |condition: &OperatorCondition| -> Vec<Request> {
            let (ns, name) = (condition.namespace().unwrap_or_default(), condition.name_any());
            cache
                .list_in::<ClusterServiceVersion>(&ns)
                .iter()
                .filter(|c| c.spec.replaces == name)
                .map(|c| Request::from_object(c.as_ref()))
                .collect()
        }
    };
    Controller::new(mgr, csv::reconcile)
        .named("clusterserviceversion")
        .with_state(olm.clone())
        .owns::<Deployment>()
        .watches::<OperatorGroup>(move |g| csvs_of_namespace(&g.namespace().unwrap_or_default()))
        .watches::<CustomResourceDefinition>(pending_csvs)
        .watches::<ClusterServiceVersion>(replacing)
        .watches::<OperatorCondition>(replacing_condition_of)
        .max_concurrent_reconciles(4)
        .build()?;
    Ok(())
}

/// Registers the OperatorGroup controller: a namespace created, labelled or deleted may
/// change what a group's selector selects.
fn setup_operator_group(mgr: &Manager, olm: &Arc<Olm>, cache: &Cache) -> Result<(), OlmError> {
    let selecting_groups = {
        let cache = cache.clone();
        move |_: &k8s_openapi::api::core::v1::Namespace| -> Vec<Request> {
            cache
                .list::<OperatorGroup>()
                .iter()
                .filter(|g| {
                    g.spec.target_namespaces.is_empty()
                        && operator_group::namespace_selector(g).is_ok_and(|s| s.is_some())
                })
                .map(|g| Request::from_object(g.as_ref()))
                .collect()
        }
    };
    Controller::new(mgr, operator_group::reconcile)
        .named("operatorgroup")
        .with_state(olm.clone())
        .watches::<k8s_openapi::api::core::v1::Namespace>(selecting_groups)
        .build()?;
    Ok(())
}

/// Registers the CatalogSource controller: a source is read again when its ConfigMap
/// changes.
fn setup_catalog_source(mgr: &Manager, olm: &Arc<Olm>, cache: &Cache) -> Result<(), OlmError> {
    let sources_of_config_map = {
        let cache = cache.clone();
        move |cm: &k8s_openapi::api::core::v1::ConfigMap| -> Vec<Request> {
            let ns = cm.namespace().unwrap_or_default();
            cache
                .list_in::<CatalogSource>(&ns)
                .iter()
                .filter(|c| c.spec.config_map.as_deref() == Some(cm.name_any().as_str()))
                .map(|c| Request::from_object(c.as_ref()))
                .collect()
        }
    };
    Controller::new(mgr, catalog_source::reconcile)
        .named("catalogsource")
        .with_state(olm.clone())
        .watches::<k8s_openapi::api::core::v1::ConfigMap>(sources_of_config_map)
        .build()?;
    Ok(())
}

/// Registers the Subscription controller: a subscription is reconciled again when a CSV
/// of its namespace changes and when its CatalogSource changes.
fn setup_subscription(mgr: &Manager, olm: &Arc<Olm>, cache: &Cache) -> Result<(), OlmError> {
    let subscriptions_in = {
        let cache = cache.clone();
        move |ns: &str| -> Vec<Request> {
            cache.list_in::<Subscription>(ns).iter().map(|s| Request::from_object(s.as_ref())).collect()
        }
    };
    let on_catalog = {
        let cache = cache.clone();
        move |c: &CatalogSource| -> Vec<Request> {
            let (ns, name) = (c.namespace().unwrap_or_default(), c.name_any());
            cache
                .list::<Subscription>()
                .iter()
                .filter(|s| s.spec.source == name && s.spec.source_namespace == ns)
                .map(|s| Request::from_object(s.as_ref()))
                .collect()
        }
    };
    Controller::new(mgr, subscription::reconcile)
        .named("subscription")
        .with_state(olm.clone())
        .owns::<InstallPlan>()
        .watches::<ClusterServiceVersion>(move |c| subscriptions_in(&c.namespace().unwrap_or_default()))
        .watches::<CatalogSource>(on_catalog)
        .max_concurrent_reconciles(4)
        .build()?;
    Ok(())
}

/// The time now, as the API server writes times (RFC 3339 to the second).
pub(crate) fn now() -> String {
    opkit::status::now().0.to_string()
}

/// Sets `new` in `conditions` as `meta.SetStatusCondition` does: the transition time is
/// kept while the status stays, else taken from `new` or set to now.
pub(crate) fn set_condition(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.last_transition_time = existing.last_transition_time.clone();
            }
            if new.last_transition_time.is_none() {
                new.last_transition_time = Some(now());
            }
            *existing = new;
        }
        None => {
            if new.last_transition_time.is_none() {
                new.last_transition_time = Some(now());
            }
            conditions.push(new);
        }
    }
}
