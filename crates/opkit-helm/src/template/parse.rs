//! The lexer and parser of Go's `text/template`: text and `{{ }}` actions (with `{{-`/`-}}`
//! trimming and `/* */` comments) become a tree of nodes, and `define`/`block` bodies
//! become named trees.

use std::collections::HashMap;
use std::rc::Rc;

use super::TemplateError;

/// A parsed template body.
#[derive(Debug, Default)]
pub struct Tree {
    /// The template's name (`define`'s name, or the file's name).
    pub name: Rc<str>,
    /// The file the template was parsed from (for error positions).
    pub file: Rc<str>,
    /// The source text, for turning byte offsets into lines and columns.
    pub source: Rc<str>,
    /// The nodes of the body.
    pub root: Vec<Node>,
}

/// One node of a template body.
#[derive(Debug)]
pub enum Node {
    /// Literal text.
    Text(Rc<str>),
    /// `{{ pipeline }}`: the value is printed unless the pipeline declares variables.
    Action(Pipe),
    /// `{{ if }}`, `{{ with }}` or `{{ range }}` with its branches.
    Branch(Box<Branch>),
    /// `{{ template "name" pipeline }}`.
    Template {
        /// The called template's name.
        name: Rc<str>,
        /// The data passed (nil without one).
        pipe: Option<Pipe>,
        /// Byte offset in the source.
        pos: usize,
    },
    /// `{{ break }}`.
    Break,
    /// `{{ continue }}`.
    Continue,
}

/// Which control structure a [`Branch`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchKind {
    /// `if`
    If,
    /// `with`
    With,
    /// `range`
    Range,
}

/// `if`/`with`/`range` with their `else` branch.
#[derive(Debug)]
pub struct Branch {
    /// Which structure.
    pub kind: BranchKind,
    /// The condition (or ranged-over value).
    pub pipe: Pipe,
    /// The body.
    pub list: Vec<Node>,
    /// The `else` branch (an `else if` is a nested `if` alone in it).
    pub else_list: Option<Vec<Node>>,
}

/// A pipeline: optional variable declarations, then commands joined by `|`.
#[derive(Debug, Default)]
pub struct Pipe {
    /// Declared or assigned variables (`$x :=`, `$i, $v :=`, `$x =`).
    pub decl: Vec<Rc<str>>,
    /// `=` rather than `:=`.
    pub is_assign: bool,
    /// The commands.
    pub cmds: Vec<Command>,
    /// Byte offset in the source.
    pub pos: usize,
}

/// One command of a pipeline: a function call or a single operand.
#[derive(Debug)]
pub struct Command {
    /// The operands; the first is the function when it is an identifier.
    pub args: Vec<Arg>,
    /// Byte offset in the source.
    pub pos: usize,
}

/// An operand.
#[derive(Debug)]
pub enum Arg {
    /// `.`
    Dot,
    /// `.a.b`, at the position Go reports for it (the second field's, in a chain).
    Field(Vec<Rc<str>>, usize),
    /// `$x.a.b` (`$` alone is the data the template was executed with), with its position.
    Var(Rc<str>, Vec<Rc<str>>, usize),
    /// A function name, with its position.
    Ident(Rc<str>, usize),
    /// `(pipeline)` or `(pipeline).a.b`, with its position.
    Pipe(Box<Pipe>, Vec<Rc<str>>, usize),
    /// A string constant.
    Str(Rc<str>),
    /// An integer constant.
    Int(i64),
    /// A float constant.
    Float(f64),
    /// `true`/`false`.
    Bool(bool),
    /// `nil`.
    Nil,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(Rc<str>),
    Field(Rc<str>),
    Dot,
    Var(Rc<str>),
    Str(Rc<str>),
    Int(i64),
    Float(f64),
    LParen,
    RParen,
    Pipe,
    Declare,
    Assign,
    Comma,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    pos: usize,
    /// Whitespace (or nothing) came right before it: a field after a space starts a new
    /// operand, one right after `)` or a variable continues it.
    spaced: bool,
}

