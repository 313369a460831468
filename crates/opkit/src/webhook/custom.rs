//! controller-runtime's `CustomDefaulter` and `CustomValidator`: async, typed admission logic
//! with the request and a client at hand ([`AdmissionContext`]), its errors
//! ([`AdmissionError`], [`FieldError`]) turned into denials as kube-apiserver words them, the
//! adapters that serve them, and [`WebhookBuilder`] (`ctrl.NewWebhookManagedBy(mgr).For(&T{})`),
//! which registers them at the paths kubebuilder's markers name.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::admission::{AsyncAdmissionHandler, decode_objects, encode_error, patch_response, with_objects};
use super::conversion::Converter;
use super::hub::{Convertible, Hub, HubConverter, Spoke};
use super::review::{AdmissionRequest, AdmissionResponse, AdmissionResponseExt, Operation};
use super::server::WebhookServer;
use crate::Manager;

/// What a [`CustomDefaulter`] or [`CustomValidator`] gets besides the object: the whole
/// admission request (user, operation, dry run, the objects as submitted) and a client.
pub struct AdmissionContext<'a, K: Resource> {
    /// The request, its objects decoded as `K`.
    pub request: &'a AdmissionRequest<K>,
    /// A client of the cluster (the manager's).
    pub client: &'a Client,
}

/// Why an admission request is refused. The API server shows the message to the client as
/// `admission webhook "<name>" denied the request: <message>`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AdmissionError {
    /// Refused, code 403 `Forbidden` (controller-runtime's `Denied`, what a plain error becomes).
    #[error("{0}")]
    Forbidden(String),
    /// The object is invalid, code 422 `Invalid`, with one cause per field error (kube's
    /// `apierrors.NewInvalid`): `Kind.group "name" is invalid: spec.to: Invalid value: ...`.
    #[error("{}", invalid_message(kind, group, name, causes))]
    Invalid {
        /// The kind (`FlightTicket`).
        kind: String,
        /// The API group (`flights.com`; empty for the core group).
        group: String,
        /// The object's name.
        name: String,
        /// What is wrong, per field.
        causes: Vec<FieldError>,
    },
    /// The request could not be understood, code 400 `BadRequest`.
    #[error("{0}")]
    BadRequest(String),
    /// The webhook failed, code 500 `InternalError`.
    #[error("{0}")]
    Internal(String),
}

impl AdmissionError {
    /// An [`AdmissionError::Invalid`] for `obj` (its kind, group and name) with `causes`.
    pub fn invalid<K: Resource<DynamicType = ()>>(obj: &K, causes: Vec<FieldError>) -> Self {
        AdmissionError::Invalid {
            kind: K::kind(&()).into_owned(),
            group: K::group(&()).into_owned(),
            name: obj.meta().name.clone().unwrap_or_default(),
            causes,
        }
    }

    /// The `metav1.Status` the webhook answers with.
    pub fn status(&self) -> Status {
        let message = self.to_string();
        let (code, reason) = match self {
            AdmissionError::Forbidden(_) => (403, "Forbidden"),
            AdmissionError::Invalid { .. } => (422, "Invalid"),
            AdmissionError::BadRequest(_) => (400, "BadRequest"),
            AdmissionError::Internal(_) => (500, "InternalError"),
        };
        let mut status = Status::failure(&message, reason).with_code(code);
        if let AdmissionError::Invalid { kind, group, name, causes } = self {
            status.details = Some(StatusDetails {
                name: name.clone(),
                group: group.clone(),
                kind: kind.clone(),
                causes: causes
                    .iter()
                    .map(|c| StatusCause { reason: c.reason.cause(), message: c.body(), field: c.field.clone() })
                    .collect(),
                uid: String::new(),
                retry_after_seconds: 0,
            });
        }
        status
    }

    /// A denying response to `req` with this error's status.
    fn response<K: Resource>(&self, req: &AdmissionRequest<K>) -> AdmissionResponse {
        let status = self.status();
        let mut resp = AdmissionResponse::from(req).deny(&status.message);
        resp.result = status;
        resp
    }
}

/// kube's `NewInvalid` message: `Kind.group "name" is invalid: <errors>`, the errors joined
/// as `utilerrors.NewAggregate` joins them (`[a, b]` when there are several).
fn invalid_message(kind: &str, group: &str, name: &str, causes: &[FieldError]) -> String {
    let qualified = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
    let errors = match causes {
        [] => String::new(),
        [one] => one.to_string(),
        many => format!("[{}]", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
    };
    format!("{qualified} {name:?} is invalid: {errors}")
}

/// The kinds of field error kube's `field.ErrorType` has that webhooks use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorReason {
    /// `Invalid value`: the value is malformed or not allowed.
    Invalid,
    /// `Required value`: the field is missing.
    Required,
    /// `Forbidden`: the field may not be set (or changed).
    Forbidden,
    /// `Duplicate value`: the value repeats one given before.
    Duplicate,
}

