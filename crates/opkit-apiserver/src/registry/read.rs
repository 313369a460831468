//! Reads: get, list (selectors, pagination, resourceVersion semantics) and watch
//! (initial events, bookmarks, selector transitions, expiry), each at the requested
//! version (`conversion` converts what is stored at another).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::conversion::{may_be_stored_at_other_versions, stored_at};
use super::{Registry, Target, at_version, parse_stored};
use crate::error::{ApiError, ApiResult};
use crate::selector::{FieldSelector, LabelSelector};
use crate::storage::{
    EventKind, ListItem, ListRange, ResourceId, Revision, StorageError, WatchSubscription, run_off_async_workers,
};

/// Options of a list.
#[derive(Debug, Default, Clone)]
pub struct ListOptions {
    /// `labelSelector`, parsed.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`, parsed.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 = none).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

/// A page of a list.
#[derive(Debug)]
pub struct ListResult {
    /// Objects at the requested version.
    pub items: Vec<Value>,
    /// The list's resourceVersion.
    pub rev: Revision,
    /// The continue token, when more items follow.
    pub continue_token: Option<String>,
    /// `remainingItemCount`, when known.
    pub remaining: Option<u64>,
}

/// A page of a list as stored JSON.
#[derive(Debug)]
pub struct RawListResult {
    /// Stored objects.
    pub items: Vec<Bytes>,
    /// The list's resourceVersion.
    pub rev: Revision,
    /// The continue token, when more items follow.
    pub continue_token: Option<String>,
    /// `remainingItemCount`, when known.
    pub remaining: Option<u64>,
}

/// Options of a watch.
#[derive(Debug, Default, Clone)]
pub struct WatchOptions {
    /// Selectors and resourceVersion, as for lists.
    pub list: ListOptions,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
}

/// The payload of a watch event.
#[derive(Debug, Clone)]
pub enum WatchPayload {
    /// Stored JSON, passed through unchanged.
    Raw(Bytes),
    /// A built object (bookmarks, errors, converted objects).
    Json(Value),
}

/// One event of a watch stream.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub kind: &'static str,
    /// The object.
    pub payload: WatchPayload,
}

fn parse_rv(s: &str) -> ApiResult<Revision> {
    s.parse::<Revision>().map_err(|_| ApiError::bad_request(format!("invalid resource version {s:?}")))
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: Revision,
    start: String,
}

fn encode_continue(rev: Revision, ns: &str, name: &str) -> String {
    let t = ContinueToken { v: "meta.k8s.io/v1".into(), rv: rev, start: format!("{ns}/{name}") };
    base64::engine::general_purpose::URL_SAFE.encode(crate::json::to_vec(&t))
}

fn decode_continue(s: &str) -> ApiResult<(Revision, (String, String))> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE
        .decode(s)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(s))
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let t: ContinueToken = serde_json::from_slice(&raw).map_err(|_| bad("incorrect encoding"))?;
    if t.v != "meta.k8s.io/v1" {
        return Err(bad("server does not recognize this encoded version"));
    }
    let (ns, name) = t.start.split_once('/').ok_or_else(|| bad("invalid start key"))?;
    Ok((t.rv, (ns.to_string(), name.to_string())))
}

/// Builds the filter closure for selectors, over parsed objects (watch events).
fn matcher(target: &Target, opts: &ListOptions) -> impl FnMut(&Value) -> bool + Send + use<> {
    let labels = opts.labels.clone().filter(|l| !l.is_empty());
    let fields = opts.fields.clone().filter(|f| !f.is_empty());
    let group = target.info.group.clone();
    let field_labels = target.strategy.field_labels();
    let extra = target.version_info().map(|v| v.selectable_fields.clone()).unwrap_or_default();
    move |obj: &Value| {
        labels.as_ref().is_none_or(|l| l.matches(obj["metadata"]["labels"].as_object()))
            && fields.as_ref().is_none_or(|f| f.matches(&group, &field_labels, obj, &extra).unwrap_or(false))
    }
}

