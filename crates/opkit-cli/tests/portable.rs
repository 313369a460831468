//! Scaffolded projects are portable and their builds do not repeat: the project carries
//! the opkit crates it needs (`vendor/opkit`), its Dockerfile's cargo commands build it
//! in a copy of the Docker build context elsewhere, `opkit generate` shows cargo's
//! progress, and neither the project nor this workspace asks other features of a crate
//! when the dev-dependencies join the build (which made `cargo test` rebuild everything
//! `cargo build` had built).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::workflow as support;

use support::*;

/// `opkit init` + `create api` in `<tmp>/<name>`, with the opkit crates vendored as for a
/// user (`OPKIT_PATH`, which the suites' commands set, is removed) or, where the test is
/// not about vendoring, built from this checkout (compiled once for every suite).
fn scaffold(tmp: &Path, name: &str, vendored: bool) -> PathBuf {
    let project = tmp.join(name);
    std::fs::create_dir(&project).expect("mkdir");
    let repo = format!("github.com/example/{name}");
    let mut init = command(OPKIT, &project, None);
    if vendored {
        init.env_remove("OPKIT_PATH");
    }
    init.args(["init", "--domain", "example.com", "--repo", &repo]);
    run_ok(init, "opkit init");
    opkit(&project, None, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    project
}

#[test]
fn init_vendors_opkit_and_the_dockerfile_commands_build_the_context_elsewhere() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), "portable-operator", true);

    // Nothing points outside the project: the opkit crates are vendored, with their
    // manifests made standalone, and the lock file is already settled.
    let cargo_toml = std::fs::read_to_string(project.join("Cargo.toml")).expect("Cargo.toml");
    assert!(cargo_toml.contains("opkit = { version = \"0.1.0\", path = \"vendor/opkit/opkit\" }"), "{cargo_toml}");
    assert!(cargo_toml.contains("path = \"vendor/opkit/opkit-testenv\""), "{cargo_toml}");
    let checkout = std::fs::canonicalize(workspace()).expect("checkout");
    for krate in [
        "opkit",
        "opkit-serve",
        "opkit-apimachinery",
        "opkit-apiserver",
        "opkit-kubelet",
        "opkit-controllers",
        "opkit-testenv",
    ] {
        let manifest = std::fs::read_to_string(project.join("vendor/opkit").join(krate).join("Cargo.toml"))
            .unwrap_or_else(|e| panic!("vendored {krate}: {e}"));
        assert!(!manifest.contains("workspace = true") && !manifest.contains(".workspace"), "{krate}: {manifest}");
        assert!(!manifest.contains(&*checkout.to_string_lossy()), "{krate} points at the checkout: {manifest}");
        assert!(project.join("vendor/opkit").join(krate).join("src/lib.rs").is_file(), "{krate} has no sources");
    }
    let lock = std::fs::read_to_string(project.join("Cargo.lock")).expect("Cargo.lock");
    assert!(lock.contains("name = \"portable-operator\""), "init did not settle Cargo.lock");
    assert!(!lock.contains("name = \"opkit-cli\""), "Cargo.lock still lists the opkit workspace");

    // The build context as Docker sends it (.dockerignore applied), in a directory
    // outside the project and the checkout, then the builder stage step by step.
    let context = tmp.path().join("context");
    copy_context(&project, &context);
    assert!(context.join("vendor/opkit/opkit/src/lib.rs").is_file(), ".dockerignore drops the vendored crates");
    let root = tmp.path().join("image");
    let dockerfile = std::fs::read_to_string(project.join("Dockerfile")).expect("Dockerfile");
    let (runs, workdir) = run_builder_stage(&dockerfile, &context, &root);
    assert!(runs.iter().any(|r| r.contains("cargo build --release --locked")), "{runs:?}");
    let binary = docker_target_dir().join("release/portable-operator");
    assert!(binary.is_file(), "{} was not built", binary.display());
    // Every local package the image build used lies inside the image.
    let mut metadata = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    metadata.args(["metadata", "--format-version", "1", "--offline", "--locked"]).current_dir(&workdir);
    let metadata: serde_json::Value = serde_json::from_str(&run_ok(metadata, "cargo metadata")).expect("metadata");
    let packages = metadata["packages"].as_array().expect("packages");
    let local: Vec<&str> =
        packages.iter().filter(|p| p["source"].is_null()).filter_map(|p| p["manifest_path"].as_str()).collect();
    assert!(local.len() == 8, "the project and its seven opkit crates: {local:?}");
    let outside: Vec<&&str> = local.iter().filter(|p| !Path::new(p).starts_with(&root)).collect();
    assert!(outside.is_empty(), "the image build reads packages outside the image: {outside:?}");
}

