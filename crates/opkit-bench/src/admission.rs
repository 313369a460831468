//! The admission webhook benchmark (`opkit-bench admission`): what one validating
//! webhook adds to a create. An in-process API server (a `TestEnv` without controllers)
//! takes `--requests` ConfigMap creates one after the other, first with no webhook, then
//! with one ValidatingWebhookConfiguration that matches them and calls an in-process
//! HTTPS webhook server (the runtime's `WebhookServer` with a `Validator<ConfigMap>`) on
//! 127.0.0.1. Both runs are timed per request as the client sees it; the report gives
//! p50/p99 of each and the latency the webhook adds (target: ≤ 2 ms at p50).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use opkit::webhook::{CA_FILE, Validator, WebhookServer};
use opkit_testenv::TestEnv;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::BenchError;
use crate::stats::percentile;

/// The added p50 latency the issue sets as the target, in milliseconds.
pub const TARGET_ADDED_P50_MS: f64 = 2.0;

/// Creates made before each measured run, so connections and caches are warm.
const WARM_UP: usize = 20;

/// What to measure.
#[derive(Debug, Clone)]
pub struct AdmissionOptions {
    /// Measured creates per run.
    pub requests: usize,
}

/// The latencies of one run, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct RunLatency {
    /// Median.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
}

/// The benchmark's figures.
#[derive(Debug, Clone, Serialize)]
pub struct AdmissionReport {
    /// Measured creates per run.
    pub requests: usize,
    /// Creates with no webhook.
    pub without_webhook: RunLatency,
    /// Creates passing one validating webhook.
    pub with_webhook: RunLatency,
    /// p50 with the webhook minus p50 without.
    pub added_p50_ms: f64,
    /// p99 with the webhook minus p99 without.
    pub added_p99_ms: f64,
    /// The target of `added_p50_ms`.
    pub target_added_p50_ms: f64,
}

/// Admits every ConfigMap, as a cheap real validating webhook does.
struct AdmitAll;

impl Validator<ConfigMap> for AdmitAll {
    fn validate_create(&self, _obj: &ConfigMap) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
    fn validate_update(&self, _old: &ConfigMap, _new: &ConfigMap) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// Runs the benchmark.
pub async fn run(opts: &AdmissionOptions) -> Result<AdmissionReport, BenchError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| BenchError::Setup(format!("{what}: {e}"));
    let env = TestEnv::builder().without_controllers().start().await.map_err(|e| setup("starting the server", &e))?;
    let configmaps: Api<ConfigMap> = Api::namespaced(env.client(), "default");

    let without = creates(&configmaps, "plain", opts.requests).await?;

    let certs = tempfile::tempdir().map_err(|e| setup("certificate directory", &e))?;
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let addr = WebhookServer::new()
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .dev_certs(certs.path().to_path_buf(), vec!["127.0.0.1".into()])
        .validating::<ConfigMap, _>("/validate", AdmitAll)
        .start(shutdown.clone())
        .await
        .map_err(|e| setup("starting the webhook server", &e))?;
    let ca = std::fs::read(certs.path().join(CA_FILE)).map_err(|e| setup("reading the webhook CA", &e))?;
    let config: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "bench"},
        "webhooks": [{
            "name": "validate.bench.opkit.dev",
            "clientConfig": {"url": format!("https://{addr}/validate"), "caBundle": base64_encode(&ca)},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    }))
    .map_err(|e| setup("webhook configuration", &e))?;
    Api::<ValidatingWebhookConfiguration>::all(env.client())
        .create(&PostParams::default(), &config)
        .await
        .map_err(|e| setup("creating the webhook configuration", &e))?;

    let with = creates(&configmaps, "hooked", opts.requests).await?;
    let added = |f: fn(&RunLatency) -> f64| f(&with) - f(&without);
    Ok(AdmissionReport {
        requests: opts.requests,
        added_p50_ms: added(|r| r.p50_ms),
        added_p99_ms: added(|r| r.p99_ms),
        without_webhook: without,
        with_webhook: with,
        target_added_p50_ms: TARGET_ADDED_P50_MS,
    })
}

/// `caBundle` as the API expects it (base64 of the PEM).
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Creates `WARM_UP` then `requests` ConfigMaps named `<prefix>-<i>`, one at a time;
/// returns the latency of the measured ones.
async fn creates(api: &Api<ConfigMap>, prefix: &str, requests: usize) -> Result<RunLatency, BenchError> {
    let mut samples = Vec::with_capacity(requests);
    for i in 0..WARM_UP + requests {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("{prefix}-{i}"));
        cm.data = Some([("key".to_string(), "value".to_string())].into());
        let started = Instant::now();
        api.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| BenchError::Setup(format!("creating ConfigMap {prefix}-{i}: {e}")))?;
        if i >= WARM_UP {
            samples.push(started.elapsed());
        }
    }
    samples.sort_unstable();
    let ms = |d: Option<Duration>| d.unwrap_or_default().as_secs_f64() * 1000.0;
    Ok(RunLatency { p50_ms: ms(percentile(&samples, 50.0)), p99_ms: ms(percentile(&samples, 99.0)) })
}

/// The report as text.
pub fn render_text(r: &AdmissionReport) -> String {
    format!(
        "admission webhook benchmark: {} ConfigMap creates per run, one at a time\n\
         \x20 no webhook:             p50 {:>7.3} ms   p99 {:>7.3} ms\n\
         \x20 one validating webhook: p50 {:>7.3} ms   p99 {:>7.3} ms\n\
         \x20 added:                  p50 {:>7.3} ms   p99 {:>7.3} ms   (target p50 <= {:.1} ms: {})\n",
        r.requests,
        r.without_webhook.p50_ms,
        r.without_webhook.p99_ms,
        r.with_webhook.p50_ms,
        r.with_webhook.p99_ms,
        r.added_p50_ms,
        r.added_p99_ms,
        r.target_added_p50_ms,
        if r.added_p50_ms <= r.target_added_p50_ms { "met" } else { "missed" },
    )
}
