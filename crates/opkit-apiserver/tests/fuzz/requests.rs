//! The fuzzer's request generators (proptest strategies): paths into the seeded objects
//! and beyond, query parameters with valid-looking and hostile values, content types,
//! and bodies.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Value, json};

/// One generated request (its Debug output shows the body as text).
#[derive(Clone)]
pub(crate) struct FuzzRequest {
    pub method: String,
    pub uri: String,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for FuzzRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FuzzRequest")
            .field("method", &self.method)
            .field("uri", &self.uri)
            .field("content_type", &self.content_type)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

/// Collections and their seeded object's name (the first ones have object templates in
/// [`template`]).
const COLLECTIONS: &[(&str, &str)] = &[
    ("/api/v1/namespaces/default/configmaps", "c"),
    ("/api/v1/namespaces/default/secrets", "s"),
    ("/apis/apps/v1/namespaces/default/deployments", "d"),
    ("/api/v1/namespaces/default/pods", "p"),
    ("/api/v1/namespaces/default/services", "svc"),
    ("/apis/flights.com/v1/namespaces/default/flighttickets", "f"),
    ("/api/v1/namespaces", "default"),
    ("/api/v1/nodes", "n"),
    ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "flighttickets.flights.com"),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles", "admin"),
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases", "l"),
    ("/apis/batch/v1/namespaces/default/jobs", "j"),
    ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", "pdb"),
];

const SUBRESOURCES: &[&str] = &["status", "scale", "eviction", "binding", "log", "token", "approval", "exec", "x"];

const OTHER_PATHS: &[&str] = &[
    "/",
    "/api",
    "/apis",
    "/version",
    "/healthz",
    "/readyz?verbose",
    "/openapi/v2",
    "/openapi/v3",
    "/openapi/v3/apis/apps/v1",
    "/apis/apps",
    "/apis/apps/v1",
    "/api/v1",
    "/apis/flights.com/v1",
    "/.well-known/openid-configuration",
    "/openid/v1/jwks",
    "/apis/nope/v9/things",
    "/api/v1/watch/configmaps",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.-]{0,20}",
        any::<String>(),
        Just(String::new()),
        "[a-z]{1,5}".prop_map(|s| s.repeat(80)),
        select(vec!["%2F", "..", ".", "a%00b", "%ZZ", "~", "-", "ä", "a b"]).prop_map(str::to_string),
    ]
}

fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..50).prop_map(|n| n.to_string()),
        Just(i64::MAX.to_string()),
        Just(u64::MAX.to_string()),
        Just("99999999999999999999999".to_string()),
        Just("-1".to_string()),
        Just("1e3".to_string()),
        text(),
    ]
}

fn selector_text() -> impl Strategy<Value = String> {
    let key =
        prop_oneof!["[a-z]{1,8}", "[a-z]{1,5}\\.[a-z]{2,5}/[a-z]{1,8}", "metadata\\.name", "spec\\.nodeName", text()];
    let op = select(vec!["=", "==", "!=", " in ", " notin ", "", "!", ">", "<", " exists"]);
    let value = prop_oneof!["[a-z0-9]{0,8}", "\\([a-z, ]{0,12}\\)", text()];
    prop_oneof![
        vec((key, op, value).prop_map(|(k, o, v)| format!("{k}{o}{v}")), 1..4).prop_map(|t| t.join(",")),
        text()
    ]
}

fn query() -> impl Strategy<Value = String> {
    let param = prop_oneof![
        selector_text().prop_map(|s| ("labelSelector", s)),
        selector_text().prop_map(|s| ("fieldSelector", s)),
        number_text().prop_map(|s| ("resourceVersion", s)),
        select(vec!["Exact", "NotOlderThan", "x", ""]).prop_map(|s| ("resourceVersionMatch", s.to_string())),
        number_text().prop_map(|s| ("limit", s)),
        text().prop_map(|s| ("continue", s)),
        number_text().prop_map(|s| ("timeoutSeconds", s)),
        select(vec!["true", "1", "false", "x"]).prop_map(|s| ("watch", s.to_string())),
        select(vec!["All", "x", ""]).prop_map(|s| ("dryRun", s.to_string())),
        text().prop_map(|s| ("fieldManager", s)),
        select(vec!["Strict", "Warn", "Ignore", "x"]).prop_map(|s| ("fieldValidation", s.to_string())),
        select(vec!["true", "false", "x"]).prop_map(|s| ("force", s.to_string())),
        number_text().prop_map(|s| ("gracePeriodSeconds", s)),
        select(vec!["Orphan", "Background", "Foreground", "x"]).prop_map(|s| ("propagationPolicy", s.to_string())),
        select(vec!["true", "false"]).prop_map(|s| ("allowWatchBookmarks", s.to_string())),
        select(vec!["true", "false"]).prop_map(|s| ("sendInitialEvents", s.to_string())),
        text().prop_map(|s| ("container", s)),
        number_text().prop_map(|s| ("tailLines", s)),
    ];
    vec(param, 0..4).prop_map(|params| {
        let encoded: Vec<String> = params
            .into_iter()
            .map(|(k, v)| {
                format!("{k}={}", percent_encoding::utf8_percent_encode(&v, percent_encoding::NON_ALPHANUMERIC))
            })
            .collect();
        encoded.join("&")
    })
}

