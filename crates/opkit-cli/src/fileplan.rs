//! All-or-nothing file changes: a command plans every file it creates or edits, checks
//! the plan, then writes it; if a write fails, what was written is rolled back, so a
//! failed command leaves the project as it was.

use std::path::{Path, PathBuf};

/// A file change that could not be planned or written.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A file to create exists already.
    #[error("{0} already exists; refusing to overwrite it")]
    Exists(PathBuf),
    /// A file to edit lacks the marker where the new lines go.
    #[error("{path}: marker {marker:?} not found; add it back where new entries belong")]
    MissingMarker {
        /// The file.
        path: PathBuf,
        /// The marker line.
        marker: String,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PlanError + '_ {
    move |source| PlanError::Io { path: path.to_path_buf(), source }
}

/// The planned contents of files under a root directory.
#[derive(Debug, Default)]
pub(crate) struct FilePlan {
    root: PathBuf,
    files: Vec<(PathBuf, String)>,
    overwrite: bool,
}

/// What [`FilePlan::commit`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Written {
    /// The path relative to the root.
    pub path: String,
    /// `created`, `updated` or `unchanged`.
    pub action: &'static str,
}

impl FilePlan {
    /// An empty plan for files under `root`.
    pub(crate) fn new(root: impl Into<PathBuf>) -> FilePlan {
        FilePlan { root: root.into(), files: Vec::new(), overwrite: false }
    }

    /// With `overwrite`, [`FilePlan::create`] replaces a file that exists (kubebuilder's
    /// `--force`) instead of refusing.
    pub(crate) fn set_overwrite(&mut self, overwrite: bool) {
        self.overwrite = overwrite;
    }

    /// Plans a new file; errors if it exists on disk (unless overwriting).
    pub(crate) fn create(&mut self, rel: impl Into<PathBuf>, contents: impl Into<String>) -> Result<(), PlanError> {
        let rel = rel.into();
        let abs = self.root.join(&rel);
        if self.overwrite {
            self.write(rel, contents);
            return Ok(());
        }
        if abs.exists() || self.files.iter().any(|(p, _)| *p == rel) {
            return Err(PlanError::Exists(rel));
        }
        self.files.push((rel, contents.into()));
        Ok(())
    }

    /// Plans a file's whole contents, whether it exists or not.
    pub(crate) fn write(&mut self, rel: impl Into<PathBuf>, contents: impl Into<String>) {
        let rel = rel.into();
        let contents = contents.into();
        match self.files.iter_mut().find(|(p, _)| *p == rel) {
            Some(slot) => slot.1 = contents,
            None => self.files.push((rel, contents)),
        }
    }

    /// The planned or current contents of a file, if any.
    pub(crate) fn current(&self, rel: &Path) -> Result<Option<String>, PlanError> {
        if let Some((_, c)) = self.files.iter().find(|(p, _)| p == rel) {
            return Ok(Some(c.clone()));
        }
        let abs = self.root.join(rel);
        match std::fs::read_to_string(&abs) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&abs)(e)),
        }
    }

    /// Plans inserting `line` just above the line containing `marker` in an existing (or
    /// planned) file, keeping the marker's indentation. A line already present is not added
    /// twice.
    pub(crate) fn insert_before_marker(
        &mut self,
        rel: impl Into<PathBuf>,
        marker: &str,
        line: &str,
    ) -> Result<(), PlanError> {
        let rel = rel.into();
        let text = self
            .current(&rel)?
            .ok_or_else(|| PlanError::MissingMarker { path: rel.clone(), marker: marker.to_string() })?;
        let mut out = String::with_capacity(text.len() + line.len() + 8);
        let mut found = false;
        for l in text.split_inclusive('\n') {
            if !found && l.contains(marker) {
                found = true;
                let indent: String = l.chars().take_while(|c| c.is_whitespace() && *c != '\n').collect();
                let new_line = format!("{indent}{line}");
                if !text.lines().any(|existing| existing == new_line) {
                    out.push_str(&new_line);
                    out.push('\n');
                }
            }
            out.push_str(l);
        }
        if !found {
            return Err(PlanError::MissingMarker { path: rel, marker: marker.to_string() });
        }
        self.write(rel, out);
        Ok(())
    }

    /// [`FilePlan::insert_before_marker`] for a module declaration (`pub mod name;`): the
    /// declarations directly above the marker are kept in the order rustfmt sorts them
    /// (its `reorder_modules`, numbers compared by value), so the file stays `cargo fmt`
    /// clean whatever order the modules are added in.
    pub(crate) fn insert_module_before_marker(
        &mut self,
        rel: impl Into<PathBuf>,
        marker: &str,
        line: &str,
    ) -> Result<(), PlanError> {
        let rel = rel.into();
        self.insert_before_marker(rel.clone(), marker, line)?;
        let text = self.current(&rel)?.unwrap_or_default();
        let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
        let Some(at) = lines.iter().position(|l| l.contains(marker)) else { return Ok(()) };
        let is_module = |l: &str| {
            let l = l.trim_start();
            l.starts_with("pub mod ") || l.starts_with("mod ")
        };
        let start = lines[..at].iter().rposition(|l| !is_module(l)).map_or(0, |i| i + 1);
        lines[start..at].sort_by(|a, b| version_order(module_name(a), module_name(b)));
        self.write(rel, lines.concat());
        Ok(())
    }

    /// The planned files whose contents differ from what is on disk.
    pub(crate) fn stale(&self) -> Result<Vec<String>, PlanError> {
        let mut out = Vec::new();
        for (rel, contents) in &self.files {
            let abs = self.root.join(rel);
            let on_disk = match std::fs::read_to_string(&abs) {
                Ok(t) => Some(t),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(io(&abs)(e)),
            };
            if on_disk.as_deref() != Some(contents.as_str()) {
                out.push(rel.display().to_string());
            }
        }
        Ok(out)
    }

    /// Writes every planned file (through a temporary file and a rename, so no file is
    /// ever half-written). If any write fails, files created are removed and files
    /// changed get their old contents back.
    pub(crate) fn commit(self) -> Result<Vec<Written>, PlanError> {
        let mut undo: Vec<(PathBuf, Option<String>)> = Vec::new();
        let mut created_dirs: Vec<PathBuf> = Vec::new();
        let mut report = Vec::new();
        for (rel, contents) in &self.files {
            let abs = self.root.join(rel);
            let result = (|| {
                let old = match std::fs::read_to_string(&abs) {
                    Ok(t) => Some(t),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => return Err(io(&abs)(e)),
                };
                if old.as_deref() == Some(contents.as_str()) {
                    return Ok((old, "unchanged"));
                }
                if let Some(parent) = abs.parent() {
                    let mut missing = Vec::new();
                    let mut p = parent.to_path_buf();
                    while !p.exists() {
                        missing.push(p.clone());
                        if !p.pop() {
                            break;
                        }
                    }
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                    created_dirs.extend(missing);
                }
                write_atomic(&abs, contents)?;
                let action = if old.is_some() { "updated" } else { "created" };
                Ok((old, action))
            })();
            match result {
                Ok((old, action)) => {
                    if action != "unchanged" {
                        undo.push((abs.clone(), old));
                    }
                    report.push(Written { path: rel.display().to_string(), action });
                }
                Err(e) => {
                    for (path, old) in undo.into_iter().rev() {
                        let _ = match old {
                            Some(text) => std::fs::write(&path, text),
                            None => std::fs::remove_file(&path),
                        };
                    }
                    created_dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
                    for d in created_dirs {
                        let _ = std::fs::remove_dir(d);
                    }
                    return Err(e);
                }
            }
        }
        Ok(report)
    }
}

