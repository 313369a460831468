//! The static cost of a CRD's validation rules (CEL), checked as kube-apiserver checks
//! it when a CRD is created or updated, so that no custom resource can make a rule run
//! for seconds. Each rule's worst case comes from the bounds the schema declares
//! (`maxItems`, `maxProperties`, `maxLength`) or, where it declares none, from the
//! largest object a request can carry (3 MiB), as kube estimates them; it is multiplied
//! by how many times the rule can run (once per element of every enclosing list or map).
//! A rule over kube's `StaticEstimatedCostLimit` (10^7), or rules over
//! `StaticEstimatedCRDCostLimit` (10^8) in all, are Forbidden, with kube's messages.
//!
//! The cost model follows cel-go's estimator in outline — one unit per call, select and
//! variable; a comprehension costs its range's size times its body; string and list
//! traversals cost a tenth of a unit per byte or element — but not to the unit: kube-cel
//! has no typed checker, so this walks the parsed expression with the schema beside it.
//! Written here because no crate estimates CEL cost against an OpenAPI schema.
//!
//! The same walk bounds rules while a request is validated, since the interpreter does
//! not meter cost: before a node's rules run, each rule's cost is estimated with the
//! sizes of the actual value (its lists, maps and strings) in place of the schema's
//! bounds, and a rule over kube's `PerCallLimit` (10^6) is refused without running, as
//! are rules once a request has used kube's `RuntimeCELCostBudget` (10^7).

use std::collections::HashMap;

use kube_cel::cel::common::ast::{Expr, LiteralValue};
use serde_json::{Value, json};

use super::errors::FieldError;

/// kube's limit on the request size, which bounds every unbounded list, map and string.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// kube's `StaticEstimatedCostLimit`: one rule, times the times it runs.
const PER_RULE_LIMIT: u64 = 10_000_000;
/// kube's `StaticEstimatedCRDCostLimit`: all the rules of one schema.
const PER_SCHEMA_LIMIT: u64 = 100_000_000;
/// kube's `PerCallLimit`: one rule evaluated on one value.
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// kube's `RuntimeCELCostBudget`: every rule evaluated for one request.
const PER_REQUEST_BUDGET: u64 = 10_000_000;
/// cel-go's cost per byte or element of a traversal.
const TRAVERSAL_FACTOR: f64 = 0.1;

/// The Forbidden errors of the rules in `schema` (a version's `openAPIV3Schema`, found at
/// `path`) whose estimated cost is over kube's limits.
pub(crate) fn cost_errors(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut walk = Walk { errors: Vec::new(), total: 0 };
    walk.node(schema, path, 1);
    if walk.total > PER_SCHEMA_LIMIT {
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

struct Walk {
    errors: Vec<FieldError>,
    total: u64,
}

impl Walk {
    /// Checks the rules of `node` (run `runs` times per object) and of its descendants.
    fn node(&mut self, node: &Value, path: &str, runs: u64) {
        for (i, rule) in node["x-kubernetes-validations"].as_array().into_iter().flatten().enumerate() {
            let Some(rule) = rule["rule"].as_str() else { continue };
            // A rule nested too deep is refused by the compilation (`cel_depth`).
            let Ok((program, _)) = super::cel_depth::parse(rule) else { continue };
            let cost = Estimator::for_rule(node, None).expr(&program.expression().expr).cost.saturating_mul(runs);
            self.total = self.total.saturating_add(cost);
            if cost > PER_RULE_LIMIT {
                let field = format!("{path}.x-kubernetes-validations[{i}].rule");
                self.errors.push(FieldError::forbidden(&field, &exceeds("estimated rule cost", cost, PER_RULE_LIMIT)));
            }
        }
        for (key, child) in node["properties"].as_object().into_iter().flatten() {
            self.node(child, &format!("{path}.properties[{key}]"), runs);
        }
        if node["items"].is_object() {
            self.node(&node["items"], &format!("{path}.items"), runs.saturating_mul(max_count(node)));
        }
        if node["additionalProperties"].is_object() {
            let each = runs.saturating_mul(max_count(node));
            self.node(&node["additionalProperties"], &format!("{path}.additionalProperties"), each);
        }
    }
}

/// The smallest JSON a value of `node` can take.
fn min_size(node: &Value) -> u64 {
    match node["type"].as_str() {
        Some("string") => 2,
        Some("array" | "object") => 2,
        _ => 1,
    }
}

/// The most elements of a list or entries of a map `node` can hold.
fn max_count(node: &Value) -> u64 {
    let declared = node["maxItems"].as_u64().or_else(|| node["maxProperties"].as_u64());
    declared.unwrap_or_else(|| {
        let element = if node["items"].is_object() { &node["items"] } else { &node["additionalProperties"] };
        // A map entry also carries a key: `"":` at least.
        let key = if node["items"].is_object() { 0 } else { 3 };
        (MAX_REQUEST_BYTES - 2) / (min_size(element) + key + 1)
    })
}

/// The most bytes or elements a value of `node` can have, for traversal costs.
fn max_size(node: &Value) -> u64 {
    match node["type"].as_str() {
        Some("string") => node["maxLength"].as_u64().unwrap_or(MAX_REQUEST_BYTES - 2),
        Some("array") => max_count(node),
        Some("object") if node["additionalProperties"].is_object() => max_count(node),
        _ => 1,
    }
}

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
/// the value's own sizes in place of the schema's bounds.
pub(crate) fn runtime_cost(expr: &Expr, node: &Value, value: &Value) -> u64 {
    Estimator::for_rule(node, Some(value)).expr(expr).cost
}

/// What the estimator knows of an expression: its worst-case cost, the schema node of
/// its value when it is a field of the object, the value itself when one is being
/// validated, and its size for literals and comprehension results.
#[derive(Default)]
struct Estimate<'a> {
    cost: u64,
    node: Option<&'a Value>,
    value: Option<&'a Value>,
    size: Option<u64>,
}

impl Estimate<'_> {
    fn size(&self) -> u64 {
        let actual = self.value.and_then(|v| match v {
            Value::String(s) => Some(s.len() as u64),
            Value::Array(a) => Some(a.len() as u64),
            Value::Object(m) => Some(m.len() as u64),
            _ => None,
        });
        self.size.or(actual).or_else(|| self.node.map(max_size)).unwrap_or(1)
    }
}

