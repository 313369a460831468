//! The benchmark report: what was measured (serialized as the `-o json` output), the
//! targets each figure is compared with, and the human-readable rendering.

use std::fmt::Write as _;

use serde::Serialize;

use crate::serve::Backend;
use crate::stats::PhaseStats;

/// Everything one `opkit-bench apiserver` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The machine it ran on.
    pub machine: Machine,
    /// The workload sizes used.
    pub workload: crate::Workload,
    /// In-process `ApiServer::start` with in-memory storage.
    pub startup: StartupReport,
    /// One section per storage backend.
    pub backends: Vec<BackendReport>,
    /// The etcd baseline.
    pub etcd: EtcdReport,
    /// Each figure next to its target.
    pub targets: Vec<TargetCheck>,
}

/// The machine the figures come from.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs available.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// Total memory in bytes.
    pub memory_bytes: u64,
}

impl Machine {
    /// Reads the machine description from /proc.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        Machine { cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1), cpu_model, memory_bytes }
    }
}

/// In-process start-up times.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    /// Number of starts.
    pub runs: usize,
    /// The first start in this process (pays one-time lazy initialisation), in ms.
    pub first_ms: f64,
    /// Median `startup_time()` in milliseconds.
    pub median_ms: f64,
    /// Fastest start in milliseconds.
    pub min_ms: f64,
    /// Slowest start in milliseconds.
    pub max_ms: f64,
}

/// The figures for one backend.
#[derive(Debug, Clone, Serialize)]
pub struct BackendReport {
    /// Which backend.
    pub backend: Backend,
    /// Start-up time the server process reported, in milliseconds.
    pub server_startup_ms: f64,
    /// Create, get and update phases at each concurrency.
    pub phases: Vec<PhaseStats>,
    /// Listing.
    pub list: Option<ListReport>,
    /// Watch fan-out.
    pub watch: Option<WatchReport>,
    /// Lease renewals while clients list by label, and idle watches' memory.
    pub label_lists: Option<LabelListReport>,
    /// Memory after many objects.
    pub memory: Option<MemoryReport>,
    /// Sections that failed, with the reason.
    pub failures: Vec<String>,
}

impl BackendReport {
    /// A report with nothing measured but the reason.
    pub fn failed(backend: Backend, why: String) -> BackendReport {
        BackendReport {
            backend,
            server_startup_ms: 0.0,
            phases: Vec::new(),
            list: None,
            watch: None,
            label_lists: None,
            memory: None,
            failures: vec![why],
        }
    }

    /// The phase for `op` at `concurrency`, if measured.
    pub fn phase(&self, op: &str, concurrency: usize) -> Option<&PhaseStats> {
        self.phases.iter().find(|p| p.op == op && p.concurrency == concurrency)
    }
}

/// Listing figures.
#[derive(Debug, Clone, Serialize)]
pub struct ListReport {
    /// Objects in the listed namespace.
    pub objects: usize,
    /// Items the full list returned.
    pub items_returned: usize,
    /// Median full-list time (request to last byte) in milliseconds.
    pub full_list_ms: f64,
    /// Fastest full list in milliseconds.
    pub full_list_min_ms: f64,
    /// Median time until the full list's response head arrived, in milliseconds (the
    /// server sends the head once the whole body is built, so this is mostly server work).
    pub full_list_head_ms: f64,
    /// Size of one full-list response.
    pub full_list_bytes: usize,
    /// Page size of the paged list.
    pub page_size: usize,
    /// Pages the paged list took.
    pub pages: usize,
    /// Median total time of the paged list in milliseconds.
    pub paged_ms: f64,
}

/// Watch fan-out figures.
#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    /// Concurrent watchers.
    pub watchers: usize,
    /// Events each watcher should receive.
    pub events: usize,
    /// Time to perform the writes, in seconds.
    pub write_seconds: f64,
    /// From the first write until the last watcher had every event, in seconds.
    pub all_delivered_seconds: f64,
    /// Watchers that received every event before the time limit.
    pub complete_watchers: usize,
    /// Events received by the least-served watcher.
    pub min_events_received: usize,
}

/// Memory figures.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// Objects created.
    pub objects: usize,
    /// Creates per second while filling.
    pub create_ops_per_sec: f64,
    /// Total size of the created objects as the server returned them (JSON).
    pub json_bytes: u64,
    /// Server VmRSS before the objects were created.
    pub rss_before_bytes: u64,
    /// Server VmRSS after.
    pub rss_after_bytes: u64,
    /// Server VmHWM (peak RSS) after.
    pub hwm_after_bytes: u64,
    /// (VmRSS after − VmRSS before) / JSON bytes: memory per byte of data.
    pub growth_ratio: f64,
    /// VmRSS after / JSON bytes, including the empty server's baseline.
    pub rss_ratio: f64,
}

