//! The local cluster's lifecycle as a kind or minikube user drives it, through the real
//! `opkit` binary: `cluster start --detach`, `status`, `stop`, `delete`, `kubeconfig`,
//! context names that merge, a taken port, `opkit version`, and `-o json` errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `opkit` with a clean environment: no data directory or kubeconfig from the caller.
pub(crate) fn opkit(cwd: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_opkit"));
    cmd.current_dir(cwd).env_remove("OPKIT_DATA_DIR").env_remove("KUBECONFIG").env_remove("OPKIT_LOG");
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run opkit")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} / {:?}", String::from_utf8_lossy(&out.stdout), stderr(out)))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one JSON document `-o json` prints on stderr for an error.
fn stderr_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stderr).unwrap_or_else(|e| panic!("{e}: {:?}", stderr(out)))
}

fn kubectl(kubeconfig: &str, args: &[&str]) -> Output {
    Command::new("kubectl").env("KUBECONFIG", kubeconfig).args(args).output().expect("kubectl")
}

fn kubectl_ok(kubeconfig: &str, args: &[&str]) -> String {
    let out = kubectl(kubeconfig, args);
    assert!(out.status.success(), "kubectl {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stops the cluster of a data directory when the test ends, however it ends.
pub(crate) struct StopOnDrop {
    cwd: PathBuf,
    data_dir: PathBuf,
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = opkit(&self.cwd)
            .args(["cluster", "stop", "--ignore-not-running", "--timeout", "10", "--data-dir"])
            .arg(&self.data_dir)
            .output();
    }
}

/// `opkit cluster start --detach --port 0 -o json` in `cwd` with `flags`; its output
/// and a guard that stops it.
pub(crate) fn start_detached(cwd: &Path, data_dir: Option<&Path>, flags: &[&str]) -> (StopOnDrop, Value) {
    let mut cmd = opkit(cwd);
    cmd.args(["cluster", "start", "--detach", "--port", "0", "-o", "json"]).args(flags);
    if let Some(dir) = data_dir {
        cmd.arg("--data-dir").arg(dir);
    }
    let guard = StopOnDrop {
        cwd: cwd.to_path_buf(),
        data_dir: data_dir.map_or_else(|| cwd.join(".opkit/cluster"), Path::to_path_buf),
    };
    let out = run(&mut cmd);
    assert!(out.status.success(), "start --detach: {}", stderr(&out));
    (guard, stdout_json(&out))
}

/// A client of the cluster a kubeconfig file (such as `start_detached`'s) names.
pub(crate) async fn client_of(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default()).await.expect("config");
    kube::Client::try_from(config).expect("client")
}

/// Whether a container of `pod` runs as a real process (its ID the process runtime's, not
/// a simulated pod's).
pub(crate) fn runs_for_real(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    let statuses = pod.status.iter().flat_map(|s| s.container_statuses.iter().flatten());
    statuses
        .filter_map(|c| c.container_id.as_deref())
        .any(|id| id.starts_with(opkit_controllers::REAL_CONTAINER_ID_PREFIX))
}

fn status(cwd: &Path, data_dir: &Path) -> (Option<i32>, Value) {
    let out = run(opkit(cwd).args(["cluster", "status", "-o", "json", "--data-dir"]).arg(data_dir));
    assert!(out.stderr.is_empty(), "status prints its result on stdout: {}", stderr(&out));
    (out.status.code(), stdout_json(&out))
}

fn str_of<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_else(|| panic!("{field} in {value}"))
}