/// Walks one rule's expression with the schema nodes (and, at runtime, the values) its
/// variables stand for.
struct Estimator<'a> {
    vars: HashMap<String, (&'a Value, Option<&'a Value>)>,
}

impl<'a> Estimator<'a> {
    fn for_rule(node: &'a Value, value: Option<&'a Value>) -> Self {
        let bound = (node, value);
        let vars = HashMap::from([("self".to_string(), bound), ("oldSelf".to_string(), bound)]);
        Estimator { vars }
    }

    fn expr(&mut self, expr: &Expr) -> Estimate<'a> {
        match expr {
            Expr::Ident(name) => match self.vars.get(name) {
                Some(&(node, value)) => Estimate { cost: 1, node: Some(node), value, size: None },
                None => Estimate { cost: 1, ..Default::default() },
            },
            Expr::Literal(LiteralValue::String(s)) => Estimate { size: Some(s.len() as u64), ..Default::default() },
            Expr::Literal(_) => Estimate::default(),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand.expr);
                let node = operand.node.and_then(|n| field_node(n, &select.field));
                let value = operand.value.and_then(|v| v.get(&select.field));
                let cost = operand.cost.saturating_add(1);
                if select.test {
                    Estimate { cost, ..Default::default() }
                } else {
                    Estimate { cost, node, value, size: None }
                }
            }
            Expr::List(list) => {
                let cost = list.elements.iter().map(|e| self.expr(&e.expr).cost).fold(1u64, u64::saturating_add);
                Estimate { cost, size: Some(list.elements.len() as u64), ..Default::default() }
            }
            Expr::Map(map) => Estimate { cost: 1u64.saturating_add(map.entries.len() as u64), ..Default::default() },
            Expr::Call(call) => {
                let target = call.target.as_ref().map(|t| self.expr(&t.expr));
                let args: Vec<Estimate<'a>> = call.args.iter().map(|a| self.expr(&a.expr)).collect();
                let inputs = target.iter().chain(&args).map(|e| e.cost).fold(0u64, u64::saturating_add);
                let subject = target.as_ref().or(args.first());
                let own = call_cost(&call.func_name, subject, &args);
                let node = match call.func_name.as_str() {
                    "_[_]" => args.first().and_then(|a| a.node).and_then(element_node),
                    _ => None,
                };
                Estimate { cost: inputs.saturating_add(own), node, ..Default::default() }
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range.expr);
                let count = range.size();
                let element = range.node.and_then(element_node).unwrap_or(&ANY_SCHEMA);
                let saved = self.vars.insert(c.iter_var.clone(), (element, range.value.and_then(largest_element)));
                let init = self.expr(&c.accu_init.expr).cost;
                let per_element = self.expr(&c.loop_cond.expr).cost.saturating_add(self.expr(&c.loop_step.expr).cost);
                let result = self.expr(&c.result.expr).cost;
                match saved {
                    Some(v) => self.vars.insert(c.iter_var.clone(), v),
                    None => self.vars.remove(&c.iter_var),
                };
                let cost = range
                    .cost
                    .saturating_add(init)
                    .saturating_add(count.saturating_mul(per_element))
                    .saturating_add(result);
                Estimate { cost, size: Some(count), ..Default::default() }
            }
            _ => Estimate { cost: 1, ..Default::default() },
        }
    }
}

