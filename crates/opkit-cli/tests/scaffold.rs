//! `opkit init` and `opkit create api` as a user runs them: the files they write, the
//! PROJECT record, and every refusal (bad names, an existing kind, not a project), each
//! of which must leave the directory exactly as it was.

use std::path::Path;

use crate::support::scaffold as support;

use support::*;

/// `opkit init` of the Rust layout, by operator-sdk's name for the Go one.
fn init(dir: &Path) {
    ok(
        dir,
        &["init", "--plugins", "go/v4", "--domain", "example.com", "--repo", "github.com/example/memcached-operator"],
    );
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
        "cluster-load: manifests",
        "IMG ?=",
        "ENABLE_WEBHOOKS ?=",
    ] {
        assert!(makefile.contains(target), "{target} not in Makefile");
    }
    assert!(read(&dir, "config/default/kustomization.yaml").contains("namePrefix: memcached-operator-"));

    // A second init refuses and changes nothing.
    refused(&dir, &["init", "--domain", "example.com", "--repo", "github.com/x/y"], "already contains PROJECT");
}

/// The commands `make -n ARGS...` would run in `dir` (CARGO_PROFILE set in its
/// environment when `env_profile` is given), with OPKIT and CARGO named so that the lines
/// are easy to match.
fn make_dry_run(dir: &Path, args: &[&str], env_profile: Option<&str>) -> String {
    let mut make = std::process::Command::new("make");
    make.current_dir(dir)
        .args(["-n", "OPKIT=opkit", "CARGO=cargo"])
        .args(args)
        .env_remove("CARGO_PROFILE")
        .env_remove("CLUSTER_LOAD_PROFILE")
        .env_remove("MAKEFLAGS");
    if let Some(profile) = env_profile {
        make.env("CARGO_PROFILE", profile);
    }
    let out = make.output().expect("run make");
    assert!(out.status.success(), "make -n {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("make prints UTF-8")
}

#[test]
fn cluster_load_loads_the_dev_build_unless_release_is_asked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let img = "IMG=example.com/memcached-operator:v0.0.1";

    // By default: the dev build `make manifests` (cargo run) already made, no release build.
    let dev = make_dry_run(&dir, &["cluster-load", img], None);
    assert!(dev.contains("opkit generate\n"), "{dev}");
    assert!(dev.contains("cargo build --profile dev\n"), "{dev}");
    assert!(dev.contains("opkit cluster load example.com/memcached-operator:v0.0.1 --profile dev\n"), "{dev}");
    assert!(!dev.contains("release"), "{dev}");
    // `make build` alone still builds release.
    assert!(make_dry_run(&dir, &["build"], None).contains("cargo build --profile release\n"));

    // Asked for release, by either variable.
    for ask in ["CLUSTER_LOAD_PROFILE=release", "CARGO_PROFILE=release"] {
        let release = make_dry_run(&dir, &["cluster-load", img, ask], None);
        assert!(release.contains("cargo build --profile release\n"), "{ask}: {release}");
        assert!(release.contains("--profile release\n"), "{ask}: {release}");
        assert!(!release.contains("--profile dev"), "{ask}: {release}");
    }
    // CARGO_PROFILE from the environment counts too.
    let env = make_dry_run(&dir, &["cluster-load", img], Some("release"));
    assert!(env.contains("cluster load example.com/memcached-operator:v0.0.1 --profile release\n"), "{env}");
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
    // The Rust layout has no roles to generate.
    refused(
        &dir,
        &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached", "--generate-role"],
        "--generate-role is for an Ansible operator project",
    );
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
    // --force writes the kind's files again (an edit is undone) and keeps one PROJECT entry.
    std::fs::write(dir.join("src/api/cache_v1alpha1/memcached.rs"), "// edited\n").unwrap();
    let mut force = api("cache", "v1alpha1", "Memcached").to_vec();
    force.push("--force");
    ok(&dir, &force);
    assert!(read(&dir, "src/api/cache_v1alpha1/memcached.rs").contains("pub struct MemcachedSpec"));
    assert_eq!(read(&dir, "PROJECT").matches("kind: Memcached\n").count(), 1);
    assert_eq!(read(&dir, "src/controller/mod.rs").matches("memcached::setup(mgr)?;").count(), 1);
    // --make runs `make generate` afterwards (here a stand-in `make` on PATH records it).
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = tmp.path().join("make.log");
    std::fs::write(bin.join("make"), format!("#!/bin/sh\necho \"$@\" >> {}\n", log.display())).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(bin.join("make"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut made = force.clone();
    made.push("--make");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opkit"))
        .args(&made)
        .current_dir(&dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "generate\n");
    made.push("--make=false");
    made.retain(|a| *a != "--make");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opkit"))
        .args(&made)
        .current_dir(&dir)
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "generate\n", "--make=false runs nothing");
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

    // A kind whose module name is a Rust keyword gets a trailing `_`.
    ok(&dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", "Type"]);
    assert!(read(&dir, "src/api/ship_v1/mod.rs").contains("mod type_;"));
    let controllers = read(&dir, "src/controller/mod.rs");
    assert!(controllers.contains("pub mod type_;") && controllers.contains("type_::setup(mgr)?;"), "{controllers}");
    assert!(dir.join("src/controller/type_.rs").is_file() && dir.join("tests/type_controller.rs").is_file());
}

/// Kinds that are Rust keywords (`Type`, `Match`, `Crate`, `Self`) or names the scaffold's
/// files already use (`Manager`): modules and files get a trailing `_`, and a type that
/// cannot bear the kind's name is `<Kind>_` with the CRD's kind unchanged. (The scaffolded
/// project is compiled in `scaffold_compiles.rs`.)
#[test]
fn create_api_takes_kinds_that_are_rust_keywords() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    for kind in ["Type", "Match", "Crate", "Self", "Manager"] {
        ok(&dir, &["create", "api", "--group", "ship", "--version", "v1", "--kind", kind]);
    }
    let gv = read(&dir, "src/api/ship_v1/mod.rs");
    for module in ["type_", "match_", "crate_", "self_", "manager"] {
        assert!(gv.contains(&format!("mod {module};\npub use {module}::*;")), "{module} not in {gv}");
        assert!(dir.join(format!("src/api/ship_v1/{module}.rs")).is_file(), "{module}.rs");
        assert!(dir.join(format!("src/controller/{module}.rs")).is_file(), "controller {module}.rs");
    }
    let self_type = read(&dir, "src/api/ship_v1/self_.rs");
    assert!(self_type.contains("    kind = \"Self\",\n    root = \"Self_\",\n"), "{self_type}");
    assert!(self_type.contains("pub struct SelfSpec {"), "{self_type}");
    let api = read(&dir, "src/api/mod.rs");
    assert!(api.contains("ship_v1::Self_::crd(),") && api.contains("ship_v1::Manager_::crd(),"), "{api}");
    assert!(api.contains("ship_v1::Type::crd(),"), "{api}");
    assert!(read(&dir, "src/controller/self_.rs").contains("use crate::api::ship_v1::Self_;"));
    assert!(read(&dir, "src/controller/self_.rs").contains("Context<Self_>"));
    assert!(read(&dir, "src/controller/manager.rs").contains("use crate::api::ship_v1::Manager_;"));
    let sample = read(&dir, "config/samples/ship_v1_self.yaml");
    assert!(sample.contains("kind: Self\n"), "{sample}");
    assert!(dir.join("tests/self_controller.rs").is_file());
    assert!(read(&dir, "PROJECT").contains("kind: Self\n"));
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
    // --repo is required for the Rust layout, and init's help says so.
    let init_help = ok(tmp.path(), &["init", "--help"]);
    let repo = init_help.lines().skip_while(|l| !l.contains("--repo <REPO>")).nth(1).unwrap_or_default();
    assert!(repo.trim_start().starts_with("[required]"), "{init_help}");
    refused(tmp.path(), &["init", "--plugins", "go/v4", "--domain", "example.com"], "--repo <REPO>");
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

/// The `role.yaml` rules `opkit generate` makes from the project's RBAC markers, as
/// (apiGroups, resources) pairs.
fn marker_rules(dir: &Path) -> Vec<(Vec<String>, Vec<String>)> {
    let markers = opkit_cli::rbac::scan_markers(&dir.join("src")).expect("markers parse");
    let role = opkit_cli::rbac::render_roles(&markers, "manager-role");
    let docs: Vec<serde_json::Value> = role
        .split("\n---\n")
        .map(|d| serde_saphyr::from_str(d.trim_start_matches("---\n")).expect("role yaml"))
        .collect();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
    };
    docs.iter()
        .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| (strings(&r["apiGroups"]), strings(&r["resources"])))
        .collect()
}