/// The templates a source defines, by name.
pub type Defines = HashMap<Rc<str>, Rc<Tree>>;

/// Parses `source` (from `file`) into its main tree and the templates it defines.
pub fn parse(file: &str, source: &str) -> Result<(Tree, Defines), TemplateError> {
    let file: Rc<str> = file.into();
    let src: Rc<str> = source.into();
    let mut parser = Parser {
        file: file.clone(),
        src: src.clone(),
        items: lex(&file, &src)?,
        at: 0,
        defines: HashMap::new(),
        range_depth: 0,
    };
    let (root, end) = parser.list(true)?;
    if let Some(end) = end {
        return Err(parser.err(end.1, format!("unexpected {{{{{}}}}}", end.0)));
    }
    let tree = Tree { name: file.clone(), file, source: src, root };
    Ok((tree, parser.defines))
}

enum Item {
    Text(String),
    Action(Vec<Token>, usize),
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits the source into text and actions, applying trim markers and dropping comments.
fn lex(file: &str, src: &str) -> Result<Vec<Item>, TemplateError> {
    let bytes = src.as_bytes();
    let mut items = Vec::new();
    let mut pos = 0;
    let mut trim_next = false;
    while pos <= bytes.len() {
        let open = src[pos..].find("{{").map(|i| i + pos);
        let text_end = open.unwrap_or(bytes.len());
        let mut text = &src[pos..text_end];
        if trim_next {
            text = text.trim_start_matches([' ', '\t', '\r', '\n']);
        }
        let Some(open) = open else {
            if !text.is_empty() {
                items.push(Item::Text(text.to_string()));
            }
            break;
        };
        let mut inner = open + 2;
        if bytes.len() > inner + 1 && bytes[inner] == b'-' && is_space(bytes[inner + 1]) {
            text = text.trim_end_matches([' ', '\t', '\r', '\n']);
            inner += 2;
        }
        if !text.is_empty() {
            items.push(Item::Text(text.to_string()));
        }
        // A comment: `{{/*` ... `*/}}`.
        let after_space = skip_spaces(bytes, inner);
        if src[after_space..].starts_with("/*") && (after_space == inner || inner > open + 2) {
            let Some(close) = src[after_space + 2..].find("*/") else {
                return Err(lex_err(file, src, open, "unclosed comment"));
            };
            let mut end = after_space + 2 + close + 2;
            let mut trim = false;
            let rest = &src[end..];
            if rest.starts_with(" -}}")
                || rest.starts_with("\t-}}")
                || rest.starts_with("\n-}}")
                || rest.starts_with("\r-}}")
            {
                trim = true;
                end += 4;
            } else if rest.starts_with("}}") {
                end += 2;
            } else {
                return Err(lex_err(file, src, open, "comment ends before closing delimiter"));
            }
            trim_next = trim;
            pos = end;
            continue;
        }
        let (tokens, end, trim) = lex_action(file, src, inner)?;
        items.push(Item::Action(tokens, open));
        trim_next = trim;
        pos = end;
    }
    Ok(items)
}

fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_space(bytes[i]) {
        i += 1;
    }
    i
}

fn lex_err(file: &str, src: &str, pos: usize, msg: &str) -> TemplateError {
    let (line, _) = line_col(src, pos);
    TemplateError::Parse(format!("template: {file}:{line}: {msg}"))
}

/// The 1-based line and 0-based byte column of `pos`, as Go reports positions.
pub fn line_col(src: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(src.len());
    let before = &src.as_bytes()[..pos];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = match before.iter().rposition(|b| *b == b'\n') {
        Some(nl) => pos - nl - 1,
        None => pos,
    };
    (line, col)
}

