//! One CEL expression of a policy: compiled against the variables a
//! ValidatingAdmissionPolicy declares (`object`, `oldObject`, `request`, `params`,
//! `namespaceObject`, `variables`, `authorizer`), with kube's compile errors for a
//! parse error, an undeclared reference or an undefined variable.

use std::collections::BTreeSet;

use kube_cel::cel::Program;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};

pub(crate) use crate::schema::cel_depth::parse;

/// What the expressions of one policy may refer to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declarations {
    /// The policy has a `paramKind`, so `params` is declared.
    pub params: bool,
    /// The names of the variables declared so far (`variables.<name>`).
    pub variables: Vec<String>,
}

/// The variables every policy expression may use, besides `params` and `variables`.
const ALWAYS_DECLARED: [&str; 5] = ["object", "oldObject", "request", "namespaceObject", "authorizer"];

/// A compiled expression and its text.
pub(crate) struct Expression {
    /// The expression as written.
    pub source: String,
    /// The program.
    pub program: Program,
    /// The depth of its syntax tree.
    pub depth: usize,
}

impl std::fmt::Debug for Expression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expression").field("source", &self.source).finish_non_exhaustive()
    }
}

impl Expression {
    /// Compiles `source`; the error is kube's detail (`compilation failed: ERROR: ...`).
    pub(crate) fn compile(source: &str, decls: &Declarations) -> Result<Expression, String> {
        let (program, depth) = parse(source)?;
        let mut problems = Vec::new();
        check_references(program.expression(), decls, &mut BTreeSet::new(), &mut problems);
        if let Some(p) = problems.first() {
            let column = column_of(source, p);
            return Err(format!("compilation failed: ERROR: <input>:1:{column}: {}", p.message()));
        }
        Ok(Expression { source: source.to_string(), program, depth })
    }
}

/// A reference the declarations do not allow.
enum Problem {
    /// An identifier nothing declares.
    Undeclared(String),
    /// `variables.<name>` for a variable not declared (yet).
    UndefinedVariable(String),
}

impl Problem {
    fn message(&self) -> String {
        match self {
            Problem::Undeclared(name) => format!("undeclared reference to '{name}' (in container '')"),
            Problem::UndefinedVariable(name) => format!("undefined field '{name}'"),
        }
    }
}

/// The 1-based column of the reference in `source`, as cel-go reports it.
fn column_of(source: &str, problem: &Problem) -> usize {
    let found = match problem {
        Problem::Undeclared(name) => source.find(name.as_str()),
        Problem::UndefinedVariable(name) => source.find(&format!("variables.{name}")).map(|i| i + "variables".len()),
    };
    found.map_or(1, |i| source[..i].chars().count() + 1)
}

/// Walks `e`, recording identifiers that are neither declared nor bound by an
/// enclosing comprehension (`bound`).
fn check_references(e: &IdedExpr, decls: &Declarations, bound: &mut BTreeSet<String>, out: &mut Vec<Problem>) {
    match &e.expr {
        Expr::Ident(name) => {
            let declared = ALWAYS_DECLARED.contains(&name.as_str())
                || (name == "params" && decls.params)
                || name == "variables"
                || bound.contains(name);
            if !declared {
                out.push(Problem::Undeclared(name.clone()));
            }
        }
        Expr::Select(s) => {
            if let Expr::Ident(root) = &s.operand.expr
                && root == "variables"
                && !bound.contains(root)
                && !decls.variables.contains(&s.field)
            {
                out.push(Problem::UndefinedVariable(s.field.clone()));
            }
            check_references(&s.operand, decls, bound, out);
        }
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                check_references(t, decls, bound, out);
            }
            for a in &c.args {
                check_references(a, decls, bound, out);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| check_references(x, decls, bound, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    check_references(&me.key, decls, bound, out);
                    check_references(&me.value, decls, bound, out);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    check_references(&f.value, decls, bound, out);
                }
            }
        }
        Expr::Comprehension(c) => {
            check_references(&c.iter_range, decls, bound, out);
            check_references(&c.accu_init, decls, bound, out);
            let mut inner = bound.clone();
            inner.insert(c.iter_var.clone());
            if let Some(v2) = &c.iter_var2 {
                inner.insert(v2.clone());
            }
            inner.insert(c.accu_var.clone());
            for part in [&c.loop_cond, &c.loop_step, &c.result] {
                check_references(part, decls, &mut inner, out);
            }
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The field paths an expression reads from `object` or `oldObject` (each a list of
/// segments, `[]` for a list item or map value), for the type checker.
pub(crate) fn object_paths(e: &IdedExpr) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect_paths(e, &mut out);
    out
}

fn collect_paths(e: &IdedExpr, out: &mut Vec<Vec<String>>) {
    if let Some(path) = object_path(e) {
        if !path.is_empty() {
            out.push(path);
        }
        // The operands of a path are parts of it, except index arguments.
        visit_index_args(e, out);
        return;
    }
    match &e.expr {
        Expr::Select(s) => collect_paths(&s.operand, out),
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                collect_paths(t, out);
            }
            c.args.iter().for_each(|a| collect_paths(a, out));
        }
        Expr::List(l) => l.elements.iter().for_each(|x| collect_paths(x, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    collect_paths(&me.key, out);
                    collect_paths(&me.value, out);
                }
            }
        }
        Expr::Comprehension(c) => {
            for part in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                collect_paths(part, out);
            }
        }
        _ => {}
    }
}

fn visit_index_args(e: &IdedExpr, out: &mut Vec<Vec<String>>) {
    match &e.expr {
        Expr::Select(s) => visit_index_args(&s.operand, out),
        Expr::Call(c) if c.func_name == "_[_]" && c.args.len() == 2 => {
            visit_index_args(&c.args[0], out);
            collect_paths(&c.args[1], out);
        }
        _ => {}
    }
}

/// `object.a.b[0].c` as `["a", "b", "[]", "c"]`; None when `e` is not such a path.
fn object_path(e: &IdedExpr) -> Option<Vec<String>> {
    match &e.expr {
        Expr::Ident(root) if root == "object" || root == "oldObject" => Some(Vec::new()),
        Expr::Select(s) => {
            let mut p = object_path(&s.operand)?;
            p.push(s.field.clone());
            Some(p)
        }
        Expr::Call(c) if c.func_name == "_[_]" && c.args.len() == 2 => {
            let mut p = object_path(&c.args[0])?;
            p.push("[]".to_string());
            Some(p)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_chains_are_refused_as_too_deep_without_overflowing() {
        let sum = vec!["1"; 3000].join(" + ");
        let err = Expression::compile(&sum, &Declarations::default()).map(|_| ()).expect_err("too deep");
        assert!(err.contains("max recursion depth exceeded"), "{err}");
        // Logical chains are balanced, as cel-go balances them.
        let all = vec!["object.a"; 1000].join(" && ");
        let e = Expression::compile(&all, &Declarations::default()).expect("balanced");
        assert!(e.depth < 20, "{}", e.depth);
    }

    #[test]
    fn deep_nesting_is_a_compile_error() {
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        let err = Expression::compile(&deep, &Declarations::default()).map(|_| ()).expect_err("too deep");
        assert!(err.contains("max recursion depth exceeded"), "{err}");
    }

    #[test]
    fn a_tree_within_the_limit_compiles_and_runs() {
        let text = vec!["1"; 200].join(" + ") + " == 200";
        let e = Expression::compile(&text, &Declarations::default()).expect("compiles");
        let ctx = super::super::activation::context(&[]);
        assert_eq!(super::super::activation::eval_bool(&e, &ctx), Ok(true));
    }
}