/// The element of a list that costs the most to visit (the longest string or list, the
/// object with the most fields), standing for every element of a comprehension.
fn largest_element(v: &Value) -> Option<&Value> {
    let measure = |e: &&Value| match e {
        Value::String(s) => s.len(),
        Value::Array(a) => a.len(),
        Value::Object(m) => m.len(),
        _ => 0,
    };
    v.as_array()?.iter().max_by_key(measure)
}

/// The cost of a call itself, beyond evaluating its target and arguments.
fn call_cost(func: &str, subject: Option<&Estimate<'_>>, args: &[Estimate<'_>]) -> u64 {
    let traverse = |size: u64| 1 + (size as f64 * TRAVERSAL_FACTOR).ceil() as u64;
    let subject_size = subject.map_or(1, Estimate::size);
    match func {
        // Scans of a string or list.
        "contains" | "startsWith" | "endsWith" | "matches" | "find" | "findAll" | "split" | "replace"
        | "lowerAscii" | "upperAscii" | "trim" | "indexOf" | "lastIndexOf" | "join" | "substring" | "reverse"
        | "format" | "isSorted" | "sum" | "min" | "max" | "url" | "quantity" | "isQuantity" | "ip" | "cidr"
        | "isURL" => {
            let mut cost = traverse(subject_size);
            if func == "matches" || func == "find" || func == "findAll" {
                // A regex is compiled and run over the text: its size multiplies the scan.
                let pattern = args.last().map_or(1, Estimate::size);
                cost = cost.saturating_mul(traverse(pattern));
            }
            cost
        }
        // Comparisons and concatenations of strings and lists.
        "_==_" | "_!=_" | "_+_" | "_<_" | "_>_" | "_<=_" | "_>=_" => {
            let larger = args.iter().map(Estimate::size).max().unwrap_or(1);
            traverse(larger)
        }
        // Membership in a list scans it.
        "@in" => args.get(1).map_or(1, |list| 1 + list.size()),
        _ => 1,
    }
}

/// The schema of a value the estimator knows nothing of, and of a map's keys.
static ANY_SCHEMA: Value = Value::Null;
static KEY_SCHEMA: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({"type": "string"}));

/// The schema node of field `name` of an object node (a property or a map value).
fn field_node<'a>(node: &'a Value, name: &str) -> Option<&'a Value> {
    node["properties"].get(name).or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
}

/// The schema node of an element of a list, or of a key of a map (what `all`, `exists`,
/// `map` and `filter` bind their variable to).
fn element_node(node: &Value) -> Option<&Value> {
    if node["items"].is_object() {
        return Some(&node["items"]);
    }
    if node["additionalProperties"].is_object() || node["type"] == "object" {
        return Some(&KEY_SCHEMA);
    }
    None
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

    fn with_rule(items: Value, rule: &str) -> Value {
        json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"names": {"type": "array", "items": items}},
            "x-kubernetes-validations": [{"rule": rule}],
        }}})
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

    #[test]
    fn unbounded_regexes_and_nested_loops_are_forbidden() {
        let regex = errors_of(with_rule(json!({"type": "string"}), "self.names.all(x, x.matches('^[a-z]+$'))"));
        assert_eq!(regex.len(), 2, "{regex:#?}");
        assert!(regex[0].starts_with(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength"
        ), "{regex:#?}");
        assert!(regex[1].starts_with(
            "spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total"
        ));
        let nested = with_rule(json!({"type": "integer"}), "self.names.all(x, self.names.all(y, x <= y))");
        assert!(!errors_of(nested).is_empty(), "quadratic over an unbounded list");
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
        let mut budget = RuntimeBudget::default();
        assert!(budget.spend(PER_REQUEST_BUDGET - 1) && !budget.exhausted());
        assert!(!budget.spend(2) && budget.exhausted());
    }

    #[test]
    fn rules_on_list_items_run_once_per_item() {
        let item = json!({"type": "object", "properties": {"v": {"type": "string", "maxLength": 10000}},
                          "x-kubernetes-validations": [{"rule": "self.v.contains('x')"}]});
        let schema = json!({"type": "object", "properties": {"items": {"type": "array", "items": item}}});
        assert!(!errors_of(schema.clone()).is_empty(), "1001 units times a million items");
        let mut bounded = schema;
        bounded["properties"]["items"]["maxItems"] = json!(10);
        assert!(errors_of(bounded).is_empty());
    }
}
