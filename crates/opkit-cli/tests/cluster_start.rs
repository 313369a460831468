//! `opkit cluster start` as a user runs it: flags, the printed kubeconfig line, kubectl
//! against it, a clean stop on SIGTERM, and a restart that keeps every object.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn opkit() -> Command {
    Command::new(env!("CARGO_BIN_EXE_opkit"))
}

fn start(dir: &std::path::Path) -> (Child, serde_json::Value) {
    start_with(dir, &[])
}

fn start_with(dir: &std::path::Path, flags: &[&str]) -> (Child, serde_json::Value) {
    let mut child = opkit()
        .args(["cluster", "start", "--port", "0", "-o", "json", "--data-dir"])
        .arg(dir)
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn opkit");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("first line");
    let info: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    (child, info)
}

fn stop(mut child: Child) {
    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(status.success());
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "opkit exits cleanly on SIGTERM: {exit:?}");
}

fn kubectl(kubeconfig: &str, args: &[&str]) -> String {
    let out = Command::new("kubectl").env("KUBECONFIG", kubeconfig).args(args).output().expect("kubectl");
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn restart_keeps_objects_and_resource_versions_grow() {
    let dir = tempfile::tempdir().expect("tmp");
    let (child, info) = start(dir.path());
    let kc = info["kubeconfig"].as_str().expect("kubeconfig").to_string();
    assert!(std::path::Path::new(&kc).exists());
    kubectl(&kc, &["create", "configmap", "kept", "--from-literal=a=b"]);
    let rv1: u64 =
        kubectl(&kc, &["get", "cm", "kept", "-o", "jsonpath={.metadata.resourceVersion}"]).parse().expect("rv");
    stop(child);

    let (child, info) = start(dir.path());
    let kc = info["kubeconfig"].as_str().expect("kubeconfig").to_string();
    assert_eq!(kubectl(&kc, &["get", "cm", "kept", "-o", "jsonpath={.data.a}"]), "b");
    kubectl(&kc, &["create", "configmap", "new"]);
    let rv2: u64 =
        kubectl(&kc, &["get", "cm", "new", "-o", "jsonpath={.metadata.resourceVersion}"]).parse().expect("rv");
    assert!(rv2 > rv1, "resourceVersions keep growing across restarts ({rv2} > {rv1})");
    stop(child);
}

#[test]
fn a_second_cluster_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (child, info) = start(dir.path());
    let kc = info["kubeconfig"].as_str().expect("kubeconfig").to_string();
    let before = std::fs::read_to_string(&kc).expect("kubeconfig");
    let out = opkit().args(["cluster", "start", "--port", "0", "--data-dir"]).arg(dir.path()).output().expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let holder = format!("(pid {}, {})", child.id(), info["server"].as_str().expect("server"));
    assert!(err.contains("a cluster is already running from") && err.contains(&holder), "{err}");
    assert_eq!(std::fs::read_to_string(&kc).expect("kubeconfig"), before, "the kubeconfig is untouched");
    stop(child);
}

#[test]
fn bad_flags_fail_clearly_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("never");
    let out = opkit()
        .args(["cluster", "start", "--disable-controllers", "bogus", "--data-dir"])
        .arg(&data)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown controller \"bogus\""), "{err}");
    assert!(!data.exists(), "nothing is written when a command fails");
    let out = opkit().args(["cluster", "start", "--port", "notaport"]).output().expect("run");
    assert!(!out.status.success());
    let out = opkit()
        .args(["cluster", "start", "--lb-range", "10.0.0.9-10.0.0.1", "--data-dir"])
        .arg(&data)
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the range 10.0.0.9-10.0.0.1 ends before it starts"), "{err}");
    assert!(!data.exists(), "nothing is written when a command fails");
}

/// `--lb-range` gives LoadBalancer Services their EXTERNAL-IP from the pool, as helm
/// `--wait` and kubectl users expect of kind or k3s.
#[test]
fn load_balancer_services_get_an_address_from_the_lb_range() {
    let dir = tempfile::tempdir().expect("tmp");
    let (child, info) = start_with(dir.path(), &["--in-memory", "--lb-range", "172.18.255.200-172.18.255.210"]);
    assert_eq!(info["loadBalancerAddresses"], "172.18.255.200-172.18.255.210");
    let kc = info["kubeconfig"].as_str().expect("kubeconfig").to_string();
    kubectl(&kc, &["create", "service", "loadbalancer", "web", "--tcp=80:8080"]);
    kubectl(
        &kc,
        &["wait", "--for=jsonpath={.status.loadBalancer.ingress[0].ip}=172.18.255.200", "service/web", "--timeout=60s"],
    );
    let table = kubectl(&kc, &["get", "service", "web", "--no-headers"]);
    assert!(table.contains("172.18.255.200"), "{table}");
    stop(child);
}

