//! The depth guard of CEL expressions, shared by CRD validation rules (`cel.rs`) and
//! ValidatingAdmissionPolicies: the parser and the evaluator of the `cel` crate recurse
//! once per level of the syntax tree, so an expression nested deep enough (a long `+`
//! chain, deep brackets) overflows the stack and aborts the server. As cel-go, a tree
//! deeper than 250 levels is a compile error; trees that may be deep are parsed and
//! evaluated on a larger stack of their own.

use kube_cel::cel::Program;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// cel-go's limit on the depth of an expression's syntax tree.
const MAX_RECURSION_DEPTH: usize = 250;

/// More operators than this cannot make a tree within [`MAX_RECURSION_DEPTH`] that a
/// rule would use; such a text is refused before it is parsed.
const MAX_OPERATORS: usize = 20_000;

/// The stack parsing or evaluating a deep tree gets (the parser and the evaluator
/// recurse once per level, with large frames in debug builds).
pub(crate) const DEEP_STACK: usize = 32 << 20;

/// Trees up to this depth are parsed and evaluated on the caller's stack.
pub(crate) const SHALLOW_DEPTH: usize = 24;

fn too_deep() -> String {
    format!("compilation failed: ERROR: <input>:1:1: max recursion depth exceeded: {MAX_RECURSION_DEPTH}")
}

/// Parses `source`, refusing (as cel-go does) a tree deeper than [`MAX_RECURSION_DEPTH`];
/// returns the program and its depth. A text whose bracket nesting alone is too deep,
/// or that has more operators than any usable tree, is refused before parsing; one
/// that may make a deep tree is parsed on a stack of [`DEEP_STACK`].
pub(crate) fn parse(source: &str) -> Result<(Program, usize), String> {
    let (nesting, operators) = shape(source);
    if nesting > MAX_RECURSION_DEPTH || operators > MAX_OPERATORS {
        return Err(too_deep());
    }
    let compile = || {
        let program = Program::compile(source).map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("").trim().to_string();
            format!("compilation failed: ERROR: <input>: {first}")
        })?;
        // A tree too deep is dropped here, on the stack it was built on.
        match depth(program.expression()) {
            d if d > MAX_RECURSION_DEPTH => Err(too_deep()),
            d => Ok((program, d)),
        }
    };
    if nesting + operators <= SHALLOW_DEPTH { compile() } else { stacker::grow(DEEP_STACK, compile) }
}

/// The deepest bracket nesting of `source` and how many operators it has (both outside
/// string literals): together an upper bound of its tree's depth.
fn shape(source: &str) -> (usize, usize) {
    let (mut depth, mut max, mut operators) = (0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                max = max.max(depth);
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            (None, '.' | '+' | '-' | '*' | '/' | '%' | '&' | '|' | '=' | '<' | '>' | '!' | '?' | ',') => operators += 1,
            _ => {}
        }
    }
    (max, operators)
}

/// The depth of a syntax tree, measured without recursion.
pub(crate) fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        let mut children: Vec<&IdedExpr> = Vec::new();
        match &e.expr {
            Expr::Select(s) => children.push(&s.operand),
            Expr::Call(c) => {
                children.extend(c.target.as_deref());
                children.extend(&c.args);
            }
            Expr::List(l) => children.extend(&l.elements),
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        children.push(&me.key);
                        children.push(&me.value);
                    }
                }
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        children.push(&f.value);
                    }
                }
            }
            Expr::Comprehension(c) => {
                children.extend([&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]);
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
        stack.extend(children.into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// Runs `f` (parsing or evaluating an expression whose tree is `depth` deep) on the
/// caller's stack when the tree is shallow, else on a stack of [`DEEP_STACK`].
pub(crate) fn on_stack_for<T>(depth: usize, f: impl FnOnce() -> T) -> T {
    if depth <= SHALLOW_DEPTH { f() } else { stacker::grow(DEEP_STACK, f) }
}
