//! `opkit-bench sharding`: the same custom resources reconciled by one unsharded replica,
//! then by 1, 2 and 3 shards of one ring. Each replica is a child process (the hidden
//! `sharding-shard` command) running an opkit manager with one dynamic controller of the
//! CRD `items.bench.opkit.dev` (as the Helm, Ansible and KUDO operators run), sharded by
//! `ShardingConfig::every_controller` (what `--shard-ring` sets), that stamps each
//! object it reconciles with its replica ID. Per row, on a fresh server child filled
//! with the objects, it measures:
//! - the time until every object carries the stamp of the replica that owns it (for
//!   shards, the one its label names: the coordinator's assignment included), as objects
//!   per second;
//! - each replica's VmRSS once that is done;
//! - with two shards or more, the time from SIGKILLing one shard until every object is
//!   stamped by a survivor (the lease expiry included).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use opkit::sharding::ShardingConfig;
use opkit::{Action, CacheScope, Context, Controller, Manager, ManagerOptions, ReconcileResult};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::BenchError;
use crate::child::{Spawned, spawn_child_with_input};
use crate::report::Machine;
use crate::runtime::cluster::{Cluster, NAMESPACE, create_with};
use crate::serve::{ProcMemory, ServeInfo};

/// The ring's name.
const RING: &str = "bench";
/// The annotation a replica stamps: its ID.
const STAMP: &str = "bench.opkit.dev/shard";
/// The custom resource's group.
const GROUP: &str = "bench.opkit.dev";
/// The ID of the unsharded replica.
const UNSHARDED: &str = "unsharded";

/// The benchmark's custom resource, `items.bench.opkit.dev/v1` `Item`.
fn item_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, "v1", "Item"), "items")
}

/// Its CRD: a `spec.payload` string.
fn item_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("items.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Item", "plural": "items", "singular": "item", "listKind": "ItemList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"payload": {"type": "string"}}}},
            }}}],
        },
    })
}

/// An `Item` named `name` with about `payload` bytes in its spec.
fn item(name: &str, payload: usize, variant: usize) -> bytes::Bytes {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let pad: String = (0..payload).map(|i| ALPHABET[(i + variant) % ALPHABET.len()] as char).collect();
    let obj = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Item",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"payload": pad},
    });
    bytes::Bytes::from(obj.to_string())
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ShardingWorkload {
    /// Custom resources.
    pub objects: usize,
    /// Bytes of payload per object.
    pub payload: usize,
    /// The shard counts to measure; 0 is one unsharded replica (the baseline).
    pub shard_counts: Vec<usize>,
    /// Lease duration, renew deadline and retry period, in milliseconds.
    pub lease_ms: (u64, u64, u64),
}

impl ShardingWorkload {
    /// 10,000 objects of 1 KB; unsharded, 1, 2 and 3 shards; controller-runtime's lease
    /// timings.
    pub fn full() -> ShardingWorkload {
        ShardingWorkload {
            objects: 10_000,
            payload: 1024,
            shard_counts: vec![0, 1, 2, 3],
            lease_ms: (15_000, 10_000, 2_000),
        }
    }
    /// 300 objects, unsharded, 1 and 2 shards, 2 s leases: for the smoke test.
    pub fn tiny() -> ShardingWorkload {
        ShardingWorkload { objects: 300, payload: 256, shard_counts: vec![0, 1, 2], lease_ms: (2_000, 1_000, 200) }
    }
}

/// How to run it.
#[derive(Debug, Clone)]
pub struct ShardingOptions {
    /// What to run.
    pub workload: ShardingWorkload,
    /// The executable whose hidden commands run the server and the shards.
    pub exe: std::path::PathBuf,
    /// Progress on stderr.
    pub progress: bool,
}

/// One shard count's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ShardRun {
    /// Shards; 0 for the unsharded replica.
    pub shards: usize,
    /// Seconds from starting the shards until every object was stamped by its shard.
    pub seconds_to_all: f64,
    /// Objects per second over that time.
    pub objects_per_sec: f64,
    /// Each shard's VmRSS then, in bytes, and its share of the objects.
    pub shard_rss_bytes: Vec<u64>,
    /// Objects per shard then.
    pub shard_objects: Vec<usize>,
    /// Seconds from SIGKILLing one shard until survivors had stamped every object.
    pub rebalance_seconds: Option<f64>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct ShardingReport {
    /// The machine.
    pub machine: Machine,
    /// Objects.
    pub objects: usize,
    /// One row per shard count.
    pub runs: Vec<ShardRun>,
}

/// What the parent tells a shard.
#[derive(Debug, Serialize, Deserialize)]
struct ShardSpec {
    server: ServeInfo,
    shard_id: String,
    /// Run as a shard of the ring (else as one unsharded replica).
    sharded: bool,
    lease_ms: (u64, u64, u64),
}

/// What a shard prints once it runs.
#[derive(Debug, Serialize, Deserialize)]
struct ShardReady {
    pid: u32,
}

