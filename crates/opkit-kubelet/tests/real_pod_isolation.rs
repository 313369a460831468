//! Contained real pods, probed as an attacker in a pod would: a pod cannot read the
//! control plane's data directory, another pod's files or the host's `/etc/shadow`, and
//! sees only its own processes; it runs with the uid, capabilities and `no_new_privs`
//! its `securityContext` asks for (containerd's 14 default capabilities otherwise), a
//! `runAsNonRoot` breach is refused; `pods/exec` runs inside the container, as its user;
//! `seccompProfile: RuntimeDefault` refuses the calls containerd's profile refuses; a
//! node whose real pods are not contained says so on its Ready condition.
//! The programs report on their standard output, read back through `pods/log`.
//! These tests need root (namespaces, mounts), as the real-pod suites do.

use crate::common;

use std::time::Instant;

use common::real_pods::{event, load_script, real_env_with};
use common::{Error, WAIT, kubectl, wait};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, LogParams, PostParams};
use opkit_kubelet::PodIsolation;
use opkit_testenv::TestEnv;
use serde_json::json;

/// A program that tries every way out a contained pod must not have and reports what it
/// could do, then sleeps.
const PROBE: &str = r#"
for f in "$DATA/ca.key" "$DATA/token" "$DATA/state.db" "$DATA/kubeconfig" "$OTHER" /etc/shadow; do
  if cat "$f" > /dev/null 2>&1; then echo "READ $f"; else echo "DENIED $f"; fi
done
if touch /written 2> /dev/null; then echo "ROOT writable"; else echo "ROOT read-only"; fi
if echo x > /tmp/x; then echo "TMP writable"; fi
echo "PIDS $(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ')"
echo "PID1 $(tr '\0' ' ' < /proc/1/cmdline)"
grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs):' /proc/self/status
echo "SA $(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"
if cat /var/run/secrets/kubernetes.io/serviceaccount/token > /dev/null; then echo "TOKEN readable"; fi
echo "HOSTNAME $(cat /etc/hostname)"
echo DONE
exec sleep 3600
"#;

/// A TestEnv whose real pods are contained, with stand-ins of the data directory's
/// secrets next to its admin kubeconfig.
async fn contained_env() -> Result<(TestEnv, std::path::PathBuf), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let data = env.kubeconfig_path().parent().ok_or("no data directory")?.to_path_buf();
    for name in ["ca.key", "token", "state.db"] {
        std::fs::write(data.join(name), "secret")?;
    }
    Ok((env, data))
}

/// Waits until the first container of pod `name` has logged a line `DONE`; returns the log.
async fn report(pods: &Api<Pod>, name: &str) -> Result<String, Error> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(log) = pods.logs(name, &LogParams::default()).await
            && log.lines().any(|l| l == "DONE")
        {
            return Ok(log);
        }
        if Instant::now() > deadline {
            return Err(format!("pod {name} never reported").into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The value of the line starting with `key` in `log`, whitespace collapsed.
fn field(log: &str, key: &str) -> String {
    let line = log.lines().find(|l| l.starts_with(key)).unwrap_or_default();
    line[key.len()..].split_whitespace().collect::<Vec<_>>().join(" ")
}

fn pod(v: serde_json::Value) -> Result<Pod, Error> {
    Ok(serde_json::from_value(v)?)
}

/// A pod running the probe with `env` (name → value) and `security` as its container's
/// securityContext.
fn probe_pod(name: &str, env: &[(&str, String)], security: serde_json::Value) -> Result<Pod, Error> {
    let env: Vec<_> = env.iter().map(|(k, v)| json!({"name": k, "value": v})).collect();
    pod(json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "example.com/probe:v1", "env": env, "securityContext": security}],
        },
    }))
}

/// The host directory of pod `name`'s volume `volume`.
async fn volume_dir(env: &TestEnv, pods: &Api<Pod>, name: &str, volume: &str) -> Result<std::path::PathBuf, Error> {
    let uid = pods.get(name).await?.metadata.uid.unwrap_or_default();
    let root = env.pod_root().ok_or("no pod root")?;
    Ok(root.join(format!("default_{name}_{uid}/volumes/{volume}")))
}

