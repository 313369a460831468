//! A time-bounded fuzzer of the API server's request paths: random methods, paths,
//! query parameters, content types and bodies (random JSON, mutated valid objects, JSON
//! patches, deep nesting, random bytes) against one in-process server seeded with
//! objects of several kinds, built-in and custom. Every request must get an answer (a
//! panic or crash drops it) within a bound, and no answer may be a 5xx other than kube's
//! own 504 for a resourceVersion the server has not reached.
//!
//! `cargo test` runs it for [`DEFAULT_SECONDS`]; set `OPKIT_FUZZ_SECONDS` for a longer
//! run (CI runs it longer) and `OPKIT_FUZZ_SEED` (a number) to replay a run;
//! `OPKIT_FUZZ_TRACE` prints each request before it is sent.

#[path = "../common/mod.rs"]
mod common;
mod requests;

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::api::{Api, PostParams};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::json;

use common::{FlightTicket, env_with_flights, flight, within};
use requests::FuzzRequest;

/// How long `cargo test` fuzzes by default.
const DEFAULT_SECONDS: u64 = 15;
/// How long one request may take to be answered: a hang, not a slow answer. CI runs the
/// long fuzz niced beside the corpus runs, where a cold `/openapi/v2` (rebuilt after the
/// fuzzer's own CRD writes, 0.5 s in a debug build on a quiet machine) once took over
/// 10 s for want of CPU.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

fn seconds() -> u64 {
    std::env::var("OPKIT_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SECONDS)
}

fn seed() -> u64 {
    std::env::var("OPKIT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    })
}

/// Objects the requests address by name, so that updates, patches and deletes reach
/// real objects and not only 404s.
async fn seed_objects(client: &kube::Client) {
    let seeds = [
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": "c", "labels": {"app": "x"}}, "data": {"k": "v"}}),
        ),
        ("/api/v1/namespaces/default/secrets", json!({"metadata": {"name": "s"}, "data": {"k": "aGk="}})),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                   "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        ),
        (
            "/api/v1/namespaces/default/pods",
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}}),
        ),
        (
            "/api/v1/namespaces/default/services",
            json!({"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}}),
        ),
    ];
    for (path, body) in seeds {
        let res = common::raw(client, "POST", path, Some("application/json"), body.to_string().into_bytes()).await;
        assert_eq!(res.code, 201, "seeding {path}: {}", res.text);
    }
    let flights: Api<FlightTicket> = Api::namespaced(client.clone(), "default");
    flights.create(&PostParams::default(), &flight("f", "A", "B", 1)).await.expect("seed flight");
}

/// Sends one request; returns its status code and body, or why there was no answer.
async fn send(client: &kube::Client, request: &FuzzRequest) -> Result<(u16, String), String> {
    let mut builder = http::Request::builder().method(request.method.as_str()).uri(&request.uri);
    if let Some(ct) = &request.content_type {
        builder = builder.header(http::header::CONTENT_TYPE, ct.as_str());
    }
    let req = builder.body(kube::client::Body::from(request.body.clone())).map_err(|e| format!("not sendable: {e}"))?;
    let answer = tokio::time::timeout(ANSWER_WITHIN, client.send(req))
        .await
        .map_err(|_| "no answer in time".to_string())?
        .map_err(|e| format!("no answer: {e}"))?;
    let code = answer.status().as_u16();
    // Watches stream: their first bytes are enough.
    let body = match tokio::time::timeout(Duration::from_secs(2), answer.into_body().collect()).await {
        Ok(Ok(b)) => String::from_utf8_lossy(&b.to_bytes()).chars().take(400).collect(),
        Ok(Err(e)) if code < 300 => format!("(stream ended: {e})"),
        Ok(Err(e)) => return Err(format!("{code} and the body broke off: {e}")),
        Err(_) => "(still streaming)".to_string(),
    };
    Ok((code, body))
}

/// kube's own 5xx answers that a client can provoke: 504 for a resourceVersion newer
/// than the server's (a "Too large resource version" Timeout), and 500 for a pod
/// streaming request whose node's kubelet cannot be reached (a fuzzed Node has no
/// address, or one off this machine, and no kubelet listens).
fn expected_5xx(code: u16, body: &str) -> bool {
    (code == 504 && body.contains("Too large resource version"))
        || (code == 500
            && ["no preferred addresses found", "sends no traffic off this machine", "dial tcp"]
                .iter()
                .any(|why| body.contains(why)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_panics_the_server_or_gets_an_unexpected_5xx() {
    let env = env_with_flights().await;
    let client = env.client_without_retry().await.expect("client");
    seed_objects(&client).await;

    let seed = seed();
    let budget = Duration::from_secs(seconds());
    println!("fuzzing for {budget:?} with OPKIT_FUZZ_SEED={seed}");
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = requests::request();
    let started = Instant::now();
    let trace = std::env::var_os("OPKIT_FUZZ_TRACE").is_some();
    let mut sent = 0u64;
    let mut by_code = std::collections::BTreeMap::<u16, u64>::new();
    while started.elapsed() < budget {
        let request = strategy.new_tree(&mut runner).expect("a request").current();
        if trace {
            // A request that kills the server (a stack overflow aborts the process) is the
            // last one printed.
            eprintln!("request {}: {request:?}", sent + 1);
        }
        let answer = send(&client, &request).await;
        sent += 1;
        match answer {
            Ok((code, body)) => {
                *by_code.entry(code).or_default() += 1;
                assert!(
                    code < 500 || expected_5xx(code, &body),
                    "request {sent} (OPKIT_FUZZ_SEED={seed}) got {code}: {request:?}\n{body}"
                );
            }
            Err(why) => panic!("request {sent} (OPKIT_FUZZ_SEED={seed}): {why}: {request:?}"),
        }
    }
    println!("{sent} requests in {:?}; answers by status: {by_code:?}", started.elapsed());
    // Still serving, and the seeded objects are still readable.
    let health = within("healthz", common::raw(&client, "GET", "/healthz", None, Vec::new())).await;
    assert_eq!(health.code, 200);
    for path in ["/api/v1/namespaces/default/configmaps", "/apis/apps/v1/deployments", "/api/v1/pods"] {
        let list = common::raw(&client, "GET", path, None, Vec::new()).await;
        assert_eq!(list.code, 200, "{path} still lists: {}", list.text);
    }
}
