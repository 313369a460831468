//! Custom scorecard tests as operator-sdk runs them: each test a pod of its image in the
//! cluster, the bundle handed to it as a gzipped tar in a ConfigMap that an init
//! container unpacks at `/bundle`, its result the `v1alpha3.TestStatus` JSON it prints,
//! read from the pod's log once it has ended. A pod that does not end within
//! `--wait-time`, ends without a result, or prints something else gives an `error`
//! result saying why (on a local opkit cluster, that its image is not loaded when the pod
//! is simulated).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, LogParams, PostParams};
use kube::runtime::wait::await_condition;
use opkit_olm_bundle::scorecard::{TestConfiguration, TestResult};
use serde::Deserialize;
use serde_json::json;

use crate::commands::CliError;
use crate::duration_flag::DurationFlag;

/// Where the bundle is unpacked in a test pod.
const BUNDLE_MOUNT: &str = "/bundle";
/// The ConfigMap key holding the bundle.
const BUNDLE_KEY: &str = "bundle.tar.gz";
/// The test container's name, whose log is the result.
const TEST_CONTAINER: &str = "scorecard-test";

/// What a test image prints (`v1alpha3.TestStatus`).
#[derive(Debug, Deserialize)]
struct TestStatus {
    #[serde(default)]
    results: Vec<TestResult>,
}

/// How test pods run.
#[derive(Debug, Clone)]
pub(super) struct PodSettings {
    /// The namespace of the pods and the bundle's ConfigMap.
    pub namespace: String,
    /// The ServiceAccount the pods run as.
    pub service_account: String,
    /// How long a pod may take to end.
    pub wait_time: DurationFlag,
    /// The image unpacking the bundle.
    pub untar_image: String,
    /// Leave the pods and the ConfigMap behind.
    pub skip_cleanup: bool,
}

/// Runs custom tests as pods, with the bundle's ConfigMap made once for all of them.
pub(super) struct PodRunner {
    client: kube::Client,
    settings: PodSettings,
    run_id: String,
}