/// The module name declared by a `pub mod name;` line (without `r#`).
fn module_name(line: &str) -> &str {
    let name = line.trim().trim_start_matches("pub ").trim_start_matches("mod ").trim_end_matches(';');
    name.trim_start_matches("r#")
}

/// rustfmt's version sorting of names: runs of digits compare by value, the rest by bytes.
fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, c) in s.char_indices().skip(1) {
            let prev = s[..i].chars().next_back().is_some_and(|p| p.is_ascii_digit());
            if prev != c.is_ascii_digit() {
                out.push((prev, &s[start..i]));
                start = i;
            }
        }
        if start < s.len() {
            out.push((s[start..].starts_with(|c: char| c.is_ascii_digit()), &s[start..]));
        }
        out
    }
    for (x, y) in chunks(a).into_iter().zip(chunks(b)) {
        let order = match (x, y) {
            ((true, x), (true, y)) => {
                let (x, y) = (x.trim_start_matches('0'), y.trim_start_matches('0'));
                x.len().cmp(&y.len()).then_with(|| x.cmp(y))
            }
            ((_, x), (_, y)) => x.cmp(y),
        };
        if order.is_ne() {
            return order;
        }
    }
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Writes `path` through a sibling temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, contents: &str) -> Result<(), PlanError> {
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{file_name}.opkit-tmp"));
    std::fs::write(&tmp, contents).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path)(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_refuses_existing_and_insert_needs_marker() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.rs"), "x\n    // +marker\n").unwrap();
        let mut plan = FilePlan::new(dir.path());
        assert!(matches!(plan.create("a.rs", ""), Err(PlanError::Exists(_))));
        plan.insert_before_marker("a.rs", "+marker", "pub mod b;").unwrap();
        plan.insert_before_marker("a.rs", "+marker", "pub mod b;").unwrap();
        assert!(matches!(plan.insert_before_marker("a.rs", "+other", "y"), Err(PlanError::MissingMarker { .. })));
        plan.create("sub/dir/c.txt", "c").unwrap();
        let written = plan.commit().unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(std::fs::read_to_string(dir.path().join("a.rs")).unwrap(), "x\n    pub mod b;\n    // +marker\n");
        assert_eq!(std::fs::read_to_string(dir.path().join("sub/dir/c.txt")).unwrap(), "c");
    }

    #[test]
    fn module_declarations_stay_in_rustfmt_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("mod.rs"), "use x;\n\npub mod b;\npub mod v10;\n// +modules\nfn f() {}\n")
            .unwrap();
        let mut plan = FilePlan::new(dir.path());
        for name in ["a", "v2", "c", "r#type"] {
            plan.insert_module_before_marker("mod.rs", "+modules", &format!("pub mod {name};")).unwrap();
        }
        assert_eq!(
            plan.current(Path::new("mod.rs")).unwrap().unwrap(),
            "use x;\n\npub mod a;\npub mod b;\npub mod c;\npub mod r#type;\npub mod v2;\npub mod v10;\n// +modules\nfn f() {}\n"
        );
    }

    #[test]
    fn a_failed_commit_rolls_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep.txt"), "old").unwrap();
        // A regular file where a directory is needed makes the last write fail.
        std::fs::write(dir.path().join("blocker"), "").unwrap();
        let mut plan = FilePlan::new(dir.path());
        plan.write("keep.txt", "new");
        plan.create("fresh/new.txt", "n").unwrap();
        plan.write("blocker/x.txt", "x");
        assert!(plan.commit().is_err());
        assert_eq!(std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(), "old");
        assert!(!dir.path().join("fresh").exists());
    }
}
