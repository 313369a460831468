//! Real pods: a pod whose every image is loaded into the cluster's image store runs as
//! processes (tiny `#!/bin/sh` programs here, each loaded into the test's own store):
//! environment and arguments, the ServiceAccount identity, CrashLoopBackOff, probes,
//! termination (no process left behind) and container logs through the kubelet server.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::real_pods::{event, file, load_script, real_env};
use common::{Error, WAIT, wait};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::wait::await_condition;
use opkit_controllers::ControllersConfig;
use opkit_testenv::TestEnv;
use serde_json::json;

fn pod(v: serde_json::Value) -> Result<Pod, Error> {
    Ok(serde_json::from_value(v)?)
}

fn container_status(p: Option<&Pod>) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    p?.status.as_ref()?.container_statuses.as_ref()?.first().cloned()
}

fn phase(p: Option<&Pod>) -> String {
    p.and_then(|p| p.status.as_ref()?.phase.clone()).unwrap_or_default()
}

fn condition(p: Option<&Pod>, type_: &str) -> Option<String> {
    let cs = p?.status.as_ref()?.conditions.as_ref()?;
    cs.iter().find(|c| c.type_ == type_).map(|c| c.status.clone())
}

/// Whether process `pid` is alive (not gone and not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until none of `pids` is alive.
async fn all_gone(pids: &[i32]) -> Result<(), Error> {
    let deadline = Instant::now() + WAIT;
    while pids.iter().any(|p| alive(*p)) {
        if Instant::now() > deadline {
            return Err(format!("processes {pids:?} outlived their pod").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn pids(text: &str) -> Vec<i32> {
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_image_runs_with_env_args_and_its_service_account() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let out = tmp.path().join("out");
    load_script(
        &env,
        tmp.path(),
        "example.com/printer:v1",
        r#"{
  echo "args=$*"
  echo "GREETING=$GREETING"
  echo "EXPANDED=$EXPANDED"
  echo "POD_NAME=$POD_NAME"
  echo "POD_UID=$POD_UID"
  echo "APP_LABEL=$APP_LABEL"
  echo "NODE=$NODE"
  echo "POD_IP=$POD_IP"
  echo "MEM_MI=$MEM_MI"
  echo "CFG_color=$CFG_color"
  echo "PASSWORD=$PASSWORD"
  echo "OPTIONAL=${OPTIONAL-unset}"
  echo "HOSTNAME=$HOSTNAME"
  echo "KUBERNETES_SERVICE_HOST=$KUBERNETES_SERVICE_HOST"
  echo "KUBERNETES_PORT=$KUBERNETES_PORT"
  echo "PWD=$PWD"
  echo "MY_DB_SERVICE_PORT_SQL=$MY_DB_SERVICE_PORT_SQL"
  echo "MY_DB_PORT=$MY_DB_PORT"
  echo "SA_NAMESPACE=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"
} > "$OUT.tmp"
kubectl --kubeconfig "$KUBECONFIG" auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT.whoami.tmp" 2>&1
mv "$OUT.whoami.tmp" "$OUT.whoami"
env -u KUBECONFIG HOME=/nonexistent kubectl auth whoami -o jsonpath='{.status.userInfo.username}' > "$OUT.incluster.tmp" 2>&1
mv "$OUT.incluster.tmp" "$OUT.incluster"
mv "$OUT.tmp" "$OUT"
exec sleep 3600"#,
    )?;
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "settings"}, "data": {"greeting": "hello", "color": "blue"}
        }))?,
    )
    .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "creds"}, "stringData": {"password": "s3cret"}
            }))?,
        )
        .await?;
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(client.clone(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "my-db"}, "spec": {"ports": [{"name": "sql", "port": 5432}]}
            }))?,
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let created = Instant::now();
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "printer", "labels": {"app": "printer"}},
            "spec": {"containers": [{
                "name": "main", "image": "example.com/printer:v1",
                "command": ["ignored", "first"], "args": ["$(GREETING)-x", "last"],
                "workingDir": "work",
                "resources": {"limits": {"memory": "64Mi"}},
                "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
                "env": [
                    {"name": "OUT", "value": out.display().to_string()},
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                    {"name": "EXPANDED", "value": "$(GREETING) from $(POD_NAME) $$(KEPT)"},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                    {"name": "APP_LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {"name": "OPTIONAL", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": true}}}
                ]
            }]}
        }))?,
    )
    .await?;
    let running = wait(&pods, "printer", |p: Option<&Pod>| phase(p) == "Running").await?;
    eprintln!("real pod: create to Running in {:?}", created.elapsed());
    let text = file(&out).await?;
    let uid = running.metadata.uid.clone().unwrap_or_default();
    let vars: std::collections::HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(vars["args"], "first hello-x last", "{text}");
    assert_eq!(vars["GREETING"], "hello");
    assert_eq!(vars["EXPANDED"], "hello from $(POD_NAME) $(KEPT)", "later variables are not expanded");
    assert_eq!(vars["POD_NAME"], "printer");
    assert_eq!(vars["POD_UID"], uid);
    assert_eq!(vars["APP_LABEL"], "printer");
    assert_eq!(vars["NODE"], "opkit-worker-0");
    assert_eq!(vars["MEM_MI"], "64");
    assert_eq!(vars["CFG_color"], "blue");
    assert_eq!(vars["PASSWORD"], "s3cret");
    assert_eq!(vars["OPTIONAL"], "unset");
    assert_eq!(vars["HOSTNAME"], "printer");
    assert!(!vars["KUBERNETES_SERVICE_HOST"].is_empty());
    assert!(vars["KUBERNETES_PORT"].starts_with("tcp://"), "{text}");
    let pod_dir = env.pod_root().map(|r| r.join(format!("default_printer_{uid}"))).unwrap_or_default();
    assert_eq!(PathBuf::from(vars["PWD"]), pod_dir.join("containers/main/work"));
    // Service links of the namespace's Services.
    let db = services.get("my-db").await?.spec.and_then(|s| s.cluster_ip).ok_or("no cluster IP")?;
    assert_eq!(vars["MY_DB_SERVICE_PORT_SQL"], "5432");
    assert_eq!(vars["MY_DB_PORT"], format!("tcp://{db}:5432"));
    // The pod's status names its sandbox's IP and the running container.
    let status = running.status.clone().unwrap_or_default();
    assert_eq!(Some(vars["POD_IP"].to_string()), status.pod_ip);
    let cs = container_status(Some(&running)).ok_or("no container status")?;
    assert!(cs.container_id.as_deref().is_some_and(|id| id.starts_with("opkit://")), "{cs:?}");
    assert!(cs.state.and_then(|s| s.running).is_some());
    // In-cluster configuration acts as the pod's ServiceAccount.
    let whoami = file(&tmp.path().join("out.whoami")).await?;
    assert_eq!(whoami, "system:serviceaccount:default:default");
    // In a pod network namespace the ServiceAccount is also mounted where in-cluster
    // configuration reads it, so kubectl without a kubeconfig acts as the pod too.
    if opkit_kubelet::pod_network_mode(None).0 == opkit_kubelet::NetworkMode::Namespaces {
        assert_eq!(vars["SA_NAMESPACE"], "default");
        let in_cluster = file(&tmp.path().join("out.incluster")).await?;
        assert_eq!(in_cluster, "system:serviceaccount:default:default");
    }
    assert!(pod_dir.join("serviceaccount/token").exists() && pod_dir.join("serviceaccount/ca.crt").exists());
    assert_eq!(std::fs::read_to_string(pod_dir.join("serviceaccount/namespace"))?, "default");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_config_map_is_a_create_container_config_error() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/idle:v1", "exec sleep 3600")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({
            "metadata": {"name": "unconfigured"},
            "spec": {"containers": [{"name": "main", "image": "example.com/idle:v1",
                "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nowhere", "key": "k"}}}]}]}
        }))?,
    )
    .await?;
    let p = wait(&pods, "unconfigured", |p: Option<&Pod>| {
        container_status(p).and_then(|c| c.state?.waiting?.reason).as_deref() == Some("CreateContainerConfigError")
    })
    .await?;
    let waiting = container_status(Some(&p)).and_then(|c| c.state?.waiting).ok_or("not waiting")?;
    assert_eq!(waiting.message.as_deref(), Some("configmap \"nowhere\" not found"));
    assert_eq!(phase(Some(&p)), "Pending");
    Ok(())
}