/// kubebuilder's `create api --resource=false` for core types: a controller for the
/// k8s-openapi type, RBAC for the kind's real group (`apps`; `""` for core), no CRD, no
/// sample, and the PROJECT entry kubebuilder writes (no domain for core groups, `k8s.io` for
/// `networking`).
#[test]
fn create_api_for_built_in_kinds_scaffolds_only_a_controller() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let before = snapshot(&dir);
    let builtin = |group: &'static str, kind: &'static str| {
        ["create", "api", "--group", group, "--version", "v1", "--kind", kind, "--resource=false", "--controller"]
    };
    let out = ok(&dir, &[&builtin("apps", "Deployment")[..], &["-o", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&out).expect("json output");
    assert_eq!((json["group"].as_str(), json["plural"].as_str()), (Some("apps"), Some("deployments")), "{json}");
    ok(&dir, &builtin("core", "Pod"));
    ok(&dir, &builtin("networking", "Ingress"));
    ok(&dir, &builtin("core", "Endpoints"));

    let deployment = read(&dir, "src/controller/deployment.rs");
    assert!(deployment.contains("use k8s_openapi::api::apps::v1::Deployment;"), "{deployment}");
    assert!(deployment.contains("Context<Deployment>"));
    assert!(deployment.contains("+kubebuilder:rbac:groups=apps,resources=deployments,verbs="), "{deployment}");
    assert!(deployment.contains("+kubebuilder:rbac:groups=apps,resources=deployments/status,verbs="));
    let pod = read(&dir, "src/controller/pod.rs");
    assert!(pod.contains("use k8s_openapi::api::core::v1::Pod;"), "{pod}");
    assert!(pod.contains("+kubebuilder:rbac:groups=core,resources=pods,verbs="), "{pod}");
    let ingress = read(&dir, "src/controller/ingress.rs");
    assert!(ingress.contains("use k8s_openapi::api::networking::v1::Ingress;"), "{ingress}");
    assert!(ingress.contains("groups=networking.k8s.io,resources=ingresses,"), "{ingress}");
    // The real plural, from the API server's table of built-in kinds.
    assert!(read(&dir, "src/controller/endpoints.rs").contains("groups=core,resources=endpoints,"));
    let controllers = read(&dir, "src/controller/mod.rs");
    assert!(controllers.contains("pub mod deployment;") && controllers.contains("pod::setup(mgr)?;"), "{controllers}");

    // The roles `opkit generate` writes name the real groups; the core group is "".
    let rules = marker_rules(&dir);
    let group_of = |resource: &str| -> Vec<String> {
        rules.iter().find(|(_, res)| res.iter().any(|r| r == resource)).map(|(g, _)| g.clone()).unwrap_or_default()
    };
    assert_eq!(group_of("deployments"), ["apps"], "{rules:?}");
    assert_eq!(group_of("pods"), [""], "{rules:?}");
    assert_eq!(group_of("ingresses"), ["networking.k8s.io"], "{rules:?}");
    assert!(!rules.iter().flat_map(|(g, _)| g).any(|g| g.ends_with("example.com")), "{rules:?}");

    // No type, CRD, sample, roles or test: only the controllers and PROJECT changed.
    let after = snapshot(&dir);
    let mut changed: Vec<&String> =
        after.keys().filter(|k| !k.ends_with('/') && before.get(*k) != after.get(*k)).collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "PROJECT",
            "src/controller/deployment.rs",
            "src/controller/endpoints.rs",
            "src/controller/ingress.rs",
            "src/controller/mod.rs",
            "src/controller/pod.rs"
        ],
        "{changed:?}"
    );
    let project = read(&dir, "PROJECT");
    for entry in [
        "- controller: true\n  group: apps\n  kind: Deployment\n  path: k8s_openapi::api::apps::v1\n  plural: deployments\n  version: v1\n",
        "- controller: true\n  group: core\n  kind: Pod\n  path: k8s_openapi::api::core::v1\n  plural: pods\n  version: v1\n",
        "- controller: true\n  domain: k8s.io\n  group: networking\n  kind: Ingress\n  path: k8s_openapi::api::networking::v1\n",
    ] {
        assert!(project.contains(entry), "{entry} not in {project}");
    }

    // Refusals: a kind the API server does not serve, a second controller, the wrong plural.
    refused(&dir, &builtin("apps", "Deploymnt"), "is not a built-in Kubernetes kind");
    refused(&dir, &builtin("apps", "Deployment"), "API apps/v1, Kind=Deployment already exists");
    refused(&dir, &[&builtin("apps", "StatefulSet")[..], &["--plural", "sets"]].concat(), "is served as statefulsets");
}