/// Builds the filter of a list's stored objects: the label selector matches the labels
/// the store keeps with each entry, and only a field selector parses the object (after
/// the labels matched). An object a CRD's conversion webhook must convert first is kept
/// here and matched once converted (its labels and fields are the webhook's).
fn list_filter(target: &Target, opts: &ListOptions) -> impl FnMut(ListItem<'_>) -> bool + Send + use<> {
    let labels = opts.labels.clone().filter(|l| !l.is_empty());
    let mut fields = opts.fields.as_ref().filter(|f| !f.is_empty()).map(|_| {
        let fields_only = ListOptions { labels: None, ..opts.clone() };
        (matcher(target, &fields_only), target.clone())
    });
    let converted_later = (target.info.conversion_webhook.is_some() && needs_parse(opts)).then(|| target.api_version());
    move |item: ListItem<'_>| {
        if let Some(api_version) = &converted_later
            && !stored_at(item.value(), api_version)
        {
            return true;
        }
        labels.as_ref().is_none_or(|l| item.labels().is_some_and(|stored| l.matches_with(|k| stored.get(k))))
            && fields.as_mut().is_none_or(|(keep, view)| {
                serde_json::from_slice::<Value>(item.value()).is_ok_and(|v| keep(&at_version(v, view)))
            })
    }
}

fn needs_parse(opts: &ListOptions) -> bool {
    opts.labels.as_ref().is_some_and(|l| !l.is_empty()) || opts.fields.as_ref().is_some_and(|f| !f.is_empty())
}

impl Registry {
    /// Reads one object as stored, by storage id (for checks that another object exists,
    /// such as a token's ServiceAccount); `namespace` is empty for cluster-scoped ones.
    pub(crate) async fn stored(&self, resource: &ResourceId, namespace: &str, name: &str) -> ApiResult<Option<Value>> {
        self.view().stored(resource, namespace, name).await
    }

    /// The uid of a stored object, or `None` when there is none: reads only
    /// `metadata.uid`, for checks on every request (a token's ServiceAccount).
    pub(crate) async fn stored_uid(
        &self,
        resource: &ResourceId,
        namespace: &str,
        name: &str,
    ) -> ApiResult<Option<String>> {
        #[derive(serde::Deserialize)]
        struct Metadata {
            #[serde(default)]
            uid: String,
        }
        #[derive(serde::Deserialize)]
        struct Uid {
            metadata: Metadata,
        }
        let entry = self.store.get(resource, &(namespace.to_string(), name.to_string())).await?;
        entry
            .map(|e| serde_json::from_slice::<Uid>(&e.value).map(|u| u.metadata.uid))
            .transpose()
            .map_err(|e| ApiError::internal(format!("decoding a stored object: {e}")))
    }

    /// Reads one object.
    pub async fn get(&self, target: &Target, name: &str) -> ApiResult<Value> {
        let entry = self.store.get(&target.info.id, &target.key(name)).await?;
        match entry {
            Some(e) => self.at_requested_version(target, parse_stored(&e.value)?).await,
            None => Err(ApiError::not_found(target.group(), target.resource(), name)),
        }
    }