impl FieldErrorReason {
    fn text(self) -> &'static str {
        match self {
            FieldErrorReason::Invalid => "Invalid value",
            FieldErrorReason::Required => "Required value",
            FieldErrorReason::Forbidden => "Forbidden",
            FieldErrorReason::Duplicate => "Duplicate value",
        }
    }

    /// The `StatusCause` reason (`FieldValueInvalid`, ...).
    fn cause(self) -> String {
        match self {
            FieldErrorReason::Invalid => "FieldValueInvalid",
            FieldErrorReason::Required => "FieldValueRequired",
            FieldErrorReason::Forbidden => "FieldValueForbidden",
            FieldErrorReason::Duplicate => "FieldValueDuplicate",
        }
        .to_owned()
    }
}

/// One field's problem, displayed as kube's `field.Error` (`spec.to: Invalid value: "x": why`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub reason: FieldErrorReason,
    /// The field's path, e.g. `spec.to`.
    pub field: String,
    /// The offending value (shown for `Invalid` and `Duplicate`).
    pub value: Value,
    /// Why, e.g. `must differ from spec.from`.
    pub detail: String,
}

impl FieldError {
    /// `field: Invalid value: <value>: detail`.
    pub fn invalid(field: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        FieldError {
            reason: FieldErrorReason::Invalid,
            field: field.into(),
            value: value.into(),
            detail: detail.into(),
        }
    }

    /// `field: Required value: detail`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            reason: FieldErrorReason::Required,
            field: field.into(),
            value: Value::Null,
            detail: detail.into(),
        }
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            reason: FieldErrorReason::Forbidden,
            field: field.into(),
            value: Value::Null,
            detail: detail.into(),
        }
    }

    /// `field: Duplicate value: <value>`.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        FieldError {
            reason: FieldErrorReason::Duplicate,
            field: field.into(),
            value: value.into(),
            detail: String::new(),
        }
    }

    /// The message without the field (kube's `ErrorBody`).
    fn body(&self) -> String {
        let mut s = match self.reason {
            FieldErrorReason::Required | FieldErrorReason::Forbidden => self.reason.text().to_owned(),
            FieldErrorReason::Invalid | FieldErrorReason::Duplicate => {
                // Go prints strings quoted (%q), numbers and booleans bare, nil as null and
                // anything else as JSON.
                format!("{}: {}", self.reason.text(), self.value)
            }
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// Defaulting (mutating) webhook logic for `K`, as controller-runtime's `CustomDefaulter`:
/// fill in `obj`; the response carries the JSON patch from the submitted object to `obj`.
/// Called on CREATE and UPDATE. An error denies the request.
///
/// ```
/// use opkit::webhook::{AdmissionContext, AdmissionError, CustomDefaulter};
/// use opkit::k8s_openapi::api::core::v1::ConfigMap;
///
/// struct ModeDefault;
/// impl CustomDefaulter<ConfigMap> for ModeDefault {
///     async fn default(&self, _ctx: &AdmissionContext<'_, ConfigMap>, cm: &mut ConfigMap) -> Result<(), AdmissionError> {
///         cm.data.get_or_insert_with(Default::default).entry("mode".into()).or_insert_with(|| "standard".into());
///         Ok(())
///     }
/// }
/// ```
pub trait CustomDefaulter<K: Resource>: Send + Sync + 'static {
    /// Sets the defaults on `obj` (`ctx.request.object` is the object as submitted).
    fn default(
        &self,
        ctx: &AdmissionContext<'_, K>,
        obj: &mut K,
    ) -> impl Future<Output = Result<(), AdmissionError>> + Send;
}

/// Validating webhook logic for `K`, as controller-runtime's `CustomValidator`: `Ok(warnings)`
/// admits the request (kubectl prints the warnings), an error denies it.
///
/// ```
/// use opkit::webhook::{AdmissionContext, AdmissionError, CustomValidator, FieldError};
/// use opkit::k8s_openapi::api::core::v1::ConfigMap;
///
/// struct NoPasswords;
/// impl CustomValidator<ConfigMap> for NoPasswords {
///     async fn validate_create(&self, _ctx: &AdmissionContext<'_, ConfigMap>, cm: &ConfigMap) -> Result<Vec<String>, AdmissionError> {
///         match cm.data.as_ref().is_some_and(|d| d.contains_key("password")) {
///             true => Err(AdmissionError::invalid(cm, vec![FieldError::forbidden("data.password", "use a Secret")])),
///             false => Ok(Vec::new()),
///         }
///     }
///     async fn validate_update(&self, ctx: &AdmissionContext<'_, ConfigMap>, _old: &ConfigMap, new: &ConfigMap) -> Result<Vec<String>, AdmissionError> {
///         self.validate_create(ctx, new).await
///     }
/// }
/// ```
pub trait CustomValidator<K: Resource>: Send + Sync + 'static {
    /// Validates a new object.
    fn validate_create(
        &self,
        ctx: &AdmissionContext<'_, K>,
        obj: &K,
    ) -> impl Future<Output = Result<Vec<String>, AdmissionError>> + Send;

    /// Validates an update from `old` to `new`.
    fn validate_update(
        &self,
        ctx: &AdmissionContext<'_, K>,
        old: &K,
        new: &K,
    ) -> impl Future<Output = Result<Vec<String>, AdmissionError>> + Send;

    /// Validates the deletion of `obj`; admits by default. (The webhook is called on DELETE
    /// only if its marker's `verbs` include `delete`.)
    fn validate_delete(
        &self,
        ctx: &AdmissionContext<'_, K>,
        obj: &K,
    ) -> impl Future<Output = Result<Vec<String>, AdmissionError>> + Send {
        let _ = (ctx, obj);
        std::future::ready(Ok(Vec::new()))
    }
}

