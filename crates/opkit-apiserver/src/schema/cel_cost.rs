//! The static cost of a CRD's validation rules (CEL), checked as kube-apiserver checks
//! it when a CRD is created or updated, so that no custom resource can make a rule run
//! for seconds. A rule over kube's `StaticEstimatedCostLimit` (10^7), a messageExpression
//! over it, or all of a schema's rules over `StaticEstimatedCRDCostLimit` (10^8) are
//! Forbidden, with kube's messages.
//!
//! The estimate is the `Max` of the `CostEstimate` cel-go's `checker.Cost` computes with
//! kube's estimators, reproduced rule by rule (docs/cel.md lists them):
//! - cel-go's `checker/cost.go`: idents and selects cost 1 (a select only on a map or an
//!   object), constants 0, a list literal 10, a map literal 30; a comprehension costs its
//!   range, init and result plus the range's size times its condition and step; `&&` and
//!   `||` cost their operands, `?:` its condition and the dearer branch; `==`, `!=` and the
//!   string orderings cost a tenth of the smaller operand's size; `+` on strings a tenth of
//!   the result's size; `in` on a list its size; `matches` a tenth of the string (plus one)
//!   times a quarter of the pattern; `contains` the product of both tenths; `startsWith`
//!   a tenth of the prefix; any other call 1. Sizes come from literals, from the schema
//!   along the expression's field path (kube's `sizeEstimator`), and flow through `+`,
//!   `?:`, comprehensions and the library functions that report a result size.
//! - kube's `apiserver/pkg/cel/library/cost.go` for its own functions (lists, regex, url,
//!   ip, cidr, quantity, semver, format, the string extensions it prices) and cel-go's
//!   `ext` estimators for sets and the list extensions.
//! - apiextensions' sizes (`SchemaDeclType`): a string's `maxLength` times 4, else its
//!   longest enum value, else the request size (3 MiB); a list's `maxItems`, else the
//!   request size over its items' smallest serialization; scalars have size 0.
//!   A rule runs once per element of its enclosing lists and maps: the product of their
//!   `maxItems`/`maxProperties` when all declare one, else the request size over the
//!   node's own smallest serialization (kube's `MaxCardinality`).
//!
//! kube-cel has no type checker, so the types that choose a cost (a string or a number
//! compared, a list or a map searched with `in`) are inferred here from the schema, the
//! literals and the functions' result types; where one cannot be known, the estimate is
//! the dearest of the overloads it could be, which is also what cel-go charges for `dyn`.
//!
//! The same walk bounds rules while a request is validated, since the interpreter does
//! not meter cost: before a node's rules run, each rule's cost is estimated with the
//! sizes of the actual value (its lists, maps and strings) in place of the schema's
//! bounds, and a rule over kube's `PerCallLimit` (10^6) is refused without running, as
//! are rules once a request has used kube's `RuntimeCELCostBudget` (10^7).

use std::collections::HashMap;
use std::sync::LazyLock;

use kube_cel::cel::common::ast::{
    ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, SelectExpr,
};
use serde_json::{Value, json};

use super::errors::FieldError;

/// kube's `MaxRequestSizeBytes`, which bounds every unbounded list, map and string.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// kube's `StaticEstimatedCostLimit`: one rule, times the times it runs.
const PER_RULE_LIMIT: u64 = 10_000_000;
/// kube's `StaticEstimatedCRDCostLimit`: all the rules of one schema.
const PER_SCHEMA_LIMIT: u64 = 100_000_000;
/// kube's `PerCallLimit`: one rule evaluated on one value.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`: every rule evaluated for one request.
const PER_REQUEST_BUDGET: u64 = 10_000_000;
/// cel-go's `StringTraversalCostFactor`.
const TRAVERSAL: f64 = 0.1;
/// cel-go's `RegexStringLengthCostFactor`.
const REGEX_FACTOR: f64 = 0.25;
/// cel-go's `ListCreateBaseCost`, `MapCreateBaseCost` and `StructCreateBaseCost`.
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
/// Stack left under which the estimator's recursion moves to a new stack.
const STACK_RED_ZONE: usize = 256 << 10;
/// kube's `MaxFormatSize` and `MaxNameFormatRegexSize`.
const MAX_FORMAT_SIZE: u64 = 64;
const MAX_NAME_FORMAT_REGEX_SIZE: f64 = 128.0;

/// The Forbidden errors of the rules in `schema` (a version's `openAPIV3Schema`, found at
/// `path`) whose estimated cost is over kube's limits.
pub(crate) fn cost_errors(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut walk = Walk { errors: Vec::new(), total: 0, most_expensive: Vec::new() };
    walk.node(schema, Some(Decl::new(schema, true)), path, Some(1));
    if walk.total > PER_SCHEMA_LIMIT {
        for (rule, _) in std::mem::take(&mut walk.most_expensive) {
            let message = "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema";
            walk.errors.push(FieldError::forbidden(&rule, message));
        }
        let message = exceeds(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            walk.total,
            PER_SCHEMA_LIMIT,
        );
        walk.errors.push(FieldError::forbidden(path, &message));
    }
    walk.errors
}

/// kube's `getCostErrorMessage`.
fn exceeds(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The estimated `MaxCost` of one expression (a rule or a messageExpression) of a node.
fn expression_cost(decl: Decl<'_>, text: &str) -> Option<u64> {
    if text.trim().is_empty() {
        return None;
    }
    // A rule nested too deep is refused by the compilation (`cel_depth`).
    let (program, _) = super::cel_depth::parse(text).ok()?;
    Some(Coster::new(decl, None).cost(program.expression()))
}

/// kube's CRD validation walk (`CELSchemaContext`): each node's rules, times the node's
/// cardinality, summed over the schema.
struct Walk {
    errors: Vec<FieldError>,
    total: u64,
    /// kube's `TotalCost.MostExpensive`: the four dearest rules over 1% of the limit.
    most_expensive: Vec<(String, u64)>,
}

impl Walk {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < PER_SCHEMA_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|r| std::cmp::Reverse(r.1));
        self.most_expensive.truncate(4);
    }

    /// Checks the rules of `node` (its CEL type `decl`, found at `path`, run `cardinality`
    /// times per object, `None` when unbounded) and of its descendants.
    fn node(&mut self, node: &Value, decl: Option<Decl<'_>>, path: &str, cardinality: Option<u64>) {
        let rules = node["x-kubernetes-validations"].as_array().map_or(&[][..], Vec::as_slice);
        // A node kube cannot type has no cost: its rules fail to compile.
        if let Some(decl) = decl.filter(|_| !rules.is_empty()) {
            // kube's `maxCardinality(declType.MinSerializedSize)` when unbounded.
            let per_object = cardinality.unwrap_or_else(|| MAX_REQUEST_BYTES / (decl.min_size() + 1));
            for (i, rule) in rules.iter().enumerate() {
                let at = format!("{path}.x-kubernetes-validations[{i}]");
                if let Some(cost) = rule["rule"].as_str().and_then(|r| expression_cost(decl, r)) {
                    let cost = cost.saturating_mul(per_object);
                    if cost > PER_RULE_LIMIT {
                        let message = exceeds("estimated rule cost", cost, PER_RULE_LIMIT);
                        self.errors.push(FieldError::forbidden(&format!("{at}.rule"), &message));
                    }
                    self.observe(format!("{at}.rule"), cost);
                }
                // A messageExpression is not multiplied by the cardinality (as kube).
                if let Some(cost) = rule["messageExpression"].as_str().and_then(|r| expression_cost(decl, r)) {
                    if cost > PER_RULE_LIMIT {
                        let message = exceeds("estimated messageExpression cost", cost, PER_RULE_LIMIT);
                        self.errors.push(FieldError::forbidden(&format!("{at}.messageExpression"), &message));
                    }
                    self.observe(format!("{at}.messageExpression"), cost);
                }
            }
        }
        // kube's `childContext`: the parent's cardinality times its `extractMaxElements`.
        let child_cardinality = cardinality.zip(max_elements(node)).map(|(c, m)| c.saturating_mul(m));
        for (key, child) in node["properties"].as_object().into_iter().flatten() {
            let from_parent = decl.and_then(|d| d.field_named(key));
            let child_decl = from_parent.or_else(|| Decl::new(child, embedded(child)).exists());
            self.node(child, child_decl, &format!("{path}.properties[{key}]"), child_cardinality);
        }
        if node["items"].is_object() {
            let child = &node["items"];
            let child_decl = decl.and_then(Decl::elem).or_else(|| Decl::new(child, embedded(child)).exists());
            self.node(child, child_decl, &format!("{path}.items"), child_cardinality);
        }
        if node["additionalProperties"].is_object() {
            let child = &node["additionalProperties"];
            let child_decl = decl.and_then(Decl::elem).or_else(|| Decl::new(child, embedded(child)).exists());
            self.node(child, child_decl, &format!("{path}.additionalProperties"), child_cardinality);
        }
    }
}

/// kube's `extractMaxElements`: how many children a node's children are per node
/// (`None`: unbounded).
fn max_elements(node: &Value) -> Option<u64> {
    match node["type"].as_str() {
        Some("object") if node.get("additionalProperties").is_some_and(|a| !a.is_null()) => {
            node["maxProperties"].as_i64().map(|m| m.max(0) as u64)
        }
        Some("array") => node["maxItems"].as_i64().map(|m| m.max(0) as u64),
        _ => Some(1),
    }
}

fn embedded(node: &Value) -> bool {
    node["x-kubernetes-embedded-resource"] == true
}

// ---------------------------------------------------------------------------------------
// Schema types: kube's `SchemaDeclType`, read lazily from the schema JSON.

/// The schema of a map's keys: a string of size 0 (kube's `StringType`, whose
/// `MaxElements` is never set).
static KEY_SCHEMA: LazyLock<Value> = LazyLock::new(|| json!({"type": "string", "maxLength": 0}));
/// What kube's `WithTypeAndObjectMeta` puts on a resource root: `kind`, `apiVersion` and
/// a `metadata` with `name` and `generateName`.
static STRING_SCHEMA: LazyLock<Value> = LazyLock::new(|| json!({"type": "string"}));
static META_SCHEMA: LazyLock<Value> = LazyLock::new(
    || json!({"type": "object", "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}}}),
);

/// The kinds of kube's `DeclType`s a schema maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `x-kubernetes-int-or-string`.
    Dyn,
    List,
    Map,
    Object,
    String,
    Bytes,
    Duration,
    Date,
    DateTime,
    Bool,
    Double,
    Int,
}

/// One schema node as kube's CEL type of it (`root`: a resource root, which always has
/// `kind`, `apiVersion` and `metadata`).
#[derive(Clone, Copy, Debug)]
struct Decl<'a> {
    schema: &'a Value,
    root: bool,
}

impl<'a> Decl<'a> {
    fn new(schema: &'a Value, root: bool) -> Self {
        Decl { schema, root }
    }

    /// Itself, if kube can type it (`SchemaDeclType` is not nil).
    fn exists(self) -> Option<Self> {
        self.kind().map(|_| self)
    }

    fn kind(self) -> Option<Kind> {
        let s = self.schema;
        if s["x-kubernetes-int-or-string"] == true {
            return Some(Kind::Dyn);
        }
        Some(match s["type"].as_str()? {
            "array" => {
                Decl::new(&s["items"], embedded(&s["items"])).exists()?;
                Kind::List
            }
            "object" if s["additionalProperties"].is_object() => {
                let ap = &s["additionalProperties"];
                Decl::new(ap, embedded(ap)).exists()?;
                Kind::Map
            }
            "object" => Kind::Object,
            "string" => match s["format"].as_str() {
                Some("byte") => Kind::Bytes,
                Some("duration") => Kind::Duration,
                Some("date") => Kind::Date,
                Some("date-time") => Kind::DateTime,
                _ => Kind::String,
            },
            "boolean" => Kind::Bool,
            "number" => Kind::Double,
            "integer" => Kind::Int,
            _ => return None,
        })
    }

    /// A list's items or a map's values.
    fn elem(self) -> Option<Self> {
        let child = match self.kind()? {
            Kind::List => &self.schema["items"],
            Kind::Map => &self.schema["additionalProperties"],
            _ => return None,
        };
        Some(Decl::new(child, embedded(child)))
    }

    /// A map's keys.
    fn key(self) -> Option<Self> {
        (self.kind()? == Kind::Map).then(|| Decl::new(&KEY_SCHEMA, false))
    }

