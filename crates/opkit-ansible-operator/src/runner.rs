//! Runs `ansible-runner` for one custom resource, as operator-sdk's
//! `internal/ansible/runner`: an input directory per resource
//! (`<runner dir>/<group>/<version>/<kind>/<namespace>/<name>`) with the extra vars
//! (the spec, snake-cased unless `snakeCaseParameters: false`, `ansible_operator_meta`,
//! `_<group>_<kind>` with the whole object and `_<group>_<kind>_spec`, the watch's and the
//! finalizer's `vars`), a localhost inventory and the environment (the run's kubeconfig,
//! pointing at the API proxy, as `K8S_AUTH_KUBECONFIG` and `KUBECONFIG`). Artifacts are
//! rotated (`--rotate-artifacts`, `maxRunnerArtifacts` or the resource's
//! `ansible.sdk.operatorframework.io/max-runner-artifacts`) and `artifacts/latest` points
//! at the last run. The run's job events are read while it goes ([`EventFollower`]) and
//! handed to a callback as they come (the operator logs them per `--ansible-log-events`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;

use crate::OperatorError;
use crate::job_events::{EventFollower, JobEvent, RunSummary};
use crate::paramconv;
use crate::watches::{Runnable, Watch};

/// Annotation overriding `maxRunnerArtifacts` for one resource.
pub(crate) const MAX_RUNNER_ARTIFACTS_ANNOTATION: &str = "ansible.sdk.operatorframework.io/max-runner-artifacts";
/// Annotation overriding `--ansible-verbosity` for one resource.
pub(crate) const VERBOSITY_ANNOTATION: &str = "ansible.sdk.operatorframework.io/verbosity";

/// Settings every run shares.
#[derive(Debug, Clone)]
pub(crate) struct RunnerSettings {
    /// Where input directories are made (operator-sdk: `/tmp/ansible-operator/runner`).
    pub runner_dir: PathBuf,
    /// `-v` count (`--ansible-verbosity`, default 2).
    pub verbosity: u8,
    /// Extra `ansible-playbook` arguments (`--ansible-args`), written to `env/cmdline`.
    pub ansible_args: Option<String>,
    /// Collections paths put before the environment's `ANSIBLE_COLLECTIONS_PATH`
    /// (opkit's `operator_sdk.util` first).
    pub collections_paths: Vec<PathBuf>,
    /// Roles paths put before the environment's `ANSIBLE_ROLES_PATH`.
    pub roles_paths: Vec<PathBuf>,
    /// Where the `osdk_metric` module sends user metrics (the API proxy's `/metrics`),
    /// passed to runs as [`METRICS_URL_ENV`].
    pub metrics_url: Option<String>,
}

/// The environment variable telling opkit's `osdk_metric` module where to send (when the
/// task gives no `address`).
pub(crate) const METRICS_URL_ENV: &str = "OPKIT_ANSIBLE_METRICS_URL";

/// How often a running run's `job_events/` is read.
const EVENT_POLL: Duration = Duration::from_millis(100);

/// One finished run.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// The run's id (`-i`), also its artifact directory's name.
    pub ident: String,
    /// The artifact directory of the run.
    pub artifact_dir: PathBuf,
    /// What the run's events say.
    pub summary: RunSummary,
    /// What `ansible-runner` printed.
    pub stdout: String,
}

/// The extra vars of a run for `object`, operator-sdk's `makeParameters`.
pub(crate) fn parameters(watch: &Watch, object: &Value, finalizer_run: bool) -> Map<String, Value> {
    let spec = object.get("spec").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut params = if watch.snake_case_parameters { paramconv::map_to_snake(&spec) } else { spec.clone() };
    if watch.mark_unsafe {
        for value in params.values_mut() {
            *value = mark_unsafe(value);
        }
    }
    let meta = |field: &str| object.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or_default();
    params.insert("ansible_operator_meta".into(), json!({"name": meta("name"), "namespace": meta("namespace")}));
    let key = escape_key(&format!("_{}_{}", watch.group, watch.kind.to_lowercase()));
    let (whole, spec) = if watch.mark_unsafe {
        (mark_unsafe(object), mark_unsafe(&Value::Object(spec)))
    } else {
        (object.clone(), Value::Object(spec))
    };
    params.insert(format!("{key}_spec"), spec);
    params.insert(key, whole);
    for (k, v) in &watch.vars {
        params.insert(k.clone(), v.clone());
    }
    if finalizer_run && let Some(f) = &watch.finalizer {
        for (k, v) in &f.vars {
            params.insert(k.clone(), v.clone());
        }
    }
    params
}