/// An image that carries files (`cluster load --file`) cannot run on the host, where no
/// root holds them: its container is a CreateContainerError saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_with_files_on_the_host_is_a_create_container_error() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let program = tmp.path().join("idle");
    std::fs::write(&program, "#!/bin/sh\nexec sleep 3600\n")?;
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    std::fs::write(tmp.path().join("conf"), "x\n")?;
    let file =
        opkit_kubelet::images::ImageFile::parse(&format!("{}:/opt/app/conf", tmp.path().join("conf").display()))?;
    env.load_image_with_files("example.com/with-files:v1", &program, &[file])?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let spec = json!({"containers": [{"name": "main", "image": "example.com/with-files:v1"}]});
    pods.create(&PostParams::default(), &pod(json!({"metadata": {"name": "files-on-host"}, "spec": spec}))?).await?;
    let p = wait(&pods, "files-on-host", |p: Option<&Pod>| {
        container_status(p).and_then(|c| c.state?.waiting?.reason).as_deref() == Some("CreateContainerError")
    })
    .await?;
    let waiting = container_status(Some(&p)).and_then(|c| c.state?.waiting).ok_or("not waiting")?;
    let message = waiting.message.unwrap_or_default();
    assert!(message.contains("carries files") && message.contains("only a contained container sees"), "{message}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_automount_and_service_links_the_pod_gets_neither() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let out = tmp.path().join("out");
    load_script(
        &env,
        tmp.path(),
        "example.com/plain:v1",
        r#"echo "KUBECONFIG=${KUBECONFIG-unset} LINK=${MY_WEB_SERVICE_HOST-unset} K=$KUBERNETES_SERVICE_PORT" > "$OUT.tmp"; mv "$OUT.tmp" "$OUT"; exec sleep 3600"#,
    )?;
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(env.client(), "default");
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "my-web"}, "spec": {"ports": [{"port": 80}]}
            }))?,
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "plain"},
            "spec": {"automountServiceAccountToken": false, "enableServiceLinks": false,
                "containers": [{"name": "c", "image": "example.com/plain:v1",
                    "env": [{"name": "OUT", "value": out.display().to_string()}]}]}}))?,
    )
    .await?;
    let text = file(&out).await?;
    assert!(text.starts_with("KUBECONFIG=unset LINK=unset K="), "{text}");
    assert!(!text.trim_end().ends_with("K="), "the kubernetes Service's variables are always there: {text}");
    let uid = pods.get("plain").await?.metadata.uid.unwrap_or_default();
    let pod_dir = env.pod_root().map(|r| r.join(format!("default_plain_{uid}"))).ok_or("no pod root")?;
    assert!(!pod_dir.join("serviceaccount").exists() && !pod_dir.join("kubeconfig").exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_container_crash_loops_with_growing_backoff() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/crasher:v1", "echo failing; exit 1")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "crasher"},
            "spec": {"containers": [{"name": "c", "image": "example.com/crasher:v1"}]}}))?,
    )
    .await?;
    let backoff_message = |p: Option<&Pod>| {
        container_status(p).and_then(|c| c.state?.waiting).filter(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
    };
    let first = wait(&pods, "crasher", |p: Option<&Pod>| backoff_message(p).is_some()).await?;
    let uid = first.metadata.uid.clone().unwrap_or_default();
    let msg = backoff_message(Some(&first)).and_then(|w| w.message).unwrap_or_default();
    assert_eq!(msg, format!("back-off 1s restarting failed container=c pod=crasher_default({uid})"));
    let cs = container_status(Some(&first)).ok_or("no status")?;
    // As the kubelet: the first restart is immediate, back-off starts with the second.
    assert_eq!(cs.restart_count, 1, "{cs:?}");
    let last = cs.last_state.and_then(|s| s.terminated).ok_or("no last state")?;
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(phase(Some(&first)), "Running");
    // The next back-off is twice as long, after one more restart.
    let later = wait(&pods, "crasher", |p: Option<&Pod>| {
        backoff_message(p).and_then(|w| w.message).is_some_and(|m| m.starts_with("back-off 2s "))
    })
    .await?;
    let cs = container_status(Some(&later)).ok_or("no status")?;
    assert!(cs.restart_count >= 1, "{cs:?}");
    assert_eq!(cs.last_state.and_then(|s| s.terminated).map(|t| t.exit_code), Some(1));
    let more =
        wait(&pods, "crasher", |p: Option<&Pod>| container_status(p).is_some_and(|c| c.restart_count >= 2)).await?;
    assert!(container_status(Some(&more)).is_some_and(|c| c.restart_count >= 2));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn liveness_failure_restarts_and_readiness_gates_ready() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/probed:v1", "exec sleep 3600")?;
    let ready_flag = tmp.path().join("ready");
    let dead_flag = tmp.path().join("dead");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "probed"},
        "spec": {"terminationGracePeriodSeconds": 2, "containers": [{"name": "c", "image": "example.com/probed:v1",
            "readinessProbe": {"exec": {"command": ["/bin/sh", "-c", format!("test -f {}", ready_flag.display())]},
                "periodSeconds": 1, "failureThreshold": 1},
            "livenessProbe": {"exec": {"command": ["/bin/sh", "-c", format!("test ! -f {}", dead_flag.display())]},
                "periodSeconds": 1, "failureThreshold": 2}
        }]}}))?,
    )
    .await?;
    let running = wait(&pods, "probed", |p: Option<&Pod>| phase(p) == "Running").await?;
    assert_eq!(condition(Some(&running), "Ready").as_deref(), Some("False"));
    assert_eq!(container_status(Some(&running)).map(|c| c.ready), Some(false));
    std::fs::write(&ready_flag, "")?;
    let ready = wait(&pods, "probed", |p: Option<&Pod>| condition(p, "Ready").as_deref() == Some("True")).await?;
    assert_eq!(container_status(Some(&ready)).map(|c| c.ready), Some(true));
    std::fs::remove_file(&ready_flag)?;
    wait(&pods, "probed", |p: Option<&Pod>| condition(p, "Ready").as_deref() == Some("False")).await?;
    // Liveness fails twice in a row: the container is killed and restarted.
    std::fs::write(&dead_flag, "")?;
    let restarted =
        wait(&pods, "probed", |p: Option<&Pod>| container_status(p).is_some_and(|c| c.restart_count >= 1)).await?;
    std::fs::remove_file(&dead_flag)?;
    let last = container_status(Some(&restarted)).and_then(|c| c.last_state?.terminated).ok_or("no last state")?;
    assert_eq!(last.exit_code, 143, "stopped with SIGTERM: {last:?}");
    // Events of one reason form a series named by the first (the readiness failure).
    event(&env, "probed", "Unhealthy", "Readiness probe failed: ").await?;
    event(&env, "probed", "Killing", "Container c failed liveness probe, will be restarted").await?;
    Ok(())
}