    /// Whether kube's `WithTypeAndObjectMeta` leaves this root's properties as they are.
    fn has_type_and_meta(self) -> bool {
        let p = &self.schema["properties"];
        let string = |v: &Value| v["type"] == "string";
        string(&p["kind"])
            && string(&p["apiVersion"])
            && p["metadata"]["type"] == "object"
            && string(&p["metadata"]["properties"]["name"])
            && string(&p["metadata"]["properties"]["generateName"])
    }

    /// The object's fields kube types: (property name, CEL field name, type).
    fn fields(self) -> Vec<(&'a str, String, Decl<'a>)> {
        let mut out = Vec::new();
        let inject = self.root && !self.has_type_and_meta();
        for (name, prop) in self.schema["properties"].as_object().into_iter().flatten() {
            if inject && matches!(name.as_str(), "kind" | "apiVersion" | "metadata") {
                continue;
            }
            let Some(decl) = Decl::new(prop, embedded(prop)).exists() else { continue };
            if let Some(escaped) = escape(name) {
                out.push((name.as_str(), escaped, decl));
            }
        }
        if inject {
            for (name, schema) in
                [("kind", &*STRING_SCHEMA), ("apiVersion", &*STRING_SCHEMA), ("metadata", &*META_SCHEMA)]
            {
                out.push((name, name.to_string(), Decl::new(schema, false)));
            }
        }
        out
    }

    /// The field whose CEL name is `cel_name`, with its property name.
    fn field(self, cel_name: &str) -> Option<(&'a str, Decl<'a>)> {
        if self.kind()? != Kind::Object {
            return None;
        }
        self.fields().into_iter().find(|(_, escaped, _)| escaped == cel_name).map(|(name, _, d)| (name, d))
    }

    /// The field of property `name`.
    fn field_named(self, name: &str) -> Option<Decl<'a>> {
        if self.kind()? != Kind::Object {
            return None;
        }
        self.fields().into_iter().find(|(n, _, _)| *n == name).map(|(_, _, d)| d)
    }

    /// kube's `MaxElements`: the largest size (characters, items, entries) a value has.
    fn max_elements(self) -> u64 {
        let s = self.schema;
        let max_length = s["maxLength"].as_i64().map(|m| m.max(0) as u64);
        let unbounded = MAX_REQUEST_BYTES - 2;
        match self.kind() {
            Some(Kind::Dyn) => max_length.map_or(unbounded, |m| m.saturating_mul(4)),
            Some(Kind::List) => s["maxItems"]
                .as_i64()
                .map_or_else(|| unbounded / (self.elem().map_or(1, Decl::min_size) + 1), |m| m.max(0) as u64),
            Some(Kind::Map) => s["maxProperties"]
                .as_i64()
                .map_or_else(|| unbounded / (self.elem().map_or(1, Decl::min_size) + 6), |m| m.max(0) as u64),
            Some(Kind::Bytes) => max_length.unwrap_or(unbounded),
            Some(Kind::Duration | Kind::DateTime) => 32,
            Some(Kind::Date) => 12,
            Some(Kind::String) => match max_length {
                Some(m) => m.saturating_mul(4),
                None => match s["enum"].as_array().filter(|e| !e.is_empty()) {
                    Some(values) => values.iter().filter_map(Value::as_str).map(|v| v.len() as u64).max().unwrap_or(0),
                    None => unbounded,
                },
            },
            _ => 0,
        }
    }

    /// kube's `MinSerializedSize`: the fewest bytes a value takes in JSON.
    fn min_size(self) -> u64 {
        match self.kind() {
            Some(Kind::Dyn | Kind::Double | Kind::Int) => 1,
            Some(Kind::List | Kind::Map | Kind::String | Kind::Bytes) => 2,
            Some(Kind::Duration) => 3,
            Some(Kind::Date) => 12,
            Some(Kind::DateTime) => 21,
            Some(Kind::Bool) => 4,
            Some(Kind::Object) => {
                let required: Vec<&str> =
                    self.schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                let mut size = 2u64;
                // Every typed property counts, escapable or not (as kube).
                let inject = self.root && !self.has_type_and_meta();
                for (name, prop) in self.schema["properties"].as_object().into_iter().flatten() {
                    let prop = match name.as_str() {
                        "kind" | "apiVersion" if inject => &*STRING_SCHEMA,
                        "metadata" if inject => &*META_SCHEMA,
                        _ => prop,
                    };
                    let Some(decl) = Decl::new(prop, embedded(prop)).exists() else { continue };
                    if required.contains(&name.as_str()) && prop.get("default").is_none() {
                        size = size.saturating_add(name.len() as u64 + decl.min_size() + 4);
                    }
                }
                size
            }
            None => 1,
        }
    }
}

/// Words CEL reserves: no variable or property may be named one as it is.
pub(crate) const CEL_RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// kube's `Escape`: the CEL name of a property (`None`: it has none and is not visible).
fn escape(ident: &str) -> Option<String> {
    if ident.is_empty() || ident.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if CEL_RESERVED.contains(&ident) {
        return Some(format!("__{ident}__"));
    }
    if !ident.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')) {
        return None;
    }
    let mut out = String::with_capacity(ident.len());
    let mut chars = ident.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c => out.push(c),
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Sizes and types.

/// cel-go's `SizeEstimate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Size {
    min: u64,
    max: u64,
}

const UNKNOWN: Size = Size { min: 0, max: u64::MAX };

impl Size {
    fn fixed(n: u64) -> Size {
        Size { min: n, max: n }
    }
    fn add(self, o: Size) -> Size {
        Size { min: self.min.saturating_add(o.min), max: self.max.saturating_add(o.max) }
    }
    fn mul(self, o: Size) -> Size {
        Size { min: self.min.saturating_mul(o.min), max: self.max.saturating_mul(o.max) }
    }
    fn union(self, o: Size) -> Size {
        Size { min: self.min.min(o.min), max: self.max.max(o.max) }
    }
    /// cel-go's `MultiplyByCostFactor`, the `Max` of it.
    fn times(self, factor: f64) -> u64 {
        by_factor(self.max, factor)
    }
}

/// cel-go's `multiplyByCostFactor`: `x * y` rounded up, saturating.
fn by_factor(x: u64, y: f64) -> u64 {
    let x = x as f64;
    if x > 0.0 && y > 0.0 && x > u64::MAX as f64 / y {
        return u64::MAX;
    }
    let ceil = (x * y).ceil();
    if ceil >= 18_446_744_073_709_551_616.0 { u64::MAX } else { ceil as u64 }
}

/// cel-go's `entrySizeEstimate`: the sizes of a literal or computed container's entries.
#[derive(Clone, Copy, Debug)]
struct Entry {
    list: bool,
    key: Size,
    val: Size,
}

impl Entry {
    fn union(a: Option<Entry>, b: Option<Entry>) -> Option<Entry> {
        let (a, b) = (a?, b?);
        Some(Entry { list: a.list, key: a.key.union(b.key), val: a.val.union(b.val) })
    }
}

/// The types kube's functions are priced by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opaque {
    Quantity,
    Url,
    Ip,
    Cidr,
    Semver,
    Format,
}