impl PodRunner {
    /// Puts the bundle at `bundle_dir` in a ConfigMap for the tests to come.
    pub(super) async fn start(
        client: kube::Client,
        settings: PodSettings,
        bundle_dir: &Path,
    ) -> Result<PodRunner, CliError> {
        // Unique enough among runs against one namespace: the time and this process.
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let run_id = format!("{:08x}", nanos ^ std::process::id().rotate_left(16));
        let tgz = opkit_kudo::write_tgz(bundle_dir)?;
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("scorecard-test-{run_id}"), "labels": {"app": "scorecard-test", "testrun": run_id}},
        }))
        .map_err(|e| CliError::Usage(format!("the bundle's ConfigMap: {e}")))?;
        let config_map =
            ConfigMap { binary_data: Some([(BUNDLE_KEY.to_string(), ByteString(tgz))].into()), ..config_map };
        Api::<ConfigMap>::namespaced(client.clone(), &settings.namespace)
            .create(&PostParams::default(), &config_map)
            .await
            .map_err(|e| CliError::ClusterRequest(format!("creating the bundle's ConfigMap: {e}")))?;
        Ok(PodRunner { client, settings, run_id })
    }

    /// Runs `test` (the `index`th of the run) in a pod and returns its results.
    pub(super) async fn run(&self, index: usize, test: &TestConfiguration) -> Vec<TestResult> {
        let name = format!("scorecard-test-{}-{index}", self.run_id);
        let what = test.labels.get("test").cloned().unwrap_or_else(|| test.entrypoint.join(" "));
        let results = match self.run_pod(&name, test).await {
            Ok(results) => results,
            Err(reason) => vec![TestResult::error(&what, reason)],
        };
        if !self.settings.skip_cleanup {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
            if let Err(e) = pods.delete(&name, &DeleteParams::background()).await {
                tracing::warn!(pod = %name, error = %e, "deleting a scorecard test pod");
            }
        }
        results
    }

    /// Deletes the bundle's ConfigMap (unless `--skip-cleanup`).
    pub(super) async fn finish(self) {
        if self.settings.skip_cleanup {
            return;
        }
        let name = format!("scorecard-test-{}", self.run_id);
        let config_maps: Api<ConfigMap> = Api::namespaced(self.client, &self.settings.namespace);
        if let Err(e) = config_maps.delete(&name, &DeleteParams::background()).await {
            tracing::warn!(config_map = %name, error = %e, "deleting the scorecard bundle's ConfigMap");
        }
    }

    /// Creates the pod, waits for it to end and reads its results; `Err` says why there
    /// are none.
    async fn run_pod(&self, name: &str, test: &TestConfiguration) -> Result<Vec<TestResult>, String> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        let pod = self.pod(name, test).map_err(|e| format!("the test pod: {e}"))?;
        pods.create(&PostParams::default(), &pod).await.map_err(|e| format!("creating test pod {name}: {e}"))?;
        let ended = |p: Option<&Pod>| {
            matches!(p.and_then(|p| p.status.as_ref()?.phase.as_deref()), Some("Succeeded" | "Failed"))
        };
        let wait = tokio::time::timeout(self.settings.wait_time.get(), await_condition(pods.clone(), name, ended));
        let done = match wait.await {
            Ok(Ok(pod)) => pod,
            Ok(Err(e)) => return Err(format!("waiting for test pod {name}: {e}")),
            Err(_) => {
                let timeout = format!("test pod {name} did not end within --wait-time {}", self.settings.wait_time);
                return Err(self.explain(name, &test.image, timeout).await);
            }
        };
        if let Some(pod) = &done
            && super::super::deploy::simulated_on_opkit(&self.client, pod).await
        {
            return Err(not_loaded(&format!("test pod {name} ran no test"), &test.image));
        }
        let params = LogParams { container: Some(TEST_CONTAINER.into()), ..LogParams::default() };
        let log = pods.logs(name, &params).await.map_err(|e| format!("reading test pod {name}'s log: {e}"))?;
        match serde_json::from_str::<TestStatus>(log.trim()) {
            Ok(status) if !status.results.is_empty() => Ok(status.results),
            _ => Err(format!(
                "test pod {name} printed no scorecard result (a v1alpha3 TestStatus){}; its log:\n{log}",
                done.as_ref().map(how_it_ended).unwrap_or_default()
            )),
        }
    }

    /// Why a pod did not end in time (`timeout`): on a local opkit cluster whose pod is
    /// simulated, that the image is not loaded; else the pod's last Warning event, when
    /// it has one.
    async fn explain(&self, name: &str, image: &str, timeout: String) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.settings.namespace);
        if let Ok(pod) = pods.get(name).await
            && super::super::deploy::simulated_on_opkit(&self.client, &pod).await
        {
            return not_loaded(&timeout, image);
        }
        let labels: BTreeMap<String, String> = [("testrun".to_string(), self.run_id.clone())].into();
        let error = CliError::ClusterRequest(timeout);
        let ns = &self.settings.namespace;
        crate::commands::pod_warnings::explain_timeout(&self.client, ns, &[labels], error).await.to_string()
    }

    /// The pod of `test`, as operator-sdk's scorecard makes it.
    fn pod(&self, name: &str, test: &TestConfiguration) -> Result<Pod, serde_json::Error> {
        let archive = format!("/scorecard/{BUNDLE_KEY}");
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "scorecard-test", "testrun": self.run_id}},
            "spec": {
                "serviceAccountName": self.settings.service_account,
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "initContainers": [{
                    "name": "scorecard-untar",
                    "image": self.settings.untar_image,
                    "command": ["tar", "xzf", archive, "-C", BUNDLE_MOUNT],
                    "volumeMounts": [
                        {"name": "scorecard-bundle", "mountPath": "/scorecard", "readOnly": true},
                        {"name": "scorecard-untar", "mountPath": BUNDLE_MOUNT},
                    ],
                }],
                "containers": [{
                    "name": TEST_CONTAINER,
                    "image": test.image,
                    "command": test.entrypoint,
                    "env": [{"name": "SCORECARD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                    "volumeMounts": [{"name": "scorecard-untar", "mountPath": BUNDLE_MOUNT, "readOnly": true}],
                }],
                "volumes": [
                    {"name": "scorecard-bundle", "configMap": {"name": format!("scorecard-test-{}", self.run_id)}},
                    {"name": "scorecard-untar", "emptyDir": {}},
                ],
            },
        }))
    }
}

/// `what` happened because `image` is not loaded into the local opkit cluster.
fn not_loaded(what: &str, image: &str) -> String {
    format!(
        "{what}: image {image} is not loaded into this opkit cluster, so the pod is simulated and runs no test; load \
         it with `opkit cluster load {image} --binary PATH`"
    )
}

/// How a pod's containers ended (`, init container scorecard-untar exited 1: Error`), for
/// an error naming why a test printed nothing.
fn how_it_ended(pod: &Pod) -> String {
    let Some(status) = &pod.status else { return String::new() };
    let init = status.init_container_statuses.iter().flatten().map(|c| ("init container", c));
    let main = status.container_statuses.iter().flatten().map(|c| ("container", c));
    init.chain(main)
        .filter_map(|(what, c)| {
            let ended = c.state.as_ref()?.terminated.as_ref()?;
            (ended.exit_code != 0).then(|| {
                let reason =
                    [ended.reason.as_deref(), ended.message.as_deref()].into_iter().flatten().collect::<Vec<_>>();
                format!(", {what} {} exited {}: {}", c.name, ended.exit_code, reason.join(": "))
            })
        })
        .collect()
}
