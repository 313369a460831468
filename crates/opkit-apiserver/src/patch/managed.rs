//! `metadata.managedFields` bookkeeping: decoding/encoding entries, ownership tracking for
//! ordinary writes (`track_update`, operation "Update") and server-side apply
//! (`server_side_apply`, operation "Apply") with conflict detection, forced ownership transfer,
//! removal of fields an applier dropped, the `before-first-apply` manager and the
//! `ancient-changes` cap on update managers.

use serde_json::{Map, Value, json};

use super::fieldset::{FieldSet, Path, PathElement, path_to_string};
use super::schema::ListSemantics;
use super::typed::{compare, merge, prune, to_field_set};
use super::{ApplyConflict, FieldManager, PatchError};

/// Most Update entries kept before the oldest are merged into `ancient-changes`.
const MAX_UPDATE_MANAGERS: usize = 10;
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Options of server-side apply.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ApplyOptions {
    /// The kind has a status subresource, so writes to the main resource ignore `.status`.
    pub ignore_status: bool,
}

/// Identity of a managedFields entry (apiVersion only counts for Update entries).
#[derive(Clone, Debug, PartialEq, Eq)]
struct ManagerId {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
}

impl ManagerId {
    fn update(manager: &str, api_version: &str, subresource: &str) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation: "Update".to_string(),
            api_version: api_version.to_string(),
            subresource: subresource.to_string(),
        }
    }
    fn apply(manager: &str, subresource: &str) -> ManagerId {
        ManagerId {
            manager: manager.to_string(),
            operation: "Apply".to_string(),
            api_version: String::new(),
            subresource: subresource.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
struct Entry {
    id: ManagerId,
    api_version: String,
    time: Option<String>,
    set: FieldSet,
}

#[derive(Clone, Debug, Default)]
struct Managed(Vec<Entry>);

impl Managed {
    fn decode(v: Option<&Value>) -> Result<Managed, String> {
        let items = match v {
            None | Some(Value::Null) => return Ok(Managed::default()),
            Some(Value::Array(items)) => items,
            Some(_) => return Err("metadata.managedFields must be a list".to_string()),
        };
        let mut out = Managed::default();
        for (i, it) in items.iter().enumerate() {
            let s = |k: &str| it.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let operation = s("operation");
            if operation != "Apply" && operation != "Update" {
                return Err("operation must be `Apply` or `Update`".to_string());
            }
            let api_version = s("apiVersion");
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".to_string());
            }
            match s("fieldsType").as_str() {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                t => {
                    return Err(format!("invalid fieldsType {t:?} in managed fields entry {i}"));
                }
            }
            let set = match it.get("fieldsV1") {
                None | Some(Value::Null) => FieldSet::new(),
                Some(f) => FieldSet::from_fields_v1(f)?,
            };
            let id = ManagerId {
                manager: s("manager"),
                api_version: if operation == "Apply" { String::new() } else { api_version.clone() },
                operation,
                subresource: s("subresource"),
            };
            let entry =
                Entry { id, api_version, time: it.get("time").and_then(Value::as_str).map(str::to_string), set };
            match out.0.iter_mut().find(|e| e.id == entry.id) {
                Some(e) => *e = entry,
                None => out.0.push(entry),
            }
        }
        Ok(out)
    }

    fn encode(&self) -> Option<Value> {
        if self.0.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.0.iter().collect();
        entries.sort_by(|a, b| {
            a.id.operation
                .cmp(&b.id.operation)
                .then_with(|| a.time.as_deref().unwrap_or("").cmp(b.time.as_deref().unwrap_or("")))
                .then_with(|| a.id.manager.cmp(&b.id.manager))
                .then_with(|| a.api_version.cmp(&b.api_version))
                .then_with(|| a.id.subresource.cmp(&b.id.subresource))
        });
        let list = entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                if !e.id.manager.is_empty() {
                    m.insert("manager".into(), json!(e.id.manager));
                }
                m.insert("operation".into(), json!(e.id.operation));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.set.to_fields_v1());
                if !e.id.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.id.subresource));
                }
                Value::Object(m)
            })
            .collect();
        Some(Value::Array(list))
    }

    fn get_mut(&mut self, id: &ManagerId) -> Option<&mut Entry> {
        self.0.iter_mut().find(|e| &e.id == id)
    }

    /// Drops empty entries and merges the oldest Update entries into `ancient-changes`.
    fn tidy(&mut self) {
        self.0.retain(|e| !e.set.is_empty());
        loop {
            let mut updaters: Vec<usize> = (0..self.0.len()).filter(|&i| self.0[i].id.operation == "Update").collect();
            if updaters.len() <= MAX_UPDATE_MANAGERS {
                return;
            }
            updaters.retain(|&i| self.0[i].id.manager != "ancient-changes");
            let Some(&oldest) = updaters.iter().min_by(|&&a, &&b| {
                let (ea, eb) = (&self.0[a], &self.0[b]);
                ea.time
                    .as_deref()
                    .unwrap_or("")
                    .cmp(eb.time.as_deref().unwrap_or(""))
                    .then_with(|| ea.id.manager.cmp(&eb.id.manager))
            }) else {
                return;
            };
            let e = self.0.remove(oldest);
            let bucket = ManagerId::update("ancient-changes", &e.api_version, "");
            match self.get_mut(&bucket) {
                Some(b) => {
                    b.set = b.set.union(&e.set);
                    b.time = e.time;
                }
                None => self.0.push(Entry { id: bucket, api_version: e.api_version, time: e.time, set: e.set }),
            }
        }
    }
}

