// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached controller: for every Memcached it keeps a Deployment of `size`
//! memcached pods and reports their names in `status.nodes` — the reconcile loop the
//! operator-sdk tutorial explains line by line, in Rust.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, Pod, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile,
    SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;
use kube::api::PostParams;
use opkit::{Action, BuildError, Context, Controller, Manager, ReconcileResult, Request};

use crate::api::cache_v1alpha1::Memcached;

/// The image when `MEMCACHED_IMAGE` is not set.
pub const DEFAULT_IMAGE: &str = "memcached:1.4.36-alpine";

/// The environment variable that overrides the memcached image (set it in
/// config/manager/manager.yaml to pin an image per environment).
pub const IMAGE_ENV: &str = "MEMCACHED_IMAGE";

/// How long to wait before checking again after resizing the Deployment (the seed's minute).
pub const RESIZE_REQUEUE: Duration = Duration::from_secs(60);

// The RBAC rules this controller needs: `opkit generate` (make manifests) turns these
// markers into config/rbac/role.yaml.
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
//+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
//+kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
//+kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch

/// Moves the cluster toward the state a Memcached declares:
/// 1. the Memcached is gone: nothing to do (its Deployment is garbage-collected through
///    the owner reference);
/// 2. no Deployment yet: create it, then requeue;
/// 3. the Deployment's replicas differ from `spec.size`: update them, then check again
///    in a minute;
/// 4. list the pods by label and write their names to `status.nodes`, and set the
///    `Available` condition, through the status subresource.
///
/// The four ways to return, as in controller-runtime: `Err(e)` (or `?`) retries with
/// backoff; `Ok(Action::requeue())` runs again with backoff without an error;
/// `Ok(Action::done())` waits for the next change; `Ok(Action::requeue_after(d))` runs
/// again after `d`.
pub async fn reconcile(ctx: Context<Memcached>) -> ReconcileResult {
    // The object from the manager's cache; None: it was deleted, so stop without requeue.
    let Some(memcached) = ctx.object.as_ref() else {
        return Ok(Action::done());
    };
    let name = memcached.name_any();
    let namespace = memcached.namespace().unwrap_or_default();
    let size = memcached.spec.size;

    // Check if the deployment already exists; if not, create a new one.
    let Some(found) = ctx.cache.get::<Deployment>(&name, Some(&namespace)) else {
        let dep = deployment_for(memcached, &image())?;
        tracing::info!(deployment = %format!("{namespace}/{name}"), "creating a new Deployment");
        match ctx.api_for::<Deployment>().create(&PostParams::default(), &dep).await {
            Ok(_) => {}
            // Our create from the previous reconcile is not in the cache yet (the cache is
            // synced before the first reconcile, but lags behind our own writes): not an error.
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => return Err(e.into()),
        }
        // Deployment created successfully: requeue to continue with the status.
        return Ok(Action::requeue());
    };

    // Ensure the deployment size is the same as the spec.
    let replicas = found.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    if replicas != size {
        let mut dep = (*found).clone();
        dep.spec.get_or_insert_with(Default::default).replicas = Some(size);
        ctx.api_for::<Deployment>().replace(&name, &PostParams::default(), &dep).await?;
        // Ask to requeue after 1 minute in order to give enough time for the pods to be
        // created on the cluster side and the operand to be able to do the other
        // operations. Pod events bring the status up to date before that.
        return Ok(Action::requeue_after(RESIZE_REQUEUE));
    }

    // Update the Memcached status with the pod names: list the pods for this Memcached's
    // deployment (from the cache, by namespace and labels).
    let selector: kube::core::Selector = labels_for(&name).into_iter().collect();
    let mut nodes: Vec<String> =
        ctx.cache.list_matching::<Pod>(Some(&namespace), &selector).iter().map(|p| p.name_any()).collect();
    nodes.sort();

    let available = found.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
    let is_available = available >= size && nodes.len() == usize::try_from(size).unwrap_or(0);
    let (reason, message) = if is_available {
        ("DeploymentAvailable", format!("all {size} memcached pods are available"))
    } else {
        ("DeploymentProgressing", format!("{available} of {size} memcached pods are available"))
    };
    let condition =
        opkit::status::new_condition("Available", is_available, reason, &message, memcached.metadata.generation);

    opkit::status::update_status_from(&ctx.api(), (**memcached).clone(), |m: &mut Memcached| {
        let status = m.status.get_or_insert_with(Default::default);
        status.nodes = nodes.clone();
        opkit::status::set_condition(&mut status.conditions, condition.clone());
    })
    .await?;
    Ok(Action::done())
}

/// The memcached image: `MEMCACHED_IMAGE` if set, else [`DEFAULT_IMAGE`].
pub fn image() -> String {
    std::env::var(IMAGE_ENV).ok().filter(|i| !i.is_empty()).unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

/// The labels of a Memcached's deployment and pods.
pub fn labels_for(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), "memcached".to_string()), ("memcached_cr".to_string(), name.to_string())])
}

/// The Deployment for a Memcached: `size` replicas of memcached with a restricted security
/// context, owned (as controller) by the Memcached so it is garbage-collected with it.
pub fn deployment_for(m: &Memcached, image: &str) -> Result<Deployment, opkit::owner::OwnerError> {
    let name = m.name_any();
    let labels = labels_for(&name);
    let mut dep = Deployment {
        metadata: ObjectMeta { name: Some(name.clone()), namespace: m.namespace(), ..ObjectMeta::default() },
        spec: Some(DeploymentSpec {
            replicas: Some(m.spec.size),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..LabelSelector::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..ObjectMeta::default() }),
                spec: Some(PodSpec {
                    // Restricted pod security: see https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..SeccompProfile::default()
                        }),
                        ..PodSecurityContext::default()
                    }),
                    containers: vec![Container {
                        image: Some(image.to_string()),
                        name: "memcached".into(),
                        image_pull_policy: Some("IfNotPresent".into()),
                        security_context: Some(SecurityContext {
                            run_as_non_root: Some(true),
                            run_as_user: Some(1001),
                            allow_privilege_escalation: Some(false),
                            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
                            ..SecurityContext::default()
                        }),
                        command: Some(["memcached", "-m=64", "-o", "modern", "-v"].map(String::from).to_vec()),
                        ports: Some(vec![ContainerPort {
                            container_port: 11211,
                            name: Some("memcached".into()),
                            ..ContainerPort::default()
                        }]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    // Set the Memcached as the owner and controller: deleting it deletes the deployment.
    opkit::owner::set_controller_reference(m, &mut dep)?;
    Ok(dep)
}

/// Maps a pod to the Memcached named by its `memcached_cr` label.
pub fn pod_to_memcached(pod: &Pod) -> Vec<Request> {
    match pod.labels().get("memcached_cr") {
        Some(name) => vec![Request::new(name, pod.namespace().as_deref())],
        None => Vec::new(),
    }
}

/// Registers the controller: `For` Memcached, `Owns` its Deployment (changes enqueue the
/// owner), and `Watches` pods mapped to their Memcached by the `memcached_cr` label.
pub fn setup(mgr: &Manager) -> Result<(), BuildError> {
    Controller::new(mgr, reconcile).owns::<Deployment>().watches::<Pod>(pod_to_memcached).build()
}
