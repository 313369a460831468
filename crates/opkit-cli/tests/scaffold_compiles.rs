//! A scaffolded project with every kind of API `opkit create api` makes compiles
//! (`cargo check --all-targets`): the project's own types, kinds that are Rust keywords,
//! controllers for built-in kinds (k8s-openapi's types) and for another crate's type, and
//! a multi-group layout with one kind name in two groups (and a webhook there). One project
//! for all keeps it to one build.

use std::path::Path;

use crate::support::workflow as support;

use support::*;

/// Another crate's custom resource, as `--external-api-path` points at it (cert-manager's
/// Certificate, reduced to what the controller needs).
const EXTERNAL_CRATE_TOML: &str = r#"[package]
name = "certs"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
kube = { version = "5", default-features = false, features = ["derive"] }
k8s-openapi = { version = "0.29", features = ["v1_33", "schemars"] }
schemars = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
"#;

const EXTERNAL_CRATE_LIB: &str = r#"//! cert-manager's Certificate, for the scaffold's external API test.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a Certificate.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(group = "cert-manager.io", version = "v1", kind = "Certificate", namespaced)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    /// The Secret the certificate is written to.
    pub secret_name: String,
}
"#;

fn create_api(dir: &Path, args: &[&str]) {
    let mut all = vec!["create", "api"];
    all.extend_from_slice(args);
    opkit(dir, None, &all);
}

#[test]
fn every_kind_of_api_compiles() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("fleet-operator");
    std::fs::create_dir(&dir).expect("mkdir");
    opkit(&dir, None, &["init", "--domain", "example.com", "--repo", "github.com/example/fleet-operator"]);

    // The project's own type, and kinds that are Rust keywords or names the scaffold uses.
    create_api(&dir, &["--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    for kind in ["Type", "Self", "Match", "Crate", "Manager"] {
        create_api(&dir, &["--group", "ship", "--version", "v1", "--kind", kind]);
    }
    // Controllers for built-in kinds.
    create_api(&dir, &["--group", "apps", "--version", "v1", "--kind", "Deployment", "--resource=false"]);
    create_api(&dir, &["--group", "core", "--version", "v1", "--kind", "Pod", "--resource=false"]);
    create_api(&dir, &["--group", "networking", "--version", "v1", "--kind", "Ingress", "--resource=false"]);
    // A controller for another crate's type: the crate is a dependency of the project.
    let certs = tmp.path().join("certs");
    std::fs::create_dir_all(certs.join("src")).expect("mkdir certs");
    std::fs::write(certs.join("Cargo.toml"), EXTERNAL_CRATE_TOML).expect("write");
    std::fs::write(certs.join("src/lib.rs"), EXTERNAL_CRATE_LIB).expect("write");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    let manifest = manifest.replacen("[dependencies]\n", "[dependencies]\ncerts = { path = \"../certs\" }\n", 1);
    std::fs::write(dir.join("Cargo.toml"), manifest).expect("write Cargo.toml");
    create_api(
        &dir,
        &[
            "--group",
            "cert-manager",
            "--version",
            "v1",
            "--kind",
            "Certificate",
            "--resource=false",
            "--external-api-path",
            "certs::Certificate",
            "--external-api-domain",
            "io",
        ],
    );
    // A webhook of a kind whose Rust type is renamed (Self is `Self_`).
    opkit(
        &dir,
        None,
        &[
            "create",
            "webhook",
            "--group",
            "ship",
            "--version",
            "v1",
            "--kind",
            "Self",
            "--defaulting",
            "--programmatic-validation",
        ],
    );
    // The multi-group layout: one kind name in two groups.
    opkit(&dir, None, &["edit", "--multigroup"]);
    for group in ["sea", "navy"] {
        create_api(&dir, &["--group", group, "--version", "v1", "--kind", "Frigate"]);
    }
    create_api(&dir, &["--group", "batch", "--version", "v1", "--kind", "Job", "--resource=false"]);
    opkit(
        &dir,
        None,
        &[
            "create",
            "webhook",
            "--group",
            "sea",
            "--version",
            "v1",
            "--kind",
            "Frigate",
            "--defaulting",
            "--programmatic-validation",
        ],
    );

    let mut check = command("cargo", &dir, None);
    check.args(["check", "--all-targets", "--offline"]);
    let out = check.output().expect("run cargo check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo check of the scaffolded project failed:\n{stderr}");
    assert!(!stderr.contains("warning: `fleet-operator`"), "the scaffolded code has warnings:\n{stderr}");

    // `opkit generate` from a subdirectory finds the project: CRDs for the project's own
    // kinds only, and RBAC for the built-in kinds' real groups (the core group is "").
    let out = opkit(&dir.join("src/controller"), None, &["generate", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let mut crds: Vec<&str> = json["crds"].as_array().expect("crds").iter().filter_map(|c| c.as_str()).collect();
    crds.sort();
    assert_eq!(
        crds,
        [
            "cache.example.com_memcacheds.yaml",
            "navy.example.com_frigates.yaml",
            "sea.example.com_frigates.yaml",
            "ship.example.com_crates.yaml",
            "ship.example.com_managers.yaml",
            "ship.example.com_matches.yaml",
            "ship.example.com_selfs.yaml",
            "ship.example.com_types.yaml",
        ]
    );
    let selves = std::fs::read_to_string(dir.join("config/crd/bases/ship.example.com_selfs.yaml")).expect("CRD");
    assert!(
        selves.contains("    kind: Self\n") && selves.contains("description: Self is the Schema for the selfs API")
    );
    let role = std::fs::read_to_string(dir.join("config/rbac/role.yaml")).expect("role.yaml");
    for rule in
        ["- apiGroups:\n  - \"\"\n  resources:\n  - pods\n", "- apiGroups:\n  - apps\n  resources:\n  - deployments\n"]
    {
        assert!(role.contains(rule), "{rule:?} not in {role}");
    }
    assert!(role.contains("  - cert-manager.io\n") && role.contains("  - networking.k8s.io\n"), "{role}");
}
