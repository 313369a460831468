//! The kubectl suite: real kubectl binaries (1.33 and 1.27, found next to the `kubectl` on
//! PATH) against an in-process control plane, with kubectl's default validation.

use crate::kubectl_support as support;

use std::process::Stdio;

use opkit_testenv::TestEnv;
use support::{FLIGHT_TICKET_CRD as CRD, Kubectl, line_reader, wait_line};

const TICKET: &str = r#"
apiVersion: flights.com/v1
kind: FlightTicket
metadata:
  name: my-flight-ticket
spec:
  from: Mumbai
  to: Dubai
  number: 2
"#;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
      - name: sidecar
        image: busybox:1.36
"#;

async fn suite(version: &str) {
    let env = TestEnv::start().await.expect("start control plane");
    let k = Kubectl::new(version, &env);
    let server_version = k.ok(&["version", "-o", "json"], None);
    assert!(server_version.contains("\"minor\": \"33\""), "{server_version}");
    let resources = k.ok(&["api-resources"], None);
    for r in ["deployments", "customresourcedefinitions", "leases", "horizontalpodautoscalers"] {
        assert!(resources.contains(r), "api-resources lacks {r}:\n{resources}");
    }
    let versions = k.ok(&["api-versions"], None);
    assert!(versions.contains("apps/v1") && versions.contains("coordination.k8s.io/v1"), "{versions}");
    assert!(k.ok(&["cluster-info"], None).contains("is running at"));

    // A CRD, established, then custom resources through its short name.
    k.ok(&["apply", "-f", "-"], Some(CRD));
    k.ok(&["wait", "--for", "condition=established", "crd/flighttickets.flights.com", "--timeout=20s"], None);
    k.ok(&["apply", "-f", "-"], Some(TICKET));
    let table = k.ok(&["get", "ft"], None);
    assert!(table.contains("my-flight-ticket") && table.contains("Mumbai") && table.contains("FROM"), "{table}");
    let yaml = k.ok(&["get", "ft", "my-flight-ticket", "-o", "yaml"], None);
    assert!(yaml.contains("number: 2") && yaml.contains("resourceVersion:"), "{yaml}");
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "ft", "my-flight-ticket", "-o", "json"], None)).expect("json");
    assert_eq!(json["spec"]["to"], "Dubai");

    // `get -w` shows a later change.
    let mut watch = k
        .command(&["get", "ft", "-w", "-o", "custom-columns=NAME:.metadata.name,NUMBER:.spec.number", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn watch");
    let lines = line_reader(&mut watch);
    wait_line(&lines, "the initial row", |l| l.contains("my-flight-ticket") && l.contains(" 2"));
    k.ok(&["patch", "ft", "my-flight-ticket", "--type", "merge", "-p", r#"{"spec":{"number":7}}"#], None);
    wait_line(&lines, "the watched change", |l| l.contains("my-flight-ticket") && l.contains(" 7"));
    let _ = watch.kill();
    let _ = watch.wait();

    // Validation: schema violations name the field; unknown fields are reported under strict.
    let bad = TICKET.replace("number: 2", "number: 11").replace("my-flight-ticket", "bad-ticket");
    let err = k.fails(&["apply", "-f", "-"], Some(&bad));
    assert!(err.contains("spec.number") && err.contains("less than or equal to 10"), "{err}");
    let unknown = TICKET.replace("number: 2", "number: 3\n  bogus: true").replace("my-flight-ticket", "strict-ticket");
    let err = k.fails(&["apply", "--validate=strict", "-f", "-"], Some(&unknown));
    assert!(err.contains("unknown field") && err.contains("bogus"), "{err}");

    // Namespaces and built-ins, labels and annotations.
    k.ok(&["create", "namespace", "team-a"], None);
    k.ok(&["apply", "-n", "team-a", "-f", "-"], Some(DEPLOYMENT));
    k.ok(&["label", "-n", "team-a", "deployment", "web", "tier=frontend"], None);
    k.ok(&["annotate", "-n", "team-a", "deployment", "web", "note=hello"], None);
    let labels = k.ok(
        &[
            "get",
            "-n",
            "team-a",
            "deploy",
            "web",
            "-o",
            "jsonpath={.metadata.labels.tier} {.metadata.annotations.note}",
        ],
        None,
    );
    assert_eq!(labels, "frontend hello");

    // The three patch types.
    k.ok(&["patch", "-n", "team-a", "deploy", "web", "--type", "merge", "-p", r#"{"spec":{"replicas":3}}"#], None);
    k.ok(
        &[
            "patch",
            "-n",
            "team-a",
            "deploy",
            "web",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#,
        ],
        None,
    );
    k.ok(
        &[
            "patch",
            "-n",
            "team-a",
            "deploy",
            "web",
            "--type",
            "strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.26"}]}}}}"#,
        ],
        None,
    );
    let state = k.ok(
        &[
            "get",
            "-n",
            "team-a",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[*].image}",
        ],
        None,
    );
    assert_eq!(state, "4 nginx:1.26 busybox:1.36");

    // Server-side apply, a conflict, and forcing it.
    k.ok(
        &["apply", "--server-side", "--field-manager=ci", "-f", "-"],
        Some(&DEPLOYMENT.replace("name: web", "name: api")),
    );
    let other = DEPLOYMENT.replace("name: web", "name: api").replace("replicas: 2", "replicas: 6");
    let err = k.fails(&["apply", "--server-side", "--field-manager=other", "-f", "-"], Some(&other));
    assert!(err.contains("conflict") && err.contains(".spec.replicas"), "{err}");
    k.ok(&["apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-"], Some(&other));
    assert_eq!(k.ok(&["get", "deploy", "api", "-o", "jsonpath={.spec.replicas}"], None), "6");

    // Scale, explain, get all.
    k.ok(&["scale", "-n", "team-a", "deployment", "web", "--replicas=5"], None);
    assert_eq!(k.ok(&["get", "-n", "team-a", "deploy", "web", "-o", "jsonpath={.spec.replicas}"], None), "5");
    let explain = k.ok(&["explain", "flightticket.spec"], None);
    assert!(explain.contains("number") && explain.contains("integer"), "{explain}");
    let all = k.ok(&["get", "all", "-A"], None);
    assert!(all.contains("deployment.apps/web") && all.contains("flightticket.flights.com/my-flight-ticket"), "{all}");

    // Delete and wait until gone.
    k.ok(&["delete", "ft", "my-flight-ticket", "--wait"], None);
    let err = k.fails(&["get", "ft", "my-flight-ticket"], None);
    assert!(err.contains("NotFound") || err.contains("not found"), "{err}");
    k.ok(&["delete", "-n", "team-a", "deployment", "web", "--wait"], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33() {
    suite("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27() {
    suite("1.27").await;
}

/// Client-side `kubectl apply` stores the whole object in the last-applied annotation; an
/// object over 256 KiB makes the annotations too long and is refused, as kube-apiserver does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_of_a_huge_object_is_refused_for_its_last_applied_annotation() {
    let env = TestEnv::start().await.expect("start control plane");
    let k = Kubectl::new("1.33", &env);
    let huge = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  blob: {}\n",
        "x".repeat(300 * 1024)
    );
    let err = k.fails(&["apply", "-f", "-"], Some(&huge));
    assert!(err.contains("metadata.annotations: Too long"), "{err}");
    let err = k.fails(&["get", "configmap", "huge"], None);
    assert!(err.contains("not found"), "{err}");
    // Without the annotation (server-side apply) the same object fits.
    k.ok(&["apply", "--server-side", "-f", "-"], Some(&huge));
}