/// Fields never tracked in managedFields.
fn strip(set: &FieldSet) -> FieldSet {
    const META: &[&str] = &[
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ];
    set.iter()
        .filter(|p| {
            let top = |n: &str| matches!(p.first(), Some(PathElement::Field(f)) if f == n);
            if p.len() == 1 && (top("apiVersion") || top("kind") || top("metadata")) {
                return false;
            }
            !(top("metadata") && matches!(p.get(1), Some(PathElement::Field(f)) if META.contains(&f.as_str())))
        })
        .cloned()
        .collect()
}

fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn set_managed_fields(obj: &mut Value, mf: Option<Value>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match mf {
        Some(v) => {
            meta.insert("managedFields".into(), v);
        }
        None => {
            meta.remove("managedFields");
        }
    }
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    set_managed_fields(&mut o, None);
    o
}

fn is_reset(mf: Option<&Value>) -> bool {
    match mf {
        Some(Value::Array(items)) => {
            items.is_empty() || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty))
        }
        _ => false,
    }
}

/// For create/update/patch (operation "Update"): the fields this write changed become owned by
/// `fm.manager`; other managers lose them. Sets `new.metadata.managedFields` (FieldsV1).
/// Managed fields sent in `new` are honoured (`[]` or `[{}]` resets them); an update of an
/// object without managed fields does not start tracking (like kube-apiserver).
pub(crate) fn track_update(old: Option<&Value>, new: &mut Value, fm: &FieldManager, lists: &ListSemantics) {
    if !new.is_object() {
        return;
    }
    let sub = fm.subresource.unwrap_or("");
    let live_managed = || old.and_then(|o| Managed::decode(managed_fields_of(o)).ok()).unwrap_or_default();
    let mut managed = if !sub.is_empty() {
        live_managed()
    } else if is_reset(managed_fields_of(new)) {
        Managed::default()
    } else {
        match Managed::decode(managed_fields_of(new)) {
            Ok(m) if !m.0.is_empty() => m,
            _ => live_managed(),
        }
    };
    set_managed_fields(new, None);
    if managed.0.is_empty() && old.is_some() {
        return;
    }
    let live = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let cmp = compare(&live, new, lists.root());
    let changed = cmp.changed();
    for e in &mut managed.0 {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let current = strip(&changed);
    if !current.is_empty() {
        let id = ManagerId::update(fm.manager, fm.api_version, sub);
        match managed.get_mut(&id) {
            Some(e) => {
                e.set = e.set.union(&current);
                e.time = Some(fm.time.to_string());
            }
            None => managed.0.push(Entry {
                id,
                api_version: fm.api_version.to_string(),
                time: Some(fm.time.to_string()),
                set: current,
            }),
        }
    }
    managed.tidy();
    set_managed_fields(new, managed.encode());
}

/// Server-side apply with default options. See [`server_side_apply_with_options`].
pub(crate) fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    fm: &FieldManager,
    force: bool,
    lists: &ListSemantics,
) -> Result<Value, PatchError> {
    server_side_apply_with_options(live, applied, fm, force, lists, &ApplyOptions::default())
}