/// kubebuilder's `--external-api-path`/`--external-api-domain`: a controller for another
/// crate's type, with RBAC for `<group>.<domain>` and `external: true` in PROJECT.
#[test]
fn create_api_for_external_types_scaffolds_only_a_controller() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let external = |path: &'static str| {
        [
            "create",
            "api",
            "--group",
            "cert-manager",
            "--version",
            "v1",
            "--kind",
            "Certificate",
            "--resource=false",
            "--external-api-path",
            path,
            "--external-api-domain",
            "io",
        ]
    };
    refused(&dir, &external("github.com/cert-manager/cert-manager"), "invalid --external-api-path");
    refused(
        &dir,
        &["create", "api", "--group", "x", "--version", "v1", "--kind", "Y", "--external-api-path", "y::Y"],
        "--external-api-domain",
    );
    let mut with_resource = external("certs::Certificate").to_vec();
    with_resource.retain(|a| *a != "--resource=false");
    refused(&dir, &with_resource, "use it with --resource=false");
    ok(&dir, &external("certs::Certificate"));
    // A crate whose name ends in `crate` keeps its path.
    let mut other = external("my_crate::v1").to_vec();
    other[7] = "Issuer";
    ok(&dir, &other);
    assert!(read(&dir, "PROJECT").contains("  path: my_crate::v1\n"));
    let controller = read(&dir, "src/controller/certificate.rs");
    assert!(controller.contains("use certs::Certificate;"), "{controller}");
    assert!(controller.contains("+kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs="));
    assert!(!dir.join("config/samples/cert-manager_v1_certificate.yaml").exists());
    assert!(!read(&dir, "config/crd/kustomization.yaml").contains("certificates"));
    let project = read(&dir, "PROJECT");
    let entry = "- controller: true\n  domain: io\n  external: true\n  group: cert-manager\n  kind: Certificate\n  path: certs\n";
    assert!(project.contains(entry), "{project}");
}

