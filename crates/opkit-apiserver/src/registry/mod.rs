//! The registry: what each API verb means for stored objects, independent of HTTP.
//! Handlers call it with parsed requests; it validates, applies Kubernetes' object
//! semantics (metadata, generation, status subresource, finalizers, field management)
//! and reads and writes the [`Store`]. It never names a kind: what differs from kind to
//! kind comes from the strategy each [`Target`] carries (the server hands in the table
//! of the built-in kinds' strategies, which live above the registry in `kinds`).
//!
//! One file per verb or step: `create`, `update` (update, patch, finalize), `commit`
//! (the shared update step), `delete`, `read` (get, list, watch), `scale`, `validate`
//! (admission); `conversion` brings custom resources to the version read or stored
//! (through a CRD's conversion webhook, reached through the [`conversion::ConversionWebhooks`]
//! the server hands in); `pod_streaming` checks the pod subresources served by kubelets;
//! `watch_delay` holds back watch events for tests (a lagging watch cache on purpose).
//!
//! What plugs into the registry is declared here and implemented above it: `strategy`
//! (the per-kind [`strategy::Strategy`] and the table of them), `admission` (the
//! [`admission::Admission`] chain run around validation) and `view` (the read-only
//! [`view::StoreView`] both read other objects through). The registry imports none of
//! their implementations.

pub(crate) mod admission;
pub(crate) mod aggregation;
mod commit;
pub(crate) mod conversion;
mod create;
mod delete;
mod eviction;
pub(crate) mod meta;
pub(crate) mod pod_streaming;
mod read;
mod scale;
pub(crate) mod strategy;
mod update;
mod validate;
pub(crate) mod view;
mod watch_delay;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::auth::user::UserInfo;
use crate::authz::Authorizer;
use crate::catalog::{Catalog, ResourceInfo, VersionInfo};
use crate::error::{ApiError, ApiResult};
use crate::storage::{ObjectName, Store};
use crate::table::Columns;
use admission::{Admission, Attributes, Verdict};
use conversion::ConversionWebhooks;
use strategy::{Strategies, Strategy};
use view::StoreView;

pub(crate) use meta::now_unix;
pub(crate) use read::{ListOptions, RawListResult, WatchEvent, WatchOptions, WatchPayload, WatchStream};
pub(crate) use scale::ScaleChange;
pub use watch_delay::{HeldWatchEvents, WatchDelays, WatchEventFilter};

/// How unknown or duplicate fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and return a warning (kube-apiserver's default).
    #[default]
    Warn,
    /// Reject the request with 400.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter; unknown values are a 400.
    pub fn parse(s: &str) -> ApiResult<Self> {
        match s {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            "Strict" => Ok(FieldValidation::Strict),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, Strict, got {other:?}"
            ))),
        }
    }
}

/// Options common to writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// The field manager (`fieldManager`, or derived from the User-Agent).
    pub field_manager: String,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` for server-side apply.
    pub force: bool,
    /// Who is asking.
    pub user: UserInfo,
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The object as stored (or as it would be, for a dry run).
    pub object: Value,
    /// HTTP status: 200, 201 (created) or 202 (deletion pending).
    pub code: u16,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
}

/// Which resource, version and namespace a request addresses.
#[derive(Clone)]
pub struct Target {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// The requested version.
    pub version: String,
    /// The namespace, for namespaced resources (None for all namespaces / cluster scope).
    pub namespace: Option<String>,
    /// The resource's per-kind behaviour, looked up once per request.
    pub(crate) strategy: &'static dyn Strategy,
}

impl Target {
    /// A request for `version` of `info` in `namespace`, whose kind behaves as `strategy`
    /// says (see [`Registry::target`]).
    pub(crate) fn new(
        info: Arc<ResourceInfo>,
        version: String,
        namespace: Option<String>,
        strategy: &'static dyn Strategy,
    ) -> Target {
        Target { info, version, namespace, strategy }
    }
    /// The version's details.
    pub fn version_info(&self) -> ApiResult<&VersionInfo> {
        self.info.version(&self.version).ok_or_else(ApiError::no_route)
    }
    /// `apiVersion` for objects returned at this version.
    pub fn api_version(&self) -> String {
        self.info.api_version(&self.version)
    }
    /// The columns of a Table of the target's objects: a CRD's printer columns, the
    /// kind's printer, or kube's default table.
    pub(crate) fn table_columns(&self) -> Columns<'_> {
        if !self.info.builtin {
            return Columns::Custom(self.version_info().map(|v| v.columns.as_slice()).unwrap_or_default());
        }
        match self.strategy.table() {
            Some(printer) => Columns::Builtin(printer),
            None => Columns::Default,
        }
    }

    /// The storage key of `name`.
    pub fn key(&self, name: &str) -> ObjectName {
        let ns = if self.info.namespaced { self.namespace.clone().unwrap_or_default() } else { String::new() };
        (ns, name.to_string())
    }
    fn group(&self) -> &str {
        &self.info.group
    }
    fn resource(&self) -> &str {
        &self.info.resource
    }
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself (status changes are ignored when a status subresource exists).
    Main,
    /// `/status`: only status changes are kept.
    Status,
    /// A subresource of the kind's own that is read and written whole (one of its
    /// strategy's `update_subresources`, such as `pods/ephemeralcontainers`): the
    /// strategy says what of the request is kept and validates the change.
    OfKind(&'static str),
}

impl Subresource {
    /// The subresource's name in a URL and in `managedFields`; None for the object itself.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::OfKind(name) => Some(name),
        }
    }
}

/// The patch formats kube-apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json` (built-in kinds only)
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