/// Runs the hidden `sharding-shard` command: one shard, until stdin closes.
pub async fn run_shard() -> Result<(), BenchError> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let line = lines.next_line().await?.ok_or_else(|| BenchError::Setup("no shard spec on stdin".into()))?;
    let spec: ShardSpec = serde_json::from_str(&line).map_err(|e| BenchError::Setup(format!("bad shard spec: {e}")))?;
    let client = spec.server.kube_client(NAMESPACE)?;
    let mut sharding = ShardingConfig::new(RING, NAMESPACE).shard_id(spec.shard_id.clone()).every_controller();
    sharding.lease_duration = Duration::from_millis(spec.lease_ms.0);
    sharding.renew_deadline = Duration::from_millis(spec.lease_ms.1);
    sharding.retry_period = Duration::from_millis(spec.lease_ms.2);
    sharding.release_on_cancel = false;
    let opts = ManagerOptions {
        cache: CacheScope::namespaces(vec![NAMESPACE.to_string()]),
        sharding: spec.sharded.then_some(sharding),
        ..ManagerOptions::default()
    };
    let mgr = Manager::new(client, opts);
    let id = Arc::new(spec.shard_id.clone());
    let reconcile = move |ctx: Context<DynamicObject>| {
        let id = id.clone();
        async move {
            let Some(obj) = ctx.object.as_ref() else { return ReconcileResult::Ok(Action::done()) };
            if obj.metadata.annotations.as_ref().and_then(|a| a.get(STAMP)) != Some(&*id) {
                let patch = json!({"metadata": {"annotations": {STAMP: *id}}});
                ctx.dynamic_api().patch(&ctx.request.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            Ok(Action::done())
        }
    };
    Controller::new_dynamic(&mgr, item_resource(), Scope::Namespaced, reconcile)
        .build()
        .map_err(|e| BenchError::Setup(e.to_string()))?;
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(mgr.run_until(stop.clone()));
    let line =
        serde_json::to_string(&ShardReady { pid: std::process::id() }).map_err(|e| BenchError::Setup(e.to_string()))?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{line}\n").as_bytes()).await?;
    out.flush().await?;
    while let Ok(Some(_)) = lines.next_line().await {}
    stop.cancel();
    let _ = running.await;
    Ok(())
}

struct Shard {
    id: String,
    pid: u32,
    child: Child,
}

impl Shard {
    async fn start(
        exe: &std::path::Path,
        server: &ServeInfo,
        id: &str,
        sharded: bool,
        lease_ms: (u64, u64, u64),
    ) -> Result<Shard, BenchError> {
        let spec = ShardSpec { server: server.clone(), shard_id: id.to_string(), sharded, lease_ms };
        let spec = serde_json::to_string(&spec).map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut cmd = Command::new(exe);
        cmd.arg("sharding-shard");
        let spawned: Spawned<ShardReady> =
            spawn_child_with_input(cmd, &format!("shard {id}"), Duration::from_secs(60), Some(&spec)).await?;
        Ok(Shard { id: id.to_string(), pid: spawned.ready.pid, child: spawned.child })
    }

    fn rss(&self) -> Result<u64, BenchError> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))?;
        ProcMemory::parse(&status).map(|m| m.rss_bytes).ok_or_else(|| BenchError::Setup("no VmRSS".into()))
    }
}