const TRAPPING: &str = r#"trap 'echo bye > "$OUT.term"; kill $child; exit 0' TERM
sleep 3600 &
child=$!
echo "$$ $child" > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
wait"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_sends_sigterm_and_leaves_no_process() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/trapper:v1", TRAPPING)?;
    let out = tmp.path().join("pids");
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "trapper"},
            "spec": {"containers": [{"name": "c", "image": "example.com/trapper:v1",
                "env": [{"name": "OUT", "value": out.display().to_string()}]}]}}))?,
    )
    .await?;
    let seen = pids(&file(&out).await?);
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|p| alive(*p)));
    let uid = pods.get("trapper").await?.metadata.uid.unwrap_or_default();
    let pod_dir = env.pod_root().map(|r| r.join(format!("default_trapper_{uid}"))).ok_or("no pod root")?;
    assert!(pod_dir.is_dir());
    pods.delete("trapper", &Default::default()).await?;
    tokio::time::timeout(WAIT, await_condition(pods.clone(), "trapper", |p: Option<&Pod>| p.is_none())).await??;
    assert_eq!(file(&tmp.path().join("pids.term")).await?.trim(), "bye");
    all_gone(&seen).await?;
    assert!(!pod_dir.exists(), "the deleted pod's directory is removed");
    event(&env, "trapper", "Killing", "Stopping container c").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_test_env_stops_every_process() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/trapper:v1", TRAPPING)?;
    let stubborn = "trap '' TERM\nsleep 3600 &\necho \"$$ $!\" > \"$OUT.tmp\"\nmv \"$OUT.tmp\" \"$OUT\"\nwait";
    load_script(&env, tmp.path(), "example.com/stubborn:v1", stubborn)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let mut seen = Vec::new();
    for (name, image, grace) in [("polite", "example.com/trapper:v1", 30), ("stubborn", "example.com/stubborn:v1", 1)] {
        let out = tmp.path().join(name);
        pods.create(
            &PostParams::default(),
            &pod(json!({"metadata": {"name": name},
                "spec": {"terminationGracePeriodSeconds": grace, "containers": [{"name": "c", "image": image,
                    "env": [{"name": "OUT", "value": out.display().to_string()}]}]}}))?,
        )
        .await?;
        seen.extend(pids(&file(&out).await?));
    }
    assert_eq!(seen.len(), 4);
    drop(env);
    all_gone(&seen).await?;
    assert_eq!(file(&tmp.path().join("polite.term")).await?.trim(), "bye");
    Ok(())
}