/// `_cert-manager.k8s.io` → `_cert_manager_k8s_io`.
fn escape_key(key: &str) -> String {
    key.replace(['.', '-'], "_")
}

/// Strings wrapped as `{"__ansible_unsafe": s}`, so Ansible never templates them.
fn mark_unsafe(value: &Value) -> Value {
    match value {
        Value::String(_) => json!({ "__ansible_unsafe": value }),
        Value::Array(items) => Value::Array(items.iter().map(mark_unsafe).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), mark_unsafe(v))).collect()),
        other => other.clone(),
    }
}

/// Runs `runnable` for `object` (its input directory under `settings.runner_dir`) with
/// the kubeconfig at `kubeconfig`, handing each job event to `on_event` while the run
/// goes (with the run's id), in order.
pub(crate) async fn run(
    settings: &RunnerSettings,
    watch: &Watch,
    runnable: &Runnable,
    object: &Value,
    finalizer_run: bool,
    kubeconfig: &Path,
    mut on_event: impl FnMut(&str, &JobEvent),
) -> Result<RunOutput, OperatorError> {
    let invocation = Invocation::of(settings, watch, object);
    let env = environment(settings, kubeconfig);
    write_input_dir(
        &invocation.input_dir,
        &parameters(watch, object, finalizer_run),
        &env,
        settings.ansible_args.as_deref(),
    )?;
    let mut child = spawn(invocation.command(runnable, &env))?;
    let out = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let Invocation { input_dir, ident, .. } = invocation;
    let artifact_dir = input_dir.join("artifacts").join(&ident);
    let mut follower = EventFollower::new(&artifact_dir);
    let waited = follow_events(&mut child, &mut follower, |event| on_event(&ident, event)).await;
    if let Err(e) = waited {
        return Err(OperatorError::Runner(format!("waiting for ansible-runner: {e}")));
    }
    let mut stdout = String::from_utf8_lossy(&out.await.unwrap_or_default()).into_owned();
    stdout.push_str(&String::from_utf8_lossy(&err.await.unwrap_or_default()));
    let summary: RunSummary = follower.summary();
    link_latest(&input_dir, &ident);
    Ok(RunOutput { ident, artifact_dir, summary, stdout })
}

/// One `ansible-runner run` of a resource: its input directory, the run's id and the
/// settings its annotations may override.
struct Invocation {
    /// `RUNNER_DIR/GROUP/VERSION/KIND/NAMESPACE/NAME` (`_cluster` for no namespace).
    input_dir: PathBuf,
    /// The run's id (`-i`).
    ident: String,
    /// `--rotate-artifacts`: the watch's, or the resource's annotation.
    max_artifacts: usize,
    /// The `-v` count: the settings', or the resource's annotation (at most 7).
    verbosity: u8,
}

