//! The executor of parsed templates: walks a tree with a dot and variables, evaluates
//! pipelines (fields, variables, function calls with the previous command's value as the
//! last argument) and writes the output.

use std::collections::HashMap;
use std::rc::Rc;

use super::parse::{Arg, Branch, BranchKind, Command, Node, Pipe, Tree, line_col};
use super::{TemplateError, Templates};
use crate::funcs;
use crate::value::{Value, write_go};

/// Go's limit on nested template calls.
const MAX_EXEC_DEPTH: usize = 100_000;
/// Helm's limit on nested `include`/`tpl` calls.
const MAX_INCLUDE_DEPTH: usize = 1000;

/// How a list of nodes ended.
enum Flow {
    Normal,
    Break,
    Continue,
}

/// A parsed `tpl` string: its body and the templates it defines.
type ParsedTpl = Rc<(Rc<Tree>, HashMap<Rc<str>, Rc<Tree>>)>;

/// The state of one rendering: the template set, variables and call depth.
pub struct Exec<'t> {
    templates: &'t Templates,
    /// Templates defined by `tpl` strings being executed (innermost last).
    overlays: Vec<HashMap<Rc<str>, Rc<Tree>>>,
    vars: Vec<(Rc<str>, Value)>,
    depth: usize,
    include_depth: usize,
    tpl_cache: HashMap<String, ParsedTpl>,
    /// The tree being executed (for error positions).
    tree: Option<Rc<Tree>>,
}