/// What cel-go's checker would deduce of an expression, as far as costs depend on it.
/// `Unknown` is what this inference cannot tell (not cel-go's `dyn`).
#[derive(Clone, Debug)]
enum Ty<'a> {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    Type,
    Dyn,
    Unknown,
    List(Box<Ty<'a>>),
    Map(Box<Ty<'a>>, Box<Ty<'a>>),
    Object(Decl<'a>),
    Optional(Box<Ty<'a>>),
    Opaque(Opaque),
}

impl<'a> Ty<'a> {
    fn of(decl: Decl<'a>) -> Ty<'a> {
        match decl.kind() {
            Some(Kind::Dyn) => Ty::Dyn,
            Some(Kind::List) => Ty::List(Box::new(decl.elem().map_or(Ty::Unknown, Ty::of))),
            Some(Kind::Map) => Ty::Map(Box::new(Ty::String), Box::new(decl.elem().map_or(Ty::Unknown, Ty::of))),
            Some(Kind::Object) => Ty::Object(decl),
            Some(Kind::String) => Ty::String,
            Some(Kind::Bytes) => Ty::Bytes,
            Some(Kind::Duration) => Ty::Duration,
            Some(Kind::Date | Kind::DateTime) => Ty::Timestamp,
            Some(Kind::Bool) => Ty::Bool,
            Some(Kind::Double) => Ty::Double,
            Some(Kind::Int) => Ty::Int,
            None => Ty::Unknown,
        }
    }

    /// cel-go's `isScalar`: values of a fixed size (1).
    fn is_scalar(&self) -> bool {
        match self {
            Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::Duration | Ty::Timestamp => true,
            Ty::Optional(inner) => inner.is_scalar(),
            _ => false,
        }
    }

    /// Not known (this inference's `Unknown`, or cel-go's `dyn`): any overload may apply.
    fn open(&self) -> bool {
        matches!(self, Ty::Unknown | Ty::Dyn)
    }

    fn is_string(&self) -> bool {
        matches!(self, Ty::String | Ty::Bytes)
    }

    fn is_list(&self) -> bool {
        matches!(self, Ty::List(_))
    }

    fn elem(&self) -> Ty<'a> {
        match self {
            Ty::List(e) | Ty::Map(_, e) => (**e).clone(),
            Ty::Dyn => Ty::Dyn,
            _ => Ty::Unknown,
        }
    }

    fn join(a: Ty<'a>, b: Ty<'a>) -> Ty<'a> {
        match (a, b) {
            (Ty::Unknown, b) => b,
            (a, Ty::Unknown) => a,
            (Ty::List(a), Ty::List(b)) => Ty::List(Box::new(Ty::join(*a, *b))),
            (a, b) if std::mem::discriminant(&a) == std::mem::discriminant(&b) => a,
            _ => Ty::Dyn,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The estimator: cel-go's `coster`.

/// A variable in scope: cel-go's `localVar`.
#[derive(Clone)]
struct Local<'a> {
    path: Vec<String>,
    size: Option<Size>,
    entry: Option<Entry>,
    ty: Ty<'a>,
}

/// A call's target or argument as the estimators see it: cel-go's `AstNode`.
struct Node<'e, 'a> {
    expr: &'e IdedExpr,
    /// The field path, without accumulator-rooted paths (cel-go's `newAstNode`).
    path: Vec<String>,
    ty: Ty<'a>,
    size: Option<Size>,
}

impl Node<'_, '_> {
    fn size_or_unknown(&self) -> Size {
        self.size.unwrap_or(UNKNOWN)
    }
    fn int_literal(&self) -> Option<i64> {
        match &self.expr.expr {
            Expr::Literal(LiteralValue::Int(i)) => Some(**i),
            _ => None,
        }
    }
}

/// A call's own estimate, before its target's cost: cel-go's `CallEstimate`.
struct Call<'a> {
    cost: u64,
    size: Option<Size>,
    ty: Ty<'a>,
}

struct Coster<'a> {
    /// The rule's node (`self`), whose type resolves every field path (kube's `root`).
    root: Decl<'a>,
    /// At runtime, the value being validated: sizes are the value's own.
    value: Option<&'a Value>,
    paths: HashMap<u64, Vec<String>>,
    sizes: HashMap<u64, Size>,
    entries: HashMap<u64, Entry>,
    types: HashMap<u64, Ty<'a>>,
    locals: HashMap<String, Vec<Local<'a>>>,
}

/// Namespaces of qualified function names (`ip.isCanonical`, `sets.contains`, ...).
const NAMESPACES: [&str; 10] =
    ["ip", "cidr", "format", "strings", "sets", "lists", "math", "optional", "cel", "base64"];

/// The kube library functions `EstimateCallCost` charges 1: the authorizer's accessors,
/// the IP and CIDR accessors, `format.named`, the quantity and semver comparisons and
/// accessors, and the URL accessors.
const UNIT_COST_FUNCTIONS: &[&str] = &[
    "serviceAccount",
    "path",
    "group",
    "resource",
    "subresource",
    "namespace",
    "name",
    "allowed",
    "reason",
    "error",
    "errored",
    "masked",
    "prefixLength",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "format.named",
    "sign",
    "asInteger",
    "isInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "add",
    "sub",
    "major",
    "minor",
    "patch",
    "getScheme",
    "getHostname",
    "getHost",
    "getPort",
    "getEscapedPath",
    "getQuery",
];

impl<'a> Coster<'a> {
    fn new(root: Decl<'a>, value: Option<&'a Value>) -> Self {
        Coster {
            root,
            value,
            paths: HashMap::new(),
            sizes: HashMap::new(),
            entries: HashMap::new(),
            types: HashMap::new(),
            locals: HashMap::new(),
        }
    }

    fn ty(&self, e: &IdedExpr) -> Ty<'a> {
        self.types.get(&e.id).cloned().unwrap_or(Ty::Unknown)
    }

    fn local(&self, name: &str) -> Option<&Local<'a>> {
        self.locals.get(name).and_then(|s| s.last())
    }

    fn push_local(&mut self, name: &str, local: Local<'a>) {
        self.locals.entry(name.to_string()).or_default().push(local);
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(stack) = self.locals.get_mut(name) {
            stack.pop();
        }
    }

    /// cel-go's `getPath`.
    fn path(&self, e: &IdedExpr) -> Vec<String> {
        if let Expr::Ident(name) = &e.expr
            && let Some(local) = self.local(name)
        {
            return local.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    /// kube's `sizeEstimator.EstimateSize`: the size of what `path` leads to from the
    /// rule's node (any variable stands for the node, as in kube).
    fn resolve(&self, path: &[String]) -> Option<Size> {
        if path.is_empty() {
            return None;
        }
        let mut decl = self.root;
        let mut values: Option<Vec<&'a Value>> = self.value.map(|v| vec![v]);
        for seg in &path[1..] {
            match seg.as_str() {
                "@items" | "@values" => {
                    decl = decl.elem()?;
                    values = values.map(|vs| {
                        vs.into_iter()
                            .flat_map(|v| match v {
                                Value::Array(a) => a.iter().collect::<Vec<_>>(),
                                Value::Object(m) => m.values().collect(),
                                _ => Vec::new(),
                            })
                            .collect()
                    });
                }
                "@keys" => {
                    decl = decl.key()?;
                    // Keys are priced by the schema's size for them (0) at runtime too.
                    values = None;
                }
                field => {
                    let (name, d) = decl.field(field)?;
                    decl = d;
                    values = values.map(|vs| vs.into_iter().filter_map(|v| v.get(name)).collect());
                }
            }
        }
        let sized = matches!(decl.kind(), Some(Kind::String | Kind::Bytes | Kind::List | Kind::Map | Kind::Dyn));
        match values {
            Some(values) if sized => {
                let actual = values.iter().map(|v| actual_size(v)).max().unwrap_or(0);
                Some(Size { min: 0, max: actual })
            }
            _ => Some(Size { min: 0, max: decl.max_elements() }),
        }
    }

    /// cel-go's `computeSize`.
    fn size(&mut self, e: &IdedExpr) -> Option<Size> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = literal_size(e) {
            return Some(s);
        }
        if let Some(s) = self.resolve(&self.path(e)) {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if self.ty(e).is_scalar() {
            return Some(Size::fixed(1));
        }
        match &e.expr {
            Expr::Ident(name) => self.local(name).and_then(|l| l.size),
            _ => None,
        }
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Size {
        self.size(e).unwrap_or(UNKNOWN)
    }

    /// cel-go's `computeEntrySize`.
    fn entry(&self, e: &IdedExpr) -> Option<Entry> {
        if let Some(entry) = self.entries.get(&e.id) {
            return Some(*entry);
        }
        match &e.expr {
            Expr::Ident(name) => self.local(name).and_then(|l| l.entry),
            _ => None,
        }
    }

    fn node<'e>(&mut self, e: &'e IdedExpr) -> Node<'e, 'a> {
        let mut path = self.path(e);
        if path.first().is_some_and(|p| p == "@result" || p == "__result__") {
            path.clear();
        }
        let size = self.size(e);
        Node { expr: e, path, ty: self.ty(e), size }
    }

    /// kube's `sizeEstimate` (and cel-go ext's `estimateSize`).
    fn estimate_size(&self, n: &Node<'_, '_>) -> Size {
        n.size.or_else(|| self.resolve(&n.path)).unwrap_or(UNKNOWN)
    }

    /// The `Max` of cel-go's `coster.cost`. It recurses once per level of the tree (up
    /// to 250 levels, `cel_depth`), on a stack grown when the caller's runs low.
    fn cost(&mut self, e: &IdedExpr) -> u64 {
        stacker::maybe_grow(STACK_RED_ZONE, super::cel_depth::DEEP_STACK, || self.cost_of(e))
    }

    fn cost_of(&mut self, e: &IdedExpr) -> u64 {
        match &e.expr {
            Expr::Literal(lit) => {
                self.types.insert(e.id, literal_ty(lit));
                0
            }
            Expr::Ident(name) => {
                let (path, ty) = match self.local(name) {
                    Some(local) => (local.path.clone(), local.ty.clone()),
                    None => (vec![name.clone()], self.ident_ty(name)),
                };
                self.paths.insert(e.id, path);
                self.types.insert(e.id, ty);
                1
            }
            // A select chain on an undeclared name (`google.protobuf.Timestamp`) is one
            // qualified identifier to cel-go's checker: cost 1, its path the name.
            Expr::Select(select) if !select.test && self.qualified_name(e).is_some() => {
                let name = self.qualified_name(e).unwrap_or_default();
                self.types.insert(e.id, Ty::Type);
                self.paths.insert(e.id, vec![name]);
                1
            }
            Expr::Select(select) => self.select_cost(e, select),
            Expr::Call(call) => self.cost_call(e, &call.func_name, call.target.as_deref(), &call.args),
            Expr::List(list) => self.list_literal_cost(e, list),
            Expr::Map(map) => self.map_literal_cost(e, map),
            Expr::Struct(s) => {
                let mut sum = STRUCT_CREATE;
                for entry in &s.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        sum = sum.saturating_add(self.cost(&field.value));
                    }
                }
                sum
            }
            Expr::Comprehension(c) => self.comprehension_cost(e, c),
            Expr::Unspecified => 0,
        }
    }

    /// A field select `a.b`, or a presence test `has(a.b)`.
    fn select_cost(&mut self, e: &IdedExpr, select: &SelectExpr) -> u64 {
        let operand = self.cost(&select.operand);
        if select.test {
            // kube sets `PresenceTestHasCost(false)`: has() costs its operand only.
            self.types.insert(e.id, Ty::Bool);
            return operand;
        }
        let operand_ty = self.ty(&select.operand);
        // One for the select itself on a map or an object (assumed when unknown).
        let own = u64::from(!matches!(operand_ty, Ty::Dyn) && (operand_ty.open() || is_struct_or_map(&operand_ty)));
        let ty = match &operand_ty {
            Ty::Object(d) => d.field(&select.field).map_or(Ty::Unknown, |(_, f)| Ty::of(f)),
            Ty::Map(_, v) => (**v).clone(),
            Ty::Dyn => Ty::Dyn,
            _ => Ty::Unknown,
        };
        let mut path = self.path(&select.operand);
        path.push(select.field.clone());
        self.paths.insert(e.id, path);
        self.types.insert(e.id, ty);
        operand.saturating_add(own)
    }

    /// A list literal `[a, b]`: its elements plus the list's creation.
    fn list_literal_cost(&mut self, e: &IdedExpr, list: &ListExpr) -> u64 {
        let mut sum = 0u64;
        let mut item = Size { min: u64::MAX, max: 0 };
        if list.elements.is_empty() {
            item.min = 0;
        }
        let mut ty = Ty::Unknown;
        for el in &list.elements {
            sum = sum.saturating_add(self.cost(el));
            item = item.union(self.size_or_unknown(el));
            ty = Ty::join(ty, self.ty(el));
        }
        self.entries.insert(e.id, Entry { list: true, key: Size::fixed(1), val: item });
        self.types.insert(e.id, Ty::List(Box::new(ty)));
        sum.saturating_add(LIST_CREATE)
    }

    /// A map literal `{k: v}`: its keys and values plus the map's creation.
    fn map_literal_cost(&mut self, e: &IdedExpr, map: &MapExpr) -> u64 {
        let mut sum = 0u64;
        let mut keys = Size { min: u64::MAX, max: 0 };
        let mut vals = Size { min: u64::MAX, max: 0 };
        if map.entries.is_empty() {
            keys.min = 0;
            vals.min = 0;
        }
        let (mut kt, mut vt) = (Ty::Unknown, Ty::Unknown);
        for entry in &map.entries {
            if let EntryExpr::MapEntry(entry) = &entry.expr {
                sum = sum.saturating_add(self.cost(&entry.key)).saturating_add(self.cost(&entry.value));
                keys = keys.union(self.size_or_unknown(&entry.key));
                vals = vals.union(self.size_or_unknown(&entry.value));
                kt = Ty::join(kt, self.ty(&entry.key));
                vt = Ty::join(vt, self.ty(&entry.value));
            }
        }
        self.entries.insert(e.id, Entry { list: false, key: keys, val: vals });
        self.types.insert(e.id, Ty::Map(Box::new(kt), Box::new(vt)));
        sum.saturating_add(MAP_CREATE)
    }

    /// cel-go's `costComprehension`: range, init and result, plus the range's size times
    /// the loop's condition and step.
    fn comprehension_cost(&mut self, e: &IdedExpr, c: &ComprehensionExpr) -> u64 {
        let mut sum = self.cost(&c.iter_range).saturating_add(self.cost(&c.accu_init));
        let accu = self.local_for(&c.accu_init);
        self.push_local(&c.accu_var, accu);
        self.push_iter_vars(c);
        let per_element = self.cost(&c.loop_cond).saturating_add(self.cost(&c.loop_step));
        self.pop_local(&c.iter_var);
        if let Some(var2) = &c.iter_var2 {
            self.pop_local(var2);
        }
        sum = sum.saturating_add(self.cost(&c.result));
        self.pop_local(&c.accu_var);
        let count = self.size_or_unknown(&c.iter_range);
        sum = sum.saturating_add(count.max.saturating_mul(per_element));
        self.record_comprehension_result(e, c, count);
        sum
    }

    /// Binds a comprehension's iteration variables to the range's elements (or keys):
    /// their paths under the range's, their sizes from its entries.
    fn push_iter_vars(&mut self, c: &ComprehensionExpr) {
        let range_ty = self.ty(&c.iter_range);
        let range_entry = self.entry(&c.iter_range);
        let is_list = range_entry.map_or(range_ty.is_list() || range_ty.open(), |en| en.list);
        let range_path = self.path(&c.iter_range);
        let at = |sub: &str| {
            let mut p = range_path.clone();
            p.push(sub.to_string());
            p
        };
        let (key_ty, val_ty) = match &range_ty {
            Ty::List(t) => (Ty::Int, (**t).clone()),
            Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
            other => (other.elem(), other.elem()),
        };
        match &c.iter_var2 {
            Some(var2) => {
                let key_sub = if is_list { "@indices" } else { "@keys" };
                let val_sub = if is_list { "@items" } else { "@values" };
                let key = Local { path: at(key_sub), size: range_entry.map(|en| en.key), entry: None, ty: key_ty };
                let val = Local { path: at(val_sub), size: range_entry.map(|en| en.val), entry: None, ty: val_ty };
                self.push_local(&c.iter_var, key);
                self.push_local(var2, val);
            }
            None => {
                let (sub, size, ty) = if is_list {
                    ("@items", range_entry.map(|en| en.val), val_ty)
                } else {
                    ("@keys", range_entry.map(|en| en.key), key_ty)
                };
                self.push_local(&c.iter_var, Local { path: at(sub), size, entry: None, ty });
            }
        }
    }

    /// The size, entries and type of a comprehension's result, from its accumulator.
    fn record_comprehension_result(&mut self, e: &IdedExpr, c: &ComprehensionExpr, count: Size) {
        match &c.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(s) = self.size(&c.accu_init) {
                    self.sizes.insert(e.id, s);
                }
                self.types.insert(e.id, self.ty(&c.result));
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, count);
                if let Some(entry) = self.entry(&c.loop_step) {
                    self.entries.insert(e.id, entry);
                }
                self.types.insert(e.id, self.ty(&c.loop_step));
            }
            _ => {
                self.types.insert(e.id, self.ty(&c.result));
            }
        }
    }

    /// `a.b.c` when `a` is no variable in scope (`self`, `oldSelf`, a loop's).
    fn qualified_name(&self, e: &IdedExpr) -> Option<String> {
        match &e.expr {
            Expr::Ident(name) if name != "self" && name != "oldSelf" && self.local(name).is_none() => {
                Some(name.clone())
            }
            Expr::Select(select) if !select.test => {
                self.qualified_name(&select.operand).map(|prefix| format!("{prefix}.{}", select.field))
            }
            _ => None,
        }
    }

    /// cel-go's `pushLocalVar`: a variable bound to `init`.
    fn local_for(&mut self, init: &IdedExpr) -> Local<'a> {
        Local { path: self.path(init), size: self.size(init), entry: self.entry(init), ty: self.ty(init) }
    }

    fn ident_ty(&self, name: &str) -> Ty<'a> {
        match name {
            "self" | "oldSelf" => Ty::of(self.root),
            "int" | "uint" | "double" | "bool" | "string" | "bytes" | "list" | "map" | "null_type" | "type" => Ty::Type,
            _ => Ty::Unknown,
        }
    }

    /// cel-go's `costCall`.
    fn cost_call(&mut self, e: &IdedExpr, func: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> u64 {
        // A qualified function name (`sets.contains(a, b)`) parses as a member call on
        // the namespace; cel-go resolves it to the function, with no target.
        let qualified;
        let (func, target) = match target.map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) && self.local(ns).is_none() => {
                qualified = format!("{ns}.{func}");
                (qualified.as_str(), None)
            }
            _ => (func, target),
        };
        // `dyn(x)` costs one plus its argument and keeps its sizes.
        if func == "dyn" && target.is_none() && args.len() == 1 {
            let cost = self.cost(&args[0]);
            if let Some(s) = self.size(&args[0]) {
                self.sizes.insert(e.id, s);
            }
            if let Some(entry) = self.entry(&args[0]) {
                self.entries.insert(e.id, entry);
            }
            self.types.insert(e.id, Ty::Dyn);
            return cost.saturating_add(1);
        }
        // `cel.bind(v, init, result)`: cel-go's `costBind`.
        if func == "cel.bind"
            && let [IdedExpr { expr: Expr::Ident(var), .. }, init, result] = args
        {
            let mut sum = LIST_CREATE.saturating_add(self.cost(init));
            let local = self.local_for(init);
            self.push_local(var, local);
            sum = sum.saturating_add(self.cost(result));
            self.pop_local(var);
            if let Some(s) = self.size(result) {
                self.sizes.insert(e.id, s);
            }
            if let Some(entry) = self.entry(result) {
                self.entries.insert(e.id, entry);
            }
            self.types.insert(e.id, self.ty(result));
            return sum;
        }
        let arg_costs: Vec<u64> = args.iter().map(|a| self.cost(a)).collect();
        let arg_nodes: Vec<Node<'_, 'a>> = args.iter().map(|a| self.node(a)).collect();
        let target_cost = target.map_or(0, |t| self.cost(t));
        let target_node = target.map(|t| self.node(t));
        let call = self.function_cost(e, func, target_node.as_ref(), &arg_nodes, &arg_costs);
        self.types.insert(e.id, call.ty.clone());
        let mut size = call.size;
        if func == "_[_]" && !args.is_empty() {
            // cel-go's `IndexList`/`IndexMap`: the element's path and entry size.
            let sub = if matches!(arg_nodes[0].ty, Ty::Map(..) | Ty::Dyn) { "@values" } else { "@items" };
            size = self.entry(&args[0]).map(|en| en.val);
            let mut path = self.path(&args[0]);
            path.push(sub.to_string());
            self.paths.insert(e.id, path);
        }
        if size.is_none() {
            size = self.size(e);
        }
        if let Some(s) = size {
            self.sizes.insert(e.id, s);
        }
        target_cost.saturating_add(call.cost)
    }

    /// cel-go's `functionCost`, with kube's `CostEstimator.EstimateCallCost` and the cel-go
    /// extensions' estimators before it, as kube's environment has them.
    fn function_cost(
        &mut self,
        e: &IdedExpr,
        func: &str,
        target: Option<&Node<'_, 'a>>,
        args: &[Node<'_, 'a>],
        arg_costs: &[u64],
    ) -> Call<'a> {
        let arg_sum = arg_costs.iter().fold(0u64, |a, c| a.saturating_add(*c));
        let ty = self.result_ty(func, target, args);
        let own = self.ext_cost(func, target, args).or_else(|| self.kube_cost(func, target, args));
        match own {
            Some((cost, size)) => Call { cost: cost.saturating_add(arg_sum), size, ty },
            None => self.cel_go_cost(e, func, target, args, arg_costs, ty),
        }
    }

    /// cel-go's ext estimators (sets, and lists version 3): the call's own cost and
    /// result size, or `None` for the functions they leave to the others.
    fn ext_cost(
        &self,
        func: &str,
        target: Option<&Node<'_, 'a>>,
        args: &[Node<'_, 'a>],
    ) -> Option<(u64, Option<Size>)> {
        let target_ty = target.map_or(Ty::Unknown, |t| t.ty.clone());
        match (func, target, args.len()) {
            ("sets.contains" | "sets.intersects" | "sets.equivalent", None, 2) => {
                let factor = if func == "sets.equivalent" { 2.0 } else { 1.0 };
                let product = self.estimate_size(&args[0]).mul(self.estimate_size(&args[1]));
                Some((product.times(factor).saturating_add(1), None))
            }
            ("slice", Some(t), 2) if !target_ty.is_string() => {
                let size = self.estimate_size(t);
                let start = args[0].int_literal().map_or(0, |i| i.max(0) as u64);
                let end = args[1].int_literal().map_or(size.max, |i| i.max(0) as u64);
                Some(list_call(1.0, Size::fixed(end.wrapping_sub(start))))
            }
            ("lists.range", None, 1) => {
                let n = args[0].int_literal().map_or(u64::MAX, |i| i.max(0) as u64);
                Some(list_call(1.0, Size::fixed(n)))
            }
            ("reverse", Some(t), 0) if target_ty.is_list() => Some(list_call(1.0, self.estimate_size(t))),
            ("flatten", Some(t), 0 | 1) => {
                let depth = args.first().map_or(1, |d| d.int_literal().map_or(u64::MAX, |i| i.max(0) as u64));
                Some(list_call(depth as f64, self.estimate_size(t)))
            }
            ("distinct", Some(t), 0) => {
                let size = self.estimate_size(t);
                Some(list_call(2.0, size.mul(size)))
            }
            ("sort", Some(t), 0) => {
                let size = self.estimate_size(t);
                let factor = if target_ty.elem().is_string() { 2.0 + TRAVERSAL } else { 2.0 };
                Some(list_call(factor, size.mul(size)))
            }
            _ => None,
        }
    }

    /// cel-go's own estimates (`checker/cost.go`), for the calls no library prices; any
    /// other call costs 1.
    fn cel_go_cost(
        &mut self,
        e: &IdedExpr,
        func: &str,
        target: Option<&Node<'_, 'a>>,
        args: &[Node<'_, 'a>],
        arg_costs: &[u64],
        ty: Ty<'a>,
    ) -> Call<'a> {
        let arg_sum = arg_costs.iter().fold(0u64, |a, c| a.saturating_add(*c));
        let own = match (func, target, args.len()) {
            ("_&&_" | "_||_", None, 2) => Some((0, None)),
            ("_?_:_", None, 3) => {
                let size = args[1].size_or_unknown().union(args[2].size_or_unknown());
                if let Some(entry) = Entry::union(self.entry(args[1].expr), self.entry(args[2].expr)) {
                    self.entries.insert(e.id, entry);
                }
                let cost = arg_costs[0].saturating_add(arg_costs[1].max(arg_costs[2]));
                return Call { cost, size: Some(size), ty };
            }
            ("_+_", None, 2) => self.concat_cost(e, args),
            ("_<_" | "_>_" | "_<=_" | "_>=_", None, 2) => ordering_cost(args),
            ("_==_" | "_!=_", None, 2) => Some((min_size_cost(&args[0], &args[1]), None)),
            _ => string_call_cost(func, target, args),
        };
        // O(1) functions.
        let (cost, size) = own.unwrap_or((1, None));
        Call { cost: cost.saturating_add(arg_sum), size, ty }
    }

    /// `+` on strings, lists or operands of unknown type: a tenth of the result's size
    /// for strings, 1 for lists; `None` (cost 1) for numbers.
    fn concat_cost(&mut self, e: &IdedExpr, args: &[Node<'_, 'a>]) -> Option<(u64, Option<Size>)> {
        let (l, r) = (&args[0].ty, &args[1].ty);
        let strings = l.is_string() || r.is_string();
        let lists = l.is_list() || r.is_list();
        let open = l.open() && r.open();
        if !(strings || lists || open) {
            return None;
        }
        let size = args[0].size_or_unknown().add(args[1].size_or_unknown());
        if let Some(entry) = Entry::union(self.entry(args[0].expr), self.entry(args[1].expr)) {
            self.entries.insert(e.id, entry);
        }
        let cost = if strings {
            size.times(TRAVERSAL)
        } else if lists {
            1
        } else {
            size.times(TRAVERSAL).max(1)
        };
        Some((cost, Some(size)))
    }

    /// kube's `CostEstimator.EstimateCallCost` (`apiserver/pkg/cel/library/cost.go`): the
    /// call's own cost and result size, or `None` for the functions it leaves to cel-go.
    fn kube_cost(
        &self,
        func: &str,
        target: Option<&Node<'_, 'a>>,
        args: &[Node<'_, 'a>],
    ) -> Option<(u64, Option<Size>)> {
        let first = args.first();
        let arg_size = || first.map_or(UNKNOWN, |a| self.estimate_size(a));
        let fixed = |c: u64| Some((c, None));
        if UNIT_COST_FUNCTIONS.contains(&func) {
            return fixed(1);
        }
        match func {
            "check" => fixed(350_000),
            "fieldSelector" | "labelSelector" if args.len() == 1 => {
                let length = arg_size();
                let parse = length.times(TRAVERSAL);
                let requirements = by_factor(length.times(0.5), (LIST_CREATE + STRUCT_CREATE) as f64);
                fixed(LIST_CREATE.saturating_add(parse).saturating_add(requirements))
            }
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" | "includes" => {
                fixed(self.list_search_cost(func, target?))
            }
            "url" | "jsonpatch.escapeKey" if args.len() == 1 => {
                let size = arg_size();
                Some((size.times(TRAVERSAL), Some(size)))
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let size = self.estimate_size(target?);
                Some((size.times(TRAVERSAL), Some(size)))
            }
            "replace" if target.is_some() && args.len() >= 2 => {
                let size = self.estimate_size(target?);
                let result = replaced_size(size, self.estimate_size(&args[0]), self.estimate_size(&args[1]));
                Some((size.times(2.0 * TRAVERSAL), Some(result)))
            }
            "split" => {
                let size = self.estimate_size(target?);
                // Go's uint64 of the limit (a negative limit wraps, as in kube).
                let max = args.get(1).and_then(Node::int_literal).map_or(size.max, |i| i as u64);
                Some((size.times(2.0 * TRAVERSAL), Some(Size { min: 0, max })))
            }
            "join" => {
                let size = self.joined_size(target?, first);
                Some((size.times(TRAVERSAL), Some(size)))
            }
            "find" | "findAll" if target.is_some() && !args.is_empty() => {
                let size = self.estimate_size(target?);
                let text = size.add(Size::fixed(1)).times(TRAVERSAL);
                let regex = self.estimate_size(&args[0]).times(REGEX_FACTOR);
                Some((text.saturating_mul(regex), Some(Size { min: 0, max: size.max })))
            }
            "cidr" | "isIP" | "isCIDR" if !args.is_empty() => fixed(arg_size().times(TRAVERSAL)),
            // `cidr.ip()` is a field access; `ip(string)` parses the string.
            "ip" if target.is_some() => fixed(1),
            "ip" if !args.is_empty() => fixed(arg_size().times(TRAVERSAL)),
            "ip.isCanonical" if !args.is_empty() => fixed(arg_size().times(2.0 * TRAVERSAL)),
            "containsIP" | "containsCIDR" if !args.is_empty() => {
                fixed(contains_address_cost(func, &args[0], arg_size()))
            }
            "quantity" | "isQuantity" | "semver" | "isSemver" if !args.is_empty() => fixed(arg_size().times(TRAVERSAL)),
            "validate" if !args.is_empty() => {
                fixed(by_factor(arg_size().times(TRAVERSAL), MAX_NAME_FORMAT_REGEX_SIZE * REGEX_FACTOR))
            }
            "_==_" if args.len() == 2 => opaque_equality_cost(&args[0], &args[1]).map(|c| (c, None)),
            _ => None,
        }
    }

    /// kube's list library on `t` (`isSorted`, `sum`, `max`, `min`, `indexOf`,
    /// `lastIndexOf`, `includes`), whose `indexOf`/`lastIndexOf` also take a string.
    fn list_search_cost(&self, func: &str, t: &Node<'_, 'a>) -> u64 {
        let size = self.estimate_size(t);
        if let Ty::List(elem) = &t.ty {
            // One per element, plus a traversal of each string or bytes element.
            let mut per_element = 1u64;
            if elem.is_string() {
                let elem_size = self.resolve(&items_path(t)).unwrap_or(UNKNOWN);
                per_element = per_element.saturating_add(elem_size.times(TRAVERSAL));
            }
            size.max.saturating_mul(per_element)
        } else if func == "includes" {
            size.max
        } else {
            // On a string (`indexOf`, `lastIndexOf`); on a value of unknown type,
            // the dearer of a list of 1-unit elements and a string.
            let string = size.times(TRAVERSAL);
            if t.ty.open() { string.max(size.max) } else { string }
        }
    }

    /// The size of `t.join(sep)`: the list's elements plus a separator between each two.
    fn joined_size(&self, t: &Node<'_, 'a>, sep: Option<&Node<'_, 'a>>) -> Size {
        let list = self.estimate_size(t);
        let mut size = Size::fixed(0);
        if matches!(t.ty, Ty::List(_)) || t.ty.open() {
            size = list.mul(self.resolve(&items_path(t)).unwrap_or(UNKNOWN));
        }
        if let Some(sep) = sep {
            let separators = Size { min: list.min.saturating_sub(1), max: list.max.saturating_sub(1) };
            size = size.add(self.estimate_size(sep).mul(separators));
        }
        size
    }

    /// The type of a call's result, as far as costs depend on it.
    fn result_ty(&self, func: &str, target: Option<&Node<'_, 'a>>, args: &[Node<'_, 'a>]) -> Ty<'a> {
        if let Some(ty) = fixed_result_ty(func) {
            return ty;
        }
        let t = target.map(|t| t.ty.clone());
        let a0 = args.first().map_or(Ty::Unknown, |a| a.ty.clone());
        let subject = t.clone().unwrap_or_else(|| a0.clone());
        match func {
            "reverse" if subject.is_string() => Ty::String,
            "split" | "findAll" => Ty::List(Box::new(Ty::String)),
            "getQuery" => Ty::Map(Box::new(Ty::String), Box::new(Ty::List(Box::new(Ty::String)))),
            "quantity" | "add" | "sub" if t.is_none() || matches!(t, Some(Ty::Opaque(Opaque::Quantity))) => {
                Ty::Opaque(Opaque::Quantity)
            }
            "url" => Ty::Opaque(Opaque::Url),
            "ip" => Ty::Opaque(Opaque::Ip),
            "cidr" | "masked" => Ty::Opaque(Opaque::Cidr),
            "semver" => Ty::Opaque(Opaque::Semver),
            "format.named" => Ty::Optional(Box::new(Ty::Opaque(Opaque::Format))),
            f if f.starts_with("format.") => Ty::Opaque(Opaque::Format),
            "validate" => Ty::Optional(Box::new(Ty::List(Box::new(Ty::String)))),
            "sum" | "min" | "max" => subject.elem(),
            "slice" | "flatten" | "distinct" | "sort" | "reverse" => subject,
            "lists.range" => Ty::List(Box::new(Ty::Int)),
            "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "-_" => {
                let b = args.get(1).map_or(Ty::Unknown, |a| a.ty.clone());
                match (func, &a0, &b) {
                    ("_-_", Ty::Timestamp, Ty::Timestamp) => Ty::Duration,
                    ("_+_", Ty::Duration, Ty::Timestamp) | ("_+_" | "_-_", Ty::Timestamp, Ty::Duration) => {
                        Ty::Timestamp
                    }
                    _ => Ty::join(a0, b),
                }
            }
            "_?_:_" => {
                let (a, b) = (args.get(1), args.get(2));
                Ty::join(a.map_or(Ty::Unknown, |n| n.ty.clone()), b.map_or(Ty::Unknown, |n| n.ty.clone()))
            }
            "_[_]" => a0.elem(),
            "_[?_]" => Ty::Optional(Box::new(a0.elem())),
            "_?._" => {
                let field = match args.get(1).map(|a| &a.expr.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => Some(s.to_string()),
                    _ => None,
                };
                let inner = match (&a0, field) {
                    (Ty::Object(d), Some(f)) => d.field(&f).map_or(Ty::Unknown, |(_, d)| Ty::of(d)),
                    (Ty::Map(_, v), _) => (**v).clone(),
                    _ => Ty::Unknown,
                };
                Ty::Optional(Box::new(inner))
            }
            "optional.of" | "optional.ofNonZeroValue" => Ty::Optional(Box::new(a0)),
            "optional.none" => Ty::Optional(Box::new(Ty::Unknown)),
            "value" | "orValue" => match subject {
                Ty::Optional(inner) => *inner,
                _ => Ty::Unknown,
            },
            "or" | "optMap" | "optFlatMap" => subject,
            _ => Ty::Unknown,
        }
    }
}