/// Commands run from a subdirectory use the project above it, as cargo finds Cargo.toml.
#[test]
fn commands_find_project_in_a_parent_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    let src = dir.join("src");
    ok(&src, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    assert!(dir.join("src/api/cache_v1alpha1/memcached.rs").is_file());
    assert!(!src.join("PROJECT").exists() && !src.join("src").exists());
    assert!(read(&dir, "PROJECT").contains("kind: Memcached"));
    // `generate` reads the markers under the project's src/ (and names files from its root).
    let nested = dir.join("src/controller");
    let controller = read(&dir, "src/controller/memcached.rs");
    let line = controller.lines().position(|l| l.contains("+kubebuilder:rbac")).expect("a marker") + 1;
    std::fs::write(
        dir.join("src/controller/memcached.rs"),
        controller.replacen("+kubebuilder:rbac:groups=", "+kubebuilder:rbac:group=", 1),
    )
    .unwrap();
    refused(&nested, &["generate"], &format!("src/controller/memcached.rs:{line}: rbac marker"));
    // `init` stays in the directory it is run in: a project inside a project is refused
    // there, not scaffolded over the outer one.
    let inner = dir.join("inner");
    std::fs::create_dir(&inner).unwrap();
    ok(&inner, &["init", "--domain", "example.com", "--repo", "github.com/example/inner"]);
    assert!(inner.join("PROJECT").is_file());
    // Outside any project the error names the current directory.
    let outside = tempfile::tempdir().unwrap();
    refused(outside.path(), &["generate"], "is not an opkit project");
}

/// A misspelt `+kubebuilder:` marker is reported by `opkit generate` with its file and line
/// (and everything else still runs: here the build, which this test makes fail at once).
#[test]
fn generate_warns_about_unknown_markers_with_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("memcached-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    ok(&dir, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    let controller = read(&dir, "src/controller/memcached.rs");
    let typo = controller.replacen(
        "// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,",
        "// +kubebuilder:rback:groups=cache.example.com,resources=memcacheds,",
        1,
    );
    assert_ne!(typo, controller);
    let line = typo.lines().position(|l| l.contains("+kubebuilder:rback:")).expect("typo") + 1;
    std::fs::write(dir.join("src/controller/memcached.rs"), typo).unwrap();
    // `false` for cargo: the warning must come before (and without) the build.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_opkit"))
        .arg("generate")
        .current_dir(&dir)
        .env("CARGO", "false")
        .output()
        .expect("run opkit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warning = format!(
        "warning: src/controller/memcached.rs:{line}: +kubebuilder:rback:groups=cache.example.com,resources=memcacheds,"
    );
    assert!(stderr.contains(&warning), "{warning:?} not in {stderr}");
    assert!(stderr.contains("opkit does not understand this marker"), "{stderr}");
}

