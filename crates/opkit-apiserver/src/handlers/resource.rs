//! Resource requests: maps method, path and query to registry calls (get, list, watch,
//! create, update, patch, delete, deletecollection, status, scale) and encodes results.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use serde_json::{Value, json};

use super::codec::{self, Body, Output};
use super::route::ResourceRequest;
use super::{AppState, watch};
use crate::auth::user::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::perturbation::{self, FaultAction, RequestLine};
use crate::registry::{
    FieldValidation, ListOptions, PatchType, ScaleChange, Subresource, Target, WatchOptions, WriteOptions,
};
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::{self, IncludeObject, TableContext};

/// A parsed request, ready for the registry.
pub(super) struct Call<'a> {
    /// The server state.
    pub state: &'a AppState,
    /// Method.
    pub method: Method,
    /// The route.
    pub req: ResourceRequest,
    /// Query parameters.
    pub query: HashMap<String, String>,
    /// Request headers.
    pub headers: HeaderMap,
    /// The body (empty for reads).
    pub body: Bytes,
    /// Who is asking.
    pub user: UserInfo,
    /// The name and resourceVersion of the object answered, for a request's trace.
    pub answered: parking_lot::Mutex<Option<(Option<String>, Option<String>)>>,
}

fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    matches!(q.get(k).map(String::as_str), Some("true" | "1"))
}

fn list_options(q: &HashMap<String, String>) -> ApiResult<ListOptions> {
    let labels = match q.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let fields = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(FieldSelector::parse(s).map_err(|e| ApiError::bad_request(e.to_string()))?),
        None => None,
    };
    let limit = match q.get("limit").filter(|s| !s.is_empty()) {
        Some(s) => {
            Some(s.parse::<i64>().map_err(|_| ApiError::bad_request(format!("limit: invalid value {s:?}")))?.max(0)
                as usize)
        }
        None => None,
    };
    Ok(ListOptions {
        labels,
        fields,
        limit,
        continue_token: q.get("continue").filter(|s| !s.is_empty()).cloned(),
        resource_version: q.get("resourceVersion").cloned(),
        resource_version_match: q.get("resourceVersionMatch").cloned(),
    })
}

fn watch_options(q: &HashMap<String, String>) -> ApiResult<WatchOptions> {
    let list = list_options(q)?;
    let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        Some(s) => Some(Duration::from_secs(s.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds: Invalid value: {s:?}: must be a non-negative integer"))
        })?)),
        None => None,
    };
    Ok(WatchOptions {
        list,
        bookmarks: flag(q, "allowWatchBookmarks"),
        send_initial_events: q.get("sendInitialEvents").map(|v| v == "true"),
        timeout,
    })
}

fn write_options(q: &HashMap<String, String>, headers: &HeaderMap, user: &UserInfo) -> ApiResult<WriteOptions> {
    write_options_for(q, headers, user, false)
}

/// Write options; for server-side apply (`apply`) the field manager is never derived from
/// the User-Agent, as kube-apiserver requires it explicitly.
fn write_options_for(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    user: &UserInfo,
    apply: bool,
) -> ApiResult<WriteOptions> {
    let dry_run = match q.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: {other:?}: supported values: \"All\""
            )));
        }
    };
    let field_manager = match q.get("fieldManager").filter(|s| !s.is_empty()) {
        Some(m) if m.len() > 128 => {
            return Err(ApiError::bad_request("fieldManager: Too long: may not be longer than 128"));
        }
        Some(m) => m.clone(),
        None if apply => String::new(),
        None => headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .and_then(|ua| ua.split('/').next())
            .unwrap_or("unknown")
            .chars()
            .take(128)
            .collect(),
    };
    Ok(WriteOptions {
        dry_run,
        field_manager,
        field_validation: FieldValidation::parse(q.get("fieldValidation").map(String::as_str).unwrap_or(""))?,
        force: flag(q, "force"),
        user: user.clone(),
    })
}