/// The registry over one store and catalogue.
#[derive(Clone)]
pub struct Registry {
    pub(crate) store: Store,
    pub(crate) catalog: Arc<Catalog>,
    authorizer: Arc<Authorizer>,
    /// Each resource's strategy.
    strategies: Strategies,
    /// Held from a kind's allocation to its commit (kube's allocators are atomic), so two
    /// writes never take the same node port or cluster IP.
    allocations: Arc<tokio::sync::Mutex<()>>,
    /// The admission chain run around validation.
    admission: Arc<dyn Admission>,
    /// The client of CRDs' conversion webhooks.
    conversion_webhooks: Arc<dyn ConversionWebhooks>,
    /// How many watches are open (kube's `apiserver_longrunning_requests` for WATCH).
    open_watches: Arc<std::sync::atomic::AtomicUsize>,
    /// The watch events tests hold back.
    watch_delays: Arc<WatchDelays>,
}

impl Registry {
    /// A registry over `store`, serving `catalog`, whose resources behave as
    /// `strategies` say, whose writes pass `admission` and whose custom resources are
    /// converted through `conversion_webhooks` when their CRD says so.
    pub(crate) fn new(
        store: Store,
        catalog: Arc<Catalog>,
        strategies: Strategies,
        admission: Arc<dyn Admission>,
        conversion_webhooks: Arc<dyn ConversionWebhooks>,
    ) -> Registry {
        Registry {
            store,
            catalog,
            authorizer: Arc::default(),
            strategies,
            allocations: Arc::default(),
            admission,
            conversion_webhooks,
            open_watches: Arc::default(),
            watch_delays: Arc::default(),
        }
    }

    /// The holds on watch events (a test hook: see [`WatchDelays`]).
    pub fn watch_delays(&self) -> &Arc<WatchDelays> {
        &self.watch_delays
    }

    /// How many watches are open now: each counts from its start until its stream is
    /// dropped (the client went away, or the watch ended and its response finished).
    pub fn open_watches(&self) -> usize {
        self.open_watches.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The authorizer, whose RBAC index is kept over this registry's store.
    pub fn authorizer(&self) -> &Authorizer {
        &self.authorizer
    }

    /// The catalogue.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Which strategy each resource has.
    pub(crate) fn strategies(&self) -> Strategies {
        self.strategies
    }

    /// The strategy of a served resource.
    pub(crate) fn strategy_for(&self, info: &ResourceInfo) -> &'static dyn Strategy {
        self.strategies.for_resource(info)
    }

    /// A request for `version` of `info` in `namespace`, with the resource's strategy.
    pub(crate) fn target(&self, info: Arc<ResourceInfo>, version: String, namespace: Option<String>) -> Target {
        let strategy = self.strategy_for(&info);
        Target::new(info, version, namespace, strategy)
    }

    /// The read-only view strategies and admission plugins read other objects through.
    pub(crate) fn view(&self) -> StoreView<'_> {
        StoreView::new(&self.store, &self.catalog, &self.authorizer)
    }

    /// The allocation lock, when `target`'s kind allocates from shared pools (see
    /// [`Strategy::allocates`]): the caller holds it until its write is committed.
    pub(crate) async fn allocation_guard(&self, target: &Target) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        if target.strategy.allocates() { Some(self.allocations.clone().lock_owned().await) } else { None }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The mutating admission phase (see [`Admission::mutate`]).
    pub(crate) async fn admission_mutate(&self, attrs: &Attributes<'_>, obj: &mut Value) -> ApiResult<Verdict> {
        self.admission.mutate(self, attrs, obj).await
    }

    /// The validating admission phase (see [`Admission::validate`]).
    pub(crate) async fn admission_validate(&self, attrs: &Attributes<'_>, obj: &Value) -> ApiResult<Verdict> {
        self.admission.validate(self, attrs, obj).await
    }
}

/// Parses stored bytes. Stored data is always JSON the server wrote itself.
pub(crate) fn parse_stored(b: &Bytes) -> ApiResult<Value> {
    serde_json::from_slice(b).map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))
}

/// A stored object at the requested version, without a conversion webhook: a built-in
/// kind's strategy converts it, and `apiVersion` is rewritten (CRD conversion strategy
/// `None`). An object of a CRD with a conversion webhook is left at the version it is
/// stored in (only the webhook converts it). Reads and writes of custom resources go
/// through `conversion` ([`Registry::at_requested_version`]), which calls the webhook.
pub(crate) fn at_version(mut obj: Value, target: &Target) -> Value {
    if target.info.conversion_webhook.is_some() {
        return obj;
    }
    target.strategy.convert_from_storage(&mut obj, &target.version);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), Value::String(target.api_version()));
    }
    obj
}
