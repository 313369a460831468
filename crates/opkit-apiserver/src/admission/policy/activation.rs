//! The values a policy's expressions see (kube's CEL activation): JSON objects turned
//! into CEL values, the `request` object, and evaluation with kube's error wording. The
//! context with the Kubernetes CEL libraries registered once is shared with admission
//! webhooks' `matchConditions`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Value as Cel};
use serde_json::Value;

use super::expr::Expression;
use crate::schema::cel_depth::on_stack_for;

/// A JSON value as CEL sees it: integers are `int` (`uint` only beyond `int`'s range),
/// objects are maps with string keys.
pub(crate) fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(o) => {
            let map: HashMap<Key, Cel> = o.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v))).collect();
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

/// The Kubernetes CEL libraries, registered once and shared by every evaluation.
fn libraries() -> &'static Context<'static> {
    static LIBRARIES: OnceLock<Context<'static>> = OnceLock::new();
    LIBRARIES.get_or_init(|| Context::default().with_all())
}

/// A context with the Kubernetes CEL libraries and `vars` bound.
pub(crate) fn context(vars: &[(&str, &Value)]) -> Context<'static> {
    let mut ctx = libraries().new_inner_scope();
    bind(&mut ctx, vars);
    ctx
}

/// A context of its own (functions may be added to it: the `authorizer`'s, which
/// answer for one request), with the libraries and `vars` bound.
pub(crate) fn root_context(vars: &[(&str, &Value)]) -> Context<'static> {
    let mut ctx = Context::default().with_all();
    bind(&mut ctx, vars);
    ctx
}

fn bind(ctx: &mut Context<'static>, vars: &[(&str, &Value)]) {
    for (name, value) in vars {
        ctx.add_variable_from_value(*name, to_cel(value));
    }
}

/// Runs `e`; an error is worded as kube words it
/// (`expression '<e>' resulted in error: <why>`).
pub(crate) fn eval(e: &Expression, ctx: &Context<'_>) -> Result<Cel, String> {
    on_stack_for(e.depth, || e.program.execute(ctx)).map_err(|err| {
        // cel-go words these in lower case (`no such key: x`, `no such overload`).
        let why = err.to_string();
        let why = match why.strip_prefix("No such") {
            Some(rest) => format!("no such{rest}"),
            None => why,
        };
        format!("expression '{}' resulted in error: {why}", e.source)
    })
}

/// Runs a boolean expression (validations, match conditions).
pub(crate) fn eval_bool(e: &Expression, ctx: &Context<'_>) -> Result<bool, String> {
    match eval(e, ctx)? {
        Cel::Bool(b) => Ok(b),
        other => Err(format!(
            "expression '{}' resulted in error: expected a boolean, got {}",
            e.source,
            cel_type_name(&other)
        )),
    }
}

/// The CEL type name of a value, for errors.
pub(crate) fn cel_type_name(v: &Cel) -> &'static str {
    match v {
        Cel::Null => "null_type",
        Cel::Bool(_) => "bool",
        Cel::Int(_) => "int",
        Cel::UInt(_) => "uint",
        Cel::Float(_) => "double",
        Cel::String(_) => "string",
        Cel::Bytes(_) => "bytes",
        Cel::List(_) => "list",
        Cel::Map(_) => "map",
        _ => "dyn",
    }
}