impl Call<'_> {
    fn target(&self) -> ApiResult<Target> {
        let cat = self.state.registry.catalog().snapshot();
        let info = cat.lookup(&self.req.group, &self.req.version, &self.req.resource).ok_or_else(ApiError::no_route)?;
        if !info.namespaced && self.req.namespace.is_some() {
            return Err(ApiError::no_route());
        }
        Ok(self.state.registry.target(info, self.req.version.clone(), self.req.namespace.clone()))
    }

    /// Whether a delete is a dry run: `?dryRun=All`, or `dryRun: ["All"]` in the body's
    /// DeleteOptions (where kube-rs and client-go put it).
    fn delete_dry_run(&self, options: &Value) -> ApiResult<bool> {
        let in_query = write_options(&self.query, &self.headers, &self.user)?.dry_run;
        let in_body = match &options["dryRun"] {
            Value::Null => false,
            Value::Array(values) => {
                if let Some(other) = values.iter().find(|v| v.as_str() != Some("All")) {
                    return Err(ApiError::bad_request(format!(
                        "dryRun: Unsupported value: {other}: supported values: \"All\""
                    )));
                }
                !values.is_empty()
            }
            other => return Err(ApiError::bad_request(format!("dryRun: Invalid value: {other}: must be a list"))),
        };
        Ok(in_query || in_body)
    }

    fn delete_options(&self) -> ApiResult<Value> {
        let mut opts = if self.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            codec::decode_object(&self.headers, &self.body)?
        };
        if !opts.is_object() {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type v1.DeleteOptions",
                crate::json::go_json_kind(&opts)
            )));
        }
        for (k, key) in [("propagationPolicy", "propagationPolicy"), ("gracePeriodSeconds", "gracePeriodSeconds")] {
            if let Some(v) = self.query.get(k) {
                opts[key] = match v.parse::<i64>() {
                    Ok(n) => json!(n),
                    Err(_) => json!(v),
                };
            }
        }
        if let Some(v) = self.query.get("orphanDependents") {
            opts["orphanDependents"] = json!(v == "true");
        }
        Ok(opts)
    }

    /// Runs the request: resolves the target, then serves it, perturbed when a test
    /// perturbs its user's requests (see [`crate::perturbation`]).
    pub(super) async fn run(self) -> ApiResult<Response<Body>> {
        let target = self.target()?;
        let perturbations = self.state.perturbations.clone();
        if !perturbations.active() {
            return self.serve(target).await;
        }
        let line = self.request_line(&target);
        let fault = perturbations.fault_for(&line);
        if perturbation::WRITE_VERBS.contains(&line.verb) {
            perturbations.catch_up(&line.user);
        }
        let before = self.state.registry.store().revision();
        let result = match fault {
            Some(FaultAction::Reject { code }) => Err(perturbation::rejection(code, &line)),
            _ => self.serve(target).await,
        };
        let code = match &result {
            Ok(r) => r.status().as_u16(),
            Err(e) => e.code,
        };
        let (name, rv) = self.answered.lock().take().unwrap_or_default();
        let wrote = result.is_ok() && perturbation::WRITE_VERBS.contains(&line.verb);
        let changed = wrote
            && (line.verb != "update" && line.verb != "patch"
                || rv.and_then(|rv| rv.parse::<u64>().ok()).is_some_and(|rv| rv > before));
        let committed = result.is_ok();
        let answer = |code| perturbation::Answer { code, name: name.clone(), changed };
        match fault {
            Some(FaultAction::FailAfterCommit) if committed => {
                perturbations.record(&line, answer(504), fault);
                Err(perturbation::timeout())
            }
            Some(action @ (FaultAction::CrashAfterCommit | FaultAction::CrashWithStaleRestart)) if committed => {
                if action == FaultAction::CrashWithStaleRestart {
                    perturbations.serve_stale(&line.user, before);
                }
                // The client is killed before it reads an answer: it gets none.
                perturbations.record(&line, answer(0), fault);
                self.state.shutdown.cancelled().await;
                Err(perturbation::timeout())
            }
            _ => {
                perturbations.record(&line, answer(code), fault);
                result
            }
        }
    }

    /// What the request is, for perturbations: who asks, the verb, the object.
    fn request_line(&self, target: &Target) -> RequestLine {
        let name = self.req.name.clone();
        let create = self.method == Method::POST && name.is_none();
        let body_meta = |key: &str| {
            create
                .then(|| codec::decode_object(&self.headers, &self.body).ok())
                .flatten()
                .and_then(|b| b["metadata"][key].as_str().map(String::from))
        };
        let verb = match (&self.method, name.is_some()) {
            (&Method::GET, false) if flag(&self.query, "watch") => "watch",
            (&Method::GET, false) => "list",
            (&Method::GET, true) => "get",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, true) => "delete",
            (&Method::DELETE, false) => "deletecollection",
            _ => "other",
        };
        RequestLine {
            user: self.user.name.clone(),
            verb,
            group: target.info.group.clone(),
            resource: target.info.resource.clone(),
            subresource: self.req.subresource.clone(),
            namespace: self.req.namespace.clone(),
            generate_name: if create && name.is_none() { body_meta("generateName") } else { None },
            name: if create { body_meta("name") } else { name },
        }
    }

    /// Checks the route, then performs the verb.
    async fn serve(&self, target: Target) -> ApiResult<Response<Body>> {
        let output = codec::negotiate(&self.headers)?;
        self.check_route(&target)?;
        let sub = self.req.subresource.as_deref();
        let has = |verb: &str| target.info.verbs.contains(&verb);
        match (&self.method, self.req.name.as_deref()) {
            (&Method::GET, None) if flag(&self.query, "watch") => self.watch(target, output).await,
            (&Method::GET, None) => self.list(&target, output).await,
            (&Method::GET, Some(n)) => self.get(&target, n, output).await,
            (&Method::POST, None) if has("create") => self.create(&target, output).await,
            (&Method::POST, Some(n)) if sub == Some("eviction") => self.evict(&target, n).await,
            (&Method::PUT, Some(n)) if has("update") => self.update(&target, n, output).await,
            (&Method::PATCH, Some(n)) if has("patch") => self.patch(&target, n, output).await,
            (&Method::DELETE, Some(n)) if has("delete") && sub.is_none() => self.delete(&target, n, output).await,
            (&Method::DELETE, None) if has("deletecollection") => self.delete_collection(&target, output).await,
            (m, _) => Err(ApiError::method_not_supported(&target.info.group, &target.info.resource, &verb_name(m))),
        }
    }

    /// Refuses subresources the resource does not have (or without a name), and writes
    /// to a namespaced object without its namespace.
    fn check_route(&self, target: &Target) -> ApiResult<()> {
        let version = target.version_info()?;
        if let Some(s) = self.req.subresource.as_deref() {
            let ok = match s {
                "status" => version.status,
                "scale" => version.scale.is_some(),
                "finalize" => target.strategy.has_finalize(),
                "eviction" => target.strategy.has_eviction(),
                other => target.strategy.update_subresources().contains(&other),
            };
            if !ok || self.req.name.is_none() {
                return Err(ApiError::no_route());
            }
        }
        if target.info.namespaced
            && self.req.namespace.is_none()
            && !matches!(self.method, Method::GET)
            && self.req.name.is_some()
        {
            return Err(ApiError::no_route());
        }
        Ok(())
    }

    async fn watch(&self, target: Target, output: Output) -> ApiResult<Response<Body>> {
        let opts = watch_options(&self.query)?;
        let stream = self.state.registry.watch(&target, &opts).await?;
        let perturbations = &self.state.perturbations;
        let lag = if perturbations.active() { perturbations.watch_lag(&self.user.name) } else { None };
        Ok(watch::respond_watch(stream, target, output, lag))
    }

    async fn list(&self, target: &Target, output: Output) -> ApiResult<Response<Body>> {
        let registry = &self.state.registry;
        let mut opts = list_options(&self.query)?;
        if self.state.perturbations.active() && opts.resource_version.as_deref() == Some("0") {
            // A test's lagging API server: "any version" is an old one, while the history
            // still holds it.
            if let Some(rev) = self.state.perturbations.stale_revision(&self.user.name) {
                let stale = ListOptions {
                    resource_version: Some(rev.to_string()),
                    resource_version_match: Some("Exact".into()),
                    ..opts.clone()
                };
                if registry.list(target, &ListOptions { limit: Some(1), ..stale.clone() }).await.is_ok() {
                    opts = stale;
                }
            }
        }
        if output == Output::Json && registry.serves_stored_bytes(target) {
            let page = registry.list_raw(target, &opts).await?;
            return Ok(codec::respond_bytes(raw_list(target, page), "application/json"));
        }
        let page = registry.list(target, &opts).await?;
        let rv = page.rev.to_string();
        if output == Output::Table {
            let ctx = TableContext {
                include: include_object(&self.query),
                now_unix_secs: crate::registry::now_unix(),
                resource_version: &rv,
                continue_token: page.continue_token.as_deref(),
            };
            let t = table::render(target.table_columns(), &page.items, &ctx);
            return Ok(codec::respond(200, &t, Output::Json, &[]));
        }
        let mut meta = json!({"resourceVersion": rv});
        if let Some(c) = &page.continue_token {
            meta["continue"] = json!(c);
        }
        if let Some(r) = page.remaining {
            meta["remainingItemCount"] = json!(r);
        }
        if output == Output::Metadata {
            let items: Vec<Value> = page.items.iter().map(table::partial_object_metadata).collect();
            let list = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items});
            return Ok(codec::respond(200, &list, Output::Json, &[]));
        }
        let list = json!({"kind": target.info.list_kind, "apiVersion": target.api_version(), "metadata": meta, "items": page.items});
        Ok(codec::respond(200, &list, output, &[]))
    }

    async fn get(&self, target: &Target, name: &str, output: Output) -> ApiResult<Response<Body>> {
        let registry = &self.state.registry;
        let obj = match self.req.subresource.as_deref() {
            Some("scale") => registry.get_scale(target, name).await?,
            _ => registry.get(target, name).await?,
        };
        self.respond_object(target, 200, obj, output, &[])
    }

    async fn create(&self, target: &Target, output: Output) -> ApiResult<Response<Body>> {
        let opts = write_options(&self.query, &self.headers, &self.user)?;
        let body = codec::decode_object(&self.headers, &self.body)?;
        let out = self.state.registry.create(target, body, &opts).await?;
        self.respond_object(target, out.code, out.object, output, &out.warnings)
    }

    /// `pods/eviction`: a policy/v1 (or v1beta1) Eviction whose `deleteOptions` apply.
    async fn evict(&self, target: &Target, name: &str) -> ApiResult<Response<Body>> {
        let eviction = codec::decode_object(&self.headers, &self.body)?;
        // Clients such as kube-rs send the Eviction without its type, as kube accepts.
        let kind_ok = matches!(eviction["kind"].as_str(), None | Some("Eviction"));
        let version_ok = matches!(eviction["apiVersion"].as_str(), None | Some("policy/v1" | "policy/v1beta1"));
        if !kind_ok || !version_ok {
            return Err(ApiError::bad_request(format!(
                "the body must be a policy/v1 Eviction, not {} {}",
                eviction["apiVersion"], eviction["kind"]
            )));
        }
        let options = eviction.get("deleteOptions").cloned().unwrap_or(Value::Null);
        let dry = self.delete_dry_run(&options)?;
        let status = self.state.registry.evict(target, name, &eviction, dry).await?;
        Ok(codec::respond(201, &status, Output::Json, &[]))
    }

    async fn update(&self, target: &Target, name: &str, output: Output) -> ApiResult<Response<Body>> {
        let registry = &self.state.registry;
        let opts = write_options(&self.query, &self.headers, &self.user)?;
        let body = codec::decode_object(&self.headers, &self.body)?;
        let out = match self.req.subresource.as_deref() {
            Some("scale") => registry.update_scale(target, name, ScaleChange::Replace(body), &opts).await?,
            Some("status") => registry.update(target, name, body, Subresource::Status, &opts).await?,
            Some(sub) if let Some(of_kind) = subresource_of_kind(target, sub) => {
                registry.update(target, name, body, of_kind, &opts).await?
            }
            Some("finalize") => registry.finalize(target, name, &body, &opts).await?,
            _ => registry.update(target, name, body, Subresource::Main, &opts).await?,
        };
        self.respond_object(target, out.code, out.object, output, &out.warnings)
    }

    async fn patch(&self, target: &Target, name: &str, output: Output) -> ApiResult<Response<Body>> {
        let registry = &self.state.registry;
        let kind = codec::patch_type(&self.headers)?;
        let opts = write_options_for(&self.query, &self.headers, &self.user, kind == PatchType::Apply)?;
        let patch = codec::decode_patch(kind, &self.body)?;
        let out = match self.req.subresource.as_deref() {
            Some("scale") => registry.update_scale(target, name, ScaleChange::Patch(kind, patch), &opts).await?,
            Some("status") => registry.patch(target, name, kind, patch, Subresource::Status, &opts).await?,
            Some(sub) if let Some(of_kind) = subresource_of_kind(target, sub) => {
                registry.patch(target, name, kind, patch, of_kind, &opts).await?
            }
            _ => registry.patch(target, name, kind, patch, Subresource::Main, &opts).await?,
        };
        self.respond_object(target, out.code, out.object, output, &out.warnings)
    }

    async fn delete(&self, target: &Target, name: &str, output: Output) -> ApiResult<Response<Body>> {
        let options = self.delete_options()?;
        let dry = self.delete_dry_run(&options)?;
        let registry = &self.state.registry;
        let out = registry.delete(target, name, &options, dry, Some(&self.user)).await?;
        // The deleted object (not a Status) at the requested version: a CRD's conversion
        // webhook converts it.
        let object = if out.object["kind"] == target.info.kind.as_str() {
            registry.at_requested_version(target, out.object).await?
        } else {
            out.object
        };
        self.respond_object(target, out.code, object, output, &out.warnings)
    }

    async fn delete_collection(&self, target: &Target, output: Output) -> ApiResult<Response<Body>> {
        let options = self.delete_options()?;
        let dry = self.delete_dry_run(&options)?;
        let list = list_options(&self.query)?;
        let list = self.state.registry.delete_collection(target, &list, &options, dry, Some(&self.user)).await?;
        Ok(codec::respond(200, &list, output, &[]))
    }

    fn respond_object(
        &self,
        target: &Target,
        code: u16,
        obj: Value,
        output: Output,
        warnings: &[String],
    ) -> ApiResult<Response<Body>> {
        if self.state.perturbations.active() {
            let field = |k: &str| obj["metadata"][k].as_str().map(String::from);
            *self.answered.lock() = Some((field("name"), field("resourceVersion")));
        }
        if output == Output::Table && obj["kind"] != "Scale" && obj["kind"] != "Status" {
            let ctx = TableContext {
                include: include_object(&self.query),
                now_unix_secs: crate::registry::now_unix(),
                resource_version: obj["metadata"]["resourceVersion"].as_str().unwrap_or_default(),
                continue_token: None,
            };
            let t = table::render(target.table_columns(), std::slice::from_ref(&obj), &ctx);
            return Ok(codec::respond(code, &t, Output::Json, warnings));
        }
        if output == Output::Metadata && obj["kind"] != "Scale" && obj["kind"] != "Status" {
            return Ok(codec::respond(code, &table::partial_object_metadata(&obj), Output::Json, warnings));
        }
        let output = if matches!(output, Output::Table | Output::Metadata) { Output::Json } else { output };
        Ok(codec::respond(code, &obj, output, warnings))
    }
}

