//! The `authorizer` variable of policy expressions (kube's CEL authz library): checks
//! of what the requesting user (or a ServiceAccount) may do, answered by the server's
//! RBAC authorizer.
//!
//! `authorizer.group('apps').resource('deployments').namespace('ns').name('n').check('update').allowed()`,
//! `authorizer.path('/healthz').check('get')`, `authorizer.serviceAccount(ns, name)`,
//! `authorizer.requestResource.check(verb)`, and on a decision `allowed()`, `reason()`,
//! `errored()`, `error()`. Builders and decisions are CEL maps.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, Value as Cel};

use crate::auth::user::UserInfo;
use crate::authz::attributes::{Action, Object, ResourceAttributes};
use crate::registry::Registry;

type CelResult = Result<Cel, ExecutionError>;

fn key(k: &str) -> Key {
    Key::String(Arc::new(k.to_string()))
}

fn text(v: &Cel, k: &str) -> String {
    match v {
        Cel::Map(m) => match m.map.get(&key(k)) {
            Some(Cel::String(s)) => s.to_string(),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// `v` (a map) with `k` set to `value`.
fn with(v: &Cel, k: &str, value: Cel) -> Cel {
    let mut map: HashMap<Key, Cel> = match v {
        Cel::Map(m) => (*m.map).clone(),
        _ => HashMap::new(),
    };
    map.insert(key(k), value);
    Cel::Map(Map { map: Arc::new(map) })
}

fn string(s: &str) -> Cel {
    Cel::String(Arc::new(s.to_string()))
}

/// The `authorizer` value for a request on `request_resource` (`authorizer.requestResource`).
pub(crate) fn value(request_resource: &ResourceAttributes) -> Cel {
    let r = request_resource;
    let requested = [
        ("group", &r.group),
        ("version", &r.version),
        ("resource", &r.resource),
        ("subresource", &r.subresource),
        ("namespace", &r.namespace),
        ("name", &r.name),
    ]
    .into_iter()
    .fold(Cel::Map(Map { map: Arc::new(HashMap::new()) }), |acc, (k, v)| with(&acc, k, string(v)));
    with(&Cel::Map(Map { map: Arc::new(HashMap::new()) }), "requestResource", requested)
}

/// Registers the builder and decision functions on `ctx`, checking as `user` (or the
/// ServiceAccount a builder names) against `registry`'s authorizer.
pub(crate) fn register(ctx: &mut Context<'static>, registry: &Registry, user: &UserInfo) {
    for field in ["group", "resource", "subresource", "namespace", "name", "path"] {
        ctx.add_function(field, move |This(this): This<Cel>, value: Arc<String>| -> CelResult {
            Ok(with(&this, field, Cel::String(value)))
        });
    }
    ctx.add_function("serviceAccount", |This(this): This<Cel>, ns: Arc<String>, name: Arc<String>| -> CelResult {
        Ok(with(&this, "serviceAccount", string(&format!("system:serviceaccount:{ns}:{name}"))))
    });
    let registry = registry.clone();
    let user = user.clone();
    ctx.add_function("check", move |This(this): This<Cel>, verb: Arc<String>| -> CelResult {
        let who = match text(&this, "serviceAccount") {
            sa if sa.is_empty() => user.clone(),
            sa => {
                let ns = sa.split(':').nth(2).unwrap_or_default().to_string();
                UserInfo {
                    name: sa,
                    groups: vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{ns}"),
                        "system:authenticated".into(),
                    ],
                    ..Default::default()
                }
            }
        };
        let object = match text(&this, "path") {
            path if !path.is_empty() => Object::NonResource { path },
            _ => Object::Resource(ResourceAttributes {
                namespace: text(&this, "namespace"),
                group: text(&this, "group"),
                version: text(&this, "version"),
                resource: text(&this, "resource"),
                subresource: text(&this, "subresource"),
                name: text(&this, "name"),
            }),
        };
        let action = Action { verb: verb.to_string(), object };
        let decision = registry.authorizer().authorize(registry.store(), &who, &action);
        let answer = with(&Cel::Map(Map { map: Arc::new(HashMap::new()) }), "allowed", Cel::Bool(decision.allowed));
        Ok(with(&answer, "reason", string(&decision.reason)))
    });
    ctx.add_function("allowed", |This(this): This<Cel>| -> CelResult {
        Ok(match &this {
            Cel::Map(m) => m.map.get(&key("allowed")).cloned().unwrap_or(Cel::Bool(false)),
            _ => Cel::Bool(false),
        })
    });
    ctx.add_function("reason", |This(this): This<Cel>| -> CelResult { Ok(string(&text(&this, "reason"))) });
    ctx.add_function("errored", |This(_this): This<Cel>| -> CelResult { Ok(Cel::Bool(false)) });
    ctx.add_function("error", |This(_this): This<Cel>| -> CelResult { Ok(string("")) });
}
