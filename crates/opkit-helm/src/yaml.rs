//! YAML as Helm reads and writes it.
//!
//! Reading (`values.yaml`, `-f`, `fromYaml`) goes through JSON as `sigs.k8s.io/yaml` does,
//! so every number becomes a float64. Writing (`toYaml`) is `sigs.k8s.io/yaml.Marshal`:
//! JSON first, then go-yaml v2's emitter, ported here: keys in its "natural" order, block
//! sequences not indented under their key, strings plain when they read back as strings
//! and otherwise quoted (single quotes when only indicators are in the way, double quotes
//! when they would resolve to another type or hold special characters), literal blocks
//! for multi-line strings, and long plain or quoted strings folded after column 80.

use std::cmp::Ordering;
use std::sync::LazyLock;

use regex::Regex;

use crate::json::json_float;
use crate::value::{Value, format_float};

/// Parses the first YAML document of `text` into a value with JSON's types (numbers are float64).
pub fn from_yaml_str(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Nil);
    }
    // go-yaml reads the first document of a stream.
    let options = parse_options();
    let docs: Vec<YamlValue> = serde_saphyr::from_multiple_with_options(text, options)
        .map_err(|e| format!("error converting YAML to JSON: {e}"))?;
    Ok(docs.into_iter().next().map_or(Value::Nil, |d| d.0))
}

/// A value deserialised from YAML straight into a [`Value`] with JSON's types, as
/// `sigs.k8s.io/yaml` reads YAML: every number a float64 (a NaN or infinity, which JSON
/// cannot hold, becomes nil), mapping keys as go-yaml v2 reads them (YAML 1.1 booleans such
/// as `yes` become `true`), a repeated key's last value kept.
struct YamlValue(Value);

impl<'de> serde::Deserialize<'de> for YamlValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<YamlValue, D::Error> {
        deserializer.deserialize_any(YamlValueVisitor).map(YamlValue)
    }
}

struct YamlValueVisitor;

impl<'de> serde::de::Visitor<'de> for YamlValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Float(i as f64))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::Float(u as f64))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(if f.is_finite() { Value::Float(f) } else { Value::Nil })
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::str(s))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::str(s))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(YamlValueVisitor)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(YamlValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::list(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = std::collections::BTreeMap::new();
        while let Some((k, YamlValue(v))) = map.next_entry::<String, YamlValue>()? {
            entries.insert(crate::value::yaml11_key(&k), v);
        }
        Ok(Value::map(entries))
    }
}

/// The parser's options: go-yaml's octal numbers, and comments not kept (values files
/// are full of them; kept, they hit the parser's limit on buffered comments).
pub fn parse_options() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.legacy_octal_numbers = true;
    options.emit_comments = false;
    options
}

/// `sigs.k8s.io/yaml.Marshal(value)`.
pub fn to_yaml(value: &Value) -> String {
    let mut e =
        Emitter { out: String::new(), column: 0, whitespace: true, indention: true, indent: -1, indents: Vec::new() };
    e.node(value, false, false);
    if !e.out.ends_with('\n') {
        e.out.push('\n');
    }
    e.out
}

const BEST_WIDTH: usize = 80;
const BEST_INDENT: i32 = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

struct Emitter {
    out: String,
    column: usize,
    whitespace: bool,
    indention: bool,
    indent: i32,
    indents: Vec<i32>,
}