/// A client of the kubelet server at `endpoint`, with a certificate from the cluster CA
/// when `with_cert`.
fn kubelet_client(env: &TestEnv, endpoint: &str, with_cert: bool) -> Result<kube::Client, Error> {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let mut cfg = kube::Config::new(format!("https://{endpoint}").parse()?);
    let ca = opkit_serve::tls::DevCa::from_pem(env.server().ca_pem(), env.server().ca_key_pem())?;
    cfg.root_cert = Some(vec![first_cert_der(env.server().ca_pem()).ok_or("CA certificate")?]);
    if with_cert {
        let cert = ca.issue_client_cert("kube-apiserver-kubelet-client", "system:masters")?;
        cfg.auth_info.client_certificate_data = Some(b64(&cert.cert_pem));
        cfg.auth_info.client_key_data = Some(b64(&cert.key_pem).into());
    }
    Ok(kube::Client::try_from(cfg)?)
}

/// The DER of the first certificate in `pem`.
fn first_cert_der(pem: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

async fn logs(client: &kube::Client, path: &str) -> Result<String, kube::Error> {
    client.request_text(http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_logs_through_the_kubelet_server() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let finish = tmp.path().join("finish");
    let script = format!(
        r#"n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count
for i in 1 2 3 4 5; do echo "run $n line $i"; done
echo "run $n oops" >&2
if [ $n -eq 1 ]; then exit 1; fi
while [ ! -f {} ]; do sleep 0.05; done
echo "run $n last"
exit 0"#,
        finish.display()
    );
    load_script(&env, tmp.path(), "example.com/logger:v1", &script)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "logger"},
            "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "example.com/logger:v1"}]}}))?,
    )
    .await?;
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "simulated"},
            "spec": {"containers": [{"name": "c", "image": "example.com/not-loaded:v1"}]}}))?,
    )
    .await?;
    wait(&pods, "logger", |p: Option<&Pod>| {
        container_status(p).is_some_and(|c| c.restart_count == 1 && c.state.and_then(|s| s.running).is_some())
    })
    .await?;
    let nodes: Api<Node> = Api::all(env.client());
    let node = wait(&nodes, "opkit-worker-0", |n: Option<&Node>| {
        n.and_then(|n| n.metadata.annotations.as_ref()?.get("opkit.dev/kubelet-endpoint").cloned()).is_some()
    })
    .await?;
    let endpoint = node.metadata.annotations.as_ref().and_then(|a| a.get("opkit.dev/kubelet-endpoint").cloned());
    let endpoint = endpoint.ok_or("no endpoint")?;
    let port =
        node.status.as_ref().and_then(|s| s.daemon_endpoints.as_ref()?.kubelet_endpoint.as_ref()).map(|e| e.port);
    assert_eq!(Some(format!("127.0.0.1:{}", port.unwrap_or_default())), Some(endpoint.clone()));
    let kubelet = kubelet_client(&env, &endpoint, true)?;
    let base = "/containerLogs/default/logger/c";
    // Wait for the second run's lines to be written.
    let deadline = Instant::now() + WAIT;
    let all = loop {
        let all = logs(&kubelet, base).await?;
        if all.contains("run 2 oops") || Instant::now() > deadline {
            break all;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Both streams' lines are there, in the order they were read.
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 6, "{all}");
    assert!(lines.contains(&"run 2 line 1") && lines.contains(&"run 2 oops"), "{all}");
    let tail2 = format!("{}\n{}\n", lines[4], lines[5]);
    assert_eq!(logs(&kubelet, &format!("{base}?tailLines=2")).await?, tail2);
    let previous = logs(&kubelet, &format!("{base}?previous=true")).await?;
    assert_eq!(previous.lines().count(), 6, "{previous}");
    assert!(previous.contains("run 1 line 1\n") && previous.contains("run 1 oops"), "{previous}");
    assert!(!previous.contains("run 2"), "{previous}");
    let stamped = logs(&kubelet, &format!("{base}?timestamps=true&tailLines=1")).await?;
    let (ts, line) = stamped.trim_end().split_once(' ').ok_or("no timestamp")?;
    assert!(ts.parse::<jiff::Timestamp>().is_ok(), "{stamped}");
    assert_eq!(line, lines[5]);
    assert_eq!(logs(&kubelet, &format!("{base}?limitBytes=5")).await?, &all[..5]);
    assert_eq!(logs(&kubelet, &format!("{base}?sinceTime=2999-01-01T00:00:00Z")).await?, "");
    // Following streams until the container ends.
    let req = http::Request::get(format!("{base}?follow=true&tailLines=1")).body(Vec::new())?;
    let mut stream = Box::pin(kubelet.request_stream(req).await?);
    std::fs::write(&finish, "")?;
    let mut followed = Vec::new();
    tokio::time::timeout(WAIT, futures::AsyncReadExt::read_to_end(&mut stream, &mut followed)).await??;
    assert_eq!(String::from_utf8_lossy(&followed), format!("{}\nrun 2 last\n", lines[5]));
    // Errors are kube's.
    let err = |e: kube::Error| match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => (0, other.to_string()),
    };
    let bad = logs(&kubelet, "/containerLogs/default/logger/nope").await.map_err(err);
    assert_eq!(bad, Err((400, "container nope is not valid for pod logger".into())));
    let sim = logs(&kubelet, "/containerLogs/default/simulated/c").await?;
    assert_eq!(sim, "", "a simulated container printed nothing");
    let prev = logs(&kubelet, "/containerLogs/default/simulated/c?previous=true").await.map_err(err);
    assert_eq!(prev, Err((400, "previous terminated container \"c\" in pod \"simulated\" not found".into())));
    let tail = logs(&kubelet, &format!("{base}?tailLines=-1")).await.map_err(err);
    assert!(matches!(tail, Err((400, _))), "{tail:?}");
    let anonymous = kubelet_client(&env, &endpoint, false)?;
    let denied = logs(&anonymous, base).await.map_err(err);
    assert!(matches!(denied, Err((401, _))), "{denied:?}");
    Ok(())
}