/// A list response spliced from stored bytes, without parsing the objects.
fn raw_list(target: &Target, page: crate::registry::RawListResult) -> Bytes {
    let mut meta = json!({"resourceVersion": page.rev.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    let head = json!({"kind": target.info.list_kind, "apiVersion": target.api_version(), "metadata": meta});
    let mut head = head.to_string().into_bytes();
    head.pop(); // the closing brace; items follow
    let size = head.len() + page.items.iter().map(|b| b.len() + 1).sum::<usize>() + 16;
    let mut out = bytes::BytesMut::with_capacity(size);
    out.extend_from_slice(&head);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",");
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    out.freeze()
}

/// The Table columns of `target`: a custom resource's printer columns, the built-in
/// printer its strategy names, or kube's default table.
/// The kind's own subresource called `sub`, if its strategy has one.
fn subresource_of_kind(target: &Target, sub: &str) -> Option<Subresource> {
    target.strategy.update_subresources().iter().find(|s| **s == sub).map(|s| Subresource::OfKind(s))
}

/// `includeObject` for tables.
pub(super) fn include_object(q: &HashMap<String, String>) -> IncludeObject {
    match q.get("includeObject").and_then(|v| IncludeObject::from_query(v)) {
        Some(include) => include,
        None => IncludeObject::Metadata,
    }
}

fn verb_name(m: &Method) -> String {
    match *m {
        Method::POST => "create".into(),
        Method::PUT => "update".into(),
        Method::PATCH => "patch".into(),
        Method::DELETE => "delete".into(),
        _ => m.as_str().to_lowercase(),
    }
}