#[test]
fn detached_cluster_status_stop_restart_and_delete() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let kubeconfig_path = tmp.path().join("elsewhere.kubeconfig");
    let kc_flag = kubeconfig_path.to_str().expect("utf-8");
    let (_guard, info) = start_detached(tmp.path(), Some(&data), &["--kubeconfig", kc_flag]);
    let pid = info["pid"].as_u64().expect("pid");
    assert_eq!(str_of(&info, "logFile"), data.join("cluster.log").display().to_string());
    assert_eq!(str_of(&info, "kubeconfig"), kc_flag);
    assert_eq!(str_of(&info, "contextName"), "opkit");
    // Returned means ready: kubectl works at once.
    kubectl_ok(kc_flag, &["get", "namespace", "default"]);
    kubectl_ok(kc_flag, &["create", "configmap", "kept", "--from-literal=a=b"]);

    let (code, running) = status(tmp.path(), &data);
    assert_eq!(code, Some(0), "{running}");
    assert_eq!(running["running"], true);
    assert_eq!(running["pid"].as_u64(), Some(pid));
    assert_eq!(running["server"], info["server"]);
    assert_eq!(running["kubeconfig"], info["kubeconfig"]);
    assert_eq!(running["logFile"], info["logFile"]);
    assert!(running["uptimeSeconds"].as_i64().is_some_and(|s| s >= 0), "{running}");
    let text = run(opkit(tmp.path()).args(["cluster", "status", "--data-dir"]).arg(&data));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("a cluster is running from") && text.contains(&format!("pid:        {pid}")), "{text}");

    // A second start on the directory is refused, naming the running one.
    let again = run(opkit(tmp.path())
        .args(["cluster", "start", "--detach", "--port", "0", "-o", "json", "--data-dir"])
        .arg(&data));
    assert_eq!(again.status.code(), Some(1));
    let error = stderr_json(&again);
    assert_eq!(error["error"]["kind"], "already-running");
    let holder =
        format!("a cluster is already running from {} (pid {pid}, {})", data.display(), str_of(&info, "server"));
    assert!(str_of(&error["error"], "message").contains(&holder), "{error}");

    let stopped = run(opkit(tmp.path()).args(["cluster", "stop", "-o", "json", "--data-dir"]).arg(&data));
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let stopped = stdout_json(&stopped);
    assert_eq!(
        (stopped["stopped"].clone(), stopped["killed"].clone(), stopped["pid"].as_u64()),
        (true.into(), false.into(), Some(pid))
    );
    let (code, not_running) = status(tmp.path(), &data);
    assert_eq!(code, Some(3), "{not_running}");
    assert_eq!(not_running["running"], false);
    assert!(!kubectl(kc_flag, &["get", "namespace", "default", "--request-timeout=5s"]).status.success());

    // Again, as people read it.
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let out = run(opkit(tmp.path())
        .args(["cluster", "start", "--detach", "--port", "0", "--kubeconfig", kc_flag, "--data-dir"])
        .arg(&data));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let log = data.join("cluster.log");
    for line in [
        format!("export KUBECONFIG={kc_flag}"),
        "Running in the background (pid ".to_string(),
        format!("its log is {}.", log.display()),
        format!("Stop it with `opkit cluster stop --data-dir {}`.", data.display()),
    ] {
        assert!(text.contains(&line), "{line:?} in {text}");
    }
    assert!(std::fs::read_to_string(&log).expect("log").contains("opkit control plane listening on"));
    let (_, info) = status(tmp.path(), &data);
    assert_ne!(info["pid"].as_u64(), Some(pid));
    assert_eq!(kubectl_ok(kc_flag, &["get", "configmap", "kept", "-o", "jsonpath={.data.a}"]), "b", "objects are kept");

    let deleted = run(opkit(tmp.path()).args(["cluster", "delete", "-o", "json", "--data-dir"]).arg(&data));
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    let deleted = stdout_json(&deleted);
    assert_eq!(deleted["stoppedPid"], info["pid"]);
    assert!(!data.exists(), "the data directory is gone");
    assert!(!kubeconfig_path.exists(), "the kubeconfig it wrote is gone");
    assert_eq!(status(tmp.path(), &data).0, Some(3));
    let again = run(opkit(tmp.path()).args(["cluster", "delete", "--data-dir"]).arg(&data));
    assert!(again.status.success(), "deleting what is gone succeeds: {}", stderr(&again));
}

