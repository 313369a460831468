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

use std::collections::HashMap;

use kube_cel::cel::Program;
use kube_cel::cel::common::ast::{Expr, LiteralValue};
use serde_json::{Value, json};

use super::errors::FieldError;

/// kube's limit on the request size, which bounds every unbounded list, map and string.
const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// kube's `StaticEstimatedCostLimit`: one rule, times the times it runs.
const PER_RULE_LIMIT: u64 = 10_000_000;
/// kube's `StaticEstimatedCRDCostLimit`: all the rules of one schema.
const PER_SCHEMA_LIMIT: u64 = 100_000_000;
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
            let Ok(program) = Program::compile(rule) else { continue };
            let cost = Estimator::for_rule(node).expr(&program.expression().expr).cost.saturating_mul(runs);
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

/// What the estimator knows of an expression: its worst-case cost, the schema node of
/// its value when it is a field of the object, and its size for literals.
#[derive(Default)]
struct Estimate {
    cost: u64,
    node: Option<Value>,
    size: Option<u64>,
}

impl Estimate {
    fn size(&self) -> u64 {
        self.size.or_else(|| self.node.as_ref().map(max_size)).unwrap_or(1)
    }
}

/// Walks one rule's expression with the schema nodes its variables stand for.
struct Estimator {
    vars: HashMap<String, Value>,
}

impl Estimator {
    fn for_rule(node: &Value) -> Self {
        let vars = HashMap::from([("self".to_string(), node.clone()), ("oldSelf".to_string(), node.clone())]);
        Estimator { vars }
    }

    fn expr(&mut self, expr: &Expr) -> Estimate {
        match expr {
            Expr::Ident(name) => Estimate { cost: 1, node: self.vars.get(name).cloned(), size: None },
            Expr::Literal(LiteralValue::String(s)) => Estimate { size: Some(s.len() as u64), ..Default::default() },
            Expr::Literal(_) => Estimate::default(),
            Expr::Select(select) => {
                let operand = self.expr(&select.operand.expr);
                let node = operand.node.as_ref().and_then(|n| field_node(n, &select.field));
                Estimate {
                    cost: operand.cost.saturating_add(1),
                    node: if select.test { None } else { node },
                    size: None,
                }
            }
            Expr::List(list) => {
                let cost = list.elements.iter().map(|e| self.expr(&e.expr).cost).fold(1u64, u64::saturating_add);
                Estimate { cost, node: None, size: Some(list.elements.len() as u64) }
            }
            Expr::Map(map) => Estimate { cost: 1u64.saturating_add(map.entries.len() as u64), node: None, size: None },
            Expr::Call(call) => {
                let target = call.target.as_ref().map(|t| self.expr(&t.expr));
                let args: Vec<Estimate> = call.args.iter().map(|a| self.expr(&a.expr)).collect();
                let inputs = target.iter().chain(&args).map(|e| e.cost).fold(0u64, u64::saturating_add);
                let subject = target.as_ref().or(args.first());
                let own = call_cost(&call.func_name, subject, &args);
                let node = match call.func_name.as_str() {
                    "_[_]" => args.first().and_then(|a| a.node.as_ref()).and_then(element_node),
                    _ => None,
                };
                Estimate { cost: inputs.saturating_add(own), node, size: None }
            }
            Expr::Comprehension(c) => {
                let range = self.expr(&c.iter_range.expr);
                let count = range.size();
                let element = range.node.as_ref().and_then(element_node).unwrap_or_else(|| json!({}));
                let saved = self.vars.insert(c.iter_var.clone(), element);
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
                Estimate { cost, node: None, size: Some(count) }
            }
            _ => Estimate { cost: 1, ..Default::default() },
        }
    }
}

/// The cost of a call itself, beyond evaluating its target and arguments.
fn call_cost(func: &str, subject: Option<&Estimate>, args: &[Estimate]) -> u64 {
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

/// The schema node of field `name` of an object node (a property or a map value).
fn field_node(node: &Value, name: &str) -> Option<Value> {
    node["properties"]
        .get(name)
        .cloned()
        .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()).cloned())
}

/// The schema node of an element of a list, or of a key of a map (what `all`, `exists`,
/// `map` and `filter` bind their variable to).
fn element_node(node: &Value) -> Option<Value> {
    if node["items"].is_object() {
        return Some(node["items"].clone());
    }
    if node["additionalProperties"].is_object() || node["type"] == "object" {
        return Some(json!({"type": "string"}));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
