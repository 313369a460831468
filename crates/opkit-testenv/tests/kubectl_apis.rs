//! kubectl against the APIs kube-apiserver serves beyond the basics: `autoscale` (1.27
//! writes autoscaling/v1) read back by 1.27 and 1.33, `certificate approve` and `deny`
//! with the signer issuing approved client certificates, and `debug` adding an
//! ephemeral container.

use crate::kubectl_support as support;

use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use opkit_testenv::TestEnv;
use support::Kubectl;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  replicas: 1
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
      - name: app
        image: nginx:1.25
"#;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: target
spec:
  containers:
  - name: app
    image: busybox:1.36
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27_autoscale_is_served_at_v1_and_read_by_both_versions() {
    let env = TestEnv::start().await.expect("start control plane");
    let old = Kubectl::new("1.27", &env);
    let new = Kubectl::new("1.33", &env);
    old.ok(&["apply", "-f", "-"], Some(DEPLOYMENT));
    let out = old.ok(&["autoscale", "deployment", "x", "--min", "2", "--max", "5", "--cpu-percent", "80"], None);
    assert!(out.contains("horizontalpodautoscaler.autoscaling/x autoscaled"), "{out}");
    for k in [&old, &new] {
        let table = k.ok(&["get", "hpa"], None);
        let row = table.lines().find(|l| l.starts_with("x ")).unwrap_or_else(|| panic!("no row for x:\n{table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "Deployment/x", "{table}");
        assert!(row.contains("/80%"), "the CPU target prints: {table}");
        assert_eq!(&cells[cells.len() - 4..cells.len() - 2], ["2", "5"], "MINPODS MAXPODS: {table}");
    }
    let v1 = new.ok(
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "x",
            "-o",
            "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage}",
        ],
        None,
    );
    assert_eq!(v1, "autoscaling/v1 80");
    let v2 = new.ok(
        &[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "x",
            "-o",
            "jsonpath={.apiVersion} {.spec.metrics[0].resource.target.averageUtilization}",
        ],
        None,
    );
    assert_eq!(v2, "autoscaling/v2 80");

    // An autoscaling/v1 manifest applies with kubectl's default (strict) validation.
    let manifest = "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: second\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: x}\n  maxReplicas: 3\n  targetCPUUtilizationPercentage: 50\n";
    new.ok(&["apply", "-f", "-"], Some(manifest));
    let v2 =
        new.ok(&["get", "hpa", "second", "-o", "jsonpath={.spec.metrics[0].resource.target.averageUtilization}"], None);
    assert_eq!(v2, "50");
    let err = new.fails(&["apply", "-f", "-"], Some(&manifest.replace("maxReplicas: 3", "maxReplicas: 3\n  bogus: 1")));
    assert!(err.contains("unknown field") && err.contains("bogus"), "{err}");
}

/// A certificate request for user `cn` in group `o` (PEM) and its key.
fn request(cn: &str, o: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
    params.serialize_request(&key).expect("csr").pem().expect("pem")
}

fn csr_yaml(name: &str, signer: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(request(name, "dev"));
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {encoded}\n  signerName: {signer}\n  expirationSeconds: 86400\n  usages: [client auth]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_certificate_approve_issues_and_deny_does_not() {
    let env = TestEnv::start().await.expect("start control plane");
    let k = Kubectl::new("1.33", &env);
    k.ok(&["apply", "-f", "-"], Some(&csr_yaml("alice", "kubernetes.io/kube-apiserver-client")));
    k.ok(&["apply", "-f", "-"], Some(&csr_yaml("mallory", "kubernetes.io/kube-apiserver-client")));
    k.ok(&["apply", "-f", "-"], Some(&csr_yaml("other", "example.com/unsigned")));
    let pending = k.ok(&["get", "csr"], None);
    assert!(pending.contains("SIGNERNAME") && pending.contains("REQUESTEDDURATION"), "{pending}");
    assert!(
        pending.lines().any(|l| l.starts_with("alice ")
            && l.contains("kubernetes-admin")
            && l.contains("24h")
            && l.trim_end().ends_with("Pending")),
        "{pending}"
    );

    let out = k.ok(&["certificate", "approve", "alice", "other"], None);
    assert!(out.contains("certificatesigningrequest.certificates.k8s.io/alice approved"), "{out}");
    let out = k.ok(&["certificate", "deny", "mallory"], None);
    assert!(out.contains("certificatesigningrequest.certificates.k8s.io/mallory denied"), "{out}");

    let csrs: Api<CertificateSigningRequest> = Api::all(env.client());
    let has_certificate = |csr: Option<&CertificateSigningRequest>| {
        csr.and_then(|c| c.status.as_ref()).and_then(|s| s.certificate.as_ref()).is_some()
    };
    tokio::time::timeout(Duration::from_secs(20), await_condition(csrs, "alice", has_certificate))
        .await
        .expect("alice's certificate within 20s")
        .expect("watch");
    let issued = k.ok(&["get", "csr", "alice", "--no-headers"], None);
    assert!(issued.contains("kubernetes.io/kube-apiserver-client") && issued.contains("Approved,Issued"), "{issued}");
    let table = k.ok(&["get", "csr"], None);
    assert!(table.lines().any(|l| l.starts_with("mallory ") && l.trim_end().ends_with("Denied")), "{table}");
    // No signer for other signers: approved, never issued (checked after alice's issue).
    assert!(table.lines().any(|l| l.starts_with("other ") && l.trim_end().ends_with("Approved")), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_debug_adds_an_ephemeral_container_targeting_a_container() {
    let env = TestEnv::start().await.expect("start control plane");
    let k = Kubectl::new("1.33", &env);
    k.ok(&["apply", "-f", "-"], Some(POD));
    let out = k.run(&["debug", "target", "--image=busybox", "--target=app", "--container=dbg"], None);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kubectl debug failed:\n{text}");
    let added = k.ok(
        &["get", "pod", "target", "-o", "jsonpath={.spec.ephemeralContainers[0].name} {.spec.ephemeralContainers[0].image} {.spec.ephemeralContainers[0].targetContainerName}"],
        None,
    );
    assert_eq!(added, "dbg busybox app");
    // The name is now taken by the pod's containers.
    let err = k.fails(&["debug", "target", "--image=busybox", "--container=app"], None);
    assert!(err.contains("Duplicate value"), "{err}");
}