impl<'t> Exec<'t> {
    /// A new executor over `templates`.
    pub fn new(templates: &'t Templates) -> Exec<'t> {
        Exec {
            templates,
            overlays: Vec::new(),
            vars: Vec::new(),
            depth: 0,
            include_depth: 0,
            tpl_cache: HashMap::new(),
            tree: None,
        }
    }

    fn lookup(&self, name: &str) -> Option<Rc<Tree>> {
        for overlay in self.overlays.iter().rev() {
            if let Some(t) = overlay.get(name) {
                return Some(t.clone());
            }
        }
        self.templates.get(name).cloned()
    }

    /// Executes the template `name` with `data` as dot and `$`.
    pub fn execute(&mut self, name: &str, data: &Value) -> Result<String, TemplateError> {
        let tree = self.lookup(name).ok_or_else(|| {
            TemplateError::Exec(format!("template: no template {name:?} associated with template \"gotpl\""))
        })?;
        let mut out = String::new();
        self.run_tree(&tree, data, &mut out)?;
        Ok(out)
    }

    fn run_tree(&mut self, tree: &Rc<Tree>, data: &Value, out: &mut String) -> Result<(), TemplateError> {
        if self.depth >= MAX_EXEC_DEPTH {
            return Err(TemplateError::Exec(format!(
                "template: {}: exceeded maximum template depth ({MAX_EXEC_DEPTH})",
                tree.name
            )));
        }
        self.depth += 1;
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$".into(), data.clone())]);
        let saved_tree = self.tree.replace(tree.clone());
        // Nested `include`s and `template`s recurse here: the stack grows on the heap
        // instead of overflowing before Helm's limit of 1000 nested includes is reached.
        let result = stacker::maybe_grow(256 * 1024, 8 * 1024 * 1024, || self.walk_list(&tree.root, data, out));
        self.tree = saved_tree;
        self.vars = saved_vars;
        self.depth -= 1;
        result.map(|_| ())
    }

    /// Helm's `include`: the output of template `name` with `data`.
    pub fn include(&mut self, name: &str, data: &Value) -> Result<String, String> {
        if self.include_depth >= MAX_INCLUDE_DEPTH {
            return Err(format!("rendering template has a nested reference name: {name}: unable to execute template"));
        }
        let Some(tree) = self.lookup(name) else {
            return Err(format!("template: no template {name:?} associated with template \"gotpl\""));
        };
        self.include_depth += 1;
        let mut out = String::new();
        let result = self.run_tree(&tree, data, &mut out);
        self.include_depth -= 1;
        result.map(|_| out).map_err(|e| e.to_string())
    }

    /// Helm's `tpl`: `source` parsed as a template (named after `.Template.Name`) and
    /// executed with `data`; `<no value>` is removed from the output, as Helm does.
    pub fn tpl(&mut self, source: &str, data: &Value) -> Result<String, String> {
        if self.include_depth >= MAX_INCLUDE_DEPTH {
            return Err("rendering template has a nested reference name: tpl: unable to execute template".into());
        }
        let parsed = match self.tpl_cache.get(source) {
            Some(p) => p.clone(),
            None => {
                let name = template_name(data);
                let (tree, defines) = super::parse::parse(&name, source).map_err(|e| e.to_string())?;
                let parsed: ParsedTpl = Rc::new((Rc::new(tree), defines));
                self.tpl_cache.insert(source.to_string(), parsed.clone());
                parsed
            }
        };
        self.overlays.push(parsed.1.clone());
        self.include_depth += 1;
        let mut out = String::new();
        let result = self.run_tree(&parsed.0, data, &mut out);
        self.include_depth -= 1;
        self.overlays.pop();
        result.map_err(|e| e.to_string())?;
        Ok(out.replace("<no value>", ""))
    }

    fn walk_list(&mut self, nodes: &[Node], dot: &Value, out: &mut String) -> Result<Flow, TemplateError> {
        for node in nodes {
            match self.walk(node, dot, out)? {
                Flow::Normal => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, node: &Node, dot: &Value, out: &mut String) -> Result<Flow, TemplateError> {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Action(pipe) => {
                let value = self.eval_pipe(pipe, dot)?;
                if pipe.decl.is_empty() {
                    print_value(out, &value);
                }
            }
            Node::Branch(branch) => return self.walk_branch(branch, dot, out),
            Node::Template { name, pipe, pos } => {
                let Some(tree) = self.lookup(name) else {
                    return Err(self.error(*pos, &format!("template {name:?} not defined")));
                };
                let data = match pipe {
                    Some(p) => self.eval_pipe(p, dot)?,
                    None => Value::Nil,
                };
                self.run_tree(&tree, &data, out)?;
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_branch(&mut self, branch: &Branch, dot: &Value, out: &mut String) -> Result<Flow, TemplateError> {
        let mark = self.vars.len();
        let value = self.eval_pipe(&branch.pipe, dot)?;
        let result = match branch.kind {
            BranchKind::If => {
                if value.truthy() {
                    self.walk_list(&branch.list, dot, out)
                } else if let Some(e) = &branch.else_list {
                    self.walk_list(e, dot, out)
                } else {
                    Ok(Flow::Normal)
                }
            }
            BranchKind::With => {
                if value.truthy() {
                    self.walk_list(&branch.list, &value, out)
                } else if let Some(e) = &branch.else_list {
                    self.walk_list(e, dot, out)
                } else {
                    Ok(Flow::Normal)
                }
            }
            BranchKind::Range => self.walk_range(branch, dot, value, mark, out),
        };
        self.vars.truncate(mark);
        result
    }

    fn walk_range(
        &mut self,
        branch: &Branch,
        dot: &Value,
        value: Value,
        mark: usize,
        out: &mut String,
    ) -> Result<Flow, TemplateError> {
        // The range's own declarations were pushed by eval_pipe; they are set per element.
        let decl = &branch.pipe.decl;
        let base = mark;
        let items: Vec<(Value, Value)> = match &value {
            Value::List(l) => l.iter().enumerate().map(|(i, v)| (Value::int(i as i64), v.clone())).collect(),
            Value::Map(m) => m.borrow().iter().map(|(k, v)| (Value::str(k.as_str()), v.clone())).collect(),
            Value::Nil => Vec::new(),
            Value::Object(o) => match o.range_items() {
                Some(items) => items,
                None => {
                    return Err(self.error(
                        branch.pipe.pos,
                        &format!("range can't iterate over {}", crate::value::go_string(&value)),
                    ));
                }
            },
            other => {
                return Err(self
                    .error(branch.pipe.pos, &format!("range can't iterate over {}", crate::value::go_string(other))));
            }
        };
        if items.is_empty() {
            if let Some(e) = &branch.else_list {
                self.vars.truncate(base);
                return self.walk_list(e, dot, out);
            }
            return Ok(Flow::Normal);
        }
        for (key, elem) in items {
            self.vars.truncate(base);
            if !branch.pipe.is_assign {
                match decl.len() {
                    1 => self.vars.push((decl[0].clone(), elem.clone())),
                    2 => {
                        self.vars.push((decl[0].clone(), key));
                        self.vars.push((decl[1].clone(), elem.clone()));
                    }
                    _ => {}
                }
            } else {
                match decl.len() {
                    1 => self.set_var(&decl[0], elem.clone()),
                    2 => {
                        self.set_var(&decl[0], key);
                        self.set_var(&decl[1], elem.clone());
                    }
                    _ => {}
                }
            }
            match self.walk_list(&branch.list, &elem, out)? {
                Flow::Break => break,
                Flow::Normal | Flow::Continue => {}
            }
        }
        Ok(Flow::Normal)
    }

    fn set_var(&mut self, name: &str, value: Value) {
        if let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| &**n == name) {
            slot.1 = value;
        }
    }

    fn var(&self, name: &str, pos: usize) -> Result<Value, TemplateError> {
        match self.vars.iter().rev().find(|(n, _)| &**n == name) {
            Some((_, v)) => Ok(v.clone()),
            None => Err(self.error(pos, &format!("undefined variable: {name}"))),
        }
    }

    fn eval_pipe(&mut self, pipe: &Pipe, dot: &Value) -> Result<Value, TemplateError> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(cmd, dot, value)?);
        }
        let value = value.unwrap_or_default();
        if !pipe.decl.is_empty() {
            if pipe.is_assign {
                for name in &pipe.decl {
                    if !self.vars.iter().any(|(n, _)| n == name) {
                        return Err(self.error(pipe.pos, &format!("undefined variable: {name}")));
                    }
                    self.set_var(name, value.clone());
                }
            } else {
                for name in &pipe.decl {
                    self.vars.push((name.clone(), value.clone()));
                }
            }
        }
        Ok(value)
    }

    fn eval_command(&mut self, cmd: &Command, dot: &Value, last: Option<Value>) -> Result<Value, TemplateError> {
        let first = &cmd.args[0];
        let rest = &cmd.args[1..];
        match first {
            Arg::Ident(name, pos) => self.call_function(name, rest, dot, last, *pos),
            Arg::Field(chain, pos) => {
                let args = self.eval_args(rest, dot, last)?;
                self.eval_chain(dot.clone(), chain, args, *pos, "")
            }
            Arg::Var(name, chain, pos) => {
                let v = self.var(name, *pos)?;
                if chain.is_empty() {
                    self.no_args(rest, &last, *pos)?;
                    return Ok(v);
                }
                let args = self.eval_args(rest, dot, last)?;
                self.eval_chain(v, chain, args, *pos, name)
            }
            Arg::Pipe(pipe, chain, pos) => {
                let v = self.eval_pipe_scoped(pipe, dot)?;
                if chain.is_empty() {
                    self.no_args(rest, &last, *pos)?;
                    return Ok(v);
                }
                let args = self.eval_args(rest, dot, last)?;
                self.eval_chain(v, chain, args, *pos, "(...)")
            }
            other => {
                self.no_args(rest, &last, cmd.pos)?;
                self.eval_arg(other, dot)
            }
        }
    }

    fn no_args(&self, rest: &[Arg], last: &Option<Value>, pos: usize) -> Result<(), TemplateError> {
        if !rest.is_empty() || last.is_some() {
            return Err(self.error(pos, "can't give argument to non-function"));
        }
        Ok(())
    }

    /// A parenthesized pipeline: its declarations do not outlive it.
    fn eval_pipe_scoped(&mut self, pipe: &Pipe, dot: &Value) -> Result<Value, TemplateError> {
        let mark = self.vars.len();
        let v = self.eval_pipe(pipe, dot);
        if pipe.decl.is_empty() || pipe.is_assign {
            self.vars.truncate(mark);
        }
        v
    }

    fn eval_args(&mut self, args: &[Arg], dot: &Value, last: Option<Value>) -> Result<Vec<Value>, TemplateError> {
        let mut values = Vec::with_capacity(args.len() + 1);
        for a in args {
            values.push(self.eval_arg(a, dot)?);
        }
        if let Some(l) = last {
            values.push(l);
        }
        Ok(values)
    }

    fn eval_arg(&mut self, arg: &Arg, dot: &Value) -> Result<Value, TemplateError> {
        Ok(match arg {
            Arg::Dot => dot.clone(),
            Arg::Field(chain, pos) => self.eval_chain(dot.clone(), chain, Vec::new(), *pos, "")?,
            Arg::Var(name, chain, pos) => {
                let v = self.var(name, *pos)?;
                if chain.is_empty() { v } else { self.eval_chain(v, chain, Vec::new(), *pos, name)? }
            }
            Arg::Pipe(pipe, chain, pos) => {
                let v = self.eval_pipe_scoped(pipe, dot)?;
                if chain.is_empty() { v } else { self.eval_chain(v, chain, Vec::new(), *pos, "(...)")? }
            }
            Arg::Ident(name, pos) => self.call_function(name, &[], dot, None, *pos)?,
            Arg::Str(s) => Value::Str(s.clone()),
            Arg::Int(i) => Value::int(*i),
            Arg::Float(f) => Value::Float(*f),
            Arg::Bool(b) => Value::Bool(*b),
            Arg::Nil => Value::Nil,
        })
    }

    /// `.a.b.c` on `receiver`; `args` go to the last element when it is a method.
    fn eval_chain(
        &mut self,
        mut receiver: Value,
        chain: &[Rc<str>],
        mut args: Vec<Value>,
        pos: usize,
        prefix: &str,
    ) -> Result<Value, TemplateError> {
        let context = || {
            let fields: Vec<&str> = chain.iter().map(|c| &**c).collect();
            format!("{prefix}.{}", fields.join("."))
        };
        let n = chain.len();
        for (i, name) in chain.iter().enumerate() {
            let is_last = i + 1 == n;
            let call_args = if is_last { std::mem::take(&mut args) } else { Vec::new() };
            receiver = match &receiver {
                // A nil that a pipeline or variable produced has no fields and no error
                // (Go's invalid value); a nil met inside the chain is a nil pointer.
                Value::Nil if i == 0 => return Ok(Value::Nil),
                Value::Map(m) => {
                    if !call_args.is_empty() {
                        return Err(self.error_at(
                            pos,
                            &context(),
                            &format!("{name} is not a method but has arguments"),
                        ));
                    }
                    m.borrow().get(&**name).cloned().unwrap_or(Value::Nil)
                }
                Value::Object(o) => o.field(name, call_args).map_err(|e| self.error_at(pos, &context(), &e))?,
                Value::Nil => {
                    return Err(self.error_at(
                        pos,
                        &context(),
                        &format!("nil pointer evaluating interface {{}}.{name}"),
                    ));
                }
                other => {
                    return Err(self.error_at(
                        pos,
                        &context(),
                        &format!("can't evaluate field {name} in type {}", other.type_name()),
                    ));
                }
            };
        }
        Ok(receiver)
    }

    fn call_function(
        &mut self,
        name: &str,
        args: &[Arg],
        dot: &Value,
        last: Option<Value>,
        pos: usize,
    ) -> Result<Value, TemplateError> {
        // `and` and `or` evaluate their arguments only as far as needed.
        if name == "and" || name == "or" {
            let total = args.len() + usize::from(last.is_some());
            if total == 0 {
                return Err(self.error(pos, &format!("wrong number of args for {name}: want at least 1 got 0")));
            }
            let mut value = Value::Nil;
            for a in args {
                value = self.eval_arg(a, dot)?;
                if (name == "and") != value.truthy() {
                    return Ok(value);
                }
            }
            if let Some(l) = last {
                value = l;
            }
            return Ok(value);
        }
        let values = self.eval_args(args, dot, last)?;
        funcs::call(self, name, values).map_err(|e| match e {
            funcs::FuncError::Message(msg) => self.error(pos, &format!("error calling {name}: {msg}")),
        })
    }

    /// An execution error at `pos` of the current tree, in Go's format.
    fn error(&self, pos: usize, msg: &str) -> TemplateError {
        let context = self.tree.as_ref().map(|t| action_text(&t.source, pos).to_string()).unwrap_or_default();
        self.error_at(pos, &context, msg)
    }

    /// An execution error at `pos` about the node printed as `context`.
    fn error_at(&self, pos: usize, context: &str, msg: &str) -> TemplateError {
        match &self.tree {
            Some(tree) => {
                let (line, col) = line_col(&tree.source, pos);
                TemplateError::Exec(format!(
                    "template: {}:{line}:{col}: executing {:?} at <{context}>: {msg}",
                    tree.file, &*tree.name
                ))
            }
            None => TemplateError::Exec(format!("template: {msg}")),
        }
    }
}

/// The text of the command at `pos`, for error messages.
fn action_text(src: &str, pos: usize) -> &str {
    let rest = &src[pos.min(src.len())..];
    let end = rest.find("}}").unwrap_or(rest.len());
    let text = &rest[..end];
    let text = text.split(" | ").next().unwrap_or(text);
    text.trim().trim_end_matches('-').trim_end()
}

/// `.Template.Name` of `data`, which names a `tpl` string's template.
fn template_name(data: &Value) -> String {
    if let Value::Map(m) = data
        && let Some(Value::Map(t)) = m.borrow().get("Template")
        && let Some(Value::Str(n)) = t.borrow().get("Name")
    {
        return n.to_string();
    }
    "gotpl".into()
}

/// Prints an action's value as text/template does: nil is `<no value>`.
fn print_value(out: &mut String, value: &Value) {
    match value {
        Value::Nil => out.push_str("<no value>"),
        Value::Str(s) => out.push_str(s),
        other => write_go(out, other),
    }
}
