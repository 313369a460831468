//! Helpers of the scaffolding suites (`scaffold.rs`, `create_webhook.rs`): running `opkit`
//! in a project directory, and checking that a refused command leaves every file as it was.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

pub(crate) fn opkit(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opkit")).args(args).current_dir(dir).output().expect("run opkit")
}

pub(crate) fn ok(dir: &Path, args: &[&str]) -> String {
    let out = opkit(dir, args);
    assert!(out.status.success(), "opkit {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Refuses with an error containing `needle`, and changes nothing under `dir`.
pub(crate) fn refused(dir: &Path, args: &[&str], needle: &str) {
    let before = snapshot(dir);
    let out = opkit(dir, args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "opkit {args:?} should fail");
    assert!(stderr.contains(needle), "opkit {args:?}: expected {needle:?} in {stderr:?}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(snapshot(dir), before, "opkit {args:?} changed files although it failed");
}

pub(crate) fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let p = entry.expect("entry").path();
            let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
            if p.is_dir() {
                out.insert(format!("{rel}/"), String::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

pub(crate) fn read(dir: &Path, rel: &str) -> String {
    std::fs::read_to_string(dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}
