//! The oracles a perturbed run is judged by, each against the fault-free learning run:
//! the end state (the compared kinds' objects, with the fields that differ between
//! fault-free runs masked), the create/delete summary per object, and convergence (the
//! operator goes quiet after the workload).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde::Serialize;
use serde_json::Value;

use crate::{RequestTrace, TracedRequest};

/// Metadata that differs between any two runs, never compared.
const RUN_FIELDS: [&str; 6] =
    ["uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation"];

/// The compared kinds' objects at the end of a run, by key (`resource/name`, or
/// `resource/generateName*N` for objects named by the server, numbered in name order).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EndState {
    /// Each object, without the fields that differ between any two runs.
    pub objects: BTreeMap<String, Value>,
}

impl EndState {
    /// Reads `kinds` in `namespace`.
    pub async fn read(client: &Client, kinds: &[ApiResource], namespace: &str) -> Result<EndState, kube::Error> {
        let mut objects = BTreeMap::new();
        for kind in kinds {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, kind);
            let mut generated: BTreeMap<String, usize> = BTreeMap::new();
            for obj in api.list(&ListParams::default()).await?.items {
                let key = match obj.metadata.generate_name.as_deref() {
                    Some(prefix) if obj.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix)) => {
                        let n = generated.entry(prefix.to_string()).or_default();
                        *n += 1;
                        format!("{}/{prefix}*{n}", kind.plural)
                    }
                    _ => format!("{}/{}", kind.plural, obj.metadata.name.clone().unwrap_or_default()),
                };
                let mut value = serde_json::to_value(&obj).unwrap_or(Value::Null);
                strip_run_fields(&mut value);
                objects.insert(key, value);
            }
        }
        Ok(EndState { objects })
    }

    /// Every namespaced kind the server lists, except Events (each run's own): what is
    /// compared when a perturber names no kinds.
    pub async fn discover_kinds(client: &Client) -> Result<Vec<ApiResource>, kube::Error> {
        let discovery = kube::discovery::Discovery::new(client.clone()).run().await?;
        let mut kinds = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                let listable = caps.supports_operation(kube::discovery::verbs::LIST);
                if listable && caps.scope == kube::discovery::Scope::Namespaced && resource.kind != "Event" {
                    kinds.push(resource);
                }
            }
        }
        Ok(kinds)
    }

    /// What differs from `expected`, leaving out `masks` (keys, and `key` + JSON
    /// pointer paths): one line per object missing, extra, or per field changed.
    pub fn diff(&self, expected: &EndState, masks: &BTreeSet<String>) -> Vec<String> {
        let mut out = Vec::new();
        for (key, want) in &expected.objects {
            if masks.contains(key) {
                continue;
            }
            match self.objects.get(key) {
                None => out.push(format!("- {key}: missing (present in the fault-free run)")),
                Some(have) => {
                    let mut paths = Vec::new();
                    differing_paths(want, have, String::new(), &mut paths);
                    for path in paths.into_iter().filter(|p| !masks.contains(&format!("{key}{p}"))) {
                        out.push(format!("~ {key}{path}: {} -> {}", at(want, &path), at(have, &path)));
                    }
                }
            }
        }
        for key in self.objects.keys().filter(|k| !expected.objects.contains_key(*k) && !masks.contains(*k)) {
            out.push(format!("+ {key}: extra (absent in the fault-free run)"));
        }
        out
    }

    /// The keys and fields that differ between two fault-free runs: masked in the
    /// oracles, as nondeterministic.
    pub fn nondeterministic(&self, other: &EndState) -> BTreeSet<String> {
        let mut masks = BTreeSet::new();
        for key in self.objects.keys().chain(other.objects.keys()) {
            match (self.objects.get(key), other.objects.get(key)) {
                (Some(a), Some(b)) => {
                    let mut paths = Vec::new();
                    differing_paths(a, b, String::new(), &mut paths);
                    masks.extend(paths.into_iter().map(|p| format!("{key}{p}")));
                }
                _ => {
                    masks.insert(key.clone());
                }
            }
        }
        masks
    }
}

fn strip_run_fields(value: &mut Value) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in RUN_FIELDS {
            meta.remove(field);
        }
        for owner in meta.get_mut("ownerReferences").and_then(Value::as_array_mut).into_iter().flatten() {
            if let Some(owner) = owner.as_object_mut() {
                owner.remove("uid");
            }
        }
    }
}

