//! The Pipe task (KUDO's `task_pipe.go`): a pod whose init container writes files into an
//! `emptyDir` volume; each file becomes a ConfigMap or a Secret named
//! `INSTANCE.PLAN.PHASE.STEP.TASK.KEY` (lowercase alphanumerics), which later templates
//! find as `.Pipes.KEY`. The pod is validated as KUDO does (one init container, no
//! containers, one emptyDir mounted by it, files under the mount), given KUDO's waiting
//! container and applied; once it is running (so the init container has finished), each
//! file is read out of the running pod by `pods/exec` of `cat FILE` in the waiting
//! container, which mounts the same volume (KUDO execs `tar` there, as `kubectl cp`), the
//! artifacts applied and the pod deleted. A simulated pod (its image does not run on
//! opkit's local cluster) cannot be exec'd into: its files are then read from the init
//! container's script ([`super::pipe_script`]).

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, AttachParams, DeleteParams, DynamicObject};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt as _;

use super::apply::{apply_objects, health_of};
use super::pipe_script;
use super::step::{Outcome, StepMeta};
use super::{Engine, OperatorVersion};
use crate::package::{PipeSpec, Plan, Task};
use crate::render::Variables;

/// KUDO's annotation on pipe pods.
pub(crate) const PIPE_POD_ANNOTATION: &str = "kudo.dev/pipepod";
/// The largest pipe file KUDO accepts (1 MiB).
pub(crate) const MAX_PIPE_FILE: usize = 1024 * 1024;

/// KUDO's deterministic name of a pipe pod or artifact.
pub(crate) fn artifact_name(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|s| s.to_lowercase().chars().filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit()).collect::<String>())
        .collect::<Vec<_>>()
        .join(".")
}

/// `.Pipes` for a plan: every Pipe task's keys and their artifacts' names.
pub(crate) fn pipe_names(
    instance: &str,
    plan_name: &str,
    plan: &Plan,
    ov: &OperatorVersion,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for phase in &plan.phases {
        for step in &phase.steps {
            for task_name in &step.tasks {
                let Some(task) = ov.tasks.iter().find(|t| &t.name == task_name && t.kind == "Pipe") else { continue };
                for pipe in &task.spec.pipe {
                    out.insert(
                        pipe.key.clone(),
                        artifact_name(&[instance, plan_name, &phase.name, &step.name, &task.name, &pipe.key]),
                    );
                }
            }
        }
    }
    out
}

fn file_of(p: &PipeSpec) -> &str {
    if p.file.is_empty() { &p.env_file } else { &p.file }
}

/// KUDO's checks of a pipe pod; returns the shared volume's mount path.
fn validate(pod: &Value, pipes: &[PipeSpec]) -> Result<String, String> {
    if pod.pointer("/spec/containers").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) {
        return Err("pipe pod should not have containers. pipe artifacts are generated in the init container".into());
    }
    let inits = pod.pointer("/spec/initContainers").and_then(Value::as_array).cloned().unwrap_or_default();
    if inits.len() != 1 {
        return Err("pipe pod should define one init container that generated artifacts defined".into());
    }
    let restart = pod.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or_default();
    if !restart.is_empty() && restart != "OnFailure" {
        return Err("pipe pod RestartPolicy should be OnFailure".into());
    }
    let shared: Vec<&str> = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("emptyDir").is_some())
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    let [volume] = shared.as_slice() else {
        return Err("pipe pod should define one emptyDir shared volume where the artifacts are temporary stored".into());
    };
    let mount = inits[0]
        .get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|m| m.get("name").and_then(Value::as_str) == Some(volume))
        .and_then(|m| m.get("mountPath").and_then(Value::as_str))
        .ok_or_else(|| format!("pipe pod should save generated artifacts in {volume}"))?;
    for p in pipes {
        let file = file_of(p);
        if !file.starts_with(&format!("{}/", mount.trim_end_matches('/'))) {
            return Err(format!("pipe file {file} should be a child of {mount} mount path"));
        }
        let base = file.rsplit('/').next().unwrap_or_default();
        if base.is_empty() || !base.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
            return Err(format!("pipe file name {base} should only contain alphanumeric characters, '.', '_' and '-'"));
        }
    }
    Ok(mount.to_string())
}