/// Lexes one action from `start` (after `{{` and its trim marker) to its `}}`.
fn lex_action(file: &str, src: &str, start: usize) -> Result<(Vec<Token>, usize, bool), TemplateError> {
    let bytes = src.as_bytes();
    let mut i = start;
    let mut tokens = Vec::new();
    let mut spaced = true;
    let mut depth = 0usize;
    loop {
        if i >= bytes.len() {
            return Err(lex_err(file, src, start, "unclosed action"));
        }
        if is_space(bytes[i]) {
            let j = skip_spaces(bytes, i);
            if src[j..].starts_with("-}}") && depth == 0 {
                return Ok((tokens, j + 3, true));
            }
            i = j;
            spaced = true;
            continue;
        }
        if src[i..].starts_with("}}") {
            return Ok((tokens, i + 2, false));
        }
        let (tok, end) = lex_token(file, src, i)?;
        match tok {
            Tok::LParen => depth += 1,
            Tok::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        tokens.push(Token { tok, pos: i, spaced });
        i = end;
        spaced = false;
    }
}

/// The punctuation tokens of an action and their lengths.
fn punctuation(bytes: &[u8], i: usize) -> Option<(Tok, usize)> {
    Some(match bytes[i] {
        b'(' => (Tok::LParen, 1),
        b')' => (Tok::RParen, 1),
        b'|' => (Tok::Pipe, 1),
        b',' => (Tok::Comma, 1),
        b':' if bytes.get(i + 1) == Some(&b'=') => (Tok::Declare, 2),
        b'=' => (Tok::Assign, 1),
        _ => return None,
    })
}

/// The token starting at `i` (not a space, not the action's end) and where it ends.
fn lex_token(file: &str, src: &str, i: usize) -> Result<(Tok, usize), TemplateError> {
    let bytes = src.as_bytes();
    if let Some((tok, len)) = punctuation(bytes, i) {
        return Ok((tok, i + len));
    }
    Ok(match bytes[i] {
        b'"' => {
            let (s, end) = lex_quoted(file, src, i)?;
            (Tok::Str(s.into()), end)
        }
        b'`' => {
            let Some(close) = src[i + 1..].find('`') else {
                return Err(lex_err(file, src, i, "unterminated raw quoted string"));
            };
            (Tok::Str(src[i + 1..i + 1 + close].into()), i + 2 + close)
        }
        b'\'' => {
            let (s, end) = lex_char(file, src, i)?;
            (Tok::Int(s), end)
        }
        b'$' => {
            let end = ident_end(bytes, i + 1);
            (Tok::Var(src[i..end].into()), end)
        }
        b'.' if bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit()) => lex_number(file, src, i)?,
        b'.' => match ident_end(bytes, i + 1) {
            end if end == i + 1 => (Tok::Dot, i + 1),
            end => (Tok::Field(src[i + 1..end].into()), end),
        },
        b'0'..=b'9' | b'-' | b'+' => lex_number(file, src, i)?,
        c if c == b'_' || c.is_ascii_alphabetic() || c >= 0x80 => {
            let end = ident_end(bytes, i);
            (Tok::Ident(src[i..end].into()), end)
        }
        _ => {
            let found = src[i..].chars().next().unwrap_or(' ');
            return Err(lex_err(file, src, i, &format!("unexpected {found:?} in command")));
        }
    })
}

fn ident_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && (bytes[i] == b'_' || bytes[i].is_ascii_alphanumeric() || bytes[i] >= 0x80) {
        i += 1;
    }
    i
}

fn lex_quoted(file: &str, src: &str, start: usize) -> Result<(String, usize), TemplateError> {
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((off, c)) = chars.next() {
        match c {
            '"' => return Ok((out, start + 1 + off + 1)),
            '\n' => break,
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    '\'' => out.push('\''),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '0'..='7' => {
                        let mut v = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            if let Some((_, d)) = chars.next() {
                                v = v * 8 + d.to_digit(8).unwrap_or(0);
                            }
                        }
                        out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    }
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let mut v = 0u32;
                        for _ in 0..n {
                            if let Some((_, d)) = chars.next() {
                                v = v * 16 + d.to_digit(16).unwrap_or(0);
                            }
                        }
                        out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                    }
                    other => {
                        return Err(lex_err(file, src, start, &format!("invalid syntax: unknown escape \\{other}")));
                    }
                }
            }
            c => out.push(c),
        }
    }
    Err(lex_err(file, src, start, "unterminated quoted string"))
}