#[test]
fn a_detached_cluster_that_dies_shows_its_log() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let missing = tmp.path().join("missing-encryption.yaml");
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let out = run(opkit(tmp.path())
        .args(["cluster", "start", "--detach", "--port", "0", "--encryption-provider-config"])
        .arg(&missing)
        .arg("--data-dir")
        .arg(&data));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("the cluster exited") && err.contains(&data.join("cluster.log").display().to_string()),
        "{err}"
    );
    assert!(
        err.contains(&format!("reading the encryption provider config {}", missing.display())),
        "the log's end: {err}"
    );
    assert_eq!(status(tmp.path(), &data).0, Some(3));
}

#[test]
fn stop_without_a_cluster_and_of_a_foreground_cluster() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let out = run(opkit(tmp.path()).args(["cluster", "stop", "--data-dir"]).arg(&data));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out).trim(), format!("error: no cluster is running from {}", data.display()));
    let out = run(opkit(tmp.path()).args(["cluster", "stop", "--ignore-not-running", "--data-dir"]).arg(&data));
    assert!(out.status.success(), "{}", stderr(&out));

    // A cluster in the foreground (another terminal) stops cleanly too.
    let mut child = opkit(tmp.path())
        .args(["cluster", "start", "--port", "0", "-o", "json", "--data-dir"])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().expect("stdout")), &mut line)
        .expect("read");
    let info: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(info["pid"].as_u64(), Some(u64::from(child.id())));
    assert_eq!(info["logFile"], Value::Null, "a foreground cluster logs to its terminal");
    let out = run(opkit(tmp.path()).args(["cluster", "stop", "--data-dir"]).arg(&data));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("(pid {})", child.id())));
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "SIGTERM stops it cleanly: {exit:?}");
}

/// A process group that is killed when the test ends.
struct KillGroupOnDrop(std::process::Child);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.0.id())]).status();
        let _ = self.0.wait();
    }
}

#[test]
fn stop_kills_a_cluster_that_ignores_sigterm_after_the_timeout() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    std::fs::create_dir_all(&data).expect("mkdir");
    let lock = data.join("lock");
    // A stand-in for a hung cluster: it holds the lock and ignores SIGTERM.
    let holder = KillGroupOnDrop(
        Command::new("sh")
            .arg("-c")
            .arg("trap '' TERM; exec flock -o \"$0\" sleep 600")
            .arg(&lock)
            .process_group(0)
            .spawn()
            .expect("spawn flock"),
    );
    std::fs::write(&lock, format!("pid {}", holder.0.id())).expect("record the holder");
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(tmp.path(), &data).0 != Some(0) {
        assert!(Instant::now() < deadline, "the stand-in never took the lock");
        std::thread::yield_now();
    }
    let out = run(opkit(tmp.path()).args(["cluster", "stop", "--timeout", "1", "-o", "json", "--data-dir"]).arg(&data));
    assert!(out.status.success(), "{}", stderr(&out));
    let stopped = stdout_json(&out);
    assert_eq!(stopped["killed"], true, "{stopped}");
    assert!(stderr(&out).contains("did not stop within 1s; killing it"), "{}", stderr(&out));
    assert_eq!(status(tmp.path(), &data).0, Some(3));
}