impl Emitter {
    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn write(&mut self, s: &str) {
        for c in s.chars() {
            self.put(c);
        }
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(&mut self, s: &str, need_whitespace: bool, is_whitespace: bool, is_indention: bool) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        self.write(s);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    fn node(&mut self, value: &Value, mapping_context: bool, simple_key: bool) {
        match value {
            Value::Map(m) if !m.borrow().is_empty() => {
                let m = m.borrow();
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort_by(|a, b| key_order(a, b));
                self.increase_indent(false, false);
                for k in keys {
                    self.write_indent();
                    self.scalar(k, string_style(k), true);
                    self.write_indicator(":", false, false, false);
                    if let Some(v) = m.get(k) {
                        self.node(v, true, false);
                    }
                }
                self.pop_indent();
            }
            Value::List(l) if !l.is_empty() => {
                let indentless = mapping_context && !self.indention;
                self.increase_indent(false, indentless);
                for item in l.iter() {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.node(item, false, false);
                }
                self.pop_indent();
            }
            Value::Map(_) => self.empty_flow("{", "}"),
            Value::List(_) => self.empty_flow("[", "]"),
            Value::Object(o) => self.node(&o.to_value(), mapping_context, simple_key),
            Value::Str(s) => self.scalar(s, string_style(s), simple_key),
            Value::Nil => self.scalar("null", Style::Plain, simple_key),
            Value::Bool(b) => self.scalar(if *b { "true" } else { "false" }, Style::Plain, simple_key),
            Value::Int(i, _) => self.scalar(&i.to_string(), Style::Plain, simple_key),
            Value::Float(f) => self.scalar(&yaml_float(*f), Style::Plain, simple_key),
        }
    }

    fn empty_flow(&mut self, open: &str, close: &str) {
        self.write_indicator(open, true, true, false);
        self.increase_indent(true, false);
        self.pop_indent();
        self.write_indicator(close, false, false, false);
    }

    fn scalar(&mut self, text: &str, requested: Style, simple_key: bool) {
        let a = analyze(text);
        let mut style = requested;
        if simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain {
            if !a.block_plain_allowed {
                style = Style::Single;
            }
            if text.is_empty() && simple_key {
                style = Style::Single;
            }
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || simple_key) {
            style = Style::Double;
        }
        self.increase_indent(true, false);
        let allow_breaks = !simple_key;
        match style {
            Style::Plain => self.write_plain(text, allow_breaks),
            Style::Single => self.write_single(text, allow_breaks),
            Style::Double => self.write_double(text, allow_breaks),
            Style::Literal => self.write_literal(text),
        }
        self.pop_indent();
    }

    fn write_plain(&mut self, text: &str, allow_breaks: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && chars.get(i + 1) != Some(&' ') {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                self.indention = false;
                spaces = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single(&mut self, text: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        let n = chars.len();
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i + 1 != n
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
            }
        }
        self.write_indicator("'", false, false, false);
    }

    fn write_double(&mut self, text: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        let mut spaces = false;
        let n = chars.len();
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{feff}' || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    c if (c as u32) <= 0xff => self.write(&format!("x{:02X}", c as u32)),
                    c if (c as u32) <= 0xffff => self.write(&format!("u{:04X}", c as u32)),
                    c => self.write(&format!("U{:08X}", c as u32)),
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i != 0 && i + 1 != n {
                    self.write_indent();
                    if chars.get(i + 1) == Some(&' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
    }

    fn write_literal(&mut self, text: &str) {
        self.write_indicator("|", true, false, false);
        let chars: Vec<char> = text.chars().collect();
        if chars.first().is_some_and(|c| *c == ' ' || is_break(*c)) {
            self.write(&BEST_INDENT.to_string());
        }
        let n = chars.len();
        let chomp = if n == 0 || !is_break(chars[n - 1]) {
            "-"
        } else if n == 1 || is_break(chars[n - 2]) {
            "+"
        } else {
            ""
        };
        self.write(chomp);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break(c) {
                self.put_break();
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                    breaks = false;
                }
                self.put(c);
                self.indention = false;
            }
        }
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// go-yaml v2's `is_printable`: no C1 controls (so no NEL) and nothing beyond the Basic
/// Multilingual Plane (an emoji is written escaped, in double quotes).
fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0a
        || (0x20..=0x7e).contains(&u)
        || (0xa0..=0xd7ff).contains(&u)
        || ((0xe000..=0xfffd).contains(&u) && u != 0xfeff)
}

fn is_blankz(c: Option<char>) -> bool {
    match c {
        None => true,
        Some(c) => c == ' ' || c == '\t' || c == '\0' || is_break(c),
    }
}

struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

/// libyaml's `yaml_emitter_analyze_scalar`, for block context.
fn analyze(text: &str) -> Analysis {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    ScalarFlags::scan(text, &chars).analysis()
}

/// What libyaml's scan of a non-empty scalar finds in it.
#[derive(Default)]
struct ScalarFlags {
    /// An indicator (or a document marker) that rules out the plain style.
    block_indicators: bool,
    leading_space: bool,
    leading_break: bool,
    trailing_space: bool,
    trailing_break: bool,
    /// A space right after a line break.
    break_space: bool,
    /// A line break right after a space.
    space_break: bool,
    line_breaks: bool,
    /// A character that is not printable (or a byte-order mark).
    special: bool,
}

impl ScalarFlags {
    fn scan(text: &str, chars: &[char]) -> ScalarFlags {
        let mut flags = ScalarFlags {
            block_indicators: text.starts_with("---") || text.starts_with("..."),
            ..ScalarFlags::default()
        };
        let mut preceded_by_whitespace = true;
        let mut followed_by_whitespace = is_blankz(chars.get(1).copied());
        let (mut previous_space, mut previous_break) = (false, false);
        let n = chars.len();
        for (i, &c) in chars.iter().enumerate() {
            if is_indicator(i, c, preceded_by_whitespace, followed_by_whitespace) {
                flags.block_indicators = true;
            }
            if !is_printable(c) || c == '\u{feff}' {
                flags.special = true;
            }
            if is_break(c) {
                flags.line_breaks = true;
            }
            if c == ' ' {
                flags.leading_space |= i == 0;
                flags.trailing_space |= i + 1 == n;
                flags.break_space |= previous_break;
                previous_space = true;
                previous_break = false;
            } else if is_break(c) {
                flags.leading_break |= i == 0;
                flags.trailing_break |= i + 1 == n;
                flags.space_break |= previous_space;
                previous_break = true;
                previous_space = false;
            } else {
                previous_space = false;
                previous_break = false;
            }
            preceded_by_whitespace = is_blankz(Some(c));
            followed_by_whitespace = is_blankz(chars.get(i + 2).copied());
        }
        flags
    }

    /// The styles the flags allow.
    fn analysis(&self) -> Analysis {
        let mut a = Analysis {
            multiline: self.line_breaks,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: true,
        };
        if self.leading_space || self.leading_break || self.trailing_space || self.trailing_break {
            a.block_plain_allowed = false;
        }
        if self.trailing_space {
            a.block_allowed = false;
        }
        if self.break_space {
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
        }
        if self.space_break || self.special {
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
            a.block_allowed = false;
        }
        if self.line_breaks || self.block_indicators {
            a.block_plain_allowed = false;
        }
        a
    }
}

/// Whether `c`, at index `i` of a scalar, is an indicator that rules out the plain style
/// (libyaml's checks: flow and other indicators first, `? : -` first and followed by
/// whitespace, `:` followed and `#` preceded by whitespace anywhere).
fn is_indicator(i: usize, c: char, preceded_by_whitespace: bool, followed_by_whitespace: bool) -> bool {
    if i == 0 {
        "#,[]{}&*!|>'\"%@`".contains(c) || (matches!(c, '?' | ':' | '-') && followed_by_whitespace)
    } else {
        (c == ':' && followed_by_whitespace) || (c == '#' && preceded_by_whitespace)
    }
}

static YAML_FLOAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("a constant regex"));
static BASE60_FLOAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$").expect("a constant regex"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?$")
        .expect("a constant regex")
});

