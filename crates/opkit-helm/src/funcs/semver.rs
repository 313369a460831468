//! Semantic versions and constraints as Masterminds/semver v3 reads them (Sprig's
//! `semver` and `semverCompare`): lenient versions (`v1.2`), `||`/`,` constraint groups,
//! `~`, `^`, wildcards, hyphen ranges, and prereleases matched only when asked for.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::{ANY, Args, Func, FuncError, FuncResult, func};
use crate::template::Exec;
use crate::value::{IntType, Value};

/// Sprig's semver functions.
pub(super) const FUNCS: &[Func] = &[func("semver", 0, ANY, semver), func("semverCompare", 2, 2, semver_compare)];

fn semver(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Version::parse(&a.str(0)).map_err(FuncError::Message)?.to_value())
}

fn semver_compare(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(compare(&a.str(0), &a.str(1)).map_err(FuncError::Message)?))
}

/// A parsed version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    metadata: String,
    original: String,
}

impl Version {
    /// Parses a version leniently, as `semver.NewVersion` does.
    pub(super) fn parse(s: &str) -> Result<Version, String> {
        let (v, parts) = parse_parts(s).ok_or_else(|| "Invalid Semantic Version".to_string())?;
        let _ = parts;
        Ok(v)
    }

    /// The version as Sprig's `semver` returns it (a map of its parts).
    pub(super) fn to_value(&self) -> Value {
        Value::map(BTreeMap::from([
            ("Major".to_string(), Value::Int(self.major as i64, IntType::Uint64)),
            ("Minor".to_string(), Value::Int(self.minor as i64, IntType::Uint64)),
            ("Patch".to_string(), Value::Int(self.patch as i64, IntType::Uint64)),
            ("Prerelease".to_string(), Value::str(self.pre.as_str())),
            ("Metadata".to_string(), Value::str(self.metadata.as_str())),
            ("Original".to_string(), Value::str(self.original.as_str())),
        ]))
    }

    /// Major, minor and patch.
    pub(super) fn parts(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }

    fn cmp(&self, other: &Version) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| cmp_pre(&self.pre, &other.pre))
    }
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (mut x, mut y) = (a.split('.'), b.split('.'));
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => {
                let o = match (p.parse::<u64>(), q.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    _ => p.cmp(q),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// How many of major.minor.patch were given as numbers (the rest are wildcards).
fn parse_parts(s: &str) -> Option<(Version, usize)> {
    let original = s.to_string();
    let s = s.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    let (s, metadata) = match s.split_once('+') {
        Some((a, m)) => (a, m.to_string()),
        None => (s, String::new()),
    };
    let (core, pre) = match s.split_once('-') {
        Some((a, p)) => (a, p.to_string()),
        None => (s, String::new()),
    };
    let mut nums = [0u64; 3];
    let mut given = 0;
    let fields: Vec<&str> = core.split('.').collect();
    if fields.is_empty() || fields.len() > 3 {
        return None;
    }
    for (i, f) in fields.iter().enumerate() {
        if matches!(*f, "x" | "X" | "*") {
            break;
        }
        nums[i] = f.parse().ok()?;
        given = i + 1;
    }
    Some((Version { major: nums[0], minor: nums[1], patch: nums[2], pre, metadata, original }, given))
}

/// Whether `version` satisfies `constraint` (Sprig's `semverCompare`).
pub(super) fn compare(constraint: &str, version: &str) -> Result<bool, String> {
    let v = Version::parse(version)?;
    for group in constraint.split("||") {
        let mut all = true;
        let mut any_term = false;
        for term in split_terms(group) {
            any_term = true;
            if !check(&term, &v)? {
                all = false;
                break;
            }
        }
        if any_term && all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The terms of one AND group: separated by commas or spaces, with `op ver` joined and
/// `a - b` hyphen ranges kept whole.
fn split_terms(group: &str) -> Vec<String> {
    let tokens: Vec<&str> = group.split([',', ' ']).filter(|t| !t.is_empty()).collect();
    let mut terms = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if tokens.get(i + 1) == Some(&"-") && i + 2 < tokens.len() {
            terms.push(format!("{} - {}", t, tokens[i + 2]));
            i += 3;
        } else if t.chars().all(|c| "<>=!~^".contains(c)) && i + 1 < tokens.len() {
            terms.push(format!("{t}{}", tokens[i + 1]));
            i += 2;
        } else {
            terms.push(t.to_string());
            i += 1;
        }
    }
    terms
}

fn check(term: &str, v: &Version) -> Result<bool, String> {
    if let Some((lo, hi)) = term.split_once(" - ") {
        return Ok(check(&format!(">={lo}"), v)? && check(&format!("<={hi}"), v)?);
    }
    let op_len = term.find(|c: char| !"<>=!~^".contains(c)).unwrap_or(term.len());
    let (op, ver) = term.split_at(op_len);
    let (c, given) = parse_parts(ver).ok_or_else(|| format!("improper constraint: {term}"))?;
    if !v.pre.is_empty() && c.pre.is_empty() {
        return Ok(false);
    }
    let ord = v.cmp(&c);
    let prefix_eq = |n: usize| {
        let a = [v.major, v.minor, v.patch];
        let b = [c.major, c.minor, c.patch];
        a[..n] == b[..n]
    };
    let upper = |major: u64, minor: u64, patch: u64| Version {
        major,
        minor,
        patch,
        pre: String::new(),
        metadata: String::new(),
        original: String::new(),
    };
    Ok(match op {
        "" | "=" => {
            if given < 3 {
                prefix_eq(given)
            } else {
                ord == Ordering::Equal
            }
        }
        "!=" => {
            if given < 3 {
                !prefix_eq(given)
            } else {
                ord != Ordering::Equal
            }
        }
        ">" => {
            if given < 3 {
                let a = [v.major, v.minor, v.patch];
                let b = [c.major, c.minor, c.patch];
                a[..given.max(1)] > b[..given.max(1)]
            } else {
                ord == Ordering::Greater
            }
        }
        ">=" | "=>" => ord != Ordering::Less,
        "<" => ord == Ordering::Less,
        "<=" | "=<" => {
            if given < 3 {
                let a = [v.major, v.minor, v.patch];
                let b = [c.major, c.minor, c.patch];
                a[..given.max(1)] <= b[..given.max(1)]
            } else {
                ord != Ordering::Greater
            }
        }
        "~" | "~>" => {
            let hi = if given <= 1 { upper(c.major + 1, 0, 0) } else { upper(c.major, c.minor + 1, 0) };
            ord != Ordering::Less && v.cmp(&hi) == Ordering::Less
        }
        "^" => {
            let hi = if c.major > 0 || given <= 1 {
                upper(c.major + 1, 0, 0)
            } else if c.minor > 0 || given == 2 {
                upper(0, c.minor + 1, 0)
            } else {
                upper(0, 0, c.patch + 1)
            };
            ord != Ordering::Less && v.cmp(&hi) == Ordering::Less
        }
        _ => return Err(format!("improper constraint: {term}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constraints_match_as_masterminds_semver() {
        assert!(compare(">=1.21-0", "v1.33.0").unwrap());
        assert!(!compare("<1.19-0", "v1.33.0").unwrap());
        assert!(compare(">=1.16-0, <1.34-0", "1.33.0").unwrap());
        assert!(!compare(">=1.4", "1.5.0-beta").unwrap());
        assert!(compare("^1.2", "1.9.9").unwrap());
        assert!(compare("~1.2.3", "1.2.9").unwrap());
        assert!(!compare("~1.2.3", "1.3.0").unwrap());
        assert!(compare("1.2.x", "1.2.7").unwrap());
        assert!(compare("<1.2 || >=2", "2.1.0").unwrap());
    }
}