#[test]
fn context_names_keep_merged_kubeconfigs_apart() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (_ga, alpha) = start_detached(tmp.path(), Some(&a), &["--context-name", "alpha", "--in-memory"]);
    let (_gb, beta) = start_detached(tmp.path(), Some(&b), &["--context-name", "beta", "--in-memory"]);
    let merged = format!("{}:{}", str_of(&alpha, "kubeconfig"), str_of(&beta, "kubeconfig"));
    let view: Value =
        serde_json::from_str(&kubectl_ok(&merged, &["config", "view", "--flatten", "-o", "json"])).expect("json");
    let names = |list: &str| -> Vec<String> {
        let mut names: Vec<String> =
            view[list].as_array().expect(list).iter().map(|e| e["name"].as_str().expect("name").to_string()).collect();
        names.sort();
        names
    };
    assert_eq!(names("clusters"), ["alpha", "beta"]);
    assert_eq!(names("contexts"), ["alpha", "beta"]);
    assert_eq!(names("users"), ["alpha-admin", "beta-admin"]);
    kubectl_ok(&merged, &["--context", "beta", "create", "namespace", "only-in-beta"]);
    kubectl_ok(&merged, &["--context", "beta", "get", "namespace", "only-in-beta"]);
    let other = kubectl(&merged, &["--context", "alpha", "get", "namespace", "only-in-beta"]);
    assert!(!other.status.success() && stderr(&other).contains("NotFound"), "{}", stderr(&other));

    // `cluster kubeconfig` prints it, renamed on request.
    let out = run(opkit(tmp.path()).args(["cluster", "kubeconfig", "--context-name", "gamma", "--data-dir"]).arg(&a));
    assert!(out.status.success(), "{}", stderr(&out));
    let file = tmp.path().join("gamma.kubeconfig");
    std::fs::write(&file, &out.stdout).expect("write");
    let file = file.to_str().expect("utf-8");
    assert_eq!(kubectl_ok(file, &["config", "current-context"]).trim(), "gamma");
    assert_eq!(kubectl_ok(file, &["config", "view", "-o", "jsonpath={.users[0].name}"]), "gamma-admin");
    kubectl_ok(file, &["get", "namespace", "default"]);
    let out = run(opkit(tmp.path()).args(["cluster", "kubeconfig", "--data-dir"]).arg(&b));
    assert_eq!(
        out.stdout,
        std::fs::read(str_of(&beta, "kubeconfig")).expect("read"),
        "unchanged without --context-name"
    );
}

#[test]
fn a_taken_port_says_so_and_names_our_cluster() {
    let tmp = tempfile::tempdir().expect("tmp");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port().to_string();
    let start_on = |port: &str, data: &str, json: bool| {
        let mut cmd = opkit(tmp.path());
        cmd.args(["cluster", "start", "--in-memory", "--port", port, "--data-dir", data]);
        if json {
            cmd.args(["-o", "json"]);
        }
        run(&mut cmd)
    };
    let out = start_on(&port, "one", false);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("port {port} on 127.0.0.1 is already in use;")) && err.contains("--port 0"), "{err}");
    let out = start_on(&port, "one", true);
    assert_eq!(stderr_json(&out)["error"]["kind"], "port-in-use");

    // The cluster of the default data directory is named.
    let (_guard, info) = start_detached(tmp.path(), None, &["--in-memory"]);
    let server = str_of(&info, "server");
    let its_port = server.rsplit(':').next().expect("port");
    let out = start_on(its_port, "two", false);
    assert_eq!(out.status.code(), Some(1));
    let default = tmp.path().join(".opkit/cluster");
    let named = format!("by the opkit cluster running from {} (pid {}, {server})", default.display(), info["pid"]);
    assert!(stderr(&out).contains(&named), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn version_reports_client_commit_and_server() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cwd = tmp.path().to_path_buf();
    let version = move |args: Vec<String>| {
        let cwd = cwd.clone();
        tokio::task::spawn_blocking(move || run(opkit(&cwd).arg("version").args(args)))
    };
    let out = version(vec!["--client".into(), "-o".into(), "json".into()]).await.expect("join");
    assert!(out.status.success(), "{}", stderr(&out));
    let client = stdout_json(&out);
    assert_eq!(client["clientVersion"]["opkitVersion"], env!("CARGO_PKG_VERSION"));
    let commit = str_of(&client["clientVersion"], "gitCommit");
    assert!(commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit()), "built in a git checkout: {commit}");
    assert_eq!(client.get("serverVersion"), None);
    // The Kubernetes version the client is built for, as operator-sdk reports client-go's.
    assert_eq!(client["clientVersion"]["kubernetesVersion"], "v1.33");
    let out = version(vec!["--client".into()]).await.expect("join");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\nKubernetes Version: v1.33"), "{out:?}");

    // A kubeconfig that cannot be read is named once, unquoted.
    let missing = tmp.path().join("missing.kubeconfig");
    let out = version(vec!["--kubeconfig".into(), missing.display().to_string()]).await.expect("join");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches(&missing.display().to_string()).count(), 1, "{text}");
    assert!(
        text.contains(&format!(
            "Server Version: unreachable: kubeconfig: {}: No such file or directory",
            missing.display()
        )),
        "{text}"
    );
    assert!(!text.contains('"') && !text.contains('\''), "{text}");

    // No server: the client part, the server unreachable, and success.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let kubeconfig = tmp.path().join("down.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: down\n  cluster: {{server: \"https://{closed}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: down\n  context: {{cluster: down, user: u}}\ncurrent-context: down\n"),
    )
    .expect("write");
    let kc = kubeconfig.display().to_string();
    let out = version(vec!["--kubeconfig".into(), kc.clone()]).await.expect("join");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("Git Commit: {commit}")), "{text}");
    assert!(text.contains(&format!("Server Version: unreachable: https://{closed}")), "{text}");
    let out = version(vec!["--kubeconfig".into(), kc, "-o".into(), "json".into()]).await.expect("join");
    assert!(str_of(&stdout_json(&out), "serverError").contains(&closed.to_string()));

    // A server: its gitVersion.
    let env = opkit_testenv::TestEnv::builder().without_controllers().start().await.expect("testenv");
    let kc = env.kubeconfig_path().display().to_string();
    let out = version(vec!["--kubeconfig".into(), kc, "-o".into(), "json".into()]).await.expect("join");
    assert!(out.status.success(), "{}", stderr(&out));
    let both = stdout_json(&out);
    let expected = env.client().apiserver_version().await.expect("version").git_version;
    assert_eq!(both["serverVersion"]["gitVersion"], expected.as_str());
    assert_eq!(both["server"], env.server().url());
}