    fn validate_selectors(&self, target: &Target, opts: &ListOptions) -> ApiResult<()> {
        if let Some(f) = &opts.fields {
            let extra = target.version_info()?.selectable_fields.clone();
            f.validate_fields(&target.info.group, &target.strategy.field_labels(), &extra)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        Ok(())
    }

    /// Lists objects.
    pub async fn list(&self, target: &Target, opts: &ListOptions) -> ApiResult<ListResult> {
        let raw = self.list_raw(target, opts).await?;
        if target.info.conversion_webhook.is_some() {
            let parse = || raw.items.iter().map(parse_stored).collect::<ApiResult<Vec<_>>>();
            let mut items = if raw.items.len() < PARSE_INLINE_ITEMS { parse()? } else { run_off_async_workers(parse)? };
            self.all_at_requested_version(target, &mut items).await?;
            if needs_parse(opts) {
                // Objects the webhook converted are matched now (see `list_filter`).
                let mut keep = matcher(target, opts);
                items.retain(|o| keep(o));
            }
            return Ok(ListResult {
                items,
                rev: raw.rev,
                continue_token: raw.continue_token,
                remaining: raw.remaining,
            });
        }
        let parse =
            || raw.items.iter().map(|b| parse_stored(b).map(|v| at_version(v, target))).collect::<ApiResult<Vec<_>>>();
        let items = if raw.items.len() < PARSE_INLINE_ITEMS { parse()? } else { run_off_async_workers(parse)? };
        Ok(ListResult { items, rev: raw.rev, continue_token: raw.continue_token, remaining: raw.remaining })
    }

    /// Whether stored objects of `target` can be returned byte for byte (no apiVersion
    /// rewrite or field conversion needed).
    pub fn serves_stored_bytes(&self, target: &Target) -> bool {
        target.version == target.info.storage_version() && !target.strategy.converts_storage(&target.version)
    }

    /// Lists objects as stored bytes. They are in the requested version's form only when
    /// [`Registry::serves_stored_bytes`] says so (then an object still stored at another
    /// version of its custom resource is converted).
    pub async fn list_raw(&self, target: &Target, opts: &ListOptions) -> ApiResult<RawListResult> {
        self.validate_selectors(target, opts)?;
        let mut range = ListRange {
            namespace: if target.info.namespaced { target.namespace.clone() } else { None },
            limit: opts.limit.filter(|l| *l > 0),
            ..Default::default()
        };
        let rv = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        match (&opts.continue_token, rv, opts.resource_version_match.as_deref()) {
            (Some(_), Some(_), _) if rv != Some("0") => {
                return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
            }
            (Some(token), _, _) => {
                let (rev, after) = decode_continue(token)?;
                range.at = Some(rev);
                range.after = Some(after);
            }
            (None, None, Some(m)) if !m.is_empty() => {
                return Err(ApiError::bad_request(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            (None, Some(v), Some("Exact")) => {
                let rev = parse_rv(v)?;
                if rev == 0 {
                    return Err(ApiError::bad_request(
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
                range.at = Some(rev);
            }
            (None, Some(v), m) => {
                if let Some(m) = m.filter(|m| !m.is_empty() && *m != "NotOlderThan") {
                    return Err(ApiError::bad_request(format!("resourceVersionMatch: Unsupported value: {m:?}")));
                }
                let rev = parse_rv(v)?;
                let current = self.store.revision();
                if rev > current {
                    return Err(ApiError::timeout(format!("Too large resource version: {rev}, current: {current}")));
                }
            }
            _ => {}
        }
        let parse = needs_parse(opts);
        let mut keep = list_filter(target, opts);
        let page = self.store.list(&target.info.id, &range, &mut keep).await.map_err(|e| match e {
            StorageError::Expired { .. } if opts.continue_token.is_some() => ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ),
            e => e.into(),
        })?;
        let continue_token = page.next.as_ref().map(|(ns, name)| encode_continue(page.rev, ns, name));
        let items = if may_be_stored_at_other_versions(target) && self.serves_stored_bytes(target) {
            let mut keep = matcher(target, opts);
            let selected = needs_parse(opts);
            self.stored_items_at_version(target, page.items, |o| !selected || keep(o)).await?
        } else {
            page.items
        };
        Ok(RawListResult { items, rev: page.rev, continue_token, remaining: if parse { None } else { page.remaining } })
    }

    /// Starts a watch.
    pub async fn watch(&self, target: &Target, opts: &WatchOptions) -> ApiResult<WatchStream> {
        self.validate_selectors(target, &opts.list)?;
        let rv = opts.list.resource_version.as_deref().filter(|s| !s.is_empty());
        let legacy_initial = matches!(rv, None | Some("0"));
        let initial = opts.send_initial_events.unwrap_or(legacy_initial);
        if opts.send_initial_events == Some(true) && opts.list.resource_version_match.as_deref() != Some("NotOlderThan")
        {
            return Err(ApiError::bad_request(
                "sendInitialEvents: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        let mut queue = VecDeque::new();
        let mut initial_items = VecDeque::new();
        let mut initial_next = None;
        let start = if initial {
            let list_opts = ListOptions {
                limit: Some(INITIAL_PAGE),
                continue_token: None,
                resource_version: None,
                resource_version_match: None,
                ..opts.list.clone()
            };
            // Read a page at a time, at the first page's revision, as the client takes the
            // events (a reflector's paged list): a watch holds one page of handles on the
            // stored bytes, however many objects there are and however slowly it reads.
            let page = self.list_raw(target, &list_opts).await?;
            initial_items = page.items.into();
            initial_next = page.continue_token.map(|token| ListOptions { continue_token: Some(token), ..list_opts });
            if opts.send_initial_events == Some(true) && opts.bookmarks {
                queue.push_back(bookmark(target, page.rev, true));
            }
            page.rev
        } else {
            match rv {
                Some(v) if v != "0" => parse_rv(v)?,
                _ => self.store.revision(),
            }
        };
        let sub = match self.store.watch(&target.info.id, start) {
            Ok(s) => Some(s),
            Err(StorageError::Expired { requested, oldest }) => {
                queue.push_back(expired_event(requested, oldest));
                None
            }
            Err(e) => return Err(e.into()),
        };
        Ok(WatchStream {
            _open: OpenWatch::count(&self.open_watches),
            registry: self.clone(),
            ready: VecDeque::new(),
            initial: initial_items,
            initial_next,
            initial_as_stored: self.serves_stored_bytes(target),
            target: target.clone(),
            parse: needs_parse(&opts.list)
                || target.version != target.info.storage_version()
                || target.strategy.converts_storage(&target.version),
            stored_version_check: may_be_stored_at_other_versions(target).then(|| target.api_version()),
            selectors: needs_parse(&opts.list),
            filter: Box::new(matcher(target, &opts.list)),
            queue,
            sub,
            bookmarks: opts.bookmarks,
            next_bookmark: Instant::now() + BOOKMARK_EVERY,
            // A timeout beyond what the clock can represent (timeoutSeconds up to
            // i64::MAX) means no deadline.
            deadline: opts.timeout.and_then(|t| Instant::now().checked_add(t)),
            last_rev: start,
        })
    }
}

const BOOKMARK_EVERY: Duration = Duration::from_secs(30);

/// How many objects of a watch's initial list are read from the store at a time (a
/// reflector's page size).
const INITIAL_PAGE: usize = 500;

/// How many objects of a watch's initial list are converted together (one review for a
/// conversion webhook).
const INITIAL_BATCH: usize = 100;

/// How many listed objects are parsed on an async worker; more are parsed off the
/// workers ([`run_off_async_workers`]).
const PARSE_INLINE_ITEMS: usize = 256;

fn bookmark(target: &Target, rev: Revision, initial_end: bool) -> WatchEvent {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    WatchEvent {
        kind: "BOOKMARK",
        payload: WatchPayload::Json(
            json!({"kind": target.info.kind, "apiVersion": target.api_version(), "metadata": meta}),
        ),
    }
}

fn expired_event(requested: Revision, oldest: Revision) -> WatchEvent {
    let status = ApiError::expired(format!("too old resource version: {requested} ({oldest})")).to_status();
    WatchEvent { kind: "ERROR", payload: WatchPayload::Json(status) }
}

/// One open watch in the registry's count, from the stream's start to its drop.
struct OpenWatch(Arc<AtomicUsize>);

impl OpenWatch {
    fn count(open: &Arc<AtomicUsize>) -> OpenWatch {
        open.fetch_add(1, Ordering::Relaxed);
        OpenWatch(open.clone())
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A running watch.
pub struct WatchStream {
    /// Counts this watch among the registry's open ones while it lives.
    _open: OpenWatch,
    /// The registry, which converts objects stored at another version.
    registry: Registry,
    /// Initial events converted and not yet sent.
    ready: VecDeque<WatchEvent>,
    /// The initial list's objects of the current page not yet converted, as stored.
    initial: VecDeque<Bytes>,
    /// The list of the initial list's next page: its continue token (at the first page's
    /// revision) and the watch's selectors (None: this page was the last).
    initial_next: Option<ListOptions>,
    /// Whether they are sent as stored, or converted to the requested version first.
    initial_as_stored: bool,
    target: Target,
    /// Whether events are parsed (selectors, conversion) rather than passed as stored.
    parse: bool,
    /// The requested `apiVersion`, when objects may be stored at another one: an event
    /// passed as stored is checked to be at it.
    stored_version_check: Option<String>,
    /// Whether selectors were given (the previous state of a change then matters).
    selectors: bool,
    filter: Box<dyn FnMut(&Value) -> bool + Send>,
    queue: VecDeque<WatchEvent>,
    sub: Option<WatchSubscription>,
    bookmarks: bool,
    next_bookmark: Instant,
    deadline: Option<Instant>,
    last_rev: Revision,
}

impl WatchStream {
    /// The next event; `None` when the watch ends (timeout, expiry, shutdown, a failed
    /// conversion after its ERROR event). An event a test holds back
    /// ([`Registry::watch_delays`]) is returned once it is released.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        let event = self.next_event().await?;
        self.registry.watch_delays().admit(&self.target, &event).await;
        Some(event)
    }

    async fn next_event(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if self.initial.is_empty()
                && let Some(next) = self.initial_next.take()
                && let Err(e) = self.read_initial_page(next).await
            {
                return Some(self.fail(e));
            }
            if !self.initial.is_empty() {
                if self.initial_as_stored {
                    let stored = self.initial.pop_front()?;
                    return Some(WatchEvent { kind: "ADDED", payload: WatchPayload::Raw(stored) });
                }
                if let Err(e) = self.convert_initial_batch().await {
                    return Some(self.fail(e));
                }
                continue;
            }
            if self.initial.capacity() > 0 {
                // The initial events are sent: free their page's buffer for the watch's life.
                self.initial = VecDeque::new();
            }
            if let Some(e) = self.queue.pop_front() {
                return Some(e);
            }
            let sub = self.sub.as_mut()?;
            let deadline = self.deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
            let tick = if self.bookmarks { self.next_bookmark.min(deadline) } else { deadline };
            let next = tokio::select! {
                ev = sub.next() => Some(ev),
                _ = tokio::time::sleep_until(tick) => None,
            };
            match next {
                Some(Ok(Some(e))) => {
                    self.last_rev = e.rev;
                    match self.convert(&e).await {
                        Ok(Some(out)) => return Some(out),
                        Ok(None) => {}
                        Err(err) => return Some(self.fail(err)),
                    }
                }
                Some(Ok(None)) => return None,
                Some(Err(StorageError::Expired { requested, oldest })) => {
                    self.sub = None;
                    return Some(expired_event(requested, oldest));
                }
                Some(Err(_)) => return None,
                None => {
                    if self.deadline.is_some_and(|d| Instant::now() >= d) {
                        return None;
                    }
                    if self.bookmarks {
                        self.next_bookmark = Instant::now() + BOOKMARK_EVERY;
                        return Some(bookmark(&self.target, self.last_rev, false));
                    }
                }
            }
        }
    }

    /// Reads the initial list's next page. A page whose revision was compacted away while
    /// the client read the ones before ends the watch with 410, as an expired watch does.
    async fn read_initial_page(&mut self, opts: ListOptions) -> ApiResult<()> {
        let page = match self.registry.list_raw(&self.target, &opts).await {
            Ok(page) => page,
            Err(e) if e.code == 410 => {
                return Err(ApiError::expired(format!(
                    "too old resource version: {} (the initial events' revision was compacted while they were read)",
                    self.last_rev
                )));
            }
            Err(e) => return Err(e),
        };
        self.initial = page.items.into();
        self.initial_next = page.continue_token.map(|token| ListOptions { continue_token: Some(token), ..opts });
        Ok(())
    }

    /// Converts the next objects of the initial list to the requested version, together.
    async fn convert_initial_batch(&mut self) -> ApiResult<()> {
        let n = self.initial.len().min(INITIAL_BATCH);
        let mut objects: Vec<Value> = self.initial.drain(..n).filter_map(|b| parse_stored(&b).ok()).collect();
        self.registry.all_at_requested_version(&self.target, &mut objects).await?;
        if self.selectors {
            // Objects the webhook converted are matched now (see `list_filter`).
            let filter = &mut self.filter;
            objects.retain(|o| filter(o));
        }
        self.ready.extend(objects.into_iter().map(|o| WatchEvent { kind: "ADDED", payload: WatchPayload::Json(o) }));
        Ok(())
    }

    /// Ends the watch with an ERROR event carrying `error`'s Status (kube ends a watch
    /// whose object cannot be converted this way).
    fn fail(&mut self, error: ApiError) -> WatchEvent {
        self.sub = None;
        self.initial.clear();
        self.initial_next = None;
        self.ready.clear();
        self.queue.clear();
        WatchEvent { kind: "ERROR", payload: WatchPayload::Json(error.to_status()) }
    }

    /// The event a stored change makes for this watch (None: it is filtered out).
    async fn convert(&mut self, e: &crate::storage::Event) -> ApiResult<Option<WatchEvent>> {
        if self.target.info.namespaced
            && let Some(ns) = &self.target.namespace
            && &e.key.0 != ns
        {
            return Ok(None);
        }
        let as_stored = !self.parse && self.stored_version_check.as_ref().is_none_or(|v| stored_at(&e.value, v));
        if as_stored {
            let kind = match e.kind {
                EventKind::Added => "ADDED",
                EventKind::Modified => "MODIFIED",
                EventKind::Deleted => "DELETED",
            };
            return Ok(Some(WatchEvent { kind, payload: WatchPayload::Raw(e.value.clone()) }));
        }
        let Ok(now) = serde_json::from_slice::<Value>(&e.value) else { return Ok(None) };
        let prev = match (&e.prev, e.kind) {
            (Some(p), EventKind::Modified) if self.selectors => serde_json::from_slice::<Value>(p).ok(),
            _ => None,
        };
        let (now, prev) = match prev {
            Some(prev) => {
                let mut both = [now, prev];
                self.registry.all_at_requested_version(&self.target, &mut both).await?;
                let [now, prev] = both;
                (now, Some(prev))
            }
            None => (self.registry.at_requested_version(&self.target, now).await?, None),
        };
        let now_match = (self.filter)(&now);
        let prev_match = match e.kind {
            EventKind::Modified if !self.selectors => true,
            EventKind::Modified => prev.as_ref().is_some_and(|p| (self.filter)(p)),
            _ => false,
        };
        let kind = match (e.kind, prev_match, now_match) {
            (EventKind::Added, _, true) => "ADDED",
            (EventKind::Modified, true, true) => "MODIFIED",
            (EventKind::Modified, false, true) => "ADDED",
            (EventKind::Modified, true, false) => "DELETED",
            (EventKind::Deleted, _, true) => "DELETED",
            _ => return Ok(None),
        };
        Ok(Some(WatchEvent { kind, payload: WatchPayload::Json(now) }))
    }
}