impl Invocation {
    fn of(settings: &RunnerSettings, watch: &Watch, object: &Value) -> Invocation {
        let meta =
            |field: &str| object.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or_default();
        let annotation = |name: &str| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(name))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let namespace = meta("namespace");
        let input_dir = settings
            .runner_dir
            .join(&watch.group)
            .join(&watch.version)
            .join(&watch.kind)
            .join(if namespace.is_empty() { "_cluster" } else { namespace })
            .join(meta("name"));
        let max_artifacts = annotation(MAX_RUNNER_ARTIFACTS_ANNOTATION)
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(watch.max_runner_artifacts);
        let verbosity = annotation(VERBOSITY_ANNOTATION)
            .and_then(|v| v.trim().parse::<u8>().ok())
            .filter(|v| *v <= 7)
            .unwrap_or(settings.verbosity);
        Invocation { input_dir, ident: rand::random::<u32>().to_string(), max_artifacts, verbosity }
    }

    /// The `ansible-runner run` command line for `runnable`, with the run's environment.
    fn command(&self, runnable: &Runnable, env: &[(String, String)]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("ansible-runner");
        cmd.arg("run").arg(&self.input_dir).arg("--rotate-artifacts").arg(self.max_artifacts.to_string());
        match runnable {
            Runnable::Playbook(path) => {
                cmd.arg("-p").arg(path);
            }
            Runnable::Role(path) => {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let parent = path.parent().unwrap_or(Path::new("."));
                cmd.args(["--role", &name]).arg("--roles-path").arg(parent).args(["--hosts", "localhost"]);
                if std::env::var("ANSIBLE_GATHERING").is_ok_and(|v| v == "explicit") {
                    cmd.arg("--role-skip-facts");
                }
            }
        }
        cmd.args(["-i", &self.ident]);
        if self.verbosity > 0 {
            cmd.arg(format!("-{}", "v".repeat(usize::from(self.verbosity))));
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        cmd
    }
}

/// Starts `ansible-runner`; not finding it is [`OperatorError::RunnerMissing`].
fn spawn(mut cmd: tokio::process::Command) -> Result<tokio::process::Child, OperatorError> {
    match cmd.spawn() {
        Ok(child) => Ok(child),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(OperatorError::RunnerMissing(e.to_string())),
        Err(e) => Err(OperatorError::Runner(format!("starting ansible-runner: {e}"))),
    }
}

/// Reads a child's pipe to the end in a task (so the child never blocks on a full pipe).
fn drain(pipe: Option<Box<dyn tokio::io::AsyncRead + Send + Unpin>>) -> tokio::task::JoinHandle<Vec<u8>> {
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes).await;
        }
        bytes
    })
}

/// Hands the run's job events to `on_event` as they appear until the child exits, then
/// the rest; returns how the child exited.
async fn follow_events(
    child: &mut tokio::process::Child,
    follower: &mut EventFollower,
    mut on_event: impl FnMut(&JobEvent),
) -> std::io::Result<std::process::ExitStatus> {
    let mut tick = tokio::time::interval(EVENT_POLL);
    let waited = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tick.tick() => {
                for event in follower.poll() {
                    on_event(&event);
                }
            }
        }
    };
    for event in follower.poll().into_iter().chain(follower.finish()) {
        on_event(&event);
    }
    waited
}

/// The run's environment: the kubeconfig, and the collections and roles paths.
fn environment(settings: &RunnerSettings, kubeconfig: &Path) -> Vec<(String, String)> {
    let join = |ours: &[PathBuf], var: &str, defaults: &[String]| {
        let mut paths: Vec<String> = ours.iter().map(|p| p.display().to_string()).collect();
        match std::env::var(var).ok().filter(|v| !v.is_empty()) {
            Some(existing) => paths.push(existing),
            None => paths.extend(defaults.iter().cloned()),
        }
        paths.join(":")
    };
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_string());
    let kubeconfig = kubeconfig.display().to_string();
    let mut env = vec![
        ("K8S_AUTH_KUBECONFIG".to_string(), kubeconfig.clone()),
        ("KUBECONFIG".to_string(), kubeconfig),
        (
            "ANSIBLE_COLLECTIONS_PATH".to_string(),
            join(
                &settings.collections_paths,
                "ANSIBLE_COLLECTIONS_PATH",
                &[format!("{home}/.ansible/collections"), "/usr/share/ansible/collections".to_string()],
            ),
        ),
        (
            "ANSIBLE_ROLES_PATH".to_string(),
            join(
                &settings.roles_paths,
                "ANSIBLE_ROLES_PATH",
                &[
                    format!("{home}/.ansible/roles"),
                    "/usr/share/ansible/roles".to_string(),
                    "/etc/ansible/roles".to_string(),
                ],
            ),
        ),
    ];
    if let Some(url) = &settings.metrics_url {
        env.push((METRICS_URL_ENV.to_string(), url.clone()));
    }
    env
}