/// The etcd baseline.
#[derive(Debug, Clone, Serialize)]
pub struct EtcdReport {
    /// The etcd version, if it ran.
    pub version: Option<String>,
    /// Why it was skipped, if it was.
    pub skipped: Option<String>,
    /// Put phases at each concurrency.
    pub puts: Vec<PhaseStats>,
    /// Our creates / etcd puts, per backend and concurrency.
    pub ratios: Vec<EtcdRatio>,
}

/// Our create throughput relative to etcd's put throughput.
#[derive(Debug, Clone, Serialize)]
pub struct EtcdRatio {
    /// Our backend.
    pub backend: Backend,
    /// Concurrency.
    pub concurrency: usize,
    /// Our creates/s.
    pub ours_ops_per_sec: f64,
    /// etcd puts/s.
    pub etcd_ops_per_sec: f64,
    /// ours / etcd.
    pub ratio: f64,
}

/// A figure next to its target (not asserted).
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    /// What is measured.
    pub what: String,
    /// The measured value, formatted.
    pub measured: String,
    /// The target, formatted.
    pub target: String,
    /// Whether the target was met.
    pub met: bool,
}

fn check(out: &mut Vec<TargetCheck>, what: String, measured: String, target: &str, met: bool) {
    out.push(TargetCheck { what, measured, target: target.into(), met });
}

/// Compares the figures with the targets.
pub fn targets(r: &Report) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for b in &r.backends {
        let name = b.backend;
        if let Some(p) = b.phase("create", 64) {
            let what = format!("{name}: creates at c=64");
            let measured = format!("{:.0}/s, p99 {:.1} ms", p.ops_per_sec, p.p99_ms);
            let met = p.ops_per_sec >= 5000.0 && p.p99_ms <= 20.0;
            check(&mut out, what, measured, ">= 5,000/s, p99 <= 20 ms", met);
        }
        if let Some(p) =
            b.phases.iter().filter(|p| p.op == "get").max_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec))
        {
            let what = format!("{name}: gets (best, c={})", p.concurrency);
            check(&mut out, what, format!("{:.0}/s", p.ops_per_sec), ">= 15,000/s", p.ops_per_sec >= 15000.0);
            // Gets: the admin's and the ServiceAccount's, measured back to back on the same
            // objects; creates: the admin's create phase and the ServiceAccount's.
            for (op, admin_op) in [("get", "get (admin)"), ("create", "create")] {
                let (Some(admin), Some(sa)) =
                    (b.phase(admin_op, p.concurrency), b.phase(&format!("{op} (SA)"), p.concurrency))
                else {
                    continue;
                };
                let what = format!("{name}: {op}s as a ServiceAccount vs admin (c={})", p.concurrency);
                let ratio = sa.ops_per_sec / admin.ops_per_sec.max(1.0);
                check(
                    &mut out,
                    what,
                    format!("{:.0}/s vs {:.0}/s ({:.1}%)", sa.ops_per_sec, admin.ops_per_sec, ratio * 100.0),
                    ">= 95%",
                    ratio >= 0.95,
                );
            }
        }
        if let Some(l) = &b.list {
            let what = format!("{name}: full list of {}", l.objects);
            check(&mut out, what, format!("{:.1} ms", l.full_list_ms), "<= 50 ms", l.full_list_ms <= 50.0);
        }
        if let Some(w) = &b.watch {
            let what = format!("{name}: fan-out {}x{}", w.watchers, w.events);
            let met = w.complete_watchers == w.watchers && w.all_delivered_seconds <= 0.5;
            check(&mut out, what, format!("{:.3} s", w.all_delivered_seconds), "<= 0.5 s", met);
        }
        if let Some(l) = &b.label_lists {
            let what = format!("{name}: {}", lease_row_name(l));
            let r = &l.renewals;
            let met = r.errors == 0 && r.ok > 0 && r.p99_ms <= 100.0;
            check(&mut out, what, format!("p99 {:.1} ms", r.p99_ms), "<= 100 ms", met);
        }
        if let Some(m) = &b.memory {
            let what = format!("{name}: memory growth / JSON ({} objects)", m.objects);
            check(&mut out, what, format!("{:.2}x", m.growth_ratio), "<= 3x", m.growth_ratio <= 3.0);
        }
    }
    let s = &r.startup;
    check(
        &mut out,
        "in-process start-up (median)".into(),
        format!("{:.1} ms", s.median_ms),
        "<= 50 ms",
        s.median_ms <= 50.0,
    );
    out
}