/// Waits until every object's stamp is one of `alive`, and equals its shard label (for
/// the unsharded replica: carries its stamp), and every replica of `alive` holds some (a
/// shard that joined late gets its share first); returns the objects per replica. Lists
/// metadata every 200 ms (a benchmark's clock).
async fn stamped(
    api: &Api<DynamicObject>,
    objects: usize,
    alive: &[String],
    limit: Duration,
) -> Result<BTreeMap<String, usize>, BenchError> {
    let label = ShardingConfig::new(RING, NAMESPACE).shard_label();
    let started = Instant::now();
    loop {
        let list =
            api.list_metadata(&ListParams::default()).await.map_err(|e| BenchError::Setup(format!("list: {e}")))?;
        let mut per_shard = BTreeMap::new();
        let (mut done, mut labelled, mut with_stamp) = (0, 0, 0);
        for meta in &list.items {
            let stamp = meta.metadata.annotations.as_ref().and_then(|a| a.get(STAMP));
            let unsharded = alive == [UNSHARDED];
            let shard = if unsharded { stamp } else { meta.metadata.labels.as_ref().and_then(|l| l.get(&label)) };
            labelled += usize::from(shard.is_some());
            with_stamp += usize::from(stamp.is_some());
            if let (Some(stamp), Some(shard)) = (stamp, shard)
                && stamp == shard
                && alive.contains(stamp)
            {
                done += 1;
                *per_shard.entry(stamp.clone()).or_default() += 1;
            }
        }
        if done >= objects && (objects == 0 || alive.iter().all(|a| per_shard.contains_key(a))) {
            return Ok(per_shard);
        }
        if started.elapsed() > limit {
            return Err(BenchError::Setup(format!(
                "{done} of {objects} objects stamped by {alive:?} within {limit:?} ({labelled} labelled for a shard, {with_stamp} stamped at all)"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn one_count(opts: &ShardingOptions, shards: usize) -> Result<ShardRun, BenchError> {
    let w = &opts.workload;
    let limit = Duration::from_secs(
        std::env::var("OPKIT_BENCH_SHARDING_LIMIT").ok().and_then(|s| s.parse().ok()).unwrap_or(600),
    );
    let cluster = Cluster::start(&opts.exe).await?;
    let result = async {
        let client = cluster.client()?;
        install_crd(&client).await?;
        let path = format!("/apis/{GROUP}/v1/namespaces/{NAMESPACE}/items");
        let payload = w.payload;
        let body = Arc::new(move |i: usize| item(&format!("item-{i:05}"), payload, i));
        create_with(&cluster.endpoint, &path, w.objects, 16, limit, body).await?;
        let api: Api<DynamicObject> = Api::namespaced_with(client, NAMESPACE, &item_resource());
        let started = Instant::now();
        let mut running = Vec::new();
        if shards == 0 {
            running.push(Shard::start(&opts.exe, &cluster.server.info, UNSHARDED, false, w.lease_ms).await?);
        }
        for i in 0..shards {
            running.push(Shard::start(&opts.exe, &cluster.server.info, &format!("shard-{i}"), true, w.lease_ms).await?);
        }
        let ids: Vec<String> = running.iter().map(|s| s.id.clone()).collect();
        let per_shard = stamped(&api, w.objects, &ids, limit).await?;
        let seconds_to_all = started.elapsed().as_secs_f64();
        let shard_rss_bytes = running.iter().map(Shard::rss).collect::<Result<Vec<_>, _>>()?;
        let shard_objects = ids.iter().map(|id| per_shard.get(id).copied().unwrap_or(0)).collect();
        let rebalance_seconds = if shards >= 2 {
            let mut victim = running.pop().ok_or_else(|| BenchError::Setup("no shard".into()))?;
            let killed = Instant::now();
            victim.child.start_kill()?;
            let _ = victim.child.wait().await;
            stamped(&api, w.objects, &ids[..ids.len() - 1], limit).await?;
            Some(killed.elapsed().as_secs_f64())
        } else {
            None
        };
        for mut s in running {
            drop(s.child.stdin.take());
            if tokio::time::timeout(Duration::from_secs(30), s.child.wait()).await.is_err() {
                let _ = s.child.kill().await;
            }
        }
        Ok(ShardRun {
            shards,
            seconds_to_all,
            objects_per_sec: w.objects as f64 / seconds_to_all,
            shard_rss_bytes,
            shard_objects,
            rebalance_seconds,
        })
    }
    .await;
    cluster.stop().await;
    result
}

/// Creates the `Item` CRD and waits until its resource is served.
async fn install_crd(client: &kube::Client) -> Result<(), BenchError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition =
        serde_json::from_value(item_crd()).map_err(|e| BenchError::Setup(format!("the CRD: {e}")))?;
    crds.create(&kube::api::PostParams::default(), &crd)
        .await
        .map_err(|e| BenchError::Setup(format!("creating the CRD: {e}")))?;
    let items: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &item_resource());
    let started = Instant::now();
    while items.list_metadata(&ListParams::default().limit(1)).await.is_err() {
        if started.elapsed() > Duration::from_secs(30) {
            return Err(BenchError::Setup("the Item CRD is not served after 30 s".into()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Runs every shard count.
pub async fn run(opts: &ShardingOptions) -> Result<ShardingReport, BenchError> {
    let mut runs = Vec::new();
    for &shards in &opts.workload.shard_counts {
        if opts.progress {
            let what = if shards == 0 { "one unsharded replica".to_string() } else { format!("{shards} shard(s)") };
            eprintln!("[opkit-bench] sharding: {} objects, {what}", opts.workload.objects);
        }
        runs.push(one_count(opts, shards).await?);
    }
    Ok(ShardingReport { machine: Machine::detect(), objects: opts.workload.objects, runs })
}

/// The report for people.
pub fn render_text(r: &ShardingReport) -> String {
    let single = r.runs.iter().find(|x| x.shards == 0).and_then(|x| x.shard_rss_bytes.first().copied());
    let mut out = String::new();
    for run in &r.runs {
        let mb: Vec<String> = run.shard_rss_bytes.iter().map(|b| format!("{:.1}", *b as f64 / 1e6)).collect();
        let share = single.map(|s| {
            let max = run.shard_rss_bytes.iter().copied().max().unwrap_or(0);
            format!(", largest {:.0}% of the unsharded replica", 100.0 * max as f64 / s as f64)
        });
        let what = if run.shards == 0 { "unsharded".to_string() } else { format!("{} shard(s)", run.shards) };
        out.push_str(&format!(
            "{what}: all {} objects in {:.2} s ({:.0}/s); VmRSS MB per replica [{}] for {:?} objects{}",
            r.objects,
            run.seconds_to_all,
            run.objects_per_sec,
            mb.join(", "),
            run.shard_objects,
            share.unwrap_or_default(),
        ));
        if let Some(s) = run.rebalance_seconds {
            out.push_str(&format!("; rebalanced {s:.2} s after SIGKILL of one shard"));
        }
        out.push('\n');
    }
    out
}