/// `opkit edit --multigroup`: PROJECT records it, new APIs go under
/// src/api/<group>/<version>/ and src/controller/<group>/ (so two groups can have a kind of
/// the same name), and APIs made before stay where they are, as the command says.
#[test]
fn edit_multigroup_lays_out_apis_by_group() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fleet-operator");
    std::fs::create_dir(&dir).unwrap();
    init(&dir);
    ok(&dir, &["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]);
    refused(&dir, &["edit"], "nothing to edit");
    let out = ok(&dir, &["edit", "--multigroup"]);
    assert!(out.contains("multigroup: true"), "{out}");
    assert!(
        out.contains("Existing APIs are left where they are (cache.example.com/v1alpha1, Kind=Memcached)"),
        "{out}"
    );
    assert!(read(&dir, "PROJECT").contains("\nmultigroup: true\n"));
    assert!(ok(&dir, &["edit", "--multigroup"]).contains("Already multigroup: true"));
    for group in ["sea", "navy"] {
        ok(&dir, &["create", "api", "--group", group, "--version", "v1", "--kind", "Frigate"]);
    }
    ok(&dir, &["create", "api", "--group", "apps", "--version", "v1", "--kind", "Deployment", "--resource=false"]);
    for f in [
        "src/api/cache_v1alpha1/memcached.rs",
        "src/controller/memcached.rs",
        "src/api/sea/mod.rs",
        "src/api/sea/v1/mod.rs",
        "src/api/sea/v1/frigate.rs",
        "src/api/navy/v1/frigate.rs",
        "src/controller/sea/mod.rs",
        "src/controller/sea/frigate.rs",
        "src/controller/navy/frigate.rs",
        "src/controller/apps/deployment.rs",
        "tests/sea_frigate_controller.rs",
        "tests/navy_frigate_controller.rs",
        "config/rbac/sea_frigate_editor_role.yaml",
        "config/rbac/navy_frigate_viewer_role.yaml",
        "config/samples/sea_v1_frigate.yaml",
        "config/samples/navy_v1_frigate.yaml",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let api = read(&dir, "src/api/mod.rs");
    for line in [
        "pub mod cache_v1alpha1;",
        "pub mod sea;",
        "pub mod navy;",
        "sea::v1::Frigate::crd(),",
        "navy::v1::Frigate::crd(),",
    ] {
        assert!(api.contains(line), "{line} not in {api}");
    }
    assert!(read(&dir, "src/api/sea/mod.rs").contains("pub mod v1;"));
    let controllers = read(&dir, "src/controller/mod.rs");
    for line in [
        "pub mod sea;",
        "pub mod navy;",
        "sea::frigate::setup(mgr)?;",
        "navy::frigate::setup(mgr)?;",
        "apps::deployment::setup(mgr)?;",
        "memcached::setup(mgr)?;",
    ] {
        assert!(controllers.contains(line), "{line} not in {controllers}");
    }
    assert!(read(&dir, "src/controller/navy/frigate.rs").contains("use crate::api::navy::v1::Frigate;"));
    assert!(read(&dir, "config/rbac/sea_frigate_editor_role.yaml").contains("name: sea-frigate-editor-role"));
    let rbac = read(&dir, "config/rbac/kustomization.yaml");
    assert!(
        rbac.contains("- sea_frigate_editor_role.yaml") && rbac.contains("- navy_frigate_viewer_role.yaml"),
        "{rbac}"
    );
    assert!(read(&dir, "PROJECT").contains("path: fleet_operator::api::sea::v1\n"));
    // Webhooks find the type where PROJECT says it is.
    ok(&dir, &["create", "webhook", "--group", "sea", "--version", "v1", "--kind", "Frigate", "--defaulting"]);
    let webhook = read(&dir, "src/webhook/sea_v1_frigate.rs");
    assert!(webhook.contains("use crate::api::sea::v1::Frigate;"), "{webhook}");
    assert!(read(&dir, "src/webhook/mod.rs").contains("pub mod sea_v1_frigate;"));
}
