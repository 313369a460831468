//! The identity APIs, which store nothing and answer a question when created:
//! `TokenRequest` (`serviceaccounts/token`), `TokenReview`, `SelfSubjectReview`
//! (`kubectl auth whoami`), and the access reviews `SelfSubjectAccessReview`
//! (`kubectl auth can-i`), `SubjectAccessReview`, `LocalSubjectAccessReview` and
//! `SelfSubjectRulesReview` (`kubectl auth can-i --list`).

use bytes::Bytes;
use http::{HeaderMap, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::codec::{self, Body, Output};
use super::route::ResourceRequest;
use crate::auth::tokens::{Claims, ISSUER, KubernetesClaims, ObjectRef};
use crate::auth::{self, UserInfo};
use crate::authz::{Action, Object, ResourceAttributes};
use crate::error::{ApiError, ApiResult};
use crate::schema::FieldError;
use crate::storage::ResourceId;

const AUTHENTICATION: &str = "authentication.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";

/// Whether `req` is a create of one of the identity APIs this module answers.
pub(super) fn answers(req: &ResourceRequest) -> bool {
    matches!(
        (req.group.as_str(), req.resource.as_str(), req.subresource.as_deref()),
        ("", "serviceaccounts", Some("token"))
            | (AUTHENTICATION, "tokenreviews" | "selfsubjectreviews", None)
            | (
                AUTHORIZATION,
                "selfsubjectaccessreviews"
                    | "subjectaccessreviews"
                    | "localsubjectaccessreviews"
                    | "selfsubjectrulesreviews",
                None
            )
    )
}

/// Answers a create of an identity API for `user`.
pub(super) async fn answer(
    state: &AppState,
    user: &UserInfo,
    req: &ResourceRequest,
    method: &http::Method,
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<Response<Body>> {
    if method != http::Method::POST {
        return Err(ApiError::method_not_supported(&req.group, &req.resource, &method.as_str().to_lowercase()));
    }
    let mut review = codec::decode_object(headers, body)?;
    if !review.is_object() {
        return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
    }
    let status = match req.resource.as_str() {
        "serviceaccounts" => return token_request(state, req, review).await,
        "tokenreviews" => token_review(state, &review).await,
        "selfsubjectreviews" => json!({"userInfo": user.to_json()}),
        "selfsubjectaccessreviews" => access_review(state, user, &review, "")?,
        "subjectaccessreviews" => access_review(state, &subject_of(&review)?, &review, "")?,
        "localsubjectaccessreviews" => {
            let namespace = req.namespace.as_deref().unwrap_or_default();
            access_review(state, &subject_of(&review)?, &review, namespace)?
        }
        _ => rules_review(state, user, &review),
    };
    review["status"] = status;
    let meta = review["metadata"].as_object_mut().map(std::mem::take).unwrap_or_default();
    review["metadata"] = Value::Object(created_meta(meta));
    Ok(codec::respond(201, &review, codec::negotiate(headers).unwrap_or(Output::Json), &[]))
}

fn created_meta(mut meta: Map<String, Value>) -> Map<String, Value> {
    meta.insert("creationTimestamp".into(), json!(crate::registry::meta::now_rfc3339()));
    meta
}

fn invalid(kind: &str, field: &str, value: &str, message: &str) -> ApiError {
    ApiError::invalid(AUTHORIZATION, kind, "", &[FieldError::invalid_str(field, value, message)])
}

/// The user a SubjectAccessReview asks about.
fn subject_of(review: &Value) -> ApiResult<UserInfo> {
    let spec = &review["spec"];
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
    };
    let user = UserInfo {
        name: spec["user"].as_str().unwrap_or_default().to_string(),
        uid: spec["uid"].as_str().unwrap_or_default().to_string(),
        groups: strings(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(invalid("SubjectAccessReview", "spec.user", "", "at least one of user or group must be specified"));
    }
    Ok(user)
}

/// The status of an access review of `user`: whether the action in its spec is allowed.
fn access_review(state: &AppState, user: &UserInfo, review: &Value, namespace: &str) -> ApiResult<Value> {
    let kind = review["kind"].as_str().unwrap_or("SubjectAccessReview");
    let spec = &review["spec"];
    let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let action = match (resource.is_object(), non_resource.is_object()) {
        (true, false) => {
            let attributes = ResourceAttributes {
                namespace: text(resource, "namespace"),
                group: text(resource, "group"),
                version: text(resource, "version"),
                resource: text(resource, "resource"),
                subresource: text(resource, "subresource"),
                name: text(resource, "name"),
            };
            if !namespace.is_empty() && attributes.namespace != namespace {
                let given = attributes.namespace.clone();
                return Err(invalid(
                    kind,
                    "spec.resourceAttributes.namespace",
                    &given,
                    "must match metadata.namespace",
                ));
            }
            Action::resource(&text(resource, "verb"), attributes)
        }
        (false, true) => Action {
            verb: text(non_resource, "verb"),
            object: Object::NonResource { path: text(non_resource, "path") },
        },
        _ => {
            return Err(invalid(
                kind,
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    let decision = state.registry.authorizer().authorize(state.registry.store(), user, &action);
    let mut status = json!({"allowed": decision.allowed});
    if !decision.reason.is_empty() {
        status["reason"] = json!(&*decision.reason);
    }
    Ok(status)
}

/// The rules `user` holds in the namespace a SelfSubjectRulesReview names.
fn rules_review(state: &AppState, user: &UserInfo, review: &Value) -> Value {
    let namespace = review["spec"]["namespace"].as_str().unwrap_or_default();
    let (rules, errors) = state.registry.authorizer().rules_for(state.registry.store(), user, namespace);
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in rules {
        if rule.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()) {
            non_resource_rules.push(json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}));
        } else {
            let mut r = json!({"verbs": rule.verbs, "apiGroups": rule.api_groups.unwrap_or_default(),
                "resources": rule.resources.unwrap_or_default()});
            if let Some(names) = rule.resource_names.filter(|n| !n.is_empty()) {
                r["resourceNames"] = json!(names);
            }
            resource_rules.push(r);
        }
    }
    let mut status = json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": !errors.is_empty()});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    status
}

/// The status of a TokenReview: who the token stands for, for the audiences asked.
async fn token_review(state: &AppState, review: &Value) -> Value {
    let token = review["spec"]["token"].as_str().unwrap_or_default();
    let mut audiences: Vec<String> = review["spec"]["audiences"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences.push(ISSUER.to_string());
    }
    match state.auth.review_token(&state.registry, token, &audiences).await {
        Ok(user) => json!({"authenticated": true, "user": user.to_json(), "audiences": audiences}),
        Err(e) => json!({"authenticated": false, "user": {}, "error": e.to_string()}),
    }
}

const DEFAULT_EXPIRATION: i64 = 3600;
const MIN_EXPIRATION: i64 = 600;
const MAX_EXPIRATION: i64 = 1 << 32;

/// `POST serviceaccounts/NAME/token`: a signed token for the ServiceAccount, optionally
/// bound to a pod or secret of its namespace.
async fn token_request(state: &AppState, req: &ResourceRequest, mut request: Value) -> ApiResult<Response<Body>> {
    let namespace = req.namespace.clone().unwrap_or_default();
    let name = req.name.clone().unwrap_or_default();
    let registry = &state.registry;
    let sa = registry
        .stored(&ResourceId::new("", "serviceaccounts"), &namespace, &name)
        .await?
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &name))?;
    let spec = &mut request["spec"];
    if !spec.is_object() {
        *spec = json!({});
    }
    let expiration = spec["expirationSeconds"].as_i64().unwrap_or(DEFAULT_EXPIRATION);
    let too = if expiration < MIN_EXPIRATION {
        Some("may not specify a duration less than 10 minutes")
    } else if expiration > MAX_EXPIRATION {
        Some("may not specify a duration larger than 2^32 seconds")
    } else {
        None
    };
    if let Some(why) = too {
        let e = FieldError::invalid("spec.expirationSeconds", &json!(expiration), why);
        return Err(ApiError::invalid(AUTHENTICATION, "TokenRequest", &name, &[e]));
    }
    spec["expirationSeconds"] = json!(expiration);
    if spec["audiences"].as_array().is_none_or(Vec::is_empty) {
        spec["audiences"] = json!([ISSUER]);
    }
    let audiences: Vec<String> =
        spec["audiences"].as_array().into_iter().flatten().filter_map(|a| a.as_str().map(String::from)).collect();
    let mut claims_k8s = KubernetesClaims {
        namespace: namespace.clone(),
        serviceaccount: ObjectRef {
            name: name.clone(),
            uid: sa["metadata"]["uid"].as_str().unwrap_or_default().into(),
        },
        pod: None,
        secret: None,
    };
    if let Some(bound) = spec.get("boundObjectRef").filter(|b| b.is_object()) {
        let object = bound_object(state, &namespace, &name, bound).await?;
        match bound["kind"].as_str() {
            Some("Pod") => claims_k8s.pod = Some(object),
            _ => claims_k8s.secret = Some(object),
        }
    }
    let now = crate::registry::now_unix();
    let claims = Claims {
        aud: audiences,
        exp: now + expiration,
        iat: now,
        iss: ISSUER.into(),
        jti: uuid::Uuid::new_v4().to_string(),
        nbf: now,
        sub: auth::service_account_user(&namespace, &name),
        kubernetes: claims_k8s,
    };
    let token = state.auth.signer().sign(&claims).map_err(|e| ApiError::internal(e.to_string()))?;
    let expires = jiff::Timestamp::from_second(claims.exp).map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()).ok();
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    let mut meta = created_meta(Map::new());
    meta.insert("name".into(), json!(name));
    meta.insert("namespace".into(), json!(namespace));
    request["metadata"] = Value::Object(meta);
    request["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(codec::respond(201, &request, Output::Json, &[]))
}

/// The pod or secret a token is to be bound to, with its uid.
async fn bound_object(state: &AppState, namespace: &str, sa: &str, bound: &Value) -> ApiResult<ObjectRef> {
    let kind = bound["kind"].as_str().unwrap_or_default();
    let resource = match kind {
        "Pod" => "pods",
        "Secret" => "secrets",
        other => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {sa:?} to object of kind {other:?}: only Pod and Secret are supported"
            )));
        }
    };
    let name = bound["name"].as_str().unwrap_or_default();
    let stored = state
        .registry
        .stored(&ResourceId::new("", resource), namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("", resource, name))?;
    let uid = stored["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    if let Some(wanted) = bound["uid"].as_str().filter(|u| !u.is_empty())
        && wanted != uid
    {
        return Err(ApiError::conflict_msg(
            "",
            resource,
            name,
            format!(
                "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
            Vec::new(),
        ));
    }
    Ok(ObjectRef { name: name.to_string(), uid })
}