/// Runs a Pipe task.
pub(crate) async fn run(
    engine: &Engine,
    client: &Client,
    ov: &OperatorVersion,
    meta: &StepMeta,
    task: &Task,
    vars: &Variables,
) -> Outcome {
    let (pod, pod_name) = match pipe_pod(ov, meta, task, vars) {
        Ok(pod) => pod,
        Err(outcome) => return outcome,
    };
    let init = pod.pointer("/spec/initContainers/0").cloned().unwrap_or(Value::Null);
    let applied = match apply_objects(engine, client, meta, ov, vec![pod]).await {
        Ok(a) => a,
        Err(outcome) => return outcome,
    };
    if let Outcome::Waiting(m) | Outcome::Error(m) = health_of(&applied) {
        // The pod cannot fail terminally: waiting, as KUDO.
        return Outcome::Waiting(m);
    }
    let written = match read_files(client, &meta.namespace(), &pod_name, &init, &task.spec.pipe).await {
        Ok(written) => written,
        Err(outcome) => return outcome,
    };
    let artifacts = match artifacts(meta, task, &written) {
        Ok(artifacts) => artifacts,
        Err(outcome) => return outcome,
    };
    if let Err(outcome) = apply_objects(engine, client, meta, ov, artifacts).await {
        return outcome;
    }
    let pods: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &meta.namespace(),
        &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    match pods.delete(&pod_name, &DeleteParams::background()).await {
        Ok(_) => Outcome::Done,
        Err(e) if opkit::status::is_not_found(&e) => Outcome::Done,
        Err(e) => Outcome::Error(format!("deleting pipe pod {pod_name}: {e}")),
    }
}

/// The name of the container KUDO adds to a pipe pod, which keeps it running so that
/// the files can be copied out of it.
const WAITER: &str = "waiter";

/// Reads each pipe file out of the running pipe pod: `cat FILE` exec'd in the waiting
/// container. A file the pod lacks is fatal, as in KUDO. When the exec itself cannot
/// run (a simulated pod), the file is taken from the init container's script if it
/// writes it there, else the step waits and retries.
async fn read_files(
    client: &Client,
    namespace: &str,
    pod: &str,
    init: &Value,
    pipes: &[PipeSpec],
) -> Result<BTreeMap<String, Vec<u8>>, Outcome> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let argv: Vec<String> = ["command", "args"]
        .iter()
        .flat_map(|k| init.get(*k).and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let scripted = || pipe_script::shell_script(&argv).map(|s| pipe_script::files_written(&s)).unwrap_or_default();
    let mut out = BTreeMap::new();
    for p in pipes {
        let file = file_of(p);
        match cat(&pods, pod, file).await {
            Ok(data) => {
                out.insert(file.to_string(), data);
            }
            Err(CatError::Missing(why)) => {
                return Err(Outcome::Fatal(format!("pipe file {file} was not produced by pipe pod {pod}: {why}")));
            }
            Err(CatError::TooLarge) => {
                return Err(Outcome::Fatal(format!(
                    "pipe file {file} size exceeds maximum file size of {MAX_PIPE_FILE} bytes"
                )));
            }
            Err(CatError::Exec(why)) => match scripted().remove(file) {
                Some(data) => {
                    out.insert(file.to_string(), data.into_bytes());
                }
                None => return Err(Outcome::Waiting(format!("copying {file} out of pipe pod {pod}: {why}"))),
            },
        }
    }
    Ok(out)
}

/// Why a file could not be copied out of a pod.
enum CatError {
    /// The exec could not run (or its streams broke): the pod's containers may not run.
    Exec(String),
    /// `cat` ran and failed: the file is not there.
    Missing(String),
    /// The file is larger than [`MAX_PIPE_FILE`].
    TooLarge,
}

/// `cat -- FILE` in the pod's waiting container: the file's bytes.
async fn cat(pods: &Api<Pod>, pod: &str, file: &str) -> Result<Vec<u8>, CatError> {
    let params = AttachParams::default().container(WAITER).stdin(false).stdout(true).stderr(true);
    let mut proc = pods.exec(pod, ["cat", "--", file], &params).await.map_err(|e| CatError::Exec(e.to_string()))?;
    let (Some(mut stdout), Some(mut stderr)) = (proc.stdout(), proc.stderr()) else {
        return Err(CatError::Exec("no output streams".into()));
    };
    let status = proc.take_status();
    let mut data = Vec::new();
    let mut errors = Vec::new();
    let mut stdout = (&mut stdout).take(MAX_PIPE_FILE as u64 + 1);
    let mut stderr = (&mut stderr).take(64 * 1024);
    let (read, _) = tokio::join!(stdout.read_to_end(&mut data), stderr.read_to_end(&mut errors));
    read.map_err(|e| CatError::Exec(e.to_string()))?;
    if data.len() > MAX_PIPE_FILE {
        return Err(CatError::TooLarge);
    }
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    // The process is over once its status is in; the connection's end is not an error.
    let _ = proc.join().await;
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(data),
        Some(s) => {
            let why = String::from_utf8_lossy(&errors).trim().to_string();
            Err(CatError::Missing(if why.is_empty() { s.message.unwrap_or_default() } else { why }))
        }
        None => Err(CatError::Exec("the exec reported no exit status".into())),
    }
}