/// Whether go-yaml v2 reads `s`, unquoted, as something other than a string.
fn resolves_to_non_string(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    if matches!(
        s,
        "~" | "null"
            | "Null"
            | "NULL"
            | "y"
            | "Y"
            | "yes"
            | "Yes"
            | "YES"
            | "on"
            | "On"
            | "ON"
            | "true"
            | "True"
            | "TRUE"
            | "n"
            | "N"
            | "no"
            | "No"
            | "NO"
            | "off"
            | "Off"
            | "OFF"
            | "false"
            | "False"
            | "FALSE"
            | ".nan"
            | ".NaN"
            | ".NAN"
            | ".inf"
            | ".Inf"
            | ".INF"
            | "+.inf"
            | "+.Inf"
            | "+.INF"
            | "-.inf"
            | "-.Inf"
            | "-.INF"
    ) {
        return true;
    }
    let first = s.as_bytes()[0];
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return false;
    }
    if first.is_ascii_digit() && TIMESTAMP.is_match(s) {
        return true;
    }
    let plain = s.replace('_', "");
    if parse_go_int_base0(&plain) {
        return true;
    }
    if YAML_FLOAT.is_match(&plain) {
        return true;
    }
    let unsigned = plain.strip_prefix('-').or_else(|| plain.strip_prefix('+')).unwrap_or(&plain);
    if let Some(b) = unsigned.strip_prefix("0b") {
        return !b.is_empty() && b.bytes().all(|c| c == b'0' || c == b'1');
    }
    false
}