fn lex_char(file: &str, src: &str, start: usize) -> Result<(i64, usize), TemplateError> {
    let rest = &src[start + 1..];
    let mut chars = rest.char_indices();
    let (value, next) = match chars.next() {
        Some((_, '\\')) => {
            let (_, e) = chars.next().ok_or_else(|| lex_err(file, src, start, "unterminated character constant"))?;
            let v = match e {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '\\' => '\\',
                '\'' => '\'',
                '0' => '\0',
                other => other,
            };
            (v, chars.next())
        }
        Some((_, c)) => (c, chars.next()),
        None => return Err(lex_err(file, src, start, "unterminated character constant")),
    };
    match next {
        Some((off, '\'')) => Ok((value as i64, start + 1 + off + 1)),
        _ => Err(lex_err(file, src, start, "unterminated character constant")),
    }
}

fn lex_number(file: &str, src: &str, start: usize) -> Result<(Tok, usize), TemplateError> {
    let bytes = src.as_bytes();
    let mut i = start;
    if matches!(bytes[i], b'+' | b'-') {
        i += 1;
    }
    while i < bytes.len() {
        let c = bytes[i];
        let hex = src[start..i].contains(['x', 'X']);
        let exp_sign = matches!(c, b'+' | b'-')
            && i > start
            && if hex { matches!(bytes[i - 1], b'p' | b'P') } else { matches!(bytes[i - 1], b'e' | b'E') };
        if c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || exp_sign {
            i += 1;
        } else {
            break;
        }
    }
    let text = &src[start..i];
    let clean: String = text.chars().filter(|c| *c != '_').collect();
    let (neg, body) = match clean.strip_prefix('-') {
        Some(b) => (true, b.to_string()),
        None => (false, clean.trim_start_matches('+').to_string()),
    };
    let lower = body.to_ascii_lowercase();
    let int = if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit()) {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else if lower.bytes().all(|b| b.is_ascii_digit()) {
        lower.parse::<i64>().ok()
    } else {
        None
    };
    if let Some(v) = int {
        return Ok((Tok::Int(if neg { -v } else { v }), i));
    }
    let float = match lower.strip_prefix("0x") {
        Some(hex) => parse_hex_float(hex),
        None => lower.parse::<f64>().ok(),
    };
    match float {
        Some(f) => Ok((Tok::Float(if neg { -f } else { f }), i)),
        None => Err(lex_err(file, src, start, &format!("bad number syntax: {text:?}"))),
    }
}