/// The pipe pod and its name: the task's pod template rendered and checked, named by the
/// engine, with a waiter container mounting the volume the init container writes to.
fn pipe_pod(ov: &OperatorVersion, meta: &StepMeta, task: &Task, vars: &Variables) -> Result<(Value, String), Outcome> {
    let Some(source) = ov.templates.get(&task.spec.pod) else {
        return Err(Outcome::Fatal(format!("template {:?} is not defined by {}", task.spec.pod, ov.name)));
    };
    let rendered = crate::render::render(&task.spec.pod, source, vars).map_err(Outcome::Fatal)?;
    // The pipe pod's name is the engine's: the template has none.
    let mut pod = match serde_saphyr::from_str_with_options::<Value>(&rendered, opkit_helm::yaml::parse_options()) {
        Ok(pod @ Value::Object(_)) if pod.get("kind").and_then(Value::as_str) == Some("Pod") => pod,
        Ok(_) => return Err(Outcome::Fatal(format!("{}: a pipe pod template renders one Pod", task.spec.pod))),
        Err(e) => return Err(Outcome::Fatal(format!("failed to unmarshall pipe pod: {e}"))),
    };
    let mount = validate(&pod, &task.spec.pipe).map_err(Outcome::Fatal)?;
    let pod_name = artifact_name(&[&meta.name(), &meta.plan, &meta.phase, &meta.step, &task.name, "pipepod"]);
    pod["metadata"]["name"] = json!(pod_name);
    pod["metadata"]["annotations"][PIPE_POD_ANNOTATION] = json!("true");
    pod["spec"]["restartPolicy"] = json!("OnFailure");
    let volume = pod
        .pointer("/spec/volumes")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v.get("emptyDir").is_some()))
        .and_then(|v| v.get("name").cloned())
        .unwrap_or(Value::Null);
    pod["spec"]["containers"] = json!([{
        "name": WAITER,
        "image": "busybox",
        "command": ["/bin/sh", "-c"],
        "args": ["sleep infinity"],
        "volumeMounts": [{"name": volume, "mountPath": mount}],
    }]);
    Ok((pod, pod_name))
}

/// The ConfigMaps and Secrets holding the files the pipe pod wrote (`written`, by path).
fn artifacts(meta: &StepMeta, task: &Task, written: &BTreeMap<String, Vec<u8>>) -> Result<Vec<Value>, Outcome> {
    let instance = meta.name();
    let mut artifacts = Vec::new();
    for p in &task.spec.pipe {
        let file = file_of(p);
        let Some(data) = written.get(file) else {
            return Err(Outcome::Fatal(format!("pipe file {file} was not produced")));
        };
        if data.len() > MAX_PIPE_FILE {
            return Err(Outcome::Fatal(format!(
                "pipe file {file} size {} exceeds maximum file size of {MAX_PIPE_FILE} bytes",
                data.len()
            )));
        }
        let name = artifact_name(&[&instance, &meta.plan, &meta.phase, &meta.step, &task.name, &p.key]);
        artifacts.push(artifact(p, &name, data)?);
    }
    Ok(artifacts)
}

/// The artifact of one pipe file: a Secret or ConfigMap named `name`, holding the file
/// under its base name, or (an env file) one key per `KEY=value` line.
fn artifact(p: &PipeSpec, name: &str, bytes: &[u8]) -> Result<Value, Outcome> {
    let key = file_of(p).rsplit('/').next().unwrap_or_default();
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    if p.kind == "ConfigMap" && !p.file.is_empty() {
        return Ok(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "binaryData": {key: b64(bytes)}}),
        );
    }
    if p.kind == "Secret" && !p.file.is_empty() {
        return Ok(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque", "data": {key: b64(bytes)}}),
        );
    }
    let data = String::from_utf8_lossy(bytes);
    let env: BTreeMap<String, String> = data
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim().to_string(), v.to_string())))
        .collect();
    Ok(match p.kind.as_str() {
        "Secret" => {
            let data: BTreeMap<&String, String> = env.iter().map(|(k, v)| (k, b64(v.as_bytes()))).collect();
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque", "data": data})
        }
        "ConfigMap" => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": env}),
        other => return Err(Outcome::Fatal(format!("unknown pipe file kind: {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kudos() {
        assert_eq!(
            artifact_name(&["My-Inst", "deploy", "gen_phase", "s1", "pipe", "Key"]),
            "myinst.deploy.genphase.s1.pipe.key"
        );
    }

    #[test]
    fn validates_the_pod_as_kudo() {
        let pod = json!({"spec": {"initContainers": [{"name": "i", "volumeMounts": [{"name": "shared", "mountPath": "/tmp"}]}],
            "volumes": [{"name": "shared", "emptyDir": {}}]}});
        let ok =
            PipeSpec { file: "/tmp/a.txt".into(), kind: "ConfigMap".into(), key: "a".into(), ..PipeSpec::default() };
        assert_eq!(validate(&pod, std::slice::from_ref(&ok)).as_deref(), Ok("/tmp"));
        let outside = PipeSpec { file: "/etc/a".into(), ..ok };
        assert_eq!(validate(&pod, &[outside]).unwrap_err(), "pipe file /etc/a should be a child of /tmp mount path");
    }
}