/// cel-go's estimates for its string and conversion functions (`format`, `bytes`,
/// `string`, `strings.quote`, `startsWith`, `endsWith`, `matches`, `contains`) and for
/// `in`: the call's own cost and result size, or `None` when the call costs 1.
fn string_call_cost(func: &str, target: Option<&Node<'_, '_>>, args: &[Node<'_, '_>]) -> Option<(u64, Option<Size>)> {
    match (func, target, args.len()) {
        ("format", Some(t), _) => Some((t.size_or_unknown().times(TRAVERSAL), None)),
        ("bytes", None, 1) if args[0].ty.is_string() || args[0].ty.open() => {
            let size = args[0].size_or_unknown();
            let conversion = size.times(TRAVERSAL);
            let cost = if args[0].ty.open() { conversion.max(1) } else { conversion };
            Some((cost, Some(Size { min: size.min, max: size.max.saturating_mul(4) })))
        }
        ("string", None, 1) if matches!(args[0].ty, Ty::Bytes) || args[0].ty.open() => {
            let size = args[0].size_or_unknown();
            let conversion = size.times(TRAVERSAL);
            let cost = if args[0].ty.open() { conversion.max(1) } else { conversion };
            Some((cost, Some(Size { min: size.min / 4, max: size.max })))
        }
        ("strings.quote", None, 1) => {
            let size = args[0].size_or_unknown();
            let result = Size { min: size.min.saturating_add(2), max: size.max.saturating_mul(2).saturating_add(2) };
            Some((size.times(TRAVERSAL), Some(result)))
        }
        ("startsWith" | "endsWith", Some(_), 1) => Some((args[0].size_or_unknown().times(TRAVERSAL), None)),
        ("matches", Some(t), 1) => {
            let text = t.size_or_unknown().add(Size::fixed(1)).times(TRAVERSAL);
            let regex = args[0].size_or_unknown().times(REGEX_FACTOR);
            Some((text.saturating_mul(regex), None))
        }
        ("contains", Some(t), 1) => {
            let text = t.size_or_unknown().times(TRAVERSAL);
            let sub = args[0].size_or_unknown().times(TRAVERSAL);
            Some((text.saturating_mul(sub), None))
        }
        ("@in", None, 2) => {
            let list = args[1].size_or_unknown().times(1.0);
            let cost = match &args[1].ty {
                Ty::List(_) => list,
                Ty::Map(..) | Ty::Object(_) => 1,
                _ => list.max(1),
            };
            Some((cost, None))
        }
        _ => None,
    }
}