/// A free TCP port on loopback (for a pod's server on the host network).
fn free_port() -> Result<u16, Error> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_and_tcp_probes() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/web:v1", r#"exec python3 -m http.server "$PORT" --bind 0.0.0.0"#)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    for (name, path) in [("web", "/"), ("web-404", "/missing")] {
        let port = free_port()?;
        pods.create(
            &PostParams::default(),
            &pod(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "example.com/web:v1",
                "ports": [{"name": "http", "containerPort": port}],
                "env": [{"name": "PORT", "value": port.to_string()}],
                "startupProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 30},
                "readinessProbe": {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 1},
                "livenessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1}
            }]}}))?,
        )
        .await?;
    }
    // HTTPS probes do not verify the certificate (here: an unknown CA, another name).
    let ca = opkit_serve::tls::DevCa::generate("elsewhere")?;
    let cert = ca.issue_serving_cert("elsewhere", &["elsewhere.invalid".to_string()])?;
    std::fs::write(tmp.path().join("tls.crt"), &cert.cert_pem)?;
    std::fs::write(tmp.path().join("tls.key"), &cert.key_pem)?;
    let tls_server = r#"import http.server, ssl, sys
server = http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[2], sys.argv[3])
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()"#;
    std::fs::write(tmp.path().join("tls.py"), tls_server)?;
    load_script(
        &env,
        tmp.path(),
        "example.com/web-tls:v1",
        r#"exec python3 "$DIR/tls.py" "$PORT" "$DIR/tls.crt" "$DIR/tls.key""#,
    )?;
    let port = free_port()?;
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "web-tls"},
            "spec": {"containers": [{"name": "c", "image": "example.com/web-tls:v1",
                "env": [{"name": "PORT", "value": port.to_string()}, {"name": "DIR", "value": tmp.path().display().to_string()}],
                "readinessProbe": {"httpGet": {"path": "/", "port": port, "scheme": "HTTPS"}, "periodSeconds": 1}
            }]}}))?,
    )
    .await?;
    wait(&pods, "web-tls", |p: Option<&Pod>| condition(p, "Ready").as_deref() == Some("True")).await?;
    let ready = wait(&pods, "web", |p: Option<&Pod>| condition(p, "Ready").as_deref() == Some("True")).await?;
    let cs = container_status(Some(&ready)).ok_or("no status")?;
    assert_eq!((cs.started, cs.ready, cs.restart_count), (Some(true), true, 0));
    // The server logs each probe (to stderr, so to the container's log): after two 404
    // answers the container has started but is not ready.
    let uid = pods.get("web-404").await?.metadata.uid.unwrap_or_default();
    let log = env.pod_root().map(|r| r.join(format!("default_web-404_{uid}/logs/c/0.log"))).ok_or("no pod root")?;
    let deadline = Instant::now() + WAIT;
    while std::fs::read_to_string(&log).unwrap_or_default().matches("GET /missing HTTP/1.1\" 404").count() < 2 {
        assert!(Instant::now() < deadline, "the readiness probe never reached the server");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let unready =
        wait(&pods, "web-404", |p: Option<&Pod>| container_status(p).is_some_and(|c| c.started == Some(true))).await?;
    assert_eq!(condition(Some(&unready), "Ready").as_deref(), Some("False"));
    assert_eq!(container_status(Some(&unready)).map(|c| c.ready), Some(false));
    let entry = std::fs::read_to_string(&log)?;
    assert!(entry.lines().all(|l| l.split(' ').nth(1).is_some_and(|s| s == "stdout" || s == "stderr")), "{entry}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_kubelet_runs_its_running_pods_again() -> Result<(), Error> {
    let env = TestEnv::builder().without_controllers().start().await?;
    let tmp = tempfile::tempdir()?;
    let images = tmp.path().join("images");
    let script = tmp.path().join("sleeper");
    std::fs::write(&script, "#!/bin/sh\necho $$ > \"$OUT.tmp\"; mv \"$OUT.tmp\" \"$OUT\"\nexec sleep 3600\n")?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    }
    opkit_kubelet::images::ImageStore::new(&images).load("example.com/sleeper:v1", &script)?;
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig_path())?;
    let admin = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let server = env.server();
    let cfg = ControllersConfig {
        nodes: 1,
        images: Some(images),
        pod_root: Some(tmp.path().join("pods")),
        // The program reports its pid through a file on the host.
        pod_isolation: Some(opkit_kubelet::PodIsolation::Host),
        ..Default::default()
    }
    .root_ca(server.ca_pem())
    .cluster_signing(server.ca_pem(), server.ca_key_pem())
    .with_identities(admin);
    let out = tmp.path().join("pid");
    let first = tokio_util::sync::CancellationToken::new();
    let controllers = opkit_controllers::spawn(env.client(), &cfg, first.clone());
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "sleeper"},
            "spec": {"containers": [{"name": "c", "image": "example.com/sleeper:v1",
                "env": [{"name": "OUT", "value": out.display().to_string()}]}]}}))?,
    )
    .await?;
    wait(&pods, "sleeper", |p: Option<&Pod>| phase(p) == "Running").await?;
    let old = pids(&file(&out).await?);
    std::fs::remove_file(&out)?;
    // The cluster stops: its processes stop with it; the pod stays Running in the API.
    first.cancel();
    tokio::time::timeout(WAIT, controllers).await??;
    all_gone(&old).await?;
    assert_eq!(phase(Some(&pods.get("sleeper").await?)), "Running");
    // It starts again: the pod runs again, one restart more.
    let second = tokio_util::sync::CancellationToken::new();
    let _controllers = opkit_controllers::spawn(env.client(), &cfg, second.clone());
    let _stop = second.drop_guard();
    let new = pids(&file(&out).await?);
    assert!(new.iter().all(|p| alive(*p)) && new != old);
    let again = wait(&pods, "sleeper", |p: Option<&Pod>| {
        container_status(p).is_some_and(|c| c.restart_count == 1 && c.state.and_then(|s| s.running).is_some())
    })
    .await?;
    assert_eq!(phase(Some(&again)), "Running");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_in_order_before_the_containers() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let trail = tmp.path().join("trail");
    load_script(
        &env,
        tmp.path(),
        "example.com/step:v1",
        r#"echo "$STEP" >> "$TRAIL"; [ "$STEP" = main ] && exec sleep 3600; exit 0"#,
    )?;
    let step = |name: &str| {
        json!({"name": name, "image": "example.com/step:v1",
            "env": [{"name": "STEP", "value": name}, {"name": "TRAIL", "value": trail.display().to_string()}]})
    };
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "stepped"},
            "spec": {"initContainers": [step("first"), step("second")], "containers": [step("main")]}}))?,
    )
    .await?;
    let running = wait(&pods, "stepped", |p: Option<&Pod>| {
        container_status(p).is_some_and(|c| c.state.and_then(|s| s.running).is_some())
    })
    .await?;
    assert_eq!(file(&trail).await?, "first\nsecond\nmain\n");
    let inits = running.status.and_then(|s| s.init_container_statuses).unwrap_or_default();
    let done: Vec<_> = inits
        .iter()
        .map(|s| {
            (s.name.as_str(), s.ready, s.state.as_ref().and_then(|st| st.terminated.as_ref()).map(|t| t.reason.clone()))
        })
        .collect();
    assert_eq!(
        done,
        [("first", true, Some(Some("Completed".to_string()))), ("second", true, Some(Some("Completed".to_string())))]
    );
    Ok(())
}