#[test]
fn errors_are_json_with_output_json_and_exit_codes_stay() {
    let tmp = tempfile::tempdir().expect("tmp");
    let empty = tmp.path().join("empty");
    let out = run(opkit(tmp.path()).args(["-o", "json", "cluster", "stop", "--data-dir"]).arg(&empty));
    assert_eq!(out.status.code(), Some(1));
    let error = stderr_json(&out);
    assert_eq!(error["error"]["kind"], "not-running");
    assert_eq!(error["error"]["message"], format!("no cluster is running from {}", empty.display()));
    assert!(out.stdout.is_empty());

    // A command line clap refuses: its exit code (2), as JSON.
    let out = run(opkit(tmp.path()).args(["cluster", "start", "--port", "notaport", "--output=json"]));
    assert_eq!(out.status.code(), Some(2));
    let error = stderr_json(&out);
    assert_eq!(error["error"]["kind"], "usage");
    assert_eq!(
        str_of(&error["error"], "message"),
        "invalid value 'notaport' for '--port <PORT>': invalid digit found in string",
        "clap's message without the usage"
    );
    let out = run(opkit(tmp.path()).args(["cluster", "start", "--port", "notaport"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).starts_with("error: invalid value 'notaport'"), "text stays clap's: {}", stderr(&out));

    // Other commands' failures too.
    let missing = tmp.path().join("missing.kubeconfig");
    let out = run(opkit(tmp.path()).args(["uninstall", "-o", "json", "--kubeconfig"]).arg(&missing));
    assert_eq!(out.status.code(), Some(1));
    let error = stderr_json(&out);
    assert!(error["error"]["kind"].is_string() && error["error"]["message"].is_string(), "{error}");
    let out = run(opkit(tmp.path()).args(["cluster", "kubeconfig", "-o", "json", "--data-dir"]).arg(&empty));
    assert_eq!(stderr_json(&out)["error"]["kind"], "not-running");
}

#[test]
fn the_repository_ignores_the_local_clusters_data() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("git")
        .args(["check-ignore", "--no-index", "-q", ".opkit/cluster/state.db"])
        .current_dir(&root)
        .output()
        .expect("git");
    assert!(out.status.success(), "`opkit cluster start` in the checkout leaves .opkit/ untracked: {}", stderr(&out));
}

/// A SIGTERM while the cluster is still starting (`cluster stop` right after `start`)
/// stops it cleanly once it is up, instead of killing it with the signal's default action.
#[test]
fn a_stop_asked_for_while_starting_is_a_clean_stop() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let mut child = opkit(tmp.path())
        .args(["cluster", "start", "--port", "0", "--data-dir"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !data.join("lock").exists() {
        assert!(Instant::now() < deadline, "the data directory was never locked");
        std::thread::yield_now();
    }
    let sent = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(sent.success());
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "a clean stop, not death by SIGTERM: {exit:?}");
}

