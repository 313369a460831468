// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The operator's generated RBAC (config/rbac, from the `+kubebuilder:rbac` markers) is
//! proven against an API server that enforces it: the manager runs as the project's
//! ServiceAccount, not as admin. With the generated role a Memcached becomes Available;
//! with `deployments create` taken out of the role, reconcile fails with kube's
//! Forbidden naming the missing permission and no Deployment appears; once the
//! permission is back, the next retry succeeds.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::Condition;
use memcached_operator::api::cache_v1alpha1::{Memcached, MemcachedSpec};
use memcached_operator::controller::memcached::{pod_to_memcached, reconcile};
use opkit::{Context, Controller, Manager, ManagerOptions, ReconcileResult};
use opkit_testenv::TestEnv;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "memcached-system";
const ACCOUNT: &str = "system:serviceaccount:memcached-system:controller-manager";

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn rbac_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config/rbac"))
}

/// Runs the Memcached controller as the project's ServiceAccount; every reconcile
/// error's message is sent on the returned channel.
async fn start_as_service_account(
    env: &TestEnv,
) -> Result<(CancellationToken, mpsc::UnboundedReceiver<String>), Box<dyn std::error::Error>> {
    env.install_crds(memcached_operator::api::crds()).await?;
    let client = env.client_with_rbac(rbac_dir(), NAMESPACE).await?;
    let mgr = Manager::new(client, ManagerOptions::default());
    let (errors, received) = mpsc::unbounded_channel();
    let reporting = move |ctx: Context<Memcached>| {
        let errors = errors.clone();
        async move {
            let result: ReconcileResult = reconcile(ctx).await;
            if let Err(e) = &result {
                let _ = errors.send(e.to_string());
            }
            result
        }
    };
    Controller::new(&mgr, reporting).owns::<Deployment>().watches::<Pod>(pod_to_memcached).build()?;
    let stop = CancellationToken::new();
    tokio::spawn(mgr.run_until(stop.clone()));
    Ok((stop, received))
}

fn available() -> impl Condition<Memcached> {
    |m: Option<&Memcached>| {
        m.and_then(|m| m.status.as_ref())
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Available" && c.status == "True"))
    }
}

async fn wait_available(api: Api<Memcached>, name: &str) -> TestResult {
    opkit_testenv::wait_for(&api, name, "to be Available", available(), TIMEOUT).await?;
    Ok(())
}

/// The generated manager-role with one verb taken away from one resource's rule.
async fn without_verb(roles: &Api<ClusterRole>, resource: &str, verb: &str) -> kube::Result<ClusterRole> {
    let mut role = roles.get("manager-role").await?;
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.iter().flatten().any(|r| r == resource) {
            rule.verbs.retain(|v| v != verb);
        }
    }
    Ok(role)
}

#[tokio::test]
async fn the_generated_role_is_sufficient() -> TestResult {
    let env = TestEnv::start().await?;
    let (stop, _errors) = start_as_service_account(&env).await?;
    let memcacheds: Api<Memcached> = Api::namespaced(env.client(), "default");
    memcacheds.create(&PostParams::default(), &Memcached::new("cache", MemcachedSpec { size: 2 })).await?;
    wait_available(memcacheds, "cache").await?;
    stop.cancel();
    Ok(())
}

#[tokio::test]
async fn a_missing_permission_fails_reconcile_with_forbidden_until_it_is_granted() -> TestResult {
    let env = TestEnv::start().await?;
    let (stop, mut errors) = start_as_service_account(&env).await?;
    let roles: Api<ClusterRole> = Api::all(env.client());
    let generated = roles.get("manager-role").await?;
    let restricted = without_verb(&roles, "deployments", "create").await?;
    roles.replace("manager-role", &PostParams::default(), &restricted).await?;

    let memcacheds: Api<Memcached> = Api::namespaced(env.client(), "default");
    memcacheds.create(&PostParams::default(), &Memcached::new("cache", MemcachedSpec { size: 1 })).await?;
    let message = tokio::time::timeout(TIMEOUT, errors.recv()).await?.ok_or("the controller stopped")?;
    let expected = format!(
        "deployments.apps is forbidden: User \"{ACCOUNT}\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"default\""
    );
    assert!(message.contains(&expected), "reconcile error {message:?} does not name the missing permission");
    let deployments: Api<Deployment> = Api::namespaced(env.client(), "default");
    assert!(deployments.get_opt("cache").await?.is_none(), "a Deployment was created without the permission");

    let mut restored = roles.get("manager-role").await?;
    restored.rules = generated.rules;
    roles.patch("manager-role", &PatchParams::default(), &Patch::Merge(&restored)).await?;
    wait_available(memcacheds, "cache").await?;
    assert!(deployments.get_opt("cache").await?.is_some());
    stop.cancel();
    Ok(())
}