/// A pod `name` with Secret `name`'s `password` mounted at `/secret`, sleeping.
async fn pod_with_secret(env: &TestEnv, pods: &Api<Pod>, name: &str) -> Result<std::path::PathBuf, Error> {
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let secret = json!({"metadata": {"name": name}, "stringData": {"password": format!("{name}-password")}});
    secrets.create(&PostParams::default(), &serde_json::from_value(secret)?).await?;
    let spec = json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "creds", "secret": {"secretName": name}}],
            "containers": [{"name": "c", "image": "example.com/sleeper:v1",
                "volumeMounts": [{"name": "creds", "mountPath": "/secret"}]}],
        },
    });
    pods.create(&PostParams::default(), &pod(spec)?).await?;
    wait(pods, name, |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.clone()).is_some_and(|phase| phase == "Running")
    })
    .await?;
    let file = volume_dir(env, pods, name, "creds").await?.join("password");
    let deadline = Instant::now() + WAIT;
    while !file.exists() {
        if Instant::now() > deadline {
            return Err(format!("{} was never written", file.display()).into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Ok(file)
}

/// An image's files (`opkit cluster load --file`) are in a contained container at their
/// targets, read-only, each on its own: a volume beside them, the ServiceAccount under
/// `/var/run` next to a file under `/var/lib`, and the rest of the root stay as they are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_images_files_are_at_their_targets_read_only_and_leave_the_rest_alone() -> Result<(), Error> {
    use opkit_kubelet::images::ImageFile;
    let (env, _) = contained_env().await?;
    let tmp = tempfile::tempdir()?;
    std::fs::create_dir_all(tmp.path().join("charts/web"))?;
    std::fs::write(tmp.path().join("charts/web/Chart.yaml"), "name: web\n")?;
    std::fs::write(tmp.path().join("watches.yaml"), "- kind: Web\n")?;
    std::fs::write(tmp.path().join("state"), "kept\n")?;
    let script = tmp.path().join("files-probe");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"WATCHES $(cat /opt/helm/watches.yaml)\"\necho \"CHART $(cat /opt/helm/charts/web/Chart.yaml)\"\n\
         echo \"STATE $(cat /var/lib/app/state)\"\n\
         if touch /opt/helm/watches.yaml 2>/dev/null; then echo 'FILES writable'; else echo 'FILES read-only'; fi\n\
         touch /opt/helm/cache/x && echo 'VOLUME writable'\n\
         echo \"SA $(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)\"\necho DONE\nexec sleep 3600\n",
    )?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let spec =
        |source: &str, target: &str| ImageFile::parse(&format!("{}:{target}", tmp.path().join(source).display()));
    let files = [
        spec("watches.yaml", "/opt/helm/watches.yaml")?,
        spec("charts", "/opt/helm/charts")?,
        spec("state", "/var/lib/app/state")?,
    ];
    env.load_image_with_files("example.com/with-files:v1", &script, &files)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let files_pod = pod(json!({"metadata": {"name": "files"}, "spec": {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "example.com/with-files:v1",
            "volumeMounts": [{"name": "cache", "mountPath": "/opt/helm/cache"}]}],
        "volumes": [{"name": "cache", "emptyDir": {}}]}}))?;
    pods.create(&PostParams::default(), &files_pod).await?;
    let log = report(&pods, "files").await?;
    assert_eq!(field(&log, "WATCHES "), "- kind: Web", "{log}");
    assert_eq!(field(&log, "CHART "), "name: web", "{log}");
    assert_eq!(field(&log, "STATE "), "kept", "{log}");
    assert!(log.contains("FILES read-only") && log.contains("VOLUME writable"), "{log}");
    assert_eq!(field(&log, "SA "), "default", "{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contained_pod_sees_neither_the_hosts_files_nor_its_processes_nor_other_pods() -> Result<(), Error> {
    let (env, data) = contained_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/probe:v1", PROBE)?;
    load_script(&env, tmp.path(), "example.com/sleeper:v1", "exec sleep 3600")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let other = pod_with_secret(&env, &pods, "pod-b").await?;
    let vars = [("DATA", data.display().to_string()), ("OTHER", other.display().to_string())];
    pods.create(&PostParams::default(), &probe_pod("pod-a", &vars, json!({}))?).await?;
    let log = report(&pods, "pod-a").await?;

    // Nothing of the host's: the data directory, pod-b's Secret, the shadow file.
    assert!(!log.contains("READ "), "a contained pod read host files:\n{log}");
    assert_eq!(log.lines().filter(|l| l.starts_with("DENIED ")).count(), 6, "{log}");
    // Only its own processes, its program as PID 1.
    let pids = field(&log, "PIDS ");
    assert!(pids.split(' ').count() < 8, "a contained pod sees host processes: {pids}");
    assert!(field(&log, "PID1 ").starts_with("/bin/sh /entrypoint"), "{log}");
    // Root with containerd's default capabilities, its root and /tmp writable.
    assert_eq!(field(&log, "Uid:"), "0 0 0 0", "{log}");
    assert_eq!(field(&log, "CapEff:"), "00000000a80425fb", "{log}");
    assert_eq!(field(&log, "CapBnd:"), "00000000a80425fb", "{log}");
    assert!(log.contains("ROOT writable") && log.contains("TMP writable"), "{log}");
    // Its ServiceAccount is mounted where in-cluster clients read it; its hostname is its own.
    assert_eq!(field(&log, "SA "), "default", "{log}");
    assert_eq!(field(&log, "HOSTNAME "), "pod-a", "{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_with_the_user_and_capabilities_its_security_context_asks_for() -> Result<(), Error> {
    let (env, data) = contained_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/probe:v1", PROBE)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let vars = [("DATA", data.display().to_string()), ("OTHER", "/nonexistent".to_string())];
    let restricted = json!({
        "runAsUser": 1000, "runAsGroup": 3000, "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
    });
    let mut restricted = probe_pod("restricted", &vars, restricted)?;
    restricted.spec.as_mut().ok_or("no spec")?.security_context =
        Some(serde_json::from_value(json!({"fsGroup": 2000}))?);
    pods.create(&PostParams::default(), &restricted).await?;
    let log = report(&pods, "restricted").await?;
    assert_eq!(field(&log, "Uid:"), "1000 1000 1000 1000", "{log}");
    assert_eq!(field(&log, "Gid:"), "3000 3000 3000 3000", "{log}");
    assert_eq!(field(&log, "CapEff:"), "0000000000000000", "{log}");
    assert_eq!(field(&log, "CapBnd:"), "0000000000000000", "{log}");
    assert_eq!(field(&log, "NoNewPrivs:"), "1", "{log}");
    assert!(log.contains("ROOT read-only"), "{log}");
    assert!(!log.contains("READ "), "{log}");
    assert_eq!(field(&log, "Groups:"), "2000", "fsGroup is a supplementary group:\n{log}");
    // Its token is readable by its user: in-cluster clients work as uid 1000.
    assert_eq!(field(&log, "SA "), "default", "{log}");
    assert!(log.contains("TOKEN readable"), "{log}");

    // Added and dropped capabilities, as containerd applies them.
    let tuned = json!({"capabilities": {"add": ["NET_ADMIN"], "drop": ["CHOWN", "NET_RAW"]}});
    pods.create(&PostParams::default(), &probe_pod("tuned", &vars, tuned)?).await?;
    let log = report(&pods, "tuned").await?;
    assert_eq!(field(&log, "CapEff:"), format!("{:016x}", (0xa80425fbu64 | 1 << 12) & !(1 | 1 << 13)), "{log}");

    // runAsNonRoot with runAsUser 0 is refused before the container starts.
    let breach = json!({"runAsNonRoot": true, "runAsUser": 0});
    pods.create(&PostParams::default(), &probe_pod("breach", &vars, breach)?).await?;
    let refused = wait(&pods, "breach", |p: Option<&Pod>| {
        let waiting =
            p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.waiting.clone());
        waiting.is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
    })
    .await?;
    let message = refused
        .status
        .and_then(|s| s.container_statuses?.first()?.state.as_ref()?.waiting.as_ref()?.message.clone())
        .unwrap_or_default();
    assert!(message.starts_with("container's runAsUser breaks non-root policy"), "{message}");
    event(&env, "breach", "Failed", "Error: container's runAsUser breaks non-root policy").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_runs_inside_the_container_as_its_user() -> Result<(), Error> {
    let (env, data) = contained_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/probe:v1", PROBE)?;
    load_script(&env, tmp.path(), "example.com/sleeper:v1", "exec sleep 3600")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let other = pod_with_secret(&env, &pods, "pod-b").await?;
    let vars = [("DATA", data.display().to_string()), ("OTHER", other.display().to_string())];
    let user = json!({"runAsUser": 1000, "capabilities": {"drop": ["ALL"]}});
    pods.create(&PostParams::default(), &probe_pod("pod-a", &vars, user)?).await?;
    report(&pods, "pod-a").await?;
    let script = format!(
        "id -u; grep CapEff /proc/self/status; \
         if cat {} > /dev/null 2>&1; then echo READ-B; else echo DENIED-B; fi; \
         if cat {}/kubeconfig > /dev/null 2>&1; then echo READ-DATA; else echo DENIED-DATA; fi; \
         echo PIDS $(ls /proc | grep -cE '^[0-9]+$'); \
         cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; hostname",
        other.display(),
        data.display()
    );
    let out = kubectl(&env, &["exec", "pod-a", "--", "sh", "-c", &script]).await?;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first().copied(), Some("1000"), "exec does not run as the container's user:\n{out}");
    assert_eq!(field(&out, "CapEff:"), "0000000000000000", "{out}");
    assert!(out.contains("DENIED-B") && out.contains("DENIED-DATA"), "exec reads host files:\n{out}");
    let pids: usize = field(&out, "PIDS ").parse()?;
    assert!(pids < 10, "exec sees host processes: {pids}\n{out}");
    assert!(lines.contains(&"default") && lines.contains(&"pod-a"), "{out}");
    // From pod-b's own container, its Secret is where it was mounted.
    let password = kubectl(&env, &["exec", "pod-b", "--", "cat", "/secret/password"]).await?;
    assert_eq!(password, "pod-b-password");
    Ok(())
}