/// Writes `env/extravars`, `env/envvars`, `env/settings`, `env/cmdline` and
/// `inventory/hosts` (operator-sdk's `inputdir`).
fn write_input_dir(
    dir: &Path,
    params: &Map<String, Value>,
    env: &[(String, String)],
    cmdline: Option<&str>,
) -> Result<(), OperatorError> {
    let fail = |what: &str, e: std::io::Error| OperatorError::Runner(format!("writing {}/{what}: {e}", dir.display()));
    for sub in ["env", "project", "inventory"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| fail(sub, e))?;
    }
    let envvars: Map<String, Value> = env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    let files = [
        ("env/extravars", Value::Object(params.clone()).to_string()),
        ("env/envvars", Value::Object(envvars).to_string()),
        ("env/settings", json!({}).to_string()),
        (
            "inventory/hosts",
            "localhost ansible_connection=local ansible_python_interpreter={{ansible_playbook_python}}".to_string(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).map_err(|e| fail(name, e))?;
    }
    let cmdline_path = dir.join("env/cmdline");
    match cmdline.map(|c| c.trim_matches('\'')).filter(|c| !c.is_empty()) {
        Some(args) => std::fs::write(&cmdline_path, args).map_err(|e| fail("env/cmdline", e))?,
        None => {
            let _ = std::fs::remove_file(&cmdline_path);
        }
    }
    Ok(())
}

/// Points `artifacts/latest` at the run just made (a symbolic link, on Unix).
fn link_latest(input_dir: &Path, ident: &str) {
    let latest = input_dir.join("artifacts").join("latest");
    let _ = std::fs::remove_file(&latest);
    let run = input_dir.join("artifacts").join(ident);
    #[cfg(unix)]
    if let Err(e) = std::os::unix::fs::symlink(&run, &latest) {
        tracing::warn!(error = %e, "linking artifacts/latest");
    }
    #[cfg(not(unix))]
    let _ = (run, latest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watches::parse_watches;

    #[test]
    fn extra_vars_are_operator_sdks() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("roles/memcached")).expect("role");
        let text = "- {group: cache.example-ops.com, version: v1, kind: Memcached, role: memcached, vars: {foo: bar}, finalizer: {name: f, vars: {state: absent}}}";
        let watch = parse_watches(text, dir.path(), &|_| None, 1).expect("watches").remove(0);
        let object = json!({"apiVersion": "cache.example-ops.com/v1", "kind": "Memcached", "metadata": {"name": "m", "namespace": "ns"}, "spec": {"size": 3, "containerPort": 11211}});
        let params = parameters(&watch, &object, false);
        assert_eq!(params["size"], 3);
        assert_eq!(params["container_port"], 11211);
        assert_eq!(params["ansible_operator_meta"], json!({"name": "m", "namespace": "ns"}));
        assert_eq!(params["_cache_example_ops_com_memcached"], object);
        assert_eq!(params["_cache_example_ops_com_memcached_spec"]["containerPort"], 11211);
        assert_eq!(params["foo"], "bar");
        assert!(params.get("state").is_none());
        assert_eq!(parameters(&watch, &object, true)["state"], "absent");
        let mut unsafe_watch = watch.clone();
        unsafe_watch.mark_unsafe = true;
        unsafe_watch.snake_case_parameters = false;
        let object = json!({"metadata": {"name": "m"}, "spec": {"someText": "{{ lookup('x') }}"}});
        let params = parameters(&unsafe_watch, &object, false);
        assert_eq!(params["someText"], json!({"__ansible_unsafe": "{{ lookup('x') }}"}));
    }
}