#[test]
fn encryption_provider_config_encrypts_secrets_at_rest() {
    let dir = tempfile::tempdir().expect("tmp");
    let conf = tempfile::tempdir().expect("tmp");
    let config = conf.path().join("encryption.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n      - name: key1\n        secret: c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbyE/ISE=\n  - identity: {}\n",
    )
    .expect("write config");
    let flag = config.to_str().expect("utf-8 path");
    let (child, info) = start_with(dir.path(), &["--encryption-provider-config", flag]);
    let kc = info["kubeconfig"].as_str().expect("kubeconfig").to_string();
    kubectl(&kc, &["create", "secret", "generic", "db", "--from-literal=password=cli-plaintext-marker"]);
    let got = kubectl(&kc, &["get", "secret", "db", "-o", "jsonpath={.data.password}"]);
    assert_eq!(got, "Y2xpLXBsYWludGV4dC1tYXJrZXI=", "served decrypted");
    let on_disk: Vec<u8> = ["state.db", "state.db-wal"]
        .iter()
        .flat_map(|f| std::fs::read(dir.path().join(f)).unwrap_or_default())
        .collect();
    for needle in [&b"cli-plaintext-marker"[..], b"Y2xpLXBsYWludGV4dC1tYXJrZXI", b"k8s:enc:secretbox:v1:key1:"] {
        let found = on_disk.windows(needle.len()).any(|w| w == needle);
        assert_eq!(found, needle.starts_with(b"k8s:enc:"), "{:?} on disk", String::from_utf8_lossy(needle));
    }
    stop(child);

    // A bad file stops the start with the field that is wrong.
    std::fs::write(&config, "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers: []\n")
        .expect("write config");
    let out = opkit()
        .args(["cluster", "start", "--port", "0", "--encryption-provider-config", flag, "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("resources[0].providers: Required value: at least one provider must be specified"), "{err}");
}

#[test]
fn loaded_and_builtin_images_are_listed_and_the_pod_network_is_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("cluster");
    let binary = dir.path().join("manager");
    std::fs::write(&binary, "#!/bin/sh\nexit 0\n").expect("write");
    std::process::Command::new("chmod").arg("755").arg(&binary).status().expect("chmod");
    let load = |image: &str, binary: &std::path::Path| {
        opkit()
            .args(["cluster", "load", image, "-o", "json", "--binary"])
            .arg(binary)
            .arg("--data-dir")
            .arg(&data)
            .output()
    };
    let out = load("example.com/op:v1", &binary).expect("load");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let loaded: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(loaded["image"]["reference"], "example.com/op:v1");
    // A bad reference or binary fails clearly and changes nothing.
    for (image, bin) in [("Not/A Ref", binary.clone()), ("example.com/op:v2", dir.path().join("missing"))] {
        let out = load(image, &bin).expect("load");
        assert_eq!(out.status.code(), Some(1));
        // With `-o json` the error is JSON too.
        let error: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        assert!(error["error"]["message"].is_string() && error["error"]["kind"].is_string(), "{error}");
    }
    let out = opkit().args(["cluster", "images", "-o", "json", "--data-dir"]).arg(&data).output().expect("images");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let refs = |built_in: bool| -> Vec<String> {
        listed["images"]
            .as_array()
            .expect("list")
            .iter()
            .filter(|i| i["builtIn"] == built_in)
            .filter_map(|i| i["reference"].as_str().map(str::to_string))
            .collect()
    };
    assert_eq!(refs(false), ["example.com/op:v1"]);
    // The built-in images follow, any tag of their repositories.
    assert_eq!(
        refs(true),
        [
            "docker.io/library/busybox:*",
            "docker.io/library/alpine:*",
            "docker.io/library/bash:*",
            "docker.io/curlimages/curl:*"
        ]
    );
    let text = opkit().args(["cluster", "images", "--data-dir"]).arg(&data).output().expect("images");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.starts_with("IMAGE") && text.contains("example.com/op:v1"), "{text}");
    let busybox = text.lines().find(|l| l.starts_with("docker.io/library/busybox:*")).unwrap_or_default();
    assert!(busybox.contains("built-in: "), "{text}");

    let (child, info) = start_with(&data, &["--pod-network", "host"]);
    assert_eq!(info["podNetwork"], "host");
    assert_eq!(info["images"], data.join("images").display().to_string());
    assert_eq!(info["certManager"], true, "the cert-manager stand-in is on by default");
    stop(child);
    let (child, info) = start_with(&data, &["--pod-network", "host", "--cert-manager=false"]);
    assert_eq!(info["certManager"], false);
    stop(child);
}
