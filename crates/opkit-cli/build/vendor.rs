//! Packs the opkit crates a scaffolded project depends on (`opkit`, `opkit-testenv` and
//! the workspace crates they use) into the CLI, so `opkit init` can vendor them into the
//! new project (`vendor/opkit/<crate>`) and the project builds anywhere, Docker included.
//!
//! Why embed instead of copying from a checkout at `opkit init` time: `cargo install
//! --locked --path crates/opkit-cli` builds in place, so this script sees the checkout,
//! but the installed binary outlives it (the checkout may move, change branch or be
//! deleted). Embedding makes the CLI self-contained and ties the vendored sources to
//! exactly the version of the CLI that scaffolds against them.
//!
//! Each crate's `Cargo.toml` is made standalone here: `workspace = true` keys are
//! resolved from the workspace manifest, the path dependencies between the crates point
//! at their siblings, and what a dependency does not need (dev-dependencies, lints,
//! tests) is dropped. When the sources are not there (a packaged crate), nothing is
//! embedded and `opkit init` falls back to the published crates.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use toml_edit::{DocumentMut, Item, Table, Value};

/// The crates a scaffolded project needs: `opkit`, `opkit-testenv` and their workspace
/// dependencies.
const VENDORED_CRATES: &[&str] = &[
    "opkit",
    "opkit-serve",
    "opkit-apimachinery",
    "opkit-apiserver",
    "opkit-kubelet",
    "opkit-controllers",
    "opkit-testenv",
];

/// Writes `OUT_DIR/vendored.rs`: the packed crates, or nothing when the sources are not there.
pub(crate) fn write_packed_sources() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.join("../..");
    let generated = match pack(&workspace) {
        Ok(code) => code,
        Err(reason) => {
            println!("cargo:warning=opkit init will use the published opkit crates: {reason}");
            "/// No vendored sources.\npub static FILES: &[(&str, &str)] = &[];\n\
             /// No lock file.\npub static WORKSPACE_LOCK: Option<&str> = None;\n\
             /// No sources.\npub const SOURCES_MODIFIED: u64 = 0;\n"
                .to_string()
        }
    };
    std::fs::write(out.join("vendored.rs"), generated).expect("writing OUT_DIR/vendored.rs");
}