/// Awaits `fut`, turning a panic in user code into a 500 denial.
async fn guarded(
    req: &AdmissionRequest<DynamicObject>,
    fut: impl Future<Output = AdmissionResponse> + Send,
) -> AdmissionResponse {
    std::panic::AssertUnwindSafe(fut)
        .catch_unwind()
        .await
        .unwrap_or_else(|_| AdmissionResponse::from(req).deny_with(500, "InternalError", "webhook handler panicked"))
}

/// Serves a [`CustomDefaulter`].
struct DefaultingHandler<K, D> {
    defaulter: D,
    client: Client,
    _kind: PhantomData<fn() -> K>,
}

impl<K, D> AsyncAdmissionHandler for DefaultingHandler<K, D>
where
    K: Resource + DeserializeOwned + Serialize + Clone + Send + Sync + 'static,
    D: CustomDefaulter<K>,
{
    fn handle<'a>(&'a self, req: &'a AdmissionRequest<DynamicObject>) -> BoxFuture<'a, AdmissionResponse> {
        Box::pin(async move {
            if !matches!(req.operation, Operation::Create | Operation::Update) {
                return AdmissionResponse::allowed(req);
            }
            let (object, old_object) = match decode_objects::<K>(req) {
                Ok((Some(o), old)) => (o, old),
                Ok((None, _)) => {
                    return AdmissionResponse::from(req).deny_with(400, "BadRequest", "request has no object");
                }
                Err(resp) => return *resp,
            };
            let encoded = serde_json::to_value(&req.object).and_then(|raw| Ok((raw, serde_json::to_value(&object)?)));
            let (raw, before) = match encoded {
                Ok(pair) => pair,
                Err(e) => return encode_error(req, e),
            };
            let mut defaulted = object.clone();
            let typed = with_objects(req, Some(object), old_object);
            let ctx = AdmissionContext { request: &typed, client: &self.client };
            let outcome = guarded(req, async {
                match self.defaulter.default(&ctx, &mut defaulted).await {
                    Ok(()) => AdmissionResponse::allowed(req),
                    Err(e) => e.response(req),
                }
            })
            .await;
            if !outcome.allowed {
                return outcome;
            }
            match serde_json::to_value(&defaulted) {
                Ok(after) => patch_response(req, &raw, &before, &after),
                Err(e) => encode_error(req, e),
            }
        })
    }
}

/// Serves a [`CustomValidator`].
struct ValidatingHandler<K, V> {
    validator: V,
    client: Client,
    _kind: PhantomData<fn() -> K>,
}

impl<K, V> AsyncAdmissionHandler for ValidatingHandler<K, V>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    V: CustomValidator<K>,
{
    fn handle<'a>(&'a self, req: &'a AdmissionRequest<DynamicObject>) -> BoxFuture<'a, AdmissionResponse> {
        Box::pin(async move {
            let (object, old_object) = match decode_objects::<K>(req) {
                Ok(pair) => pair,
                Err(resp) => return *resp,
            };
            let typed = with_objects(req, object, old_object);
            let ctx = AdmissionContext { request: &typed, client: &self.client };
            guarded(req, async {
                let result = match (&typed.operation, &typed.object, &typed.old_object) {
                    (Operation::Create, Some(obj), _) => self.validator.validate_create(&ctx, obj).await,
                    (Operation::Update, Some(new), Some(old)) => self.validator.validate_update(&ctx, old, new).await,
                    (Operation::Delete, _, Some(old)) => self.validator.validate_delete(&ctx, old).await,
                    _ => Ok(Vec::new()),
                };
                match result {
                    Ok(warnings) => AdmissionResponse::allowed(req).with_warnings(warnings),
                    Err(e) => e.response(req),
                }
            })
            .await
        })
    }
}

