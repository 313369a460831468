//! `opkit init` and `opkit create api` as a user runs them: the files they write, the
//! PROJECT record, and every refusal (bad names, an existing kind, not a project), each
//! of which must leave the directory exactly as it was.

use std::path::Path;

#[path = "support/scaffold.rs"]
mod support;

use support::*;

fn init(dir: &Path) {
    ok(dir, &["init", "--domain", "example.com", "--repo", "github.com/example/memcached-operator"]);
}

#[test]
fn init_scaffolds_an_operator_sdk_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    for f in [
        "Cargo.toml",
        "Cargo.lock",
        "PROJECT",
        "Makefile",
        "Dockerfile",
        ".gitignore",
        ".dockerignore",
        "README.md",
        "src/main.rs",
        "src/lib.rs",
        "src/api/mod.rs",
        "src/controller/mod.rs",
        "config/default/kustomization.yaml",
        "config/manager/manager.yaml",
        "config/manager/kustomization.yaml",
        "config/crd/kustomization.yaml",
        "config/rbac/role.yaml",
        "config/rbac/role_binding.yaml",
        "config/rbac/service_account.yaml",
        "config/rbac/leader_election_role.yaml",
        "config/rbac/leader_election_role_binding.yaml",
        "config/rbac/kustomization.yaml",
        "config/samples/kustomization.yaml",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let project = read(&dir, "PROJECT");
    for line in [
        "domain: example.com",
        "projectName: memcached-operator",
        "repo: github.com/example/memcached-operator",
        "- rust.opkit.dev/v1",
    ] {
        assert!(project.contains(line), "{line} not in {project}");
    }
    // The leader election ID is <fnv32a(repo)>.<domain>, like kubebuilder's.
    let main = read(&dir, "src/main.rs");
    let id = main.lines().find(|l| l.contains("const LEADER_ELECTION_ID")).expect("id line");
    assert!(
        id.ends_with(".example.com\";") && id.split('"').nth(1).unwrap().split('.').next().unwrap().len() == 8,
        "{id}"
    );
    assert!(main.contains("SPDX-License-Identifier: Apache-2.0"));
    // Built from this checkout: path dependencies on it, with the published version.
    let cargo = read(&dir, "Cargo.toml");
    assert!(cargo.contains("name = \"memcached-operator\""));
    assert!(cargo.contains("opkit = { version = \"0.1.0\", path = "), "{cargo}");
    let manager = read(&dir, "config/manager/manager.yaml");
    for needle in [
        "name: system",
        "name: controller-manager",
        "control-plane: controller-manager",
        "name: manager",
        "runAsNonRoot: true",
        "allowPrivilegeEscalation: false",
        "livenessProbe",
        "readinessProbe",
        "kubectl.kubernetes.io/default-container: manager",
    ] {
        assert!(manager.contains(needle), "{needle} not in manager.yaml");
    }
    let makefile = read(&dir, "Makefile");
    for target in [
        "generate:",
        "manifests:",
        "fmt:",
        "test:",
        "build:",
        "run:",
        "install:",
        "uninstall:",
        "deploy:",
        "undeploy:",
        "docker-build:",
        "docker-push:",
        "cluster-load: build",
        "IMG ?=",
        "ENABLE_WEBHOOKS ?=",
    ] {
        assert!(makefile.contains(target), "{target} not in Makefile");
    }
    assert!(read(&dir, "config/default/kustomization.yaml").contains("namePrefix: memcached-operator-"));

    // A second init refuses and changes nothing.
    refused(&dir, &["init", "--domain", "example.com", "--repo", "github.com/x/y"], "already contains PROJECT");
}

#[test]
fn init_refuses_bad_input_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("op");
    std::fs::create_dir(&dir).unwrap();
    refused(&dir, &["init", "--domain", "Example.COM", "--repo", "github.com/x/op"], "invalid domain \"Example.COM\"");
    refused(
        &dir,
        &["init", "--domain", "example.com", "--repo", "github.com/x/op", "--project-name", "My_Op"],
        "invalid project name",
    );
    refused(
        &dir,
        &["init", "--domain", "example.com", "--repo", "github.com/x/op", "--opkit-path", "/nonexistent"],
        "not an opkit checkout",
    );
    std::fs::write(dir.join("Cargo.toml"), "[package]\n").unwrap();
    refused(&dir, &["init", "--domain", "example.com", "--repo", "github.com/x/op"], "already contains Cargo.toml");
    assert!(snapshot(&dir).len() == 1);
}