fn path() -> impl Strategy<Value = String> {
    let collection = select(COLLECTIONS.to_vec());
    prop_oneof![
        3 => (collection.clone(), any::<bool>(), proptest::option::of(select(SUBRESOURCES.to_vec()))).prop_map(
            |((c, name), named, sub)| match (named, sub) {
                (false, _) => c.to_string(),
                (true, None) => format!("{c}/{name}"),
                (true, Some(s)) => format!("{c}/{name}/{s}"),
            }
        ),
        1 => (collection, text()).prop_map(|((c, _), name)| {
            format!("{c}/{}", percent_encoding::utf8_percent_encode(&name, percent_encoding::NON_ALPHANUMERIC))
        }),
        1 => select(OTHER_PATHS.to_vec()).prop_map(str::to_string),
        1 => vec("[a-zA-Z0-9%._~-]{0,10}", 0..6).prop_map(|segments| format!("/{}", segments.join("/"))),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            vec((prop_oneof!["[a-zA-Z]{1,10}", text()], inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Valid objects of the seeded kinds, for mutation.
fn valid_object() -> impl Strategy<Value = Value> {
    select(vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        json!({"apiVersion": "flights.com/v1", "kind": "FlightTicket", "metadata": {"name": "f"},
               "spec": {"from": "A", "to": "B", "number": 2}}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}, "deleteOptions": {"gracePeriodSeconds": 0}}),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 3}}),
    ])
}

/// A valid object with one value somewhere in it replaced.
fn mutated_object() -> impl Strategy<Value = Value> {
    (valid_object(), vec(any::<prop::sample::Index>(), 1..4), json_value())
        .prop_map(|(obj, picks, value)| replace_somewhere(obj, &picks, value))
}

/// `obj` with the value found by walking down `picks` (a key or index at each level)
/// replaced by `value`.
fn replace_somewhere(mut obj: Value, picks: &[prop::sample::Index], value: Value) -> Value {
    let mut pointer = String::new();
    let mut at = &obj;
    for pick in picks {
        let step = match at {
            Value::Object(m) if !m.is_empty() => m.keys().nth(pick.index(m.len())).cloned(),
            Value::Array(a) if !a.is_empty() => Some(pick.index(a.len()).to_string()),
            _ => None,
        };
        let Some(step) = step else { break };
        pointer.push('/');
        pointer.push_str(&step.replace('~', "~0").replace('/', "~1"));
        match obj.pointer(&pointer) {
            Some(next) => at = next,
            None => break,
        }
    }
    if let Some(slot) = obj.pointer_mut(&pointer) {
        *slot = value;
    }
    obj
}

fn json_patch() -> impl Strategy<Value = Value> {
    let pointer = prop_oneof![
        select(vec![
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/labels/a",
            "/spec/replicas",
            "/data/k",
            "/spec",
            "/spec/template/spec/containers/0",
            "/spec/template/spec/containers/-",
            "/metadata/~1x",
            "/x/y/z"
        ])
        .prop_map(str::to_string),
        text(),
    ];
    let op = (
        select(vec!["add", "remove", "replace", "move", "copy", "test", "bogus"]),
        pointer.clone(),
        pointer,
        json_value(),
    )
        .prop_map(|(op, path, from, value)| json!({"op": op, "path": path, "from": from, "value": value}));
    vec(op, 0..6).prop_map(Value::Array)
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => mutated_object().prop_map(|v| v.to_string().into_bytes()),
        2 => json_patch().prop_map(|v| v.to_string().into_bytes()),
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => valid_object().prop_map(|v| v.to_string().into_bytes()),
        1 => (1usize..400, select(vec!["[", "{\"a\":", "- ", "["])).prop_map(|(n, open)| open.repeat(n).into_bytes()),
        1 => vec(any::<u8>(), 0..200),
        1 => any::<String>().prop_map(String::into_bytes),
        1 => Just(Vec::new()),
    ]
}