/// The path kubebuilder's markers give a webhook of `K`: `/<prefix>-<group with dots as
/// dashes>-<version>-<kind in lower case>`, e.g. `/validate-flights-com-v1-flightticket`.
pub fn webhook_path<K: Resource<DynamicType = ()>>(prefix: &str) -> String {
    format!("/{prefix}-{}-{}-{}", K::group(&()).replace('.', "-"), K::version(&()), K::kind(&()).to_lowercase())
}

/// Registers the webhooks of one type, as controller-runtime's
/// `ctrl.NewWebhookManagedBy(mgr).For(&T{}).WithDefaulter(..).WithValidator(..).Complete()`.
/// Made by [`Manager::webhook_for`].
///
/// ```no_run
/// # use opkit::webhook::{AdmissionContext, AdmissionError, CustomDefaulter, WebhookServer};
/// # use opkit::k8s_openapi::api::core::v1::ConfigMap;
/// # struct ModeDefault;
/// # impl CustomDefaulter<ConfigMap> for ModeDefault {
/// #     async fn default(&self, _: &AdmissionContext<'_, ConfigMap>, _: &mut ConfigMap) -> Result<(), AdmissionError> { Ok(()) }
/// # }
/// # async fn setup(mgr: opkit::Manager) -> Result<(), Box<dyn std::error::Error>> {
/// let server = mgr.webhook_for::<ConfigMap>().with_defaulter(ModeDefault).complete(WebhookServer::new());
/// assert_eq!(server.paths(), ["/mutate--v1-configmap"]);
/// mgr.add_webhook_server(server)?;
/// # Ok(()) }
/// ```
pub struct WebhookBuilder<K> {
    client: Client,
    defaulter: Option<Arc<dyn AsyncAdmissionHandler>>,
    validator: Option<Arc<dyn AsyncAdmissionHandler>>,
    spokes: Vec<Spoke<K>>,
    converter: Option<Arc<dyn Converter>>,
}

impl<K> WebhookBuilder<K>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Serialize + Clone + Send + Sync + 'static,
{
    /// A builder whose webhooks use `client`.
    pub fn new(client: Client) -> Self {
        WebhookBuilder { client, defaulter: None, validator: None, spokes: Vec::new(), converter: None }
    }

    /// Serves `defaulter` at `/mutate-<group>-<version>-<kind>`.
    #[must_use]
    pub fn with_defaulter<D: CustomDefaulter<K>>(mut self, defaulter: D) -> Self {
        self.defaulter =
            Some(Arc::new(DefaultingHandler { defaulter, client: self.client.clone(), _kind: PhantomData }));
        self
    }

    /// Serves `validator` at `/validate-<group>-<version>-<kind>`.
    #[must_use]
    pub fn with_validator<V: CustomValidator<K>>(mut self, validator: V) -> Self {
        self.validator =
            Some(Arc::new(ValidatingHandler { validator, client: self.client.clone(), _kind: PhantomData }));
        self
    }

    /// Converts the spoke version `S` to and from `K`, the hub, at `/convert` (every spoke of
    /// the kind: call once per spoke).
    #[must_use]
    pub fn with_spoke<S: Convertible<K>>(mut self) -> Self
    where
        K: Hub,
    {
        self.spokes.push(Spoke::of::<S>());
        self.converter = Some(Arc::new(HubConverter::new(self.spokes.clone())));
        self
    }

    /// Adds the webhooks to `server`.
    pub fn complete(self, mut server: WebhookServer) -> WebhookServer {
        if let Some(d) = self.defaulter {
            server = server.async_admission(webhook_path::<K>("mutate"), d);
        }
        if let Some(v) = self.validator {
            server = server.async_admission(webhook_path::<K>("validate"), v);
        }
        if let Some(converter) = self.converter {
            server = server.kind_conversion(K::group(&()).into_owned(), K::kind(&()).into_owned(), converter);
        }
        server
    }
}

impl Manager {
    /// Starts registering the webhooks of `K` with this manager's client (controller-runtime's
    /// `ctrl.NewWebhookManagedBy(mgr).For(&K{})`); see [`WebhookBuilder`].
    pub fn webhook_for<K>(&self) -> WebhookBuilder<K>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Serialize + Clone + Send + Sync + 'static,
    {
        WebhookBuilder::new(self.client())
    }
}