/// `<`, `>`, `<=`, `>=` on strings or operands of unknown type: a tenth of the smaller
/// operand's size; `None` (cost 1) for numbers.
fn ordering_cost(args: &[Node<'_, '_>]) -> Option<(u64, Option<Size>)> {
    let (l, r) = (&args[0].ty, &args[1].ty);
    let strings = l.is_string() || r.is_string();
    let numbers = !strings && (!l.open() || !r.open());
    if numbers {
        return None;
    }
    let compare = min_size_cost(&args[0], &args[1]);
    Some((if strings { compare } else { compare.max(1) }, None))
}

/// Functions whose result is a bool, whatever their operands.
const BOOL_RESULTS: [&str; 38] = [
    "_==_",
    "_!=_",
    "_<_",
    "_>_",
    "_<=_",
    "_>=_",
    "!_",
    "_&&_",
    "_||_",
    "@in",
    "@not_strictly_false",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "isSorted",
    "isURL",
    "isIP",
    "isCIDR",
    "isQuantity",
    "isSemver",
    "isInteger",
    "isGreaterThan",
    "isLessThan",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "ip.isCanonical",
    "containsIP",
    "containsCIDR",
    "hasValue",
    "sets.contains",
    "sets.intersects",
    "sets.equivalent",
    "bool",
    "includes",
];