fn content_type() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        prop_oneof![
            select(vec![
                "application/json",
                "application/merge-patch+json",
                "application/json-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
                "text/plain",
                "application/json; charset=utf-8",
            ])
            .prop_map(str::to_string),
            text(),
        ]
        .prop_filter("a header value", |s| http::HeaderValue::from_str(s).is_ok()),
    )
}

/// A valid object for the collection at `index` of [`COLLECTIONS`], named `name`.
fn template(index: usize, name: &str) -> Value {
    let meta = json!({"name": name, "labels": {"app": "x"}});
    match index {
        0 => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}),
        1 => json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": {"k": "aGk="}}),
        2 => json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
                             "template": {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        3 => json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "i"}]}}),
        4 => {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 80}], "type": "NodePort"}})
        }
        5 => {
            json!({"apiVersion": "flights.com/v1", "kind": "FlightTicket", "metadata": meta, "spec": {"from": "A", "to": "B", "number": 2}})
        }
        _ => {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {"holderIdentity": "h"}})
        }
    }
}

/// Requests aimed at the objects: a method that fits the path, a body built from a valid
/// object of the collection (as is, with one value replaced, or as a patch).
fn targeted_request() -> impl Strategy<Value = FuzzRequest> {
    let index = 0usize..7;
    let name = select(vec!["c", "s", "d", "p", "svc", "f", "l", "a", "b"]);
    let shape = select(vec![
        ("GET", 0),
        ("POST", 0),
        ("DELETE", 0),
        ("GET", 1),
        ("PUT", 1),
        ("PATCH", 1),
        ("PATCH", 1),
        ("DELETE", 1),
        ("GET", 2),
        ("PUT", 2),
        ("PATCH", 2),
        ("POST", 2),
    ]);
    let mutation = (vec(any::<prop::sample::Index>(), 1..4), json_value(), 0u8..4);
    (index, name, shape, select(SUBRESOURCES.to_vec()), query(), mutation, json_patch()).prop_map(
        |(index, name, (method, depth), sub, query, (picks, value, body_kind), patch)| {
            let (collection, _) = COLLECTIONS[index];
            let path = match depth {
                0 => collection.to_string(),
                1 => format!("{collection}/{name}"),
                _ => format!("{collection}/{name}/{sub}"),
            };
            let object = template(index, name);
            let (content_type, body) = match (method, body_kind) {
                ("PATCH", 0) => ("application/json-patch+json", patch),
                ("PATCH", 1) => ("application/strategic-merge-patch+json", replace_somewhere(object, &picks, value)),
                ("PATCH", 2) => ("application/apply-patch+yaml", object),
                ("PATCH", _) => ("application/merge-patch+json", replace_somewhere(object, &picks, value)),
                (_, 0) => ("application/json", object),
                _ => ("application/json", replace_somewhere(object, &picks, value)),
            };
            let uri = if query.is_empty() { path } else { format!("{path}?{query}") };
            let body = if method == "GET" { Vec::new() } else { body.to_string().into_bytes() };
            FuzzRequest { method: method.to_string(), uri, content_type: Some(content_type.to_string()), body }
        },
    )
}

/// A whole request: aimed at the objects, or anything at all.
pub(crate) fn request() -> impl Strategy<Value = FuzzRequest> {
    prop_oneof![3 => targeted_request(), 2 => any_request()]
}

/// A request with every part drawn independently.
fn any_request() -> impl Strategy<Value = FuzzRequest> {
    let method = select(vec!["GET", "GET", "POST", "PUT", "PATCH", "PATCH", "DELETE", "HEAD", "OPTIONS"]);
    (method, path(), query(), content_type(), body()).prop_map(|(method, path, query, content_type, body)| {
        let uri = if query.is_empty() || path.contains('?') { path } else { format!("{path}?{query}") };
        FuzzRequest { method: method.to_string(), uri, content_type, body }
    })
}