/// A program reporting its seccomp mode and whether it may make a user namespace
/// (`unshare`, refused by the runtime's default profile), then sleeping.
const SECCOMP_PROBE: &str = r#"
grep -E '^Seccomp:' /proc/self/status
if unshare -U true 2> /tmp/unshare.err; then echo "UNSHARE allowed"; else echo "UNSHARE refused $(cat /tmp/unshare.err)"; fi
echo DONE
exec sleep 3600
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_default_seccomp_refuses_what_containerds_profile_refuses() -> Result<(), Error> {
    let (env, _) = contained_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/seccomp:v1", SECCOMP_PROBE)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let with = |name: &str, pod_sc: serde_json::Value, container_sc: serde_json::Value| {
        pod(json!({
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "securityContext": pod_sc,
                "containers": [{"name": "c", "image": "example.com/seccomp:v1", "securityContext": container_sc}],
            },
        }))
    };
    let default = json!({"seccompProfile": {"type": "RuntimeDefault"}});
    let unconfined = json!({"seccompProfile": {"type": "Unconfined"}});
    pods.create(&PostParams::default(), &with("confined", default.clone(), json!({}))?).await?;
    pods.create(&PostParams::default(), &with("free", json!({}), json!({}))?).await?;
    // The container's profile wins over the pod's.
    pods.create(&PostParams::default(), &with("overridden", default.clone(), unconfined)?).await?;

    let confined = report(&pods, "confined").await?;
    assert_eq!(field(&confined, "Seccomp:"), "2", "a RuntimeDefault pod runs under a filter:\n{confined}");
    assert!(confined.contains("UNSHARE refused"), "unshare is refused:\n{confined}");
    assert!(confined.contains("Operation not permitted"), "with EPERM:\n{confined}");
    for name in ["free", "overridden"] {
        let log = report(&pods, name).await?;
        assert_eq!(field(&log, "Seccomp:"), "0", "{name} has no filter:\n{log}");
        assert!(log.contains("UNSHARE allowed"), "{name}:\n{log}");
    }
    // Exec joins the container under its profile.
    let out = kubectl(&env, &["exec", "confined", "--", "grep", "Seccomp:", "/proc/self/status"]).await?;
    assert_eq!(field(&out, "Seccomp:"), "2", "{out}");

    // A Localhost profile is not loaded: the container is refused, as kube refuses one
    // whose profile it cannot load.
    let local = json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/audit.json"}});
    pods.create(&PostParams::default(), &with("local", json!({}), local)?).await?;
    let refused = wait(&pods, "local", |p: Option<&Pod>| {
        let waiting =
            p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first()?.state.as_ref()?.waiting.clone());
        waiting.is_some_and(|w| w.reason.as_deref() == Some("CreateContainerConfigError"))
    })
    .await?;
    let message = refused
        .status
        .and_then(|s| s.container_statuses?.first()?.state.as_ref()?.waiting.as_ref()?.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("cannot load seccomp profile \"/var/lib/kubelet/seccomp/profiles/audit.json\""),
        "{message}"
    );
    Ok(())
}

/// The Ready condition's message of the test environment's node, once it says `wanted`
/// (or whatever it says when the wait times out).
async fn ready_message(env: &TestEnv, wanted: impl Fn(&str) -> bool) -> Result<String, Error> {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Api<Node> = Api::all(env.client());
    let message = |n: Option<&Node>| {
        let conditions = n.and_then(|n| n.status.as_ref()?.conditions.clone()).unwrap_or_default();
        conditions.into_iter().find(|c| c.type_ == "Ready").and_then(|c| c.message)
    };
    let node = wait(&nodes, "opkit-worker-0", |n: Option<&Node>| message(n).is_some_and(|m| wanted(&m))).await?;
    Ok(message(Some(&node)).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_says_when_real_pods_are_not_contained() -> Result<(), Error> {
    let host = real_env_with(PodIsolation::Host).await?;
    let message = ready_message(&host, |m| m.contains("NOT contained")).await?;
    assert_eq!(
        message,
        "kubelet is posting ready status. Real pods are NOT contained (host mode): host isolation is configured"
    );
    let (contained, _) = contained_env().await?;
    let message = ready_message(&contained, |m| m.starts_with("kubelet is posting ready status")).await?;
    assert_eq!(message, "kubelet is posting ready status");
    Ok(())
}