#[test]
fn generate_shows_cargos_progress() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), "progress-operator", false);
    let out = command(OPKIT, &project, None).arg("generate").output().expect("opkit generate");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "opkit generate failed: {stderr}");
    // The project's own crate is always compiled: cargo's status lines reach the user.
    assert!(stderr.contains("Compiling progress-operator"), "cargo's progress is hidden: {stderr}");
    assert!(stderr.contains("Finished"), "{stderr}");
}

#[test]
fn a_scaffolded_projects_test_build_asks_the_same_features_as_its_build() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let project = scaffold(tmp.path(), "features-operator", true);
    let differ = feature_drift(&project, &[]);
    assert!(differ.is_empty(), "`make test` would rebuild these with other features: {differ:#?}");
}

#[test]
fn the_workspaces_test_build_asks_the_same_features_as_its_build() {
    let differ = feature_drift(&workspace(), &["--workspace"]);
    assert!(differ.is_empty(), "`cargo test --workspace` would rebuild these with other features: {differ:#?}");
}

#[test]
fn the_main_job_asks_the_same_features_as_the_workspace_build() {
    // `cargo run --release -p memcached-operator --example walkthrough` after
    // `cargo build --release --workspace` (the README's order): an example builds with its
    // package's dev-dependencies.
    let workspace_build = tree_features(&workspace(), &["--workspace"], "normal,build");
    let main_job = tree_features(&workspace(), &["-p", "memcached-operator"], "normal,build,dev");
    let differ: BTreeMap<_, _> = main_job
        .into_iter()
        .filter_map(|(package, features)| match workspace_build.get(&package) {
            Some(built) if *built != features => Some((package, (built.clone(), features))),
            _ => None,
        })
        .collect();
    assert!(differ.is_empty(), "the main job would rebuild these with other features: {differ:#?}");
}

/// The packages whose features differ between a build without the dev-dependencies
/// (`cargo build`, `cargo run`) and one with them (`cargo test`), with both feature sets.
/// `cargo tree` resolves features with the dev-dependencies only when it shows them.
fn feature_drift(dir: &Path, args: &[&str]) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let without = tree_features(dir, args, "normal,build");
    let with = tree_features(dir, args, "normal,build,dev");
    without
        .into_iter()
        .filter_map(|(package, features)| match with.get(&package) {
            Some(other) if *other != features => Some((package, (features, other.clone()))),
            _ => None,
        })
        .collect()
}

/// Every package (`name version`) and its features as `cargo tree` resolves them.
fn tree_features(dir: &Path, args: &[&str], edges: &str) -> BTreeMap<String, Vec<String>> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["tree", "--offline", "--locked", "--prefix", "none", "--no-dedupe", "-f", "{p}|{f}", "-e", edges])
        .args(args)
        .current_dir(dir);
    let stdout = run_ok(cmd, &format!("cargo tree -e {edges}"));
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in stdout.lines() {
        let Some((package, features)) = line.split_once('|') else { continue };
        // `name vX.Y.Z (path)` or `name vX.Y.Z (proc-macro)`: keep name and version.
        let package = package.split(' ').take(2).collect::<Vec<_>>().join(" ");
        let features = features.trim_end_matches(" (*)");
        let mut features: Vec<String> =
            features.split(',').filter(|f| !f.is_empty()).map(str::to_string).collect::<Vec<_>>();
        features.sort();
        let entry = out.entry(package).or_default();
        for f in features {
            if !entry.contains(&f) {
                entry.push(f);
            }
        }
        entry.sort();
    }
    out
}