/// Ctrl-C (or SIGTERM) while `start --detach` waits stops the half-started cluster too.
#[test]
fn interrupting_a_detached_start_stops_the_cluster() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let parent = opkit(tmp.path())
        .args(["cluster", "start", "--detach", "--port", "0", "--ready-timeout", "600", "--data-dir"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The log file is made once `start --detach` listens for Ctrl-C, just before the
    // background process starts, so the signal comes before the cluster is ready.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !data.join("cluster.log").exists() {
        assert!(Instant::now() < deadline, "start --detach never made its log file");
        std::thread::yield_now();
    }
    let sent = Command::new("kill").args(["-INT", &parent.id().to_string()]).status().expect("kill");
    assert!(sent.success());
    let out = parent.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("interrupted before the cluster was ready"), "{err}");
    let pid = err.split("(pid ").nth(1).and_then(|rest| rest.split(')').next()).expect("the pid in the message");
    // Gone, or a zombie nobody reaps in this container.
    let gone = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map_or(true, |stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
    };
    while !gone() {
        assert!(Instant::now() < deadline, "the background cluster (pid {pid}) was not stopped");
        std::thread::yield_now();
    }
    assert_eq!(status(tmp.path(), &data).0, Some(3));
}

/// `cluster delete --data-dir` with a mistyped directory deletes nothing of the user's.
#[test]
fn delete_refuses_a_directory_that_is_no_clusters() {
    let tmp = tempfile::tempdir().expect("tmp");
    let precious = tmp.path().join("src");
    std::fs::create_dir_all(&precious).expect("mkdir");
    std::fs::write(precious.join("main.rs"), "fn main() {}\n").expect("write");
    let out = run(opkit(tmp.path()).args(["cluster", "delete", "-o", "json", "--data-dir"]).arg(&precious));
    assert_eq!(out.status.code(), Some(1));
    let error = stderr_json(&out);
    assert!(
        str_of(&error["error"], "message").contains("does not look like an opkit cluster's data directory"),
        "{error}"
    );
    assert!(precious.join("main.rs").exists(), "nothing was deleted");
}

#[test]
fn timeouts_take_go_durations_and_bare_seconds() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("none");
    // operator-sdk, kubectl and helm users write `60s` or `2m0s`; opkit's own `60` stays.
    for timeout in ["60s", "2m0s", "1m30s", "60"] {
        let out = run(opkit(tmp.path())
            .args(["cluster", "stop", "--ignore-not-running", "--timeout", timeout])
            .arg("--data-dir")
            .arg(&data));
        assert!(out.status.success(), "--timeout {timeout}: {}", stderr(&out));
    }
    for flag in [&["cluster", "stop", "--timeout", "soon"][..], &["run", "bundle", "b1", "--timeout", "5 minutes"][..]]
    {
        let out = run(opkit(tmp.path()).args(flag));
        assert_eq!(out.status.code(), Some(2), "{flag:?} must be refused as a usage error: {}", stderr(&out));
        assert!(stderr(&out).contains("expected a Go duration such as 90s"), "{flag:?}: {}", stderr(&out));
    }
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_opkit_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().expect("tmp");
    // `opkit completion bash | head -0`: the reader is gone before opkit prints.
    let mut child = opkit(tmp.path())
        .args(["completion", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn opkit");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for opkit");
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert_eq!(out.status.signal(), Some(13), "ended by SIGPIPE, as kubectl is: {:?} {}", out.status, stderr(&out));
}