/// The part of the applied configuration that takes effect for this (sub)resource, without
/// server-managed metadata.
fn effective_config(applied: &Map<String, Value>, sub: &str, opts: &ApplyOptions) -> Value {
    let mut cfg = applied.clone();
    if sub == "status" {
        cfg.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"));
        if let Some(Value::Object(meta)) = cfg.get_mut("metadata") {
            meta.retain(|k, _| k == "name" || k == "namespace");
        }
    } else if opts.ignore_status {
        cfg.remove("status");
    }
    if let Some(Value::Object(meta)) = cfg.get_mut("metadata") {
        for k in [
            "creationTimestamp",
            "uid",
            "resourceVersion",
            "generation",
            "selfLink",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            meta.remove(k);
        }
    }
    Value::Object(cfg)
}

/// Server-side apply (operation "Apply"): merges `applied` into `live` (`None` = create),
/// removes fields the manager applied before but no longer applies (unless others own them),
/// detects conflicts with other managers whose fields would change value, and with `force`
/// takes ownership instead of failing. Returns the new object with managedFields updated.
pub(super) fn server_side_apply_with_options(
    live: Option<&Value>,
    applied: &Value,
    fm: &FieldManager,
    force: bool,
    lists: &ListSemantics,
    opts: &ApplyOptions,
) -> Result<Value, PatchError> {
    let am = applied_object(applied, fm)?;
    let root = lists.root();
    let sub = fm.subresource.unwrap_or("");
    let live0 = live.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let mut managed = live_managed_fields(live, &live0, fm, root)?;
    let config = effective_config(am, sub, opts);
    let mut merged = merge(&live0, &config, root);
    let id = ManagerId::apply(fm.manager, sub);
    let last = managed.0.iter().find(|e| e.id == id).map(|e| e.set.clone());
    let new_full = to_field_set(&config, root);
    if let Some(last) = &last {
        let owned = managed.0.iter().filter(|e| e.id != id).fold(new_full.clone(), |acc, e| acc.union(&e.set));
        prune(&mut merged, last, &owned, root);
    }
    let cmp = compare(&live0, &merged, root);
    let changed = cmp.changed();
    if !force {
        refuse_conflicts(conflicts_with_others(&managed, &id, &changed), fm, &live0, root)?;
    }
    for e in managed.0.iter_mut().filter(|e| e.id != id) {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let object_changed = live.is_none() || merged != live0;
    record_apply(&mut managed, id, strip(&new_full), fm, object_changed);
    managed.tidy();
    if fm.manager == "kubectl" {
        sync_last_applied(&mut merged, applied);
    }
    set_managed_fields(&mut merged, managed.encode());
    Ok(merged)
}

/// The apply patch as an object, refused unless it sets no managedFields and names the
/// manager's apiVersion (or none).
fn applied_object<'v>(applied: &'v Value, fm: &FieldManager<'_>) -> Result<&'v Map<String, Value>, PatchError> {
    let Value::Object(am) = applied else {
        return Err(PatchError::BadRequest("apply patch must be a JSON/YAML object".to_string()));
    };
    if managed_fields_of(applied).is_some_and(|v| !v.is_null()) {
        return Err(PatchError::BadRequest("metadata.managedFields must be nil".to_string()));
    }
    if let Some(av) = am.get("apiVersion").and_then(Value::as_str)
        && av != fm.api_version
    {
        return Err(PatchError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {av}, expected: {}",
            fm.api_version
        )));
    }
    Ok(am)
}

/// The live object's managed fields; a live object with none has its fields owned by
/// "before-first-apply", as kube records them.
fn live_managed_fields(
    live: Option<&Value>,
    live0: &Value,
    fm: &FieldManager<'_>,
    root: &super::schema::SchemaNode,
) -> Result<Managed, PatchError> {
    let mut managed = match live {
        Some(l) => Managed::decode(managed_fields_of(l))
            .map_err(|e| PatchError::Internal(format!("failed to decode managed fields: {e}")))?,
        None => Managed::default(),
    };
    if managed.0.is_empty() && live.is_some() {
        let set = strip(&compare(&json!({}), live0, root).changed());
        if !set.is_empty() {
            managed.0.push(Entry {
                id: ManagerId::update("before-first-apply", fm.api_version, fm.subresource.unwrap_or("")),
                api_version: fm.api_version.to_string(),
                time: Some(fm.time.to_string()),
                set,
            });
        }
    }
    Ok(managed)
}