/// "Lease renewal p99 while 16 clients list 50000 objects by label", saying when the
/// workload was scaled down from that.
fn lease_row_name(l: &LabelListReport) -> String {
    let scaled = if l.objects < 50_000 || l.listers < 16 { " (scaled down)" } else { "" };
    format!("Lease renewal p99 while {} clients list {} objects by label{scaled}", l.listers, l.objects)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

fn phase_table(out: &mut String, phases: &[PhaseStats]) {
    let _ = writeln!(
        out,
        "  {:<11} {:>4} {:>8} {:>10} {:>9} {:>9} {:>9} {:>7}",
        "op", "c", "ok", "ops/s", "p50 ms", "p99 ms", "max ms", "errors"
    );
    for p in phases {
        let flag = if p.time_limited { " (time limit)" } else { "" };
        let _ = writeln!(
            out,
            "  {:<11} {:>4} {:>8} {:>10.0} {:>9.2} {:>9.2} {:>9.1} {:>7}{flag}",
            p.op, p.concurrency, p.ok, p.ops_per_sec, p.p50_ms, p.p99_ms, p.max_ms, p.errors
        );
        if let Some(e) = &p.first_error {
            let _ = writeln!(out, "          first error: {e}");
        }
    }
}

/// Renders the report for people.
pub fn render_text(r: &Report) -> String {
    let mut out = String::new();
    render_header(&mut out, r);
    for b in &r.backends {
        render_backend(&mut out, b);
    }
    render_etcd(&mut out, &r.etcd);
    render_targets(&mut out, &r.targets);
    out
}

/// The machine, the client and the in-process start-up.
fn render_header(out: &mut String, r: &Report) {
    let m = &r.machine;
    let _ = writeln!(out, "opkit-bench apiserver — {} CPUs ({}), {} RAM", m.cpus, m.cpu_model, mib(m.memory_bytes));
    let _ = writeln!(
        out,
        "client: separate process, HTTP/1.1 over TLS, one connection per worker; ConfigMaps of ~{} bytes",
        r.workload.payload_bytes
    );
    let s = &r.startup;
    let _ = writeln!(
        out,
        "\nIn-process start-up (in-memory, {} runs): median {:.1} ms (min {:.1}, max {:.1}; first in process {:.1})",
        s.runs, s.median_ms, s.min_ms, s.max_ms, s.first_ms
    );
}

/// One backend's section: its phases, then each optional scenario and its failures.
fn render_backend(out: &mut String, b: &BackendReport) {
    let _ = writeln!(out, "\n== {} (server process start-up {:.1} ms) ==", b.backend, b.server_startup_ms);
    phase_table(out, &b.phases);
    if let Some(l) = &b.list {
        render_list(out, l);
    }
    if let Some(w) = &b.watch {
        render_watch(out, w);
    }
    if let Some(l) = &b.label_lists {
        render_label_lists(out, l);
    }
    if let Some(mm) = &b.memory {
        render_memory(out, mm);
    }
    for f in &b.failures {
        let _ = writeln!(out, "  FAILED: {f}");
    }
}

/// The full and paged list line.
fn render_list(out: &mut String, l: &ListReport) {
    let _ = writeln!(
        out,
        "  list {} objects: full {:.1} ms median (min {:.1}; head after {:.1} ms; {} items, {}); paged by {}: {:.1} ms in {} pages",
        l.objects,
        l.full_list_ms,
        l.full_list_min_ms,
        l.full_list_head_ms,
        l.items_returned,
        mib(l.full_list_bytes as u64),
        l.page_size,
        l.paged_ms,
        l.pages
    );
}

/// The watch fan-out line.
fn render_watch(out: &mut String, w: &WatchReport) {
    let _ = writeln!(
        out,
        "  watch fan-out {} watchers x {} events: all delivered after {:.3} s (writes took {:.3} s); complete {}/{}, least-served got {}",
        w.watchers,
        w.events,
        w.all_delivered_seconds,
        w.write_seconds,
        w.complete_watchers,
        w.watchers,
        w.min_events_received
    );
}

/// The lease-renewal-under-label-lists line, its first errors and the idle watches.
fn render_label_lists(out: &mut String, l: &LabelListReport) {
    let (r, x) = (&l.renewals, &l.lists);
    let _ = writeln!(
        out,
        "  {}: {:.1} ms (renewal = GET + PUT every {} ms; {} renewals, p50 {:.1} ms, max {:.1} ms, {} errors; {} label values, {} items per list; {} lists done, p50 {:.0} ms, {} errors)",
        lease_row_name(l),
        r.p99_ms,
        l.renew_every_ms,
        r.ok,
        r.p50_ms,
        r.max_ms,
        r.errors,
        l.label_values,
        l.items_per_list,
        x.ok,
        x.p50_ms,
        x.errors
    );
    for e in [&r.first_error, &x.first_error].into_iter().flatten() {
        let _ = writeln!(out, "          first error: {e}");
    }
    if let Some(iw) = &l.idle_watches {
        let _ = writeln!(
            out,
            "  {} unread watches from resourceVersion 0 over those {} objects: VmRSS peak {} (before {}, +{})",
            iw.watches,
            l.objects,
            mib(iw.rss_peak_bytes),
            mib(iw.rss_before_bytes),
            mib(iw.rss_peak_bytes.saturating_sub(iw.rss_before_bytes))
        );
    }
}

/// The memory-per-object line.
fn render_memory(out: &mut String, mm: &MemoryReport) {
    let _ = writeln!(
        out,
        "  memory after {} objects (filled at {:.0}/s): VmRSS {} (before {}), VmHWM {}; JSON {}; growth/JSON {:.2}x, RSS/JSON {:.2}x",
        mm.objects,
        mm.create_ops_per_sec,
        mib(mm.rss_after_bytes),
        mib(mm.rss_before_bytes),
        mib(mm.hwm_after_bytes),
        mib(mm.json_bytes),
        mm.growth_ratio,
        mm.rss_ratio
    );
}

/// The etcd baseline section: skipped, or its put phases and our/etcd ratios.
fn render_etcd(out: &mut String, etcd: &EtcdReport) {
    let _ = writeln!(out, "\n== etcd baseline ==");
    match (&etcd.skipped, &etcd.version) {
        (Some(why), _) => {
            let _ = writeln!(out, "  SKIPPED: {why}");
        }
        (None, v) => {
            let _ = writeln!(
                out,
                "  {} via the v3 JSON gateway (plain HTTP/1.1), same payload",
                v.as_deref().unwrap_or("etcd")
            );
            phase_table(out, &etcd.puts);
            for x in &etcd.ratios {
                let _ = writeln!(
                    out,
                    "  ours/etcd at c={:<3} {:<17} {:>8.0}/s vs {:>8.0}/s = {:.2}x",
                    x.concurrency,
                    x.backend.to_string(),
                    x.ours_ops_per_sec,
                    x.etcd_ops_per_sec,
                    x.ratio
                );
            }
        }
    }
}

/// The targets section.
fn render_targets(out: &mut String, targets: &[TargetCheck]) {
    let _ = writeln!(out, "\n== targets (reported, not asserted) ==");
    for t in targets {
        let _ = writeln!(
            out,
            "  [{}] {:<52} {:<24} target {}",
            if t.met { " ok " } else { "MISS" },
            t.what,
            t.measured,
            t.target
        );
    }
}

/// Lease renewals while clients list by label, and the memory of idle watches.
#[derive(Debug, Clone, Serialize)]
pub struct LabelListReport {
    /// ConfigMaps in the listed namespace.
    pub objects: usize,
    /// Distinct values of their `group` label (each list selects one).
    pub label_values: usize,
    /// Clients listing by label, each in a loop on its own connection.
    pub listers: usize,
    /// Items the last list returned.
    pub items_per_list: usize,
    /// Time between renewals, in milliseconds.
    pub renew_every_ms: u64,
    /// Lease renewals (GET and PUT) measured while the lists ran.
    pub renewals: PhaseStats,
    /// The lists completed while the renewals were measured.
    pub lists: PhaseStats,
    /// Unread watches from resourceVersion 0 over the same objects.
    pub idle_watches: Option<IdleWatchReport>,
}

/// Server memory with watches that never read.
#[derive(Debug, Clone, Serialize)]
pub struct IdleWatchReport {
    /// Watches opened.
    pub watches: usize,
    /// Server VmRSS before they were opened.
    pub rss_before_bytes: u64,
    /// Highest server VmRSS sampled while they were open.
    pub rss_peak_bytes: u64,
}