#[test]
fn a_cluster_whose_pods_are_not_contained_says_so_in_status_and_on_its_node() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let (_guard, info) = start_detached(tmp.path(), Some(&data), &["--pod-isolation", "host"]);
    assert_eq!(str_of(&info, "podIsolation"), "host", "{info}");
    let (code, running) = status(tmp.path(), &data);
    assert_eq!(code, Some(0), "{running}");
    assert_eq!(running["podIsolation"], "host", "{running}");
    assert_eq!(running["podIsolationFallbackReason"], Value::Null, "asked for, not fallen back to");
    let text = run(opkit(tmp.path()).args(["cluster", "status", "--data-dir"]).arg(&data));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("real pods:  NOT contained (host mode, as asked)"), "{text}");

    // The node's Ready condition says it too, as kube's kubelet says "AppArmor enabled".
    let kubeconfig = str_of(&info, "kubeconfig");
    let jsonpath = "-o=jsonpath={.status.conditions[?(@.type==\"Ready\")].message}";
    let deadline = Instant::now() + Duration::from_secs(60);
    let message = loop {
        let out = kubectl(kubeconfig, &["get", "node", "opkit-worker-0", jsonpath]);
        let message = String::from_utf8_lossy(&out.stdout).into_owned();
        if message.contains("NOT contained") || Instant::now() > deadline {
            break message;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        message,
        "kubelet is posting ready status. Real pods are NOT contained (host mode): host isolation is configured"
    );
}