/// Where the Dockerfile's release build goes: a directory of the workspace's target
/// directory of its own, kept between runs so only the project is rebuilt.
fn docker_target_dir() -> PathBuf {
    target_dir().join("dockerfile-build")
}

/// Copies the project as `docker build` would send it: every file except what
/// `.dockerignore` excludes, with modification times kept (as Docker's COPY does).
fn copy_context(project: &Path, context: &Path) {
    let ignore = std::fs::read_to_string(project.join(".dockerignore")).expect(".dockerignore");
    let mut ignored = Vec::new();
    for line in ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        // The subset this test understands; anything else must be taught here first.
        assert!(!line.contains(['*', '?', '[', '!']), "unsupported .dockerignore pattern {line:?}");
        ignored.push(line.trim_end_matches('/').to_string());
    }
    copy_tree(project, context, &|rel: &Path| ignored.iter().any(|i| rel.starts_with(i)));
}

fn copy_tree(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        std::fs::create_dir_all(to.join(&rel)).expect("mkdir");
        for entry in std::fs::read_dir(from.join(&rel)).expect("read_dir") {
            let entry = entry.expect("entry");
            let child = rel.join(entry.file_name());
            if skip(&child) {
                continue;
            }
            if entry.file_type().expect("file type").is_dir() {
                stack.push(child);
            } else {
                std::fs::copy(from.join(&child), to.join(&child)).expect("copy");
                let modified = entry.metadata().and_then(|m| m.modified()).expect("mtime");
                std::fs::File::options()
                    .write(true)
                    .open(to.join(&child))
                    .and_then(|f| f.set_modified(modified))
                    .expect("set mtime");
            }
        }
    }
}

/// Runs the Dockerfile's first stage with `root` as the image's file system: WORKDIR,
/// COPY from the context and RUN (through `sh -c`, as Docker's shell form does). Any
/// other instruction fails the test, so a Dockerfile this cannot follow is noticed.
/// Returns the RUN commands and the last WORKDIR. Cargo builds offline into [`docker_target_dir`], with the
/// release profile's optimizations off to keep the test cheap: the command is the same.
fn run_builder_stage(dockerfile: &str, context: &Path, root: &Path) -> (Vec<String>, PathBuf) {
    let joined = dockerfile.replace("\\\n", " ");
    let mut workdir = root.to_path_buf();
    let mut runs = Vec::new();
    let mut stages = 0;
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (instruction, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                stages += 1;
                if stages > 1 {
                    break;
                }
            }
            "WORKDIR" => {
                workdir = root.join(rest.trim().trim_start_matches('/'));
                std::fs::create_dir_all(&workdir).expect("WORKDIR");
            }
            "COPY" => {
                let args: Vec<&str> = rest.split_whitespace().collect();
                assert!(!args.iter().any(|a| a.starts_with("--")), "unsupported COPY flags in the builder: {line}");
                let (dest, sources) = args.split_last().expect("COPY needs a destination");
                let dest = workdir.join(dest);
                for source in sources {
                    let from = context.join(source);
                    if from.is_dir() {
                        copy_tree(&from, &dest, &|_| false);
                    } else {
                        std::fs::create_dir_all(&dest).expect("COPY destination");
                        let name = from.file_name().expect("file name");
                        std::fs::copy(&from, dest.join(name)).unwrap_or_else(|e| panic!("{line}: {source}: {e}"));
                    }
                }
            }
            "RUN" => {
                let mut cmd = Command::new("sh");
                cmd.arg("-c")
                    .arg(rest)
                    .current_dir(&workdir)
                    .env("CARGO_TARGET_DIR", docker_target_dir())
                    .env("CARGO_NET_OFFLINE", "true")
                    .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0")
                    .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
                    .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "256")
                    .env("CARGO_PROFILE_RELEASE_INCREMENTAL", "false")
                    .env_remove("RUSTFLAGS");
                without_test_crate_env(&mut cmd);
                run_ok(cmd, &format!("Dockerfile: {line}"));
                runs.push(rest.to_string());
            }
            other => panic!("the builder stage has {other}, which this test does not follow: {line}"),
        }
    }
    (runs, workdir)
}
