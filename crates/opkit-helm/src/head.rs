//! What Helm reads of each rendered document to sort it (`releaseutil.SimpleHead`): its
//! `kind` and its `helm.sh/hook` annotation. Helm unmarshals the whole document, so a
//! document that is not YAML fails the render; here the YAML event parser checks the
//! whole stream while only those two values are kept, without building a value tree
//! (this runs on every document of the output: for charts of large CRDs it was most of
//! the render time).

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

/// A document's kind and hook annotation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Head {
    /// `kind` ("" when absent or not a string).
    pub kind: String,
    /// The `helm.sh/hook` annotation (none when absent or not a string).
    pub hook: Option<String>,
}

/// One open collection while walking the events.
struct Frame {
    is_map: bool,
    /// In a mapping: the next node is a key.
    expecting_key: bool,
    /// In a mapping: the current key, when it is a scalar.
    key: Option<String>,
}

/// Parses a rendered document: every document of the stream must be YAML; the first
/// one's `kind` and `metadata.annotations["helm.sh/hook"]` are returned.
pub(crate) fn parse_head(doc: &str) -> Result<Head, String> {
    let mut head = Head::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Option<String>> = HashMap::new();
    let mut documents = 0usize;
    for event in Parser::new_from_str(doc) {
        let (event, span) = event.map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
        match event {
            Event::DocumentStart(..) => documents += 1,
            Event::Scalar(value, style, anchor, tag) => {
                let tagged_str = tag.as_ref().is_some_and(|t| t.is_yaml_core_schema_tag("str"));
                let text = string_value(&value, style, tagged_str);
                if anchor > 0 {
                    anchors.insert(anchor, text.clone());
                }
                scalar(&mut frames, &mut head, documents, text, style == ScalarStyle::Plain && is_null(&value))?;
            }
            Event::Alias(id) => {
                let text = anchors.get(&id).cloned().flatten();
                scalar(&mut frames, &mut head, documents, text, false)?;
            }
            Event::UnresolvedAlias(name) => {
                return Err(format!(
                    "error converting YAML to JSON: yaml: line {}: unknown anchor '{name}' referenced",
                    span.start.line()
                ));
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let is_map = matches!(event, Event::MappingStart(..));
                if documents == 1 && !is_map {
                    check_shape(&frames, "array")?;
                }
                if let Some(parent) = frames.last_mut()
                    && parent.is_map
                    && parent.expecting_key
                {
                    parent.key = None;
                }
                frames.push(Frame { is_map, expecting_key: true, key: None });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                frames.pop();
                value_done(&mut frames);
            }
            _ => {}
        }
    }
    Ok(head)
}

/// The scalar as a JSON string, or none when YAML resolves it to null, a bool or a number.
fn string_value(value: &str, style: ScalarStyle, tagged_str: bool) -> Option<String> {
    if style != ScalarStyle::Plain || tagged_str {
        return Some(value.to_string());
    }
    if is_null(value) || is_bool(value) || is_number(value) {
        return None;
    }
    Some(value.to_string())
}

fn is_null(v: &str) -> bool {
    matches!(v, "" | "~" | "null" | "Null" | "NULL")
}

fn is_bool(v: &str) -> bool {
    matches!(v, "true" | "True" | "TRUE" | "false" | "False" | "FALSE")
}

fn is_number(v: &str) -> bool {
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if matches!(digits, ".inf" | ".Inf" | ".INF") || matches!(v, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    if let Some(hex) = digits.strip_prefix("0x") {
        return !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    if let Some(oct) = digits.strip_prefix("0o") {
        return !oct.is_empty() && oct.chars().all(|c| c.is_digit(8));
    }
    digits.starts_with(|c: char| c.is_ascii_digit() || c == '.') && v.parse::<f64>().is_ok()
}

/// The keys from the root to the current node, when all are mapping keys.
fn path(frames: &[Frame]) -> Option<Vec<&str>> {
    frames.iter().map(|f| if f.is_map { f.key.as_deref() } else { None }).collect()
}

/// A value that is not a mapping where Helm's `SimpleHead` expects one is its JSON error.
fn check_shape(frames: &[Frame], found: &str) -> Result<(), String> {
    let Some(top) = frames.last() else {
        return Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {found} into Go value of type releaseutil.SimpleHead"
        ));
    };
    if !top.is_map || top.expecting_key {
        return Ok(());
    }
    match path(frames).as_deref() {
        Some(["metadata"]) => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {found} into Go struct field SimpleHead.metadata of type struct {{ Name string \"json:\\\"name\\\"\"; Annotations map[string]string \"json:\\\"annotations\\\"\" }}"
        )),
        Some(["metadata", "annotations"]) => Err(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {found} into Go struct field .metadata.annotations of type map[string]string"
        )),
        _ => Ok(()),
    }
}

/// A scalar (or alias) node: a key, or a value that may be the kind or the hook.
fn scalar(
    frames: &mut [Frame],
    head: &mut Head,
    documents: usize,
    text: Option<String>,
    null: bool,
) -> Result<(), String> {
    let Some(top) = frames.last_mut() else {
        return if documents == 1 && !null { check_shape(frames, "string") } else { Ok(()) };
    };
    if top.is_map && top.expecting_key {
        top.key = text;
        top.expecting_key = false;
        return Ok(());
    }
    if documents == 1 {
        if !null {
            check_shape(frames, if text.is_some() { "string" } else { "number" })?;
        }
        match path(frames).as_deref() {
            Some(["kind"]) => head.kind = text.unwrap_or_default(),
            Some(["metadata", "annotations", "helm.sh/hook"]) => head.hook = text,
            _ => {}
        }
    }
    value_done(frames);
    Ok(())
}

/// A mapping's value ended: its next node is a key.
fn value_done(frames: &mut [Frame]) {
    if let Some(top) = frames.last_mut()
        && top.is_map
    {
        top.expecting_key = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kind_and_hook_of_the_first_document() {
        let doc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  annotations:\n    a: [1, 2]\n    \"helm.sh/hook\": pre-install,post-install\nspec:\n  kind: Other\n";
        let head = parse_head(doc).expect("parses");
        assert_eq!(head, Head { kind: "Pod".into(), hook: Some("pre-install,post-install".into()) });
    }

    #[test]
    fn non_string_kinds_and_missing_fields_are_empty() {
        assert_eq!(parse_head("kind: 3\n").expect("parses"), Head::default());
        assert_eq!(parse_head("# only a comment\n").expect("parses"), Head::default());
        assert_eq!(parse_head("kind: &k Job\nother: *k\n").expect("parses").kind, "Job");
        assert_eq!(parse_head("metadata:\nkind: \"3\"\n").expect("parses").kind, "3");
    }

    #[test]
    fn invalid_yaml_anywhere_in_the_document_is_an_error() {
        assert!(parse_head("kind: Pod\nspec:\n  a: b\n c: d\n").is_err());
        assert!(parse_head("kind: Pod\nx: [1, 2\n").is_err());
        assert!(parse_head("kind: Pod\nx: *missing\n").is_err());
        assert!(parse_head("kind: Pod\nmetadata: text\n").is_err());
        assert!(parse_head("- a\n- b\n").is_err());
        assert!(parse_head("just text\n").is_err());
    }
}