/// The `changed` fields that other managers than `id` own, each with its owner.
fn conflicts_with_others(managed: &Managed, id: &ManagerId, changed: &FieldSet) -> Vec<(Path, ApplyConflict)> {
    let mut conflicts = Vec::new();
    for e in managed.0.iter().filter(|e| &e.id != id) {
        for p in e.set.intersection(changed).iter() {
            conflicts.push((
                p.clone(),
                ApplyConflict {
                    manager: e.id.manager.clone(),
                    api_version: e.api_version.clone(),
                    field: path_to_string(p),
                    operation: e.id.operation.clone(),
                    subresource: Some(e.id.subresource.clone()).filter(|s| !s.is_empty()),
                },
            ));
        }
    }
    conflicts
}

/// An unforced apply with conflicts is refused, with the conflicts sorted by owner; for
/// kubectl, fields of its last-applied annotation are no conflict.
fn refuse_conflicts(
    mut conflicts: Vec<(Path, ApplyConflict)>,
    fm: &FieldManager<'_>,
    live0: &Value,
    root: &super::schema::SchemaNode,
) -> Result<(), PatchError> {
    if !conflicts.is_empty() && fm.manager == "kubectl" {
        // Upgrading from client-side apply: fields recorded in the last-applied annotation
        // with their live values may be taken over without conflict.
        if let Some(allowed) = allowed_from_last_applied(live0, fm.api_version, root) {
            conflicts.retain(|(p, _)| !allowed.contains(p));
        }
    }
    if conflicts.is_empty() {
        return Ok(());
    }
    let mut conflicts: Vec<ApplyConflict> = conflicts.into_iter().map(|(_, c)| c).collect();
    conflicts
        .sort_by(|a, b| (&a.manager, &a.operation, &a.api_version).cmp(&(&b.manager, &b.operation, &b.api_version)));
    Err(PatchError::Conflicts(conflicts))
}

/// Records `set` as the applier's (`id`) fields; its time moves only when the object
/// changed (or had none).
fn record_apply(managed: &mut Managed, id: ManagerId, set: FieldSet, fm: &FieldManager<'_>, object_changed: bool) {
    match managed.get_mut(&id) {
        Some(e) => {
            e.set = set;
            e.api_version = fm.api_version.to_string();
            if object_changed || e.time.is_none() {
                e.time = Some(fm.time.to_string());
            }
        }
        None => {
            managed.0.push(Entry { id, api_version: fm.api_version.to_string(), time: Some(fm.time.to_string()), set })
        }
    }
}

/// Fields of the client-side-apply annotation whose values still match the live object.
fn allowed_from_last_applied(live: &Value, api_version: &str, root: &super::schema::SchemaNode) -> Option<FieldSet> {
    let text = live.pointer("/metadata/annotations")?.get(LAST_APPLIED)?.as_str()?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let cmp = compare(&last, live, root);
    Some(to_field_set(&last, root).difference(&cmp.modified).difference(&cmp.added).difference(&cmp.removed))
}

/// `kubectl apply --server-side` keeps an existing client-side-apply annotation in sync.
fn sync_last_applied(obj: &mut Value, applied: &Value) {
    let has = obj.pointer("/metadata/annotations").and_then(|a| a.get(LAST_APPLIED)).is_some();
    if !has {
        return;
    }
    let mut copy = applied.clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(Value::Object(ann)) = meta.get_mut("annotations")
    {
        ann.remove(LAST_APPLIED);
        if ann.is_empty() {
            meta.remove("annotations");
        }
    }
    let text = format!("{}\n", sorted(&copy));
    if let Some(Value::Object(ann)) = obj.pointer_mut("/metadata/annotations") {
        ann.insert(LAST_APPLIED.to_string(), Value::String(text));
    }
}

/// Recursively sorts object keys (Go's encoding order).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
#[path = "managed_tests.rs"]
mod tests;