/// The JSON pointers (RFC 6901) at which `a` and `b` differ: leaves, or whole
/// subtrees where one side lacks them.
fn differing_paths(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => differing_paths(p, q, path, out),
                    _ => out.push(path),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differing_paths(p, q, format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

fn at(value: &Value, pointer: &str) -> String {
    value.pointer(pointer).map_or_else(|| "(absent)".to_string(), Value::to_string)
}

/// How many times the operator created and deleted each object (committed writes only),
/// by key: `resource/namespace/name`, or `resource/namespace/generateName*` for objects
/// the server named.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Lifecycle {
    /// `(creates, deletes)` per object.
    pub counts: BTreeMap<String, (usize, usize)>,
}

impl Lifecycle {
    /// The summary of a trace.
    pub fn of(requests: &[TracedRequest]) -> Lifecycle {
        let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in requests.iter().filter(|r| r.changed && r.subresource.is_none()) {
            let name = match (&r.generate_name, &r.name) {
                (Some(prefix), _) => format!("{prefix}*"),
                (None, Some(name)) => name.clone(),
                (None, None) => continue,
            };
            let key = format!("{}/{}/{name}", r.resource, r.namespace.as_deref().unwrap_or("-"));
            let entry = counts.entry(key).or_default();
            match r.verb.as_str() {
                "create" => entry.0 += 1,
                "delete" => entry.1 += 1,
                _ => {}
            }
        }
        counts.retain(|_, (c, d)| *c + *d > 0);
        Lifecycle { counts }
    }

    /// One line per object created or deleted a different number of times than in
    /// `expected`, leaving out masked keys.
    pub fn diff(&self, expected: &Lifecycle, masks: &BTreeSet<String>) -> Vec<String> {
        let keys: BTreeSet<&String> = self.counts.keys().chain(expected.counts.keys()).collect();
        keys.into_iter()
            .filter(|k| !masks.contains(*k))
            .filter_map(|k| {
                let (have, want) = (
                    self.counts.get(k).copied().unwrap_or_default(),
                    expected.counts.get(k).copied().unwrap_or_default(),
                );
                (have != want).then(|| {
                    format!(
                        "{k}: created {} and deleted {} times (fault-free: {} and {})",
                        have.0, have.1, want.0, want.1
                    )
                })
            })
            .collect()
    }
}

/// Whether the operator went quiet after the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Convergence {
    /// It made no write for a whole settle window.
    pub settled: bool,
    /// The writes of the last window before it settled or the limit passed, per
    /// `verb resource/namespace/name`, with how many of them changed nothing.
    pub last_writes: BTreeMap<String, (usize, usize)>,
    /// Writes in the whole run that changed nothing.
    pub no_op_writes: usize,
    /// When it did not settle: the fields that changed across its next writes, as
    /// [`EndState::diff`] lines (`~ key/pointer: before -> after`).
    pub changing: Vec<String>,
}

impl Convergence {
    /// Waits until the traced identity makes no write for `window`, for at most `limit`.
    pub async fn wait(trace: &RequestTrace, window: Duration, limit: Duration) -> Convergence {
        let started = tokio::time::Instant::now();
        let mut window_start = trace.elapsed_ms();
        let settled = loop {
            let writes_before = count_writes(trace);
            let quiet = tokio::time::timeout(window, async {
                loop {
                    trace.next_request().await;
                    if count_writes(trace) > writes_before {
                        break;
                    }
                }
            })
            .await
            .is_err();
            if quiet {
                break true;
            }
            if started.elapsed() >= limit {
                break false;
            }
            window_start = trace.elapsed_ms().saturating_sub(u64::try_from(window.as_millis()).unwrap_or(0));
        };
        let requests = trace.requests();
        let mut last_writes: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for r in requests.iter().filter(|r| r.is_write() && r.at_ms >= window_start) {
            let key = format!(
                "{} {}/{}/{}",
                r.verb,
                r.resource,
                r.namespace.as_deref().unwrap_or("-"),
                r.name.as_deref().unwrap_or("-")
            );
            let entry = last_writes.entry(key).or_default();
            entry.0 += 1;
            entry.1 += usize::from(!r.changed && (200..300).contains(&r.code));
        }
        let no_op_writes =
            requests.iter().filter(|r| r.is_write() && !r.changed && (200..300).contains(&r.code)).count();
        Convergence {
            settled,
            last_writes: if settled { BTreeMap::new() } else { last_writes },
            no_op_writes,
            changing: Vec::new(),
        }
    }
}

/// How many writes `trace` holds so far.
pub(super) fn count_writes(trace: &RequestTrace) -> usize {
    trace.requests().iter().filter(|r| r.is_write()).count()
}
