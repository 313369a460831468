//! Helpers of the CLI workflow suites (`workflow.rs`, `workflow_webhooks.rs`): running
//! `opkit`, `make` and kubectl in a scaffolded project against the workspace's target
//! directory (so the opkit crates are not built twice), processes stopped with their group
//! when dropped, and `opkit cluster start` in the background.
//!
//! Projects are scaffolded against this checkout (`OPKIT_PATH`, as `--opkit-path`), so
//! every scaffolded project of a run builds the same opkit crates at the same paths and
//! compiles them once; `portable.rs` unsets it to test the vendored crates.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub(crate) const OPKIT: &str = env!("CARGO_BIN_EXE_opkit");

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's target directory (CARGO_TARGET_TMPDIR is `<target>/tmp`).
pub(crate) fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).parent().map(Path::to_path_buf).unwrap_or_else(|| workspace().join("target"))
}

/// Where a project at `dir` built by these suites gets its final artifacts (its binaries):
/// a directory of its own under the workspace's target, while its intermediate ones go
/// in the shared target (cargo's build directory), so every project still compiles the
/// opkit crates and their dependencies once. Cargo names a project's own outputs the same
/// wherever the project lies, so in one shared target directory a scaffolded
/// `memcached-operator` replaced `target/debug/memcached-operator`, the workspace
/// example's binary that its tests run.
pub(crate) fn artifacts_dir(dir: &Path) -> PathBuf {
    let name: String =
        dir.to_string_lossy().chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    target_dir().join("projects").join(name.trim_start_matches('_'))
}

pub(crate) fn command(program: &str, dir: &Path, kubeconfig: Option<&Path>) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .env("OPKIT", OPKIT)
        .env("CARGO_BUILD_BUILD_DIR", target_dir())
        .env("CARGO_TARGET_DIR", artifacts_dir(dir))
        .env("OPKIT_PATH", workspace())
        // The scaffolded project's dependencies are built without debug info, as the
        // workspace's are, not with the full debug info that took gigabytes of the shared
        // target directory and slowed every link.
        .env("CARGO_PROFILE_DEV_DEBUG", "false")
        .env_remove("RUSTFLAGS")
        .stdin(Stdio::null());
    without_test_crate_env(&mut cmd);
    if let Some(kc) = kubeconfig {
        cmd.env("KUBECONFIG", kc);
    }
    cmd
}

/// Removes from `cmd` the variables cargo sets for this test's own crate
/// (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR`, `OUT_DIR`, `CARGO_BIN_EXE_*`, ...). A cargo build started
/// with them records their values for build scripts that ask to be rerun when they change
/// (ring's asks for `CARGO_PKG_NAME` and `OUT_DIR`), so the next build of the workspace without them
/// reran those scripts and rebuilt every crate above them (the fuzz run's rebuild in CI).
pub(crate) fn without_test_crate_env(cmd: &mut Command) {
    const NAMES: [&str; 8] = [
        "CARGO_CRATE_NAME",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_BIN_NAME",
        "OUT_DIR",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if NAMES.contains(&name) || name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_BIN_EXE_") {
            cmd.env_remove(name);
        }
    }
}

pub(crate) fn run_ok(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

pub(crate) fn make(dir: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = command("make", dir, kubeconfig);
    cmd.args(args).arg(format!("OPKIT={OPKIT}"));
    run_ok(cmd, &format!("make {args:?}"))
}

pub(crate) fn opkit(dir: &Path, kubeconfig: Option<&Path>, args: &[&str]) -> String {
    let mut cmd = command(OPKIT, dir, kubeconfig);
    cmd.args(args);
    run_ok(cmd, &format!("opkit {args:?}"))
}

/// A child process (and its process group) that is stopped with SIGTERM when dropped.
pub(crate) struct Background(pub Child);

impl Background {
    pub(crate) fn spawn(mut cmd: Command) -> Background {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        Background(cmd.spawn().expect("spawn"))
    }
    pub(crate) fn stop(&mut self) -> std::process::ExitStatus {
        let pgid = format!("-{}", self.0.id());
        let _ = Command::new("kill").args(["-TERM", "--", &pgid]).status();
        self.0.wait().expect("wait")
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// Starts `opkit cluster start` on `data_dir` (with `flags`) in the background; returns
/// it, its kubeconfig and an admin client.
pub(crate) async fn start_cluster(dir: &Path, data_dir: &Path, flags: &[&str]) -> (Background, PathBuf, kube::Client) {
    let mut start = command(OPKIT, dir, None);
    start
        .args(["cluster", "start", "--port", "0", "-o", "json", "--data-dir"])
        .arg(data_dir)
        .args(flags)
        .stdout(Stdio::piped());
    let mut cluster = Background::spawn(start);
    let mut line = String::new();
    BufReader::new(cluster.0.stdout.take().expect("stdout")).read_line(&mut line).expect("cluster info");
    let info: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let kubeconfig = PathBuf::from(info["kubeconfig"].as_str().expect("kubeconfig"));
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    (cluster, kubeconfig, kube::Client::try_from(config).expect("client"))
}

pub(crate) async fn timeout<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(300), f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}