/// The generated Rust: every vendored file's path (under `vendor/opkit/`) and contents.
fn pack(workspace: &Path) -> Result<String, String> {
    let ws_manifest = workspace.join("Cargo.toml");
    println!("cargo:rerun-if-changed={}", ws_manifest.display());
    let ws_text = std::fs::read_to_string(&ws_manifest).map_err(|e| format!("{}: {e}", ws_manifest.display()))?;
    let ws: DocumentMut = ws_text.parse().map_err(|e| format!("{}: {e}", ws_manifest.display()))?;
    let ws = ws.get("workspace").and_then(Item::as_table).ok_or("no [workspace] in the parent manifest")?.clone();

    // Sources first: their hash goes into the vendored crates' versions.
    let mut sources = Vec::new();
    let mut hash = Fnv64::default();
    let mut modified = std::time::UNIX_EPOCH;
    for krate in VENDORED_CRATES {
        let dir = workspace.join("crates").join(krate);
        let src = dir.join("src");
        println!("cargo:rerun-if-changed={}", src.display());
        let mut files = Vec::new();
        walk(&src, &mut files).map_err(|e| format!("{}: {e}", src.display()))?;
        files.push(dir.join("Cargo.toml"));
        files.sort();
        for file in files {
            let relative = file.strip_prefix(&dir).map_err(|e| e.to_string())?;
            let relative = relative.to_str().ok_or_else(|| format!("{}: not UTF-8", relative.display()))?;
            let name = format!("{krate}/{relative}");
            let bytes = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            hash.write(name.as_bytes());
            hash.write(&bytes);
            let meta = std::fs::metadata(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            modified = modified.max(meta.modified().map_err(|e| format!("{}: {e}", file.display()))?);
            if relative != "Cargo.toml" {
                let absolute = file.canonicalize().map_err(|e| format!("{}: {e}", file.display()))?;
                sources.push((name, absolute));
            }
        }
    }
    hash.write(ws_text.as_bytes());
    // Build metadata makes the version say which sources these are, so two projects
    // sharing a target directory never mistake one vendored copy for another.
    let version = format!("{}+src.{:016x}", env!("CARGO_PKG_VERSION"), hash.0);

    let mut code = String::from("/// Every vendored file: its path under `vendor/opkit/` and its contents.\n");
    code.push_str("pub static FILES: &[(&str, &str)] = &[\n");
    for krate in VENDORED_CRATES {
        let manifest = workspace.join("crates").join(krate).join("Cargo.toml");
        println!("cargo:rerun-if-changed={}", manifest.display());
        let text = std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let standalone =
            standalone_manifest(&text, &ws, &version).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let _ = writeln!(code, "    ({:?}, {:?}),", format!("{krate}/Cargo.toml"), standalone);
    }
    for (name, absolute) in sources {
        let _ = writeln!(code, "    ({name:?}, include_str!({absolute:?})),");
    }
    code.push_str("];\n");
    let lock = workspace.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let lock = lock.canonicalize().map_err(|e| format!("{}: {e}", lock.display()))?;
    code.push_str("/// The workspace's lock file: the versions the vendored crates were tested with.\n");
    let _ = writeln!(code, "pub static WORKSPACE_LOCK: Option<&str> = Some(include_str!({lock:?}));");
    let modified = modified.duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    code.push_str("/// When the newest vendored source was modified (seconds since the epoch).\n");
    let _ = writeln!(code, "pub const SOURCES_MODIFIED: u64 = {modified};");
    Ok(code)
}

/// FNV-1a, 64 bit: a stable hash of the vendored sources (std's hasher is not stable).
struct Fnv64(u64);

impl Default for Fnv64 {
    fn default() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv64 {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

/// A crate's manifest with `workspace = true` resolved from `ws` (the `[workspace]` table).
fn standalone_manifest(text: &str, ws: &Table, version: &str) -> Result<String, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let ws_package = ws.get("package").and_then(Item::as_table);
    let ws_deps = ws.get("dependencies").and_then(Item::as_table).ok_or("no [workspace.dependencies]")?;
    if let Some(package) = doc.get_mut("package").and_then(Item::as_table_mut) {
        for (key, item) in package.iter_mut() {
            if inherits(item) {
                let value =
                    ws_package.and_then(|p| p.get(&key)).ok_or(format!("workspace.package.{key} is not set"))?;
                *item = value.clone();
            }
        }
        package.insert("version", toml_edit::value(version));
        package.insert("publish", toml_edit::value(false));
    }
    for section in ["dev-dependencies", "lints", "bench", "test", "example"] {
        doc.remove(section);
    }
    if let Some(deps) = doc.get_mut("dependencies").and_then(Item::as_table_like_mut) {
        resolve_dependencies(deps, ws_deps)?;
    }
    if let Some(targets) = doc.get_mut("target").and_then(Item::as_table_like_mut) {
        for (_, target) in targets.iter_mut() {
            if let Some(target) = target.as_table_like_mut() {
                target.remove("dev-dependencies");
                if let Some(deps) = target.get_mut("dependencies").and_then(Item::as_table_like_mut) {
                    resolve_dependencies(deps, ws_deps)?;
                }
            }
        }
    }
    Ok(format!("# Vendored by `opkit init` from the opkit workspace, with the inherited keys resolved.\n{doc}"))
}

/// Whether a key is `{ workspace = true }` (or `key.workspace = true`).
fn inherits(item: &Item) -> bool {
    item.as_table_like().and_then(|t| t.get("workspace")).and_then(Item::as_bool) == Some(true)
}

/// Resolves every inherited dependency: the workspace's entry, with the crate's own
/// `features` added and its `optional` kept; workspace paths (`crates/x`) become siblings.
fn resolve_dependencies(deps: &mut dyn toml_edit::TableLike, ws_deps: &Table) -> Result<(), String> {
    for (name, item) in deps.iter_mut() {
        if !inherits(item) {
            continue;
        }
        let own = item.as_table_like().ok_or("not a table")?;
        let extra_features: Vec<String> = own
            .get("features")
            .and_then(Item::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let optional = own.get("optional").and_then(Item::as_bool);
        let mut resolved = toml_edit::InlineTable::new();
        match ws_deps.get(&name).ok_or(format!("workspace.dependencies.{name} is not set"))? {
            Item::Value(Value::String(requirement)) => {
                resolved.insert("version", Value::from(requirement.value().as_str()));
            }
            Item::Value(Value::InlineTable(table)) => {
                for (key, value) in table.iter() {
                    resolved.insert(key, value.clone());
                }
            }
            other => return Err(format!("workspace.dependencies.{name}: unsupported {}", other.type_name())),
        }
        if let Some(path) = resolved.get("path").and_then(Value::as_str) {
            let sibling = Path::new(path).file_name().and_then(|n| n.to_str()).ok_or("bad path")?;
            if !VENDORED_CRATES.contains(&sibling) {
                return Err(format!("{name} depends on {path}, which is not vendored"));
            }
            resolved.insert("path", Value::from(format!("../{sibling}")));
            // Cargo ignores build metadata in a requirement: the plain version matches.
            resolved.insert("version", Value::from(env!("CARGO_PKG_VERSION")));
        }
        if !extra_features.is_empty() {
            let mut features: Vec<String> = resolved
                .get("features")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default();
            for feature in extra_features {
                if !features.contains(&feature) {
                    features.push(feature);
                }
            }
            resolved.insert("features", Value::Array(features.iter().map(String::as_str).collect()));
        }
        if let Some(optional) = optional {
            resolved.insert("optional", Value::from(optional));
        }
        resolved.fmt();
        *item = Item::Value(Value::InlineTable(resolved));
    }
    Ok(())
}