/// Functions whose result is an int, whatever their operands.
const INT_RESULTS: [&str; 22] = [
    "size",
    "indexOf",
    "lastIndexOf",
    "int",
    "sign",
    "asInteger",
    "compareTo",
    "prefixLength",
    "family",
    "major",
    "minor",
    "patch",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// Functions whose result is a string, whatever their operands.
const STRING_RESULTS: [&str; 17] = [
    "string",
    "lowerAscii",
    "upperAscii",
    "trim",
    "substring",
    "replace",
    "charAt",
    "format",
    "join",
    "strings.quote",
    "find",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "jsonpatch.escapeKey",
];

/// The result type of the functions whose result does not depend on their operands.
fn fixed_result_ty<'a>(func: &str) -> Option<Ty<'a>> {
    let ty = if BOOL_RESULTS.contains(&func) {
        Ty::Bool
    } else if INT_RESULTS.contains(&func) {
        Ty::Int
    } else if STRING_RESULTS.contains(&func) {
        Ty::String
    } else {
        match func {
            "uint" => Ty::Uint,
            "double" | "asApproximateFloat" => Ty::Double,
            "duration" => Ty::Duration,
            "timestamp" => Ty::Timestamp,
            "type" => Ty::Type,
            "bytes" => Ty::Bytes,
            _ => return None,
        }
    };
    Some(ty)
}

/// The path of a list node's elements (none for a node with no path).
fn items_path(t: &Node<'_, '_>) -> Vec<String> {
    let mut path = t.path.clone();
    if !path.is_empty() {
        path.push("@items".to_string());
    }
    path
}

/// kube's size of `s.replace(from, with)` for strings of sizes `size`, `from`, `with`:
/// the replacements made times `with`, plus what of `s` is retained.
fn replaced_size(size: Size, from: Size, with: Size) -> Size {
    let (mut count, mut retained) = (Size::fixed(0), Size::fixed(0));
    if from.min == 0 {
        count.max = if size.max < u64::MAX { size.max + 1 } else { size.max };
        retained.max = size.max;
    } else if with.max <= from.min {
        count.max = 0;
        retained.max = size.max;
    } else {
        count.max = (size.max as f64 / from.min as f64).ceil() as u64;
    }
    if from.max == 0 {
        count.min = if size.min < u64::MAX { size.min + 1 } else { size.min };
        retained.min = size.min;
    } else if from.max <= with.min {
        count.min = 0;
        retained.min = size.min;
    } else {
        count.min = (size.min as f64 / from.max as f64).ceil() as u64;
    }
    count.mul(with).add(retained)
}

/// kube's `cidr.containsIP(ip)` / `cidr.containsCIDR(cidr)`: two byte lists of an IPv4
/// or IPv6 address compared, a CIDR also masked, and a string argument parsed.
fn contains_address_cost(func: &str, arg: &Node<'_, '_>, arg_size: Size) -> u64 {
    let ip = Size { min: 4, max: 16 };
    let mut cost = ip.add(ip).times(TRAVERSAL);
    if func == "containsCIDR" {
        cost = cost.saturating_add(ip.times(TRAVERSAL)).saturating_add(1);
    }
    if arg.ty.is_string() || arg.ty.open() {
        cost = cost.saturating_add(arg_size.times(TRAVERSAL));
    }
    cost
}

/// kube's `==` on two values of the same library type (ip, cidr, quantity, semver,
/// format, url), or `None` for any other operands.
fn opaque_equality_cost(a: &Node<'_, '_>, b: &Node<'_, '_>) -> Option<u64> {
    match (&a.ty, &b.ty) {
        (Ty::Opaque(x), Ty::Opaque(y)) if x == y => Some(match x {
            Opaque::Ip | Opaque::Cidr | Opaque::Quantity | Opaque::Semver => 1,
            Opaque::Format => by_factor(MAX_FORMAT_SIZE, TRAVERSAL),
            // kube unions the right operand's size with itself (sic), else 1.
            Opaque::Url => by_factor(b.size.map_or(1, |s| s.max), TRAVERSAL),
        }),
        _ => None,
    }
}

/// The cost of a comparison of the smaller operand (`==`, `!=`, string orderings).
fn min_size_cost(a: &Node<'_, '_>, b: &Node<'_, '_>) -> u64 {
    let smallest = a.size_or_unknown().max.min(b.size_or_unknown().max);
    by_factor(smallest, TRAVERSAL)
}

/// cel-go ext's `estimateAllocatingListCall`.
fn list_call(factor: f64, size: Size) -> (u64, Option<Size>) {
    (size.times(factor).saturating_add(1).saturating_add(LIST_CREATE), Some(size))
}

fn is_struct_or_map(ty: &Ty<'_>) -> bool {
    matches!(ty, Ty::Object(_) | Ty::Map(..))
}

/// cel-go's `computeExprSize`: the sizes literals have.
fn literal_size(e: &IdedExpr) -> Option<Size> {
    Some(Size::fixed(match &e.expr {
        // The string's length in code points, as `size()` counts it.
        Expr::Literal(LiteralValue::String(s)) => s.chars().count() as u64,
        Expr::Literal(LiteralValue::Bytes(b)) => b.len() as u64,
        Expr::Literal(_) => 1,
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    }))
}

fn literal_ty<'a>(lit: &LiteralValue) -> Ty<'a> {
    match lit {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(_) => Ty::Bytes,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(_) => Ty::String,
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

/// The size of a value as CEL's `size()` counts it.
fn actual_size(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.chars().count() as u64,
        Value::Array(a) => a.len() as u64,
        Value::Object(m) => m.len() as u64,
        _ => 1,
    }
}

// ---------------------------------------------------------------------------------------
// At runtime.

/// What the cost of one request's rules may still be (kube's `RuntimeCELCostBudget`).
#[derive(Debug)]
pub(crate) struct RuntimeBudget {
    remaining: u64,
}

impl Default for RuntimeBudget {
    fn default() -> Self {
        RuntimeBudget { remaining: PER_REQUEST_BUDGET }
    }
}

impl RuntimeBudget {
    /// Takes `cost` from the budget; false (and nothing left) when it does not cover it.
    pub(crate) fn spend(&mut self, cost: u64) -> bool {
        match self.remaining.checked_sub(cost) {
            Some(left) => {
                self.remaining = left;
                true
            }
            None => {
                self.remaining = 0;
                false
            }
        }
    }

    /// Whether the budget is used up.
    pub(crate) fn exhausted(&self) -> bool {
        self.remaining == 0
    }
}

/// The cost of `expr`, a rule of schema `node`, evaluated on `value`: the estimate with
/// the value's own sizes (its strings', lists' and maps' largest at each field path) in
/// place of the schema's bounds. The node is taken as a resource root (its `kind`,
/// `apiVersion` and `metadata` resolve), which only adds what a rule may name.
pub(crate) fn runtime_cost(expr: &Expr, node: &Value, value: &Value) -> u64 {
    // The estimator keys what it learns by node id; the root gets one no parse uses.
    // (A rule's tree may be 250 levels deep: cloned and dropped on a stack that fits.)
    stacker::maybe_grow(STACK_RED_ZONE, super::cel_depth::DEEP_STACK, || {
        let root = IdedExpr { id: u64::MAX, expr: expr.clone() };
        Coster::new(Decl::new(node, true), Some(value)).cost(&root)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::Program;

    fn errors_of(schema: Value) -> Vec<String> {
        cost_errors(&schema, "spec.versions[0].schema.openAPIV3Schema")
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    /// The `MaxCost` of `rule` on `node` (not a resource root), as kube's `Compile` gives it.
    fn cost_of(node: &Value, rule: &str) -> u64 {
        expression_cost(Decl::new(node, false), rule).unwrap_or_else(|| panic!("{rule} parses"))
    }

    fn with_rule(items: Value, rule: &str) -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"names": {"type": "array", "items": items}},
            "x-kubernetes-validations": [{"rule": rule}],
        }}})
    }

    fn s(ty: &str) -> Value {
        json!({"type": ty})
    }

    /// kube's test helper `schemas(...)`: an object with properties val1, val2, ...
    fn vals(schemas: &[Value]) -> Value {
        let props: serde_json::Map<String, Value> =
            schemas.iter().enumerate().map(|(i, s)| (format!("val{}", i + 1), s.clone())).collect();
        json!({"type": "object", "properties": props})
    }

    fn list_of(items: Value) -> Value {
        json!({"type": "array", "items": items})
    }

    fn map_of(values: Value) -> Value {
        json!({"type": "object", "additionalProperties": values})
    }

    fn check(name: &str, node: &Value, cases: &[(&str, u64)]) {
        let mismatches: Vec<String> = cases
            .iter()
            .filter_map(|(rule, want)| {
                let got = cost_of(node, rule);
                (got != *want).then(|| format!("{name}: {rule}: kube {want}, opkit {got}"))
            })
            .collect();
        assert!(mismatches.is_empty(), "{mismatches:#?}");
    }

    /// Expected costs from kube's `TestCelEstimatedCostStability`
    /// (apiextensions-apiserver `pkg/apiserver/schema/cel/celcoststability_test.go`).
    #[test]
    fn kube_estimated_cost_stability() {
        let ints = vals(&[s("integer"), s("integer")]);
        check(
            "integers",
            &ints,
            &[
                ("self.val1 == 9223372036854775807 && 9223372036854775807 == self.val1 && self.val1 == self.val2", 8),
                ("type(self.val1) == int", 4),
                ("self.val1 + 1 == 2147483647 + 1", 5),
            ],
        );
        let numbers = vals(&[s("integer"), s("number"), s("number")]);
        check(
            "numeric comparisons",
            &numbers,
            &[
                ("double(self.val1) < self.val2", 6),
                ("self.val1 < int(self.val2)", 6),
                ("double(5) < 10.0", 2),
                ("5 < int(10.0)", 2),
                ("double(self.val1) < 10.0", 4),
                ("self.val3 == 1.0", 2),
            ],
        );
        let strings = vals(&[s("string"), s("string")]);
        check(
            "unicode strings",
            &strings,
            &[
                ("self.val1 == 'Rook takes 👑' && 'Rook takes 👑' == self.val1 && self.val1 == self.val2", 314585),
                ("self.val1.startsWith('Rook')", 3),
                ("!self.val1.startsWith('knight')", 4),
                ("self.val1.matches('^[^0-9]*$')", 943721),
                ("!self.val1.matches('^[0-9]*$')", 629149),
                ("type(self.val1) == string", 4),
                ("size(self.val1) == 12", 4),
                ("self.val1.charAt(3) == 'k'", 4),
                ("self.val1.indexOf('o') == 1", 314576),
                ("self.val1.indexOf('o', 2) == 2", 314576),
                ("self.val1.replace(' ', 'x') == 'Rookxtakesx👑'", 629150),
                ("self.val1.replace(' ', 'x', 1) == 'Rookxtakes 👑'", 629150),
                ("self.val1.split(' ') == ['Rook', 'takes', '👑']", 629159),
                ("self.val1.split(' ', 2) == ['Rook', 'takes 👑']", 629159),
                ("self.val1.substring(5) == 'takes 👑'", 314576),
                ("self.val1.substring(0, 4) == 'Rook'", 314576),
                ("self.val1.substring(4, 10).trim() == 'takes'", 629149),
                ("self.val1.upperAscii() == 'ROOK TAKES 👑'", 314577),
                ("self.val1.lowerAscii() == 'rook takes 👑'", 314577),
                ("self.val1.lowerAscii() == self.val1.lowerAscii()", 943723),
            ],
        );
        let bools = vals(&[s("boolean"), s("boolean"), s("boolean"), s("boolean")]);
        check(
            "booleans",
            &bools,
            &[("self.val1 == true && true == self.val1 && self.val1 == self.val2", 8), ("self.val1 != self.val4", 4)],
        );
        let durations =
            vals(&[json!({"type": "string", "format": "duration"}), json!({"type": "string", "format": "duration"})]);
        check(
            "duration format",
            &durations,
            &[
                (
                    "self.val1 == duration('1h2m3s4ms') && duration('1h2m3s4ms') == self.val1 && self.val1 == self.val2",
                    16,
                ),
                ("self.val1 == duration('1h2m') + duration('3s4ms')", 6),
                ("self.val1.getHours() == 1", 4),
                ("type(self.val1) == google.protobuf.Duration", 4),
            ],
        );
        let dates = vals(&[json!({"type": "string", "format": "date"}), json!({"type": "string", "format": "date"})]);
        check(
            "date format",
            &dates,
            &[
                (
                    "self.val1 == timestamp('1997-07-16T00:00:00.000Z') && timestamp('1997-07-16T00:00:00.000Z') == self.val1 && self.val1 == self.val2",
                    14,
                ),
                ("self.val1.getDate() == 16", 4),
                ("type(self.val1) == google.protobuf.Timestamp", 4),
            ],
        );
        let date_times =
            vals(&[json!({"type": "string", "format": "date-time"}), json!({"type": "string", "format": "date-time"})]);
        check(
            "date-time format",
            &date_times,
            &[
                (
                    "self.val1 == timestamp('2011-08-18T19:03:37.010+01:00') && timestamp('2011-08-18T19:03:37.010+01:00') == self.val1 && self.val1 == self.val2",
                    16,
                ),
                ("self.val1 == timestamp('2011-08-18T00:00:00.000+01:00') + duration('19h3m37s10ms')", 6),
                ("self.val1.getDate('01:00') == 18", 4),
                ("type(self.val1) == google.protobuf.Timestamp", 4),
            ],
        );
        let enums = json!({"type": "object", "properties": {"enumStr": {"type": "string",
            "enum": ["Pending", "Available", "Bound", "Released", "Failed"]}}});
        check("enums", &enums, &[("self.enumStr == 'Pending'", 3), ("self.enumStr in ['Pending', 'Available']", 14)]);
        let conversions = vals(&[
            s("integer"),
            s("number"),
            s("number"),
            s("number"),
            s("boolean"),
            s("string"),
            json!({"type": "string", "format": "byte"}),
        ]);
        check(
            "conversions",
            &conversions,
            &[
                ("int(self.val2) == self.val1", 5),
                ("double(self.val1) == self.val2", 5),
                ("bytes(self.val6) == self.val7", 629150),
                ("string(self.val1) == self.val6", 314578),
                ("string(self.val4) == '10.5'", 4),
                ("string(self.val7) == self.val6", 629150),
            ],
        );
        let lists = vals(&[list_of(s("integer")), list_of(s("integer"))]);
        check(
            "lists",
            &lists,
            &[
                ("self.val1 == [1, 2, 3] && [1, 2, 3] == self.val1 && self.val1 == self.val2", 157317),
                ("1 in self.val1", 1572865),
                ("self.val2[0] in self.val1", 1572868),
                ("!(0 in self.val1)", 1572866),
                ("self.val1 + self.val2 == [1, 2, 3, 1, 2, 3]", 16),
                ("self.val1 + [4, 5] == [1, 2, 3, 4, 5]", 24),
                ("has(self.val1)", 1),
                ("has(self.val1) && has(self.val2)", 2),
                ("!has(self.val1)", 2),
                ("self.val1.all(k, size(self.val1) > 0)", 11010044),
                ("self.val1.exists_one(k, self.val1 == [2])", 23592949),
                ("!self.val1.exists_one(k, size(self.val1) > 0)", 9437183),
                ("size(self.val1) == 2", 4),
                ("size(self.val1.filter(k, size(self.val1) > 1)) == 1", 26738686),
            ],
        );
        let sets = vals(&[list_of(s("string")), list_of(s("string"))]);
        check(
            "listSets",
            &sets,
            &[
                ("self.val1 == ['c', 'b', 'a']", 13),
                ("self.val1 == self.val2", 104862),
                ("'a' in self.val1", 1048577),
                ("self.val2[0] in self.val1", 1048580),
                ("self.val1.all(k, size(self.val1) > 0)", 7340028),
                ("self.val1.exists_one(k, self.val1 == ['a'])", 15728629),
                ("size(self.val1.filter(k, size(self.val1) > 1)) == 1", 17825790),
            ],
        );
        let kv = json!({"type": "object", "properties": {"k": s("string"), "v": s("string")}});
        let list_maps = json!({"type": "object", "properties": {"objs": list_of(list_of(kv))}});
        check(
            "listMaps",
            &list_maps,
            &[
                ("self.objs[0] == self.objs[1]", 104864),
                ("self.objs[0] + self.objs[2] == self.objs[2]", 104868),
                ("self.objs[0] == [self.objs[0][0], self.objs[0][1]]", 22),
                ("self.objs[2] + [self.objs[0][0], self.objs[0][1]] == self.objs[0]", 104883),
                ("size(self.objs[0] + [self.objs[3][0]]) == 3", 20),
                ("self.objs[0].all(k, size(self.objs[0]) > 0)", 8388604),
                ("self.objs[0].exists_one(k, size(self.objs[0]) > 0)", 7340030),
                ("size(self.objs[0].filter(k, size(self.objs[0]) > 1)) == 1", 18874366),
            ],
        );
        let maps = vals(&[map_of(s("string")), map_of(s("string"))]);
        check(
            "maps",
            &maps,
            &[
                ("self.val1 == self.val2", 39326),
                ("'k1' in self.val1", 3),
                ("!('k3' in self.val1)", 4),
                ("self.val1 == {'k1': 'a', 'k2': 'b'}", 33),
                ("self.val1.all(k, size(self.val1) > 0)", 2752508),
                ("self.val1.exists_one(k, size(self.val1) > 0)", 2359294),
                ("size(self.val1.filter(k, size(self.val1) > 1)) == 1", 6684670),
            ],
        );
        let objects = json!({"type": "object", "properties": {"objs": list_of(json!({"type": "object",
            "properties": {"f1": s("string"), "f2": s("string")}}))}});
        check("objects", &objects, &[("self.objs[0] == self.objs[1]", 6)]);
        let access = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": s("integer"), "c": s("integer")}},
            "a1": {"type": "object", "properties": {
                "b1": {"type": "object", "properties": {"c1": s("integer")}},
                "d2": {"type": "object", "properties": {"e2": s("integer")}}}}}});
        check(
            "object access",
            &access,
            &[
                ("has(self.a.b)", 2),
                ("has(self.a1.b1.c1)", 3),
                ("!(has(self.a1.d2) && has(self.a1.d2.e2))", 6),
                ("has(self.a) && has(self.a1)", 2),
            ],
        );
        let map_access = json!({"type": "object", "properties": {"val": map_of(s("integer"))}});
        check(
            "map access",
            &map_access,
            &[
                ("!('a' in self.val)", 4),
                ("!has(self.val.a)", 3),
                ("self.val.all(k, self.val[k] > 0)", 3595115),
                ("self.val.exists_one(k, self.val[k] == 2)", 2696338),
                ("!self.val.exists_one(k, self.val[k] > 0)", 3145728),
                ("size(self.val.filter(k, self.val[k] > 1)) == 1", 8089017),
            ],
        );
        let list_map = json!({"type": "object", "properties": {"listMap": list_of(json!({"type": "object",
            "properties": {"k": s("string"), "v": s("string"), "v2": s("string")}}))}});
        check(
            "listMap access",
            &list_map,
            &[
                ("has(self.listMap[0].v)", 3),
                ("self.listMap.all(m, m.k.startsWith('a'))", 6291453),
                ("self.listMap.all(m, !has(m.v2) || m.v2 == 'z')", 8388603),
                ("self.listMap.exists(m, m.k.endsWith('1'))", 7340028),
                ("self.listMap.exists_one(m, m.k == 'a3')", 5242879),
                ("size(self.listMap.filter(m, m.k == 'a1')) == 1", 16777215),
                ("self.listMap.exists(m, m.k == 'a1' && m.v == 'b1')", 10485753),
                ("self.listMap.map(m, m.v).exists(v, v == 'b1')", 19922939),
                ("self.listMap.map(m, has(m.v2) && m.v2 == 'z', m.v2).size() == 1", 18874365),
                ("self.listMap.filter(m, has(m.v2) && m.v2 == 'z').map(m, m.v2).size() == 1", 32505851),
            ],
        );
        let array = json!({"type": "object", "properties": {"array": list_of(s("integer"))}});
        check(
            "list access",
            &array,
            &[
                ("2 in self.array", 1572865),
                ("self.array.all(e, e > 0)", 7864318),
                ("self.array.exists(e, e > 2)", 9437181),
                ("self.array.exists_one(e, e > 4)", 6291456),
                ("!self.array.exists_one(e, e == 2)", 4718594),
                ("size(self.array.filter(e, e%2 == 0)) == 3", 25165823),
                ("self.array.map(e, e * 20).filter(e, e > 50).exists(e, e == 60)", 53477367),
            ],
        );
        let embedded = json!({"type": "object", "properties": {"embedded": {"type": "object",
            "x-kubernetes-embedded-resource": true}}});
        check(
            "embedded object",
            &embedded,
            &[
                ("self.embedded.kind == 'Pod'", 4),
                ("self.embedded.metadata.name == 'foo'", 5),
                ("self.embedded.metadata.generateName == 'pickItForMe'", 6),
            ],
        );
        let int_or_string =
            json!({"type": "object", "properties": {"something": {"x-kubernetes-int-or-string": true}}});
        check(
            "int in intOrString",
            &int_or_string,
            &[
                ("type(self.something) == int ? self.something == 1 : self.something == '25%'", 7),
                ("self.something == 1", 3),
                ("self.something != 'some string'", 4),
                ("self.something == 1 || self.something == '25%'", 6),
                ("self.something != ['anything']", 13),
            ],
        );
        let percent = json!({"type": "object", "properties": {"min": {"x-kubernetes-int-or-string": true},
            "current": s("integer"), "available": s("integer")}});
        check(
            "percent comparison using intOrString",
            &percent,
            &[
                (r"type(self.min) == string && self.min.matches(r'(\d+(\.\d+)?%)')", 1258298),
                (
                    "type(self.min) == int ? self.current <= self.min : double(self.current) / double(self.available) >= double(self.min.replace('%', '')) / 100.0",
                    629162,
                ),
            ],
        );
        let max10 = |mut v: Value, key: &str| {
            v[key] = json!(10);
            v
        };
        let listmap_kv = json!({"type": "object", "properties": {"k": s("string"), "v": s("string")}});
        let composition = json!({"type": "object", "properties": {
            "obj": {"type": "object", "properties": {"field": s("string")}},
            "mapOfMap": max10(map_of(max10(map_of(s("string")), "maxProperties")), "maxProperties"),
            "mapOfObj": map_of(json!({"type": "object", "properties": {"field2": s("string")}})),
            "mapOfListMap": max10(map_of(max10(list_of(listmap_kv.clone()), "maxItems")), "maxProperties"),
            "mapOfList": max10(map_of(max10(list_of(s("string")), "maxItems")), "maxProperties"),
            "listMapOfObj": max10(list_of(json!({"type": "object", "properties": {"k2": s("string"), "v2": s("string")}})), "maxItems"),
            "listOfMap": max10(list_of(max10(map_of(s("string")), "maxProperties")), "maxItems"),
            "listOfObj": list_of(json!({"type": "object", "properties": {"field3": s("string")}})),
            "listOfListMap": max10(list_of(max10(list_of(json!({"type": "object",
                "properties": {"k3": s("string"), "v3": s("string")}})), "maxItems")), "maxItems"),
        }});
        check(
            "container type composition",
            &composition,
            &[
                ("self.obj.field == 'a'", 4),
                ("self.mapOfMap['x']['y'] == 'b'", 5),
                ("self.mapOfObj['k'].field2 == 'c'", 5),
                ("self.mapOfListMap['o'].exists(e, e.k == '1' && e.v == 'd')", 104),
                ("self.mapOfList['l'][0] == 'e'", 5),
                ("self.listMapOfObj.exists(e, e.k2 == '2' && e.v2 == 'f')", 103),
                ("self.listOfMap[0]['z'] == 'g'", 5),
                ("self.listOfObj[0].field3 == 'h'", 5),
                ("self.listOfListMap[0].exists(e, e.k3 == '3' && e.v3 == 'i')", 104),
                ("self.mapOfMap.map(k, k).map(k, k).size() == 1", 286),
                ("self.listOfListMap.map(e, e).map(e, e).size() == 1", 286),
                ("self.mapOfMap.map(k, self.mapOfMap[k].map(m, m)).size() == 1", 1585),
                ("self.mapOfList.map(k, self.mapOfList[k].map(l, l)).size() == 1", 1585),
                ("self.listOfMap.map(e, e.map(m, m)).size() == 1", 1555),
                ("self.listOfListMap.map(e, e.map(e, e)).size() == 1", 1555),
            ],
        );
        let quantities = vals(&[s("string"), s("string")]);
        check(
            "quantity",
            &quantities,
            &[
                ("isQuantity(self.val1)", 314575),
                ("isQuantity(\"200M\")", 1),
                ("quantity(\"200M\") == quantity(\"0.2G\") && quantity(\"0.2G\") == quantity(\"200M\")", 6),
                ("quantity(self.val1).isLessThan(quantity(self.val2))", 629151),
                ("quantity(\"50k\").add(quantity(\"20\")) == quantity(\"50.02k\")", 5),
                ("quantity(\"50k\").sub(20) == quantity(\"49980\")", 4),
                ("quantity(self.val1).isInteger()", 314576),
            ],
        );
    }

    /// Expected costs from kube's `TestCostEstimation` (compilation_test.go): a rule on a
    /// list of scalars, unbounded and with maxItems.
    #[test]
    fn kube_cost_estimation() {
        let all = "self.all(x, true)";
        check("number array", &list_of(s("number")), &[(all, 4718591)]);
        check("string array", &list_of(s("string")), &[(all, 3145727)]);
        check("boolean array", &list_of(s("boolean")), &[(all, 1887437)]);
        check("array of number arrays", &list_of(list_of(s("number"))), &[(all, 3145727)]);
        let bounded = |items: Value, n: u64| json!({"type": "array", "items": items, "maxItems": n});
        check("number array, maxItems 10", &bounded(s("number"), 10), &[(all, 32)]);
        check("string array, maxItems 20", &bounded(s("string"), 20), &[(all, 62)]);
        check("boolean array, maxItems 5", &bounded(s("boolean"), 5), &[(all, 17)]);
        check("array of arrays, maxItems 100", &bounded(list_of(s("number")), 100), &[(all, 302)]);
    }

    #[test]
    fn escaping_follows_kube() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a-b.c/d").as_deref(), Some("a__dash__b__dot__c__slash__d"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
        let node = json!({"type": "object", "properties": {"namespace": {"type": "string", "maxLength": 10}}});
        // 2 for `self.__namespace__`, and a tenth of the smaller operand ('x', not the 40
        // characters of maxLength 10), rounded up: 1.
        assert_eq!(cost_of(&node, "self.__namespace__ == 'x'"), 3);
    }

    #[test]
    fn bounded_rules_pass() {
        let items = json!({"type": "string", "maxLength": 64});
        let mut schema = with_rule(items, "self.names.all(x, x.matches('^[a-z]+$'))");
        schema["properties"]["spec"]["properties"]["names"]["maxItems"] = json!(100);
        assert!(errors_of(schema).is_empty());
        let simple = with_rule(json!({"type": "string"}), "self.names.all(x, x.size() > 0)");
        assert!(errors_of(simple).is_empty(), "one pass over an unbounded list is within budget");
    }

    /// The issue's CRD: a list of at most 64 objects whose unbounded `type` is compared
    /// with a literal, charged by the literal (the smaller operand), as cel-go does.
    #[test]
    fn comparisons_are_charged_by_the_smaller_operand() {
        let list = json!({"type": "array", "maxItems": 64, "items": {"type": "object",
            "properties": {"type": {"type": "string"}, "name": {"type": "string"}}},
            "x-kubernetes-validations": [{"rule": "self.all(f, f.type == 'X')"}]});
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"filters": list.clone()}}}});
        assert!(errors_of(schema).is_empty());
        // self 1 + 64 × (@not_strictly_false 2 + && (1 + f.type 2 + == 1)) + result 1
        assert_eq!(cost_of(&list, "self.all(f, f.type == 'X')"), 1 + 64 * 6 + 1);
    }

    /// A CRD (as its `openAPIV3Schema`) shaped as Gateway API's Gateway: at most 64
    /// listeners, unique by name and by port, protocol and hostname (`exists_one` inside
    /// `all`), at most 16 addresses checked with `isIP` and `matches`.
    pub(crate) fn gateway_like() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "listeners": {"type": "array", "maxItems": 64, "items": {"type": "object",
                "required": ["name", "port", "protocol"],
                "properties": {
                    "name": {"type": "string", "maxLength": 253},
                    "hostname": {"type": "string", "maxLength": 253},
                    "port": {"type": "integer"},
                    "protocol": {"type": "string", "maxLength": 255},
                    "tls": {"type": "object", "properties": {"mode": {"type": "string"}}},
                    "allowedRoutes": {"type": "object", "properties": {"kinds": {"type": "array", "maxItems": 8,
                        "items": {"type": "object", "properties": {"group": {"type": "string", "maxLength": 253},
                            "kind": {"type": "string", "maxLength": 63}}}}}}}},
                "x-kubernetes-validations": [
                    {"rule": "self.all(l1, self.exists_one(l2, l1.name == l2.name))",
                     "message": "Listener name must be unique within the Gateway"},
                    {"rule": "self.all(l1, self.exists_one(l2, l1.port == l2.port && l1.protocol == l2.protocol && (has(l1.hostname) && has(l2.hostname) ? l1.hostname == l2.hostname : !has(l1.hostname) && !has(l2.hostname))))",
                     "message": "Combination of port, protocol and hostname must be unique for each listener"},
                    {"rule": "self.all(l, l.protocol in ['HTTP', 'TCP', 'UDP'] ? !has(l.tls) : true)",
                     "message": "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']"},
                    {"rule": "self.all(l, has(l.allowedRoutes) && has(l.allowedRoutes.kinds) ? l.allowedRoutes.kinds.all(k, k.kind.size() > 0) : true)"},
                ]},
            "addresses": {"type": "array", "maxItems": 16, "items": {"type": "object",
                "properties": {"type": {"type": "string", "maxLength": 253}, "value": {"type": "string", "maxLength": 253}},
                "x-kubernetes-validations": [
                    {"rule": "self.type == 'IPAddress' ? isIP(self.value) : true", "message": "value must be an IP address"},
                    {"rule": r"self.type == 'Hostname' ? self.value.matches(r'^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$') : true",
                     "message": "value must be a hostname"}]},
                "x-kubernetes-validations": [{"rule": "self.all(a1, a1.type in ['IPAddress', 'Hostname'] ? self.exists_one(a2, a2.type == a1.type && a2.value == a1.value) : true)",
                    "message": "IPAddress values must be unique"}]},
        }}}})
    }

    /// Shaped as Gateway API's HTTPRoute: at most 32 parentRefs compared pairwise (`all`
    /// in `all`, `__namespace__`), at most 16 rules of at most 64 matches whose paths
    /// (at most 1024 characters) are checked with `startsWith`, `contains` and `matches`,
    /// filters whose unbounded `type` is compared with literals, and the rules' match
    /// count summed over 16 `?:` terms.
    pub(crate) fn httproute_like() -> Value {
        let ref_props = json!({"group": {"type": "string", "maxLength": 253}, "kind": {"type": "string", "maxLength": 63},
            "name": {"type": "string", "maxLength": 253}, "namespace": {"type": "string", "maxLength": 63},
            "sectionName": {"type": "string", "maxLength": 253}, "port": {"type": "integer"}});
        let sum: Vec<String> = (0..16).map(|i| format!("(self.size() > {i} ? self[{i}].matches.size() : 0)")).collect();
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "parentRefs": {"type": "array", "maxItems": 32, "items": {"type": "object", "required": ["name"], "properties": ref_props},
                "x-kubernetes-validations": [{"rule": "self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) ? ((!has(p1.sectionName) || p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '') && (!has(p1.port) || p1.port == 0) == (!has(p2.port) || p2.port == 0)): true))",
                    "message": "sectionName or port must be specified when parentRefs includes 2 or more references to the same parent"}]},
            "hostnames": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 253}},
            "rules": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 253},
                "matches": {"type": "array", "maxItems": 64, "items": {"type": "object", "properties": {
                    "path": {"type": "object", "properties": {
                        "type": {"type": "string", "enum": ["Exact", "PathPrefix", "RegularExpression"]},
                        "value": {"type": "string", "maxLength": 1024}},
                        "x-kubernetes-validations": [
                            {"rule": "(self.type in ['Exact', 'PathPrefix']) ? self.value.startsWith('/') : true", "message": "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"},
                            {"rule": "(self.type in ['Exact', 'PathPrefix']) ? !self.value.contains('//') : true", "message": "must not contain '//' when type one of ['Exact', 'PathPrefix']"},
                            {"rule": r"(self.type in ['Exact', 'PathPrefix']) ? self.value.matches(r'^(?:[-A-Za-z0-9/._~!$&()*+,;=:@]|[%][0-9a-fA-F]{2})+$') : true",
                             "message": "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']"}]},
                    "headers": {"type": "array", "maxItems": 16, "items": {"type": "object", "properties": {
                        "name": {"type": "string", "maxLength": 256}, "value": {"type": "string", "maxLength": 4096}}}}}}},
                "filters": {"type": "array", "maxItems": 16, "items": {"type": "object", "required": ["type"],
                    "properties": {"type": {"type": "string"}}},
                    "x-kubernetes-validations": [
                        {"rule": "!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))", "message": "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both"},
                        {"rule": "self.filter(f, f.type == 'RequestHeaderModifier').size() <= 1", "message": "RequestHeaderModifier filter cannot be repeated"},
                        {"rule": "self.filter(f, f.type == 'URLRewrite').size() <= 1", "message": "URLRewrite filter cannot be repeated"}]}}},
                "x-kubernetes-validations": [
                    {"rule": format!("{} <= 128", sum.join(" + ")), "message": "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128"},
                    {"rule": "self.all(l1, !has(l1.name) || self.exists_one(l2, has(l2.name) && l1.name == l2.name))", "message": "Rule name must be unique within the route"}]},
        }}}})
    }

    /// Shaped as prometheus-operator's AlertmanagerConfig: unbounded lists of receivers
    /// with unbounded lists of configs, whose objects carry a rule (the cardinality is the
    /// node's own, from the request size), and a route whose rule uses unbounded strings.
    pub(crate) fn alertmanagerconfig_like() -> Value {
        let sigv4 = json!({"type": "object", "properties": {"region": {"type": "string"}, "roleArn": {"type": "string"},
            "externalId": {"type": "string"}, "profile": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "!has(self.externalId) || has(self.roleArn)", "message": "externalId requires roleArn"}]});
        let config = json!({"type": "object", "properties": {"apiURL": {"type": "string"}, "sigv4": sigv4}});
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "receivers": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "minLength": 1},
                "snsConfigs": {"type": "array", "items": config.clone()},
                "webhookConfigs": {"type": "array", "items": config}}}},
            "route": {"type": "object", "properties": {"receiver": {"type": "string"},
                "groupBy": {"type": "array", "items": {"type": "string"}},
                "matchers": {"type": "array", "items": {"type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string", "minLength": 1}, "matchType": {"type": "string", "enum": ["!=", "=", "=~", "!~"]},
                        "value": {"type": "string"}}}}},
                "x-kubernetes-validations": [{"rule": "!has(self.matchers) || self.matchers.all(m, m.matchType != '=~' || size(m.value) > 0)"}]}}}}})
    }

    /// The CRDs Gateway API and prometheus-operator ship are accepted, as kube accepts
    /// them: their comparisons are charged by the smaller operand, their cardinalities
    /// by kube's `MaxCardinality`.
    #[test]
    fn real_crd_shapes_are_accepted() {
        for (name, schema) in [
            ("gateway", gateway_like()),
            ("httproute", httproute_like()),
            ("alertmanagerconfig", alertmanagerconfig_like()),
        ] {
            assert_eq!(errors_of(schema), Vec::<String>::new(), "{name}");
        }
        // What kube charges for the heaviest of them.
        let listeners = &gateway_like()["properties"]["spec"]["properties"]["listeners"];
        // all: self and its result 2, 64 × (condition 2 + `&&`'s accumulator 1 + exists_one);
        // exists_one: self and its result 3, 64 × (the comparison + `?:` 2); the comparison:
        // two selects 4, and a tenth of the names' size (253 × 4), 102.
        let exists_one = 3 + 64 * (4 + 102 + 2);
        assert_eq!(
            cost_of(listeners, "self.all(l1, self.exists_one(l2, l1.name == l2.name))"),
            2 + 64 * (3 + exists_one)
        );
        let parent_refs = &httproute_like()["properties"]["spec"]["properties"]["parentRefs"];
        let rule = parent_refs["x-kubernetes-validations"][0]["rule"].as_str().unwrap_or_default();
        assert!(cost_of(parent_refs, rule) < PER_RULE_LIMIT / 10, "{}", cost_of(parent_refs, rule));
    }

    /// Quadratic loops over unbounded lists, and a regex over an unbounded string in an
    /// unbounded list, stay Forbidden, with kube's message.
    #[test]
    fn expensive_real_shapes_are_still_forbidden() {
        let mut quadratic = alertmanagerconfig_like();
        quadratic["properties"]["spec"]["properties"]["receivers"]["x-kubernetes-validations"] =
            json!([{"rule": "self.all(r1, self.exists_one(r2, r1.name == r2.name))"}]);
        let errs = errors_of(quadratic);
        assert!(
            errs[0].starts_with("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[receivers].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"),
            "{errs:#?}"
        );
        let mut regex = alertmanagerconfig_like();
        regex["properties"]["spec"]["properties"]["route"]["properties"]["groupBy"]["x-kubernetes-validations"] =
            json!([{"rule": "self.all(g, g.matches('^[a-zA-Z_][a-zA-Z0-9_]*$'))"}]);
        let errs = errors_of(regex);
        assert!(
            errs[0].starts_with("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[route].properties[groupBy].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"),
            "{errs:#?}"
        );
    }

    #[test]
    fn unbounded_regexes_and_nested_loops_are_forbidden() {
        let regex = errors_of(with_rule(json!({"type": "string"}), "self.names.all(x, x.matches('^[a-z]+$'))"));
        assert_eq!(regex.len(), 3, "{regex:#?}");
        assert!(regex[0].starts_with(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength"
        ), "{regex:#?}");
        assert_eq!(
            regex[1],
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
        );
        assert!(regex[2].starts_with(
            "spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total"
        ));
        let nested = with_rule(json!({"type": "integer"}), "self.names.all(x, self.names.all(y, x <= y))");
        assert!(!errors_of(nested).is_empty(), "quadratic over an unbounded list");
    }

    #[test]
    fn messages_report_the_factor_as_kube() {
        let node = json!({"type": "array", "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, x > 0) && self.all(x, x < 9)"}]});
        let schema = json!({"type": "object", "properties": {"a": node}});
        let errs = errors_of(schema);
        // 2 × (1 + 5 × 1572863 + 1) = 15728634: 1.572863x.
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(errs[0].contains("exceeds budget by factor of 1.6x"), "{errs:#?}");
    }

    #[test]
    fn unbounded_cardinality_is_the_nodes_own() {
        // A rule on objects in a list in an unbounded list: kube multiplies by the request
        // size over the node's smallest serialization, not by each list's estimate.
        let leaf = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "!has(self.a) || has(self.b)"}]});
        let schema = json!({"type": "object", "properties": {"outer": list_of(json!({"type": "object",
            "properties": {"inner": list_of(leaf)}}))}});
        // 3 (`!` 1, each has() 1) × 3145728 / 3: within the budget.
        assert!(errors_of(schema).is_empty());
        let mut walk = Walk { errors: Vec::new(), total: 0, most_expensive: Vec::new() };
        let schema = json!({"type": "object", "properties": {"outer": list_of(json!({"type": "object",
            "properties": {"inner": list_of(json!({"type": "object", "properties": {"a": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "has(self.a)"}]}))}}))}});
        walk.node(&schema, Some(Decl::new(&schema, true)), "", Some(1));
        assert_eq!(walk.total, MAX_REQUEST_BYTES / 3);
    }

    #[test]
    fn runtime_cost_follows_the_value_not_the_bounds() {
        let node = json!({"type": "object", "properties": {"a": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}}}});
        let program = Program::compile("self.a.all(x, self.a.all(y, x != y || true))").expect("rule");
        let expr = &program.expression().expr;
        let small = json!({"a": (0..10).collect::<Vec<i32>>()});
        let large = json!({"a": (0..1000).collect::<Vec<i32>>()});
        assert!(runtime_cost(expr, &node, &small) < 10_000);
        assert!(runtime_cost(expr, &node, &large) > PER_CALL_LIMIT);
        let strings = json!({"type": "object", "properties": {"s": {"type": "string"}}});
        let program = Program::compile("self.s.matches('^[a-z]+$')").expect("rule");
        assert!(runtime_cost(&program.expression().expr, &strings, &json!({"s": "abc"})) < 10);
        let mut budget = RuntimeBudget::default();
        assert!(budget.spend(PER_REQUEST_BUDGET - 1) && !budget.exhausted());
        assert!(!budget.spend(2) && budget.exhausted());
    }

    #[test]
    fn rules_on_list_items_run_once_per_item() {
        let item = json!({"type": "object", "properties": {"v": {"type": "string", "maxLength": 10000}},
                          "x-kubernetes-validations": [{"rule": "self.v.contains('x')"}]});
        let schema = json!({"type": "object", "properties": {"items": {"type": "array", "items": item}}});
        assert!(!errors_of(schema.clone()).is_empty(), "4002 units times a million items");
        let mut bounded = schema;
        bounded["properties"]["items"]["maxItems"] = json!(10);
        assert!(errors_of(bounded).is_empty());
    }
}
