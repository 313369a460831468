//! Create: namespace placement, the requested or generated name, server-set metadata,
//! admission, the kind's create-time preparation, field tracking, conversion to the
//! storage version, and an insert that fails if the name is taken (a generated name is
//! retried).

use serde_json::{Value, json};

use super::commit::{field_manager, list_semantics, serialize_with_rev};
use super::meta::{meta_mut, now_rfc3339, random_suffix};
use super::strategy::AfterCommit;
use super::validate::check_depth;
use super::{Outcome, Registry, Subresource, Target, WriteOptions, at_version};
use crate::error::{ApiError, ApiResult};
use crate::patch;
use crate::schema::{FieldError, FieldErrorReason};
use crate::storage::Write;

/// How many generated names are tried before giving up.
const GENERATE_ATTEMPTS: usize = 8;

/// The name a create asks for.
enum NameRequest {
    /// `metadata.name`.
    Given(String),
    /// `metadata.generateName`: a prefix for a random suffix.
    Generate(String),
}

impl NameRequest {
    /// Reads the request from the object's metadata; a name wins over a prefix.
    fn of(target: &Target, obj: &Value) -> ApiResult<NameRequest> {
        let field = |f: &str| obj["metadata"][f].as_str().filter(|s| !s.is_empty()).map(String::from);
        match (field("name"), field("generateName")) {
            (Some(n), _) => Ok(NameRequest::Given(n)),
            (None, Some(g)) => Ok(NameRequest::Generate(g)),
            (None, None) => Err(ApiError::invalid(
                &target.info.group,
                &target.info.kind,
                "",
                &[FieldError {
                    field: "metadata.name".into(),
                    reason: FieldErrorReason::Required,
                    message: "Required value: name or generateName is required".into(),
                }],
            )),
        }
    }

    /// The name to try.
    fn pick(&self) -> String {
        match self {
            NameRequest::Given(n) => n.clone(),
            NameRequest::Generate(g) => format!("{g}{}", random_suffix()),
        }
    }
}

/// A new object ready to insert.
struct Prepared {
    object: Value,
    warnings: Vec<String>,
    after_commit: Option<AfterCommit>,
}

/// Sets the object's namespace to the request's (refusing a different one), or removes
/// it for a cluster-scoped resource.
fn place_in_namespace(target: &Target, obj: &mut Value) -> ApiResult<()> {
    let m = meta_mut(obj);
    if !target.info.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    let want = target.namespace.clone().unwrap_or_default();
    match m.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != want => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            m.insert("namespace".into(), json!(want));
            Ok(())
        }
    }
}

/// Server-set metadata of a new object.
fn set_create_meta(obj: &mut Value, name: &str, now: &str, generation: bool) {
    let m = meta_mut(obj);
    m.insert("name".into(), json!(name));
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now));
    for f in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
        m.remove(f);
    }
    if generation {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
}

impl Registry {
    /// Creates an object the server itself keeps (start-up objects); one that already
    /// exists is left as it is.
    pub(crate) async fn create_if_missing(&self, target: &Target, obj: Value, opts: &WriteOptions) -> ApiResult<()> {
        match self.create(target, obj, opts).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates an object.
    pub async fn create(&self, target: &Target, obj: Value, opts: &WriteOptions) -> ApiResult<Outcome> {
        self.create_with(target, obj, opts, None).await
    }

    /// Creates an object; `applied_fields` are the managedFields of a server-side apply
    /// that creates it (recorded as an `Apply` operation instead of tracking an update).
    pub(super) async fn create_with(
        &self,
        target: &Target,
        mut obj: Value,
        opts: &WriteOptions,
        applied_fields: Option<Value>,
    ) -> ApiResult<Outcome> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
        }
        place_in_namespace(target, &mut obj)?;
        let request = NameRequest::of(target, &obj)?;
        let requested = obj["metadata"]["name"].as_str().unwrap_or_default();
        self.admission.admit_create(self.view(), target, requested).await?;
        let mut name = request.pick();
        let _allocating = self.allocation_guard(target).await;
        for attempt in 1..=GENERATE_ATTEMPTS {
            let Prepared { object, mut warnings, after_commit } =
                self.prepare_new(target, obj.clone(), &name, opts, applied_fields.as_ref()).await?;
            if opts.dry_run {
                return Ok(Outcome { object: at_version(object, target), code: 201, warnings });
            }
            let object = self.at_storage_version(target, object).await?;
            if let Some(stored) = self.insert(target, &name, object).await? {
                if let Some(after) = after_commit {
                    after(self, &stored);
                }
                warnings.dedup();
                let object = self.at_requested_version(target, stored).await?;
                return Ok(Outcome { object, code: 201, warnings });
            }
            if matches!(request, NameRequest::Given(_)) || attempt == GENERATE_ATTEMPTS {
                break;
            }
            name = request.pick();
        }
        Err(ApiError::already_exists(&target.info.group, &target.info.resource, &name))
    }

    /// Sets server metadata, admits, applies the kind's create-time preparation, records
    /// managed fields and runs the kind's pre-commit step.
    async fn prepare_new(
        &self,
        target: &Target,
        mut obj: Value,
        name: &str,
        opts: &WriteOptions,
        applied_fields: Option<&Value>,
    ) -> ApiResult<Prepared> {
        let now = now_rfc3339();
        set_create_meta(&mut obj, name, &now, target.info.generation);
        let warnings = self.admit(target, &mut obj, None, opts).await?;
        target.strategy.prepare_for_create(&mut obj, target.version_info()?.status);
        match applied_fields {
            Some(fields) => {
                meta_mut(&mut obj).insert("managedFields".into(), fields.clone());
            }
            None => {
                if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("managedFields");
                }
                let api_version = target.api_version();
                let fm = field_manager(opts, Subresource::Main, &now, &api_version);
                patch::track_update(None, &mut obj, &fm, &list_semantics(target));
            }
        }
        let after_commit = target.strategy.before_commit(&mut obj, None, &now)?;
        check_depth(target, name, &obj)?;
        Ok(Prepared { object: obj, warnings, after_commit })
    }

    /// Stores a new object under `name`; None if the name is taken. The stored object
    /// is the one in hand (converted to storage and given its resourceVersion), so it is
    /// returned as it is rather than parsed again from the bytes just written.
    async fn insert(&self, target: &Target, name: &str, mut obj: Value) -> ApiResult<Option<Value>> {
        let stored = &mut obj;
        let result = self
            .store
            .write(&target.info.id, &target.key(name), |cur, rev| {
                if cur.is_some() {
                    return Err(());
                }
                target.strategy.convert_to_storage(stored, &target.version);
                Ok(Write::Put(serialize_with_rev(stored, rev)))
            })
            .await?;
        match result {
            Ok(_) => Ok(Some(obj)),
            Err(()) => Ok(None),
        }
    }
}