/// RBAC names may contain `:` (kube validates them as path segments; cert-manager's and
/// metrics-server's charts use such names), and deletes print kube's messages whether the
/// server answers a Status (ConfigMaps, RBAC) or the object, also for a server dry run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rbac_names_with_colons_and_delete_messages() {
    let env = TestEnv::start().await.expect("start control plane");
    for version in ["1.33", "1.27"] {
        let k = Kubectl::new(version, &env);
        let role = format!("metrics:reader-{}", version.replace('.', "-"));
        k.ok(&["create", "clusterrole", &role, "--verb=get", "--resource=pods"], None);
        k.ok(
            &["create", "clusterrolebinding", &role, &format!("--clusterrole={role}"), "--serviceaccount=default:x"],
            None,
        );
        let name = k.ok(&["get", "clusterrole", &role, "-o", "name"], None);
        assert_eq!(name.trim(), format!("clusterrole.rbac.authorization.k8s.io/{role}"));
        let out = k.ok(&["delete", "clusterrolebinding", &role], None);
        assert!(out.contains(&format!("clusterrolebinding.rbac.authorization.k8s.io \"{role}\" deleted")), "{out}");

        let cm = format!("settings-{}", version.replace('.', "-"));
        k.ok(&["create", "configmap", &cm, "--from-literal=a=b"], None);
        let out = k.ok(&["delete", "configmap", &cm, "--dry-run=server"], None);
        assert!(out.contains(&format!("configmap \"{cm}\" deleted (server dry run)")), "{out}");
        k.ok(&["get", "configmap", &cm], None);
        let out = k.ok(&["delete", "configmap", &cm], None);
        assert!(out.contains(&format!("configmap \"{cm}\" deleted")), "{out}");
        let err = k.fails(&["create", "clusterrole", "a/b", "--verb=get", "--resource=pods"], None);
        assert!(err.contains("may not contain '/'"), "{err}");
    }
}

const DRAINED: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: drained
  labels: {app: drained}
spec:
  nodeName: opkit-worker-0
  containers:
  - name: app
    image: busybox:1.36
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: drained
spec:
  minAvailable: 0
  selector: {matchLabels: {app: drained}}
"#;

/// `kubectl get componentstatuses` shows kube's three healthy components (read-only), and
/// `kubectl drain` evicts a node's pods through `pods/eviction`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_componentstatuses_and_drain() {
    let env = TestEnv::start().await.expect("start control plane");
    for version in ["1.33", "1.27"] {
        let k = Kubectl::new(version, &env);
        let out = k.ok(&["get", "componentstatuses", "--no-headers"], None);
        let healthy: Vec<&str> = out.lines().filter(|l| l.split_whitespace().nth(1) == Some("Healthy")).collect();
        assert_eq!(healthy.len(), 3, "{out}");
        assert!(out.contains("etcd-0") && out.contains("scheduler") && out.contains("controller-manager"), "{out}");
        let err = k.fails(&["delete", "cs", "scheduler"], None);
        assert!(err.contains("MethodNotAllowed") || err.contains("not allowed"), "{err}");
    }
    let k = Kubectl::new("1.33", &env);
    k.ok(&["apply", "-f", "-"], Some(DRAINED));
    let out = k.ok(&["drain", "opkit-worker-0", "--force", "--ignore-daemonsets", "--timeout=60s"], None);
    assert!(out.contains("pod/drained evicted"), "kubectl drain must evict through pods/eviction:\n{out}");
    let err = k.fails(&["get", "pod", "drained"], None);
    assert!(err.contains("not found"), "{err}");
}