/// `cluster load` and `cluster images` use the opkit cluster the kubeconfig's current
/// context names, as `kind load docker-image` targets a cluster: the mark `cluster start`
/// leaves in its kubeconfig survives a merge, another cluster's context is refused, and
/// `--data-dir` overrides.
#[test]
fn cluster_load_targets_the_cluster_of_the_current_context() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("dev");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("mkdir");
    let kubeconfig = elsewhere.join("dev.kubeconfig");
    let flag = kubeconfig.to_str().expect("utf-8");
    let (_guard, _) = start_detached(tmp.path(), Some(&data), &["--in-memory", "--kubeconfig", flag]);
    let binary = tmp.path().join("manager");
    std::fs::write(&binary, "#!/bin/sh\nexit 0\n").expect("write");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let load = |kubeconfig: &Path, extra: &[&str]| {
        run(opkit(tmp.path())
            .env("KUBECONFIG", kubeconfig)
            .args(["cluster", "load", "example.com/op:v1", "-o", "json", "--binary"])
            .arg(&binary)
            .args(extra))
    };
    let out = load(&kubeconfig, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["store"], data.join("images").display().to_string());
    assert!(!tmp.path().join(".opkit").exists(), "loaded into the default data directory");

    // Merged into another kubeconfig, the context still names the cluster.
    let merged = tmp.path().join("merged.kubeconfig");
    std::fs::write(&merged, kubectl_ok(flag, &["config", "view", "--flatten"])).expect("write");
    let out = run(opkit(tmp.path()).env("KUBECONFIG", &merged).args(["cluster", "images", "-o", "json"]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["images"][0]["reference"], "example.com/op:v1");

    // A context naming a cluster that is not opkit's is refused.
    let other = tmp.path().join("other.kubeconfig");
    std::fs::write(
        &other,
        "apiVersion: v1\nkind: Config\ncurrent-context: kind-kind\nclusters:\n- name: kind-kind\n  cluster:\n    \
         server: https://127.0.0.1:1\ncontexts:\n- name: kind-kind\n  context:\n    cluster: kind-kind\n    user: kind\n\
         users:\n- name: kind\n  user: {}\n",
    )
    .expect("write");
    let out = load(&other, &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("names cluster \\\"kind-kind\\\" (https://127.0.0.1:1), which is not an opkit cluster"),
        "{}",
        stderr(&out)
    );
    // --data-dir overrides the kubeconfig.
    let chosen = tmp.path().join("chosen");
    let out = load(&other, &["--data-dir", chosen.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["store"], chosen.join("images").display().to_string());

    // Files in the image: recorded with their targets; a bad one is refused, loading nothing.
    let watches = tmp.path().join("watches.yaml");
    std::fs::write(&watches, "- kind: Nginx\n").expect("write");
    let file = format!("{}:/opt/helm/watches.yaml", watches.display());
    let out = load(&kubeconfig, &["--file", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["image"]["fileTargets"][0], "/opt/helm/watches.yaml");
    for (bad, why) in [
        (format!("{}:/etc/watches.yaml", watches.display()), "the target may not be under /usr"),
        (format!("{}:relative", watches.display()), "the target must be an absolute path"),
        ("/no/such/file:/opt/x".to_string(), "the source does not exist"),
    ] {
        let out = load(&kubeconfig, &["--file", &bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(stderr(&out).contains(why), "{bad}: {}", stderr(&out));
    }
    let listed = run(opkit(tmp.path()).env("KUBECONFIG", &kubeconfig).args(["cluster", "images", "-o", "json"]));
    let listed = stdout_json(&listed);
    assert_eq!(listed["images"][0]["fileTargets"][0], "/opt/helm/watches.yaml", "a refused load changed nothing");
}

/// `opkit cluster start --detach` inside a pipe that the shell also hands it as an extra
/// descriptor (`3>&1`, as `$(...)` and `| tee` pipelines may): it returns, and the pipe
/// reaches EOF while the cluster runs on, since the background cluster kept no
/// descriptor of its caller's.
#[test]
fn a_detached_start_in_a_pipe_returns_and_the_pipe_ends() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let _guard = StopOnDrop { cwd: tmp.path().to_path_buf(), data_dir: data.clone() };
    let script = r#""$OPKIT" cluster start --detach --port 0 --in-memory -o json --data-dir "$DATA" 3>&1 2>&1 | cat"#;
    let mut shell = Command::new("sh");
    shell
        .args(["-c", script])
        .env("OPKIT", env!("CARGO_BIN_EXE_opkit"))
        .env("DATA", &data)
        .env_remove("OPKIT_DATA_DIR")
        .env_remove("KUBECONFIG")
        .current_dir(tmp.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let mut child = shell.spawn().expect("sh");
    let mut stdout = child.stdout.take().expect("stdout");
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let read = std::io::Read::read_to_string(&mut stdout, &mut text);
        let _ = done.send(read.map(|_| text));
    });
    let text = match finished.recv_timeout(Duration::from_secs(120)) {
        Ok(read) => read.expect("read the pipe"),
        Err(_) => {
            let _ = child.kill();
            panic!("the pipe did not reach EOF within 120 s: the background cluster holds it");
        }
    };
    assert!(child.wait().expect("wait sh").success(), "{text}");
    let started: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    let (code, now) = status(tmp.path(), &data);
    assert_eq!(code, Some(0), "the cluster runs on after the pipe ended: {now}");
    assert_eq!(now["pid"], started["pid"]);
}

/// OLM's controllers, started in the background by `opkit olm install`, end with the
/// cluster they run for: after `cluster stop` their process is gone within a timeout
/// (they lose the Lease they hold and stop). `olm uninstall` stopping them is tested in
/// `olm.rs`.
#[test]
fn olm_controllers_stop_with_their_cluster() {
    let tmp = tempfile::tempdir().expect("tmp");
    let data = tmp.path().join("cluster");
    let kubeconfig = tmp.path().join("kubeconfig");
    let kc = kubeconfig.to_str().expect("utf-8");
    let (_guard, _) = start_detached(tmp.path(), Some(&data), &["--in-memory", "--kubeconfig", kc]);
    let out = run(opkit(tmp.path())
        .args(["olm", "install", "-o", "json", "--kubeconfig", kc, "--log-file"])
        .arg(tmp.path().join("olm.log")));
    assert!(out.status.success(), "olm install: {}", stderr(&out));
    let pid = stdout_json(&out)["pid"].as_u64().expect("pid");
    let alive = || {
        Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(alive(), "OLM's controllers (pid {pid}) run after install");
    let stopped = run(opkit(tmp.path()).args(["cluster", "stop", "--timeout", "30", "--data-dir"]).arg(&data));
    assert!(stopped.status.success(), "cluster stop: {}", stderr(&stopped));
    let deadline = Instant::now() + Duration::from_secs(90);
    while alive() {
        let log = std::fs::read_to_string(tmp.path().join("olm.log")).unwrap_or_default();
        assert!(Instant::now() < deadline, "OLM's controllers (pid {pid}) outlived their cluster; their log:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