#[test]
fn create_api_adds_kinds_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    // Not a project yet.
    refused(
        &dir,
        &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"],
        "is not an opkit project",
    );
    init(&dir);
    let out =
        ok(&dir, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out).expect("json output");
    assert_eq!(json["group"], "cache.example.com");
    assert_eq!(json["plural"], "memcacheds");
    for f in [
        "src/api/cache_v1alpha1/mod.rs",
        "src/api/cache_v1alpha1/memcached.rs",
        "src/controller/memcached.rs",
        "tests/memcached_controller.rs",
        "config/samples/cache_v1alpha1_memcached.yaml",
        "config/rbac/memcached_editor_role.yaml",
        "config/rbac/memcached_viewer_role.yaml",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let types = read(&dir, "src/api/cache_v1alpha1/memcached.rs");
    assert!(
        types.contains("group = \"cache.example.com\"")
            && types.contains("status = \"MemcachedStatus\"")
            && types.contains("namespaced")
    );
    assert!(read(&dir, "src/api/mod.rs").contains("pub mod cache_v1alpha1;"));
    assert!(read(&dir, "src/api/mod.rs").contains("cache_v1alpha1::Memcached::crd(),"));
    let controllers = read(&dir, "src/controller/mod.rs");
    assert!(controllers.contains("pub mod memcached;") && controllers.contains("memcached::setup(mgr)?;"));
    let controller = read(&dir, "src/controller/memcached.rs");
    for pattern in ["Action::requeue()", "Action::done()", "Action::requeue_after(d)", "`Err(e)`"] {
        assert!(controller.contains(pattern), "return pattern {pattern} not documented");
    }
    assert!(controller.contains("+kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs="));
    assert!(read(&dir, "config/crd/kustomization.yaml").contains("- bases/cache.example.com_memcacheds.yaml"));
    assert!(read(&dir, "config/samples/kustomization.yaml").contains("- cache_v1alpha1_memcached.yaml"));
    assert!(read(&dir, "config/rbac/kustomization.yaml").contains("- memcached_editor_role.yaml"));
    let project = read(&dir, "PROJECT");
    assert!(
        project.contains("kind: Memcached")
            && project.contains("plural: memcacheds")
            && project.contains("controller: true")
    );

    // Refusals: each leaves everything as it was.
    let api = |g: &'static str, v: &'static str, k: &'static str| {
        ["create", "api", "--group", g, "--version", v, "--kind", k]
    };
    refused(&dir, &api("cache", "v1alpha1", "Memcached"), "already exists");
    refused(&dir, &api("Cache", "v1", "Thing"), "invalid group \"Cache\"");
    refused(&dir, &api("cache_x", "v1", "Thing"), "invalid group");
    refused(&dir, &api("cache", "1", "Thing"), "invalid version \"1\"");
    refused(&dir, &api("cache", "v1gamma1", "Thing"), "invalid version");
    refused(&dir, &api("cache", "v1", "thing"), "invalid kind \"thing\"");
    refused(&dir, &api("cache", "v1", "My_Thing"), "invalid kind");
    // A missing scaffold marker is reported and nothing is half-written.
    let mod_rs = read(&dir, "src/controller/mod.rs");
    std::fs::write(dir.join("src/controller/mod.rs"), mod_rs.replace("// +opkit:scaffold:controller-setup", ""))
        .unwrap();
    refused(&dir, &api("ship", "v1", "Frigate"), "marker \"+opkit:scaffold:controller-setup\" not found");
    std::fs::write(dir.join("src/controller/mod.rs"), mod_rs).unwrap();

    // More kinds and groups, cluster-scoped, a second version of a kind.
    ok(&dir, &["create", "api", "--group", "ship", "--version", "v1beta1", "--kind", "Frigate", "--namespaced=false"]);
    assert!(!read(&dir, "src/api/ship_v1beta1/frigate.rs").contains("    namespaced,"));
    ok(&dir, &["create", "api", "--group", "cache", "--version", "v1", "--kind", "Memcached", "--controller=false"]);
    assert!(read(&dir, "src/api/mod.rs").contains("cache_v1::Memcached::crd(),"));
    let crd_kustomization = read(&dir, "config/crd/kustomization.yaml");
    assert_eq!(crd_kustomization.matches("cache.example.com_memcacheds.yaml").count(), 1, "{crd_kustomization}");
    assert!(crd_kustomization.contains("- bases/ship.example.com_frigates.yaml"));

    // A kind whose module name is a Rust keyword gets a trailing `_`; `Self` is refused.
    ok(&dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Type"]);
    assert!(read(&dir, "src/api/ship_v1/mod.rs").contains("mod type_;"));
    let controllers = read(&dir, "src/controller/mod.rs");
    assert!(controllers.contains("pub mod type_;") && controllers.contains("type_::setup(mgr)?;"), "{controllers}");
    assert!(dir.join("src/controller/type_.rs").is_file() && dir.join("tests/type_controller.rs").is_file());
    refused(&dir, &api("ship", "v1", "Self"), "is a Rust keyword");
}

#[test]
fn help_and_completion() {
    let tmp = tempfile::tempdir().unwrap();
    let help = ok(tmp.path(), &["--help"]);
    for cmd in
        ["init", "create", "generate", "install", "uninstall", "run", "deploy", "undeploy", "cluster", "completion"]
    {
        assert!(help.contains(cmd), "{cmd} not in --help");
    }
    assert!(
        ok(tmp.path(), &["create", "api", "--help"])
            .contains("opkit create api --group cache --version v1alpha1 --kind Memcached")
    );
    assert!(ok(tmp.path(), &["completion", "bash"]).contains("_opkit"));
    assert!(ok(tmp.path(), &["completion", "zsh"]).contains("#compdef opkit"));
}

#[test]
fn generate_reports_malformed_markers_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    ok(&dir, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    let controller = read(&dir, "src/controller/memcached.rs");
    let line = controller.lines().position(|l| l.contains("+kubebuilder:rbac")).expect("a marker") + 1;
    let broken = controller.replacen("+kubebuilder:rbac:groups=", "+kubebuilder:rbac:group=", 1);
    std::fs::write(dir.join("src/controller/memcached.rs"), broken).unwrap();
    // The markers are read before anything is built, so this fails fast and writes nothing.
    refused(&dir, &["generate"], &format!("src/controller/memcached.rs:{line}: rbac marker"));
}

#[test]
fn cluster_commands_outside_a_project_or_before_generate_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    refused(tmp.path(), &["install"], "is not an opkit project");
    refused(tmp.path(), &["deploy"], "is not an opkit project");
    let dir = tmp.path().join("op");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    refused(&dir, &["install", "--kubeconfig", "/nonexistent/kubeconfig"], "lists no CRDs");
}