/// `strconv.ParseInt(s, 0, 64)` or `ParseUint` succeeds.
fn parse_go_int_base0(s: &str) -> bool {
    let body = s.strip_prefix('-').or_else(|| s.strip_prefix('+')).unwrap_or(s);
    if body.is_empty() {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if let Some(o) = lower.strip_prefix("0o") {
        (o, 8)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (&lower[1..], 8)
    } else {
        (lower.as_str(), 10)
    };
    !digits.is_empty() && u128::from_str_radix(digits, radix).is_ok_and(|v| v <= u128::from(u64::MAX))
}

fn string_style(s: &str) -> Style {
    if s.contains('\n') {
        Style::Literal
    } else if resolves_to_non_string(s) || BASE60_FLOAT.is_match(s) {
        Style::Double
    } else {
        Style::Plain
    }
}

/// A float64 after the JSON round trip: integral values come back as YAML ints.
fn yaml_float(f: f64) -> String {
    let json = json_float(f);
    if !json.contains(['.', 'e', 'E']) && f.abs() < 9.2e18 {
        json
    } else if f.is_nan() {
        ".nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "+.inf".into() } else { "-.inf".into() }
    } else {
        format_float(f, 6)
    }
}

/// go-yaml v2's key order: letters after other characters, digit runs by value.
pub fn key_order(a: &str, b: &str) -> Ordering {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl { Ordering::Less } else { Ordering::Greater };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn y(json: serde_json::Value) -> String {
        to_yaml(&Value::from_json(&json))
    }

    #[test]
    fn to_yaml_matches_go_yaml_v2() {
        assert_eq!(
            y(serde_json::json!({"b": [1, {"x": "z", "w": null}], "a": {}, "c": [], "y": "y"})),
            "a: {}\nb:\n- 1\n- w: null\n  x: z\nc: []\n\"y\": \"y\"\n"
        );
        assert_eq!(
            y(serde_json::json!({"s": "true", "t": "1.5", "u": "", "v": "a: b", "w": "- x", "x": "it's"})),
            "s: \"true\"\nt: \"1.5\"\nu: \"\"\nv: 'a: b'\nw: '- x'\nx: it's\n"
        );
        assert_eq!(
            y(serde_json::json!({"m": "line1\nline2\n", "p": "a\nb", "o": "tab\there"})),
            "m: |\n  line1\n  line2\no: \"tab\\there\"\np: |-\n  a\n  b\n"
        );
        assert_eq!(y(serde_json::json!({"big": 1e6, "f": 1.5})), "big: 1000000\nf: 1.5\n");
        assert_eq!(y(serde_json::json!([["a", "b"], "c"])), "- - a\n  - b\n- c\n");
    }

    #[test]
    fn long_strings_fold_after_column_80() {
        let long = "word ".repeat(30);
        let long = long.trim_end();
        let out = y(serde_json::json!({ "k": long }));
        assert!(out.starts_with("k: word word"));
        assert!(out.lines().next().is_some_and(|l| l.len() > 80 && l.len() < 90), "{out}");
        assert!(out.lines().nth(1).is_some_and(|l| l.starts_with("  word")), "{out}");
    }

    #[test]
    fn keys_sort_naturally() {
        let mut keys = vec!["b", "a10", "a9", "_x", "A"];
        keys.sort_by(|a, b| key_order(a, b));
        assert_eq!(keys, vec!["_x", "A", "a9", "a10", "b"]);
    }
}
