//! Semver ranges as OLM reads `olm.skipRange` and `olm.package` version ranges (blang/semver's
//! `ParseRange`): comparators (`>=1.0.0`, `<2.0.0`, `>`, `<=`, `=`, `!=`, a bare version)
//! joined by spaces are ANDed, alternatives joined by `||` are ORed.

use semver::Version;

/// A parsed range.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Range {
    alternatives: Vec<Vec<(Op, Version)>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Range {
    /// Parses `text`; `None` when it is not a range.
    pub(crate) fn parse(text: &str) -> Option<Range> {
        let mut alternatives = Vec::new();
        for alternative in text.split("||") {
            let mut comparators = Vec::new();
            let mut pending_op: Option<&str> = None;
            for token in alternative.split_whitespace() {
                // ">= 1.0.0" is allowed: an operator alone waits for its version.
                if matches!(token, ">=" | "<=" | ">" | "<" | "=" | "!=" | "==") {
                    pending_op = Some(token);
                    continue;
                }
                let (op, rest) = match pending_op.take() {
                    Some(op) => (op, token),
                    None => split_op(token),
                };
                let op = match op {
                    ">=" => Op::Ge,
                    "<=" => Op::Le,
                    ">" => Op::Gt,
                    "<" => Op::Lt,
                    "!=" | "!" => Op::Ne,
                    _ => Op::Eq,
                };
                comparators.push((op, parse_version(rest)?));
            }
            if comparators.is_empty() || pending_op.is_some() {
                return None;
            }
            alternatives.push(comparators);
        }
        Some(Range { alternatives })
    }

    /// Whether `version` is in the range.
    pub(crate) fn contains(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|all| {
            all.iter().all(|(op, bound)| match op {
                Op::Eq => version == bound,
                Op::Ne => version != bound,
                Op::Gt => version > bound,
                Op::Ge => version >= bound,
                Op::Lt => version < bound,
                Op::Le => version <= bound,
            })
        })
    }
}

fn split_op(token: &str) -> (&str, &str) {
    for op in [">=", "<=", "!=", "==", ">", "<", "=", "!"] {
        if let Some(rest) = token.strip_prefix(op) {
            return (op, rest);
        }
    }
    ("=", token)
}

/// Parses a version as blang/semver's tolerant parser does: a leading `v` is dropped and
/// missing minor and patch numbers are zero.
pub fn parse_version(text: &str) -> Option<Version> {
    let text = text.trim().trim_start_matches('v');
    if let Ok(v) = Version::parse(text) {
        return Some(v);
    }
    let (core, rest) = match text.find(['-', '+']) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let mut padded = parts.join(".");
    for _ in parts.len()..3 {
        padded.push_str(".0");
    }
    Version::parse(&format!("{padded}{rest}")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        parse_version(s).expect("a version")
    }

    #[test]
    fn ands_and_ors() {
        let r = Range::parse(">=0.6.0 <1.5.0").expect("a range");
        assert!(r.contains(&v("0.6.0")));
        assert!(r.contains(&v("1.4.9")));
        assert!(!r.contains(&v("1.5.0")));
        let r = Range::parse("<1.0.0 || >=2.0.0").expect("a range");
        assert!(r.contains(&v("0.1.0")) && r.contains(&v("2.1.0")) && !r.contains(&v("1.2.0")));
        let r = Range::parse(">= 1.0 < 2").expect("a range");
        assert!(r.contains(&v("1.9.0")));
        assert!(Range::parse(">=").is_none());
        assert!(Range::parse("").is_none());
    }
}