/// A Go hexadecimal float without its `0x`: `1p60`, `1.8p-3` (mantissa × 2^exponent).
fn parse_hex_float(hex: &str) -> Option<f64> {
    let (mantissa, exponent) = hex.split_once('p')?;
    let exponent: i32 = exponent.parse().ok()?;
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut value = 0f64;
    for d in int_part.chars() {
        value = value * 16.0 + f64::from(d.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for d in frac_part.chars() {
        value += f64::from(d.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    Some(value * 2f64.powi(exponent))
}

/// How a list ended: `{{end}}` or `{{else ...}}` (the keyword and the action's offset).
type ListEnd = Option<(&'static str, usize, Vec<Token>)>;

struct Parser {
    file: Rc<str>,
    src: Rc<str>,
    items: Vec<Item>,
    at: usize,
    defines: HashMap<Rc<str>, Rc<Tree>>,
    range_depth: usize,
}

impl Parser {
    fn err(&self, pos: usize, msg: impl std::fmt::Display) -> TemplateError {
        let (line, _) = line_col(&self.src, pos);
        TemplateError::Parse(format!("template: {}:{line}: {msg}", self.file))
    }

    /// Parses nodes until `{{end}}`/`{{else}}` (returned) or the end of input.
    fn list(&mut self, top: bool) -> Result<(Vec<Node>, ListEnd), TemplateError> {
        let mut nodes = Vec::new();
        while self.at < self.items.len() {
            let item = std::mem::replace(&mut self.items[self.at], Item::Text(String::new()));
            self.at += 1;
            match item {
                Item::Text(t) => nodes.push(Node::Text(t.into())),
                Item::Action(tokens, pos) => {
                    let keyword = match tokens.first().map(|t| &t.tok) {
                        Some(Tok::Ident(k)) => Some(k.clone()),
                        _ => None,
                    };
                    match keyword.as_deref() {
                        Some("end") => {
                            if tokens.len() > 1 {
                                return Err(self.err(pos, "unexpected token in end"));
                            }
                            if top {
                                return Err(self.err(pos, "unexpected {{end}}"));
                            }
                            return Ok((nodes, Some(("end", pos, tokens))));
                        }
                        Some("else") => {
                            if top {
                                return Err(self.err(pos, "unexpected {{else}}"));
                            }
                            return Ok((nodes, Some(("else", pos, tokens))));
                        }
                        Some("if") => nodes.push(self.branch(BranchKind::If, tokens, pos)?),
                        Some("with") => nodes.push(self.branch(BranchKind::With, tokens, pos)?),
                        Some("range") => {
                            self.range_depth += 1;
                            let node = self.branch(BranchKind::Range, tokens, pos);
                            self.range_depth -= 1;
                            nodes.push(node?);
                        }
                        Some(keyword @ ("break" | "continue")) => nodes.push(self.loop_control(keyword, pos)?),
                        Some("define") => self.define_clause(&tokens, pos, top)?,
                        Some("block") => nodes.push(self.block_clause(&tokens, pos)?),
                        Some("template") => {
                            let name = self.template_name(&tokens, pos, "template clause")?;
                            let pipe =
                                if tokens.len() > 2 { Some(self.pipeline(&tokens[2..], pos, false)?) } else { None };
                            nodes.push(Node::Template { name, pipe, pos });
                        }
                        _ => {
                            if tokens.is_empty() {
                                return Err(self.err(pos, "missing value for command"));
                            }
                            nodes.push(Node::Action(self.pipeline(&tokens, pos, true)?));
                        }
                    }
                }
            }
        }
        Ok((nodes, None))
    }

    /// `{{break}}` or `{{continue}}`, which only a `{{range}}` may hold.
    fn loop_control(&self, keyword: &str, pos: usize) -> Result<Node, TemplateError> {
        if self.range_depth == 0 {
            return Err(self.err(pos, format!("{{{{{keyword}}}}} outside {{{{range}}}}")));
        }
        Ok(if keyword == "break" { Node::Break } else { Node::Continue })
    }

    /// `{{define "name"}}...{{end}}`, at the top level only: adds the template.
    fn define_clause(&mut self, tokens: &[Token], pos: usize, top: bool) -> Result<(), TemplateError> {
        if !top {
            return Err(self.err(pos, "unexpected <define> in command"));
        }
        let name = self.template_name(tokens, pos, "define clause")?;
        if tokens.len() > 2 {
            return Err(self.err(pos, "unexpected token in define clause"));
        }
        let (body, end) = self.list(false)?;
        let Some(("end", end_pos, _)) = end else {
            return Err(self.err(pos, "unexpected EOF"));
        };
        self.add_define(name, body, end_pos)
    }

    /// `{{block "name" pipeline}}...{{end}}`: defines the template and runs it here.
    fn block_clause(&mut self, tokens: &[Token], pos: usize) -> Result<Node, TemplateError> {
        let name = self.template_name(tokens, pos, "block clause")?;
        let pipe = self.pipeline(&tokens[2..], pos, false)?;
        let (body, end) = self.list(false)?;
        match end {
            Some(("end", _, _)) => {}
            _ => return Err(self.err(pos, "unexpected EOF")),
        }
        self.add_define(name.clone(), body, pos)?;
        Ok(Node::Template { name, pipe: Some(pipe), pos })
    }

    /// Adds a `define`d template; a second non-empty definition in one source is an error.
    fn add_define(&mut self, name: Rc<str>, body: Vec<Node>, pos: usize) -> Result<(), TemplateError> {
        let empty = |nodes: &[Node]| nodes.iter().all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()));
        if let Some(old) = self.defines.get(&name) {
            if empty(&body) {
                return Ok(());
            }
            if !empty(&old.root) {
                return Err(self.err(pos, format!("template: multiple definition of template {name:?}")));
            }
        }
        self.defines.insert(
            name.clone(),
            Rc::new(Tree { name, file: self.file.clone(), source: self.src.clone(), root: body }),
        );
        Ok(())
    }

    fn template_name(&self, tokens: &[Token], pos: usize, ctx: &str) -> Result<Rc<str>, TemplateError> {
        match tokens.get(1).map(|t| &t.tok) {
            Some(Tok::Str(s)) => Ok(s.clone()),
            _ => Err(self.err(pos, format!("unexpected token in {ctx}"))),
        }
    }

    /// `if`/`with`/`range` from its opening action to its `{{end}}`.
    fn branch(&mut self, kind: BranchKind, tokens: Vec<Token>, pos: usize) -> Result<Node, TemplateError> {
        let pipe = self.pipeline(&tokens[1..], pos, kind == BranchKind::Range)?;
        if pipe.cmds.is_empty() {
            return Err(self.err(pos, "missing value for command"));
        }
        let (list, end) = self.list(false)?;
        let else_list = match end {
            Some(("end", _, _)) => None,
            Some(("else", else_pos, else_tokens)) => {
                if else_tokens.len() > 1 {
                    // `{{else if ...}}` / `{{else with ...}}`: a nested branch that shares our `{{end}}`.
                    let nested_kind = match &else_tokens[1].tok {
                        Tok::Ident(k) if &**k == "if" => BranchKind::If,
                        Tok::Ident(k) if &**k == "with" => BranchKind::With,
                        _ => return Err(self.err(else_pos, "unexpected token in else")),
                    };
                    let nested = self.branch(nested_kind, else_tokens[1..].to_vec(), else_pos)?;
                    Some(vec![nested])
                } else {
                    let (else_list, end) = self.list(false)?;
                    match end {
                        Some(("end", _, _)) => {}
                        Some((_, p, _)) => return Err(self.err(p, "expected end; found {{else}}")),
                        None => return Err(self.err(pos, "unexpected EOF")),
                    }
                    Some(else_list)
                }
            }
            _ => return Err(self.err(pos, "unexpected EOF")),
        };
        Ok(Node::Branch(Box::new(Branch { kind, pipe, list, else_list })))
    }

    /// A pipeline from tokens: declarations, then commands separated by `|`.
    fn pipeline(&self, tokens: &[Token], pos: usize, allow_two_vars: bool) -> Result<Pipe, TemplateError> {
        let mut pipe = Pipe { pos: tokens.first().map_or(pos, |t| t.pos), ..Pipe::default() };
        let mut rest = tokens;
        // Declarations: `$x :=`, `$x =`, `$i, $v :=`.
        if let Some(Tok::Var(v)) = rest.first().map(|t| &t.tok) {
            match rest.get(1).map(|t| &t.tok) {
                Some(Tok::Declare) | Some(Tok::Assign) => {
                    pipe.is_assign = rest[1].tok == Tok::Assign;
                    pipe.decl.push(v.clone());
                    rest = &rest[2..];
                }
                Some(Tok::Comma) if allow_two_vars => {
                    if let (Some(Tok::Var(v2)), Some(t)) = (rest.get(2).map(|t| &t.tok), rest.get(3).map(|t| &t.tok))
                        && matches!(t, Tok::Declare | Tok::Assign)
                    {
                        pipe.is_assign = *t == Tok::Assign;
                        pipe.decl.push(v.clone());
                        pipe.decl.push(v2.clone());
                        rest = &rest[4..];
                    }
                }
                _ => {}
            }
        }
        for part in split_top(rest, |t| *t == Tok::Pipe) {
            if part.is_empty() {
                return Err(self.err(pos, "missing command"));
            }
            pipe.cmds.push(self.command(part)?);
        }
        if pipe.cmds.is_empty() && !pipe.decl.is_empty() {
            return Err(self.err(pos, "missing value for command"));
        }
        Ok(pipe)
    }

    fn command(&self, tokens: &[Token]) -> Result<Command, TemplateError> {
        let pos = tokens[0].pos;
        let mut args = Vec::new();
        let mut i = 0;
        while i < tokens.len() {
            let t = &tokens[i];
            let mut arg = match &t.tok {
                Tok::Dot => Arg::Dot,
                Tok::Field(f) => {
                    let mut chain = vec![f.clone()];
                    let mut pos = t.pos;
                    while let Some(Token { tok: Tok::Field(f), spaced: false, pos: p }) = tokens.get(i + 1) {
                        if chain.len() == 1 {
                            pos = *p;
                        }
                        chain.push(f.clone());
                        i += 1;
                    }
                    Arg::Field(chain, pos)
                }
                Tok::Var(v) => Arg::Var(v.clone(), Vec::new(), t.pos),
                Tok::Ident(name) => match &**name {
                    "true" => Arg::Bool(true),
                    "false" => Arg::Bool(false),
                    "nil" => Arg::Nil,
                    _ => {
                        if !crate::funcs::is_function(name) {
                            return Err(self.err(t.pos, format!("function {name:?} not defined")));
                        }
                        Arg::Ident(name.clone(), t.pos)
                    }
                },
                Tok::Str(s) => Arg::Str(s.clone()),
                Tok::Int(n) => Arg::Int(*n),
                Tok::Float(f) => Arg::Float(*f),
                Tok::LParen => {
                    let close = matching_paren(tokens, i).ok_or_else(|| self.err(t.pos, "unclosed left paren"))?;
                    let inner = self.pipeline(&tokens[i + 1..close], t.pos, false)?;
                    if inner.cmds.is_empty() {
                        return Err(self.err(t.pos, "missing value for parenthesized pipeline"));
                    }
                    i = close;
                    Arg::Pipe(Box::new(inner), Vec::new(), t.pos)
                }
                Tok::RParen => return Err(self.err(t.pos, "unexpected right paren")),
                Tok::Declare | Tok::Assign | Tok::Comma | Tok::Pipe => {
                    return Err(self.err(t.pos, "unexpected token in operand"));
                }
            };
            // Fields chained onto a variable or a parenthesized pipeline.
            if let Arg::Var(_, chain, pos) | Arg::Pipe(_, chain, pos) = &mut arg {
                while let Some(Token { tok: Tok::Field(f), spaced: false, pos: p }) = tokens.get(i + 1) {
                    if chain.is_empty() {
                        *pos = *p;
                    }
                    chain.push(f.clone());
                    i += 1;
                }
            }
            args.push(arg);
            i += 1;
        }
        Ok(Command { args, pos })
    }
}

fn matching_paren(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.tok {
            Tok::LParen => depth += 1,
            Tok::RParen => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits tokens on `sep` outside parentheses.
fn split_top(tokens: &[Token], sep: impl Fn(&Tok) -> bool) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    if tokens.is_empty() {
        return parts;
    }
    let mut depth = 0i32;
    let mut start = 0;
    for (i, t) in tokens.iter().enumerate() {
        match t.tok {
            Tok::LParen => depth += 1,
            Tok::RParen => depth -= 1,
            _ if depth == 0 && sep(&t.tok) => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}