/// Figures for the report: how long real pods take from create to Running, and what
/// they cost in this process's memory (API server, controllers and kubelet together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_real_pods_start_and_report_their_cost() -> Result<(), Error> {
    const PODS: usize = 20;
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/idle:v1", "exec sleep 3600")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let rss = || -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap_or_default();
        kb.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0)
    };
    // One pod first, so one-off costs (first TokenRequest, caches) are not counted per pod.
    pods.create(
        &PostParams::default(),
        &pod(json!({"metadata": {"name": "warm"},
        "spec": {"containers": [{"name": "c", "image": "example.com/idle:v1"}]}}))?,
    )
    .await?;
    wait(&pods, "warm", |p: Option<&Pod>| phase(p) == "Running").await?;
    let before = rss();
    let mut latencies = Vec::new();
    for i in 0..PODS {
        let name = format!("idle-{i}");
        let started = Instant::now();
        pods.create(
            &PostParams::default(),
            &pod(json!({"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "example.com/idle:v1"}]}}))?,
        )
        .await?;
        wait(&pods, &name, |p: Option<&Pod>| phase(p) == "Running").await?;
        latencies.push(started.elapsed());
    }
    let after = rss();
    latencies.sort();
    eprintln!(
        "real pods: create to Running median {:?}, max {:?}; RSS +{} KiB for {PODS} pods ({} KiB per pod)",
        latencies[PODS / 2],
        latencies[PODS - 1],
        after.saturating_sub(before),
        after.saturating_sub(before) / PODS as u64
    );
    assert!(latencies.iter().all(|l| *l < WAIT));
    Ok(())
}
