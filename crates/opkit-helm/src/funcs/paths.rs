//! Sprig's paths (Go's `path` and `path/filepath` on a Unix host): `base`, `dir`, `ext`,
//! `clean`, `isAbs` and their `os` forms, which are the same here.

use super::{ANY, Args, Func, FuncResult, func};
use crate::template::Exec;
use crate::value::Value;

/// Sprig's path functions.
pub(super) const FUNCS: &[Func] = &[
    func("base", 0, ANY, base),
    func("dir", 0, ANY, dir),
    func("ext", 0, ANY, ext),
    func("clean", 0, ANY, clean),
    func("isAbs", 0, ANY, is_abs),
    func("osBase", 0, ANY, base),
    func("osDir", 0, ANY, dir),
    func("osExt", 0, ANY, ext),
    func("osClean", 0, ANY, clean),
    func("osIsAbs", 0, ANY, is_abs),
];

fn base(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(path_base(&a.str(0))))
}

fn dir(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(path_dir(&a.str(0))))
}

fn ext(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(path_ext(&a.str(0))))
}

fn clean(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::str(path_clean(&a.str(0))))
}

fn is_abs(_: &mut Exec<'_>, a: Args<'_>) -> FuncResult {
    Ok(Value::Bool(a.str(0).starts_with('/')))
}

/// Go's `path.Clean`.
fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Go's `path.Base`.
fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

/// Go's `path.Dir`.
fn path_dir(p: &str) -> String {
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    path_clean(dir)
}

/// Go's `path.Ext`.
fn path_ext(p: &str) -> String {
    let base_start = p.rfind('/').map_or(0, |i| i + 1);
    match p[base_start..].rfind('.') {
        Some(i) => p[base_start + i..].to_string(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_go() {
        assert_eq!(path_base("a/b/c.yaml"), "c.yaml");
        assert_eq!(path_dir("a/b/c.yaml"), "a/b");
        assert_eq!(path_ext("a/b.c/d"), "");
        assert_eq!(path_clean("a//b/../c/"), "a/c");
    }
}
