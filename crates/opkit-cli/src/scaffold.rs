//! The project templates (`templates/`, rendered with minijinja) and the file plans of
//! `opkit init` and `opkit create api`: which files each creates and which it edits.

use std::path::{Path, PathBuf};

use minijinja::{Environment, Value, context};

use crate::fileplan::{FilePlan, PlanError};
use crate::project::{self, Project, Resource, ResourceApi};

/// A template failed to render (a bug in the CLI's templates) or the plan failed.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// A template did not render.
    #[error("template {name}: {source}")]
    Template {
        /// The template.
        name: &'static str,
        /// The error.
        source: minijinja::Error,
    },
    /// The file plan was refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Every template: its name and text, compiled into the binary.
const TEMPLATES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../templates/init/Cargo.toml.j2")),
    ("main.rs", include_str!("../templates/init/main.rs.j2")),
    ("lib.rs", include_str!("../templates/init/lib.rs.j2")),
    ("api_mod.rs", include_str!("../templates/init/api_mod.rs.j2")),
    ("controller_mod.rs", include_str!("../templates/init/controller_mod.rs.j2")),
    ("Makefile", include_str!("../templates/init/Makefile.j2")),
    ("Dockerfile", include_str!("../templates/init/Dockerfile.j2")),
    ("dockerignore", include_str!("../templates/init/dockerignore.j2")),
    ("gitignore", include_str!("../templates/init/gitignore.j2")),
    ("README.md", include_str!("../templates/init/README.md.j2")),
    ("default_kustomization", include_str!("../templates/init/config/default_kustomization.yaml.j2")),
    ("manager_kustomization", include_str!("../templates/init/config/manager_kustomization.yaml.j2")),
    ("manager.yaml", include_str!("../templates/init/config/manager.yaml.j2")),
    ("crd_kustomization", include_str!("../templates/init/config/crd_kustomization.yaml.j2")),
    ("samples_kustomization", include_str!("../templates/init/config/samples_kustomization.yaml.j2")),
    ("rbac_kustomization", include_str!("../templates/init/config/rbac_kustomization.yaml.j2")),
    ("role.yaml", include_str!("../templates/init/config/role.yaml.j2")),
    ("role_binding.yaml", include_str!("../templates/init/config/role_binding.yaml.j2")),
    ("service_account.yaml", include_str!("../templates/init/config/service_account.yaml.j2")),
    ("leader_election_role.yaml", include_str!("../templates/init/config/leader_election_role.yaml.j2")),
    (
        "leader_election_role_binding.yaml",
        include_str!("../templates/init/config/leader_election_role_binding.yaml.j2"),
    ),
    ("rustfmt.toml", include_str!("../templates/init/rustfmt.toml.j2")),
    ("e2e.rs", include_str!("../templates/init/e2e.rs.j2")),
    ("manager_metrics_patch.yaml", include_str!("../templates/init/config/manager_metrics_patch.yaml.j2")),
    ("metrics_service.yaml", include_str!("../templates/init/config/metrics_service.yaml.j2")),
    ("metrics_auth_role.yaml", include_str!("../templates/init/config/metrics_auth_role.yaml.j2")),
    ("metrics_auth_role_binding.yaml", include_str!("../templates/init/config/metrics_auth_role_binding.yaml.j2")),
    ("metrics_reader_role.yaml", include_str!("../templates/init/config/metrics_reader_role.yaml.j2")),
    ("prometheus_kustomization", include_str!("../templates/init/config/prometheus_kustomization.yaml.j2")),
    ("manifests_kustomization", include_str!("../templates/init/config/manifests_kustomization.yaml.j2")),
    ("scorecard_kustomization", include_str!("../templates/init/config/scorecard_kustomization.yaml.j2")),
    ("scorecard_config.yaml", include_str!("../templates/init/config/scorecard_config.yaml.j2")),
    ("scorecard_basic.config.yaml", include_str!("../templates/init/config/scorecard_basic.config.yaml.j2")),
    ("scorecard_olm.config.yaml", include_str!("../templates/init/config/scorecard_olm.config.yaml.j2")),
    ("monitor.yaml", include_str!("../templates/init/config/monitor.yaml.j2")),
    ("network_policy_kustomization", include_str!("../templates/init/config/network_policy_kustomization.yaml.j2")),
    ("allow_metrics_traffic.yaml", include_str!("../templates/init/config/allow_metrics_traffic.yaml.j2")),
    ("allow_webhook_traffic.yaml", include_str!("../templates/init/config/allow_webhook_traffic.yaml.j2")),
    ("types.rs", include_str!("../templates/api/types.rs.j2")),
    ("gv_mod.rs", include_str!("../templates/api/gv_mod.rs.j2")),
    ("controller.rs", include_str!("../templates/api/controller.rs.j2")),
    ("controller_test.rs", include_str!("../templates/api/controller_test.rs.j2")),
    ("sample.yaml", include_str!("../templates/api/sample.yaml.j2")),
    ("kuttl_step.yaml", include_str!("../templates/api/kuttl_step.yaml.j2")),
    ("kuttl-test.yaml", include_str!("../templates/init/kuttl/kuttl-test.yaml.j2")),
    ("editor_role.yaml", include_str!("../templates/api/editor_role.yaml.j2")),
    ("viewer_role.yaml", include_str!("../templates/api/viewer_role.yaml.j2")),
    ("webhook_mod.rs", include_str!("../templates/webhook/webhook_mod.rs.j2")),
    ("webhook.rs", include_str!("../templates/webhook/webhook.rs.j2")),
    ("webhook_kustomization", include_str!("../templates/webhook/config/webhook_kustomization.yaml.j2")),
    ("webhook_kustomizeconfig", include_str!("../templates/webhook/config/webhook_kustomizeconfig.yaml.j2")),
    ("service.yaml", include_str!("../templates/webhook/config/service.yaml.j2")),
    ("certificate.yaml", include_str!("../templates/webhook/config/certificate.yaml.j2")),
    ("certmanager_kustomization", include_str!("../templates/webhook/config/certmanager_kustomization.yaml.j2")),
    ("certmanager_kustomizeconfig", include_str!("../templates/webhook/config/certmanager_kustomizeconfig.yaml.j2")),
    ("manager_webhook_patch.yaml", include_str!("../templates/webhook/config/manager_webhook_patch.yaml.j2")),
    ("cainjection_patch.yaml", include_str!("../templates/webhook/config/cainjection_patch.yaml.j2")),
    ("crd_conversion_patch.yaml", include_str!("../templates/webhook/config/crd_conversion_patch.yaml.j2")),
    ("helm_watches.yaml", include_str!("../templates/helm/watches.yaml.j2")),
    ("helm_Makefile", include_str!("../templates/helm/Makefile.j2")),
    ("helm_manager.yaml", include_str!("../templates/helm/manager.yaml.j2")),
    ("helm_Dockerfile", include_str!("../templates/helm/Dockerfile.j2")),
    ("ansible_Dockerfile", include_str!("../templates/ansible/Dockerfile.j2")),
    ("ansible_Makefile", include_str!("../templates/ansible/Makefile.j2")),
    ("ansible_gitignore", include_str!("../templates/ansible/gitignore.j2")),
    ("plugin_kuttl-test.yaml", include_str!("../templates/plugin/kuttl-test.yaml.j2")),
    ("helm_kuttl_assert.yaml", include_str!("../templates/helm/kuttl_assert.yaml.j2")),
    ("ansible_kuttl_assert.yaml", include_str!("../templates/ansible/kuttl_assert.yaml.j2")),
    ("ansible_kuttl_install.yaml", include_str!("../templates/ansible/kuttl_install.yaml.j2")),
    ("ansible_manager.yaml", include_str!("../templates/ansible/manager.yaml.j2")),
    ("ansible_molecule_default_converge.yml", include_str!("../templates/ansible/molecule_default_converge.yml.j2")),
    ("ansible_molecule_default_create.yml", include_str!("../templates/ansible/molecule_default_create.yml.j2")),
    ("ansible_molecule_default_destroy.yml", include_str!("../templates/ansible/molecule_default_destroy.yml.j2")),
    ("ansible_molecule_default_kustomize.yml", include_str!("../templates/ansible/molecule_default_kustomize.yml.j2")),
    ("ansible_molecule_default_molecule.yml", include_str!("../templates/ansible/molecule_default_molecule.yml.j2")),
    ("ansible_molecule_default_prepare.yml", include_str!("../templates/ansible/molecule_default_prepare.yml.j2")),
    ("ansible_molecule_default_verify.yml", include_str!("../templates/ansible/molecule_default_verify.yml.j2")),
    ("ansible_molecule_kind_converge.yml", include_str!("../templates/ansible/molecule_kind_converge.yml.j2")),
    ("ansible_molecule_kind_create.yml", include_str!("../templates/ansible/molecule_kind_create.yml.j2")),
    ("ansible_molecule_kind_destroy.yml", include_str!("../templates/ansible/molecule_kind_destroy.yml.j2")),
    ("ansible_molecule_kind_molecule.yml", include_str!("../templates/ansible/molecule_kind_molecule.yml.j2")),
    ("ansible_molecule_test.yml", include_str!("../templates/ansible/molecule_test.yml.j2")),
    ("ansible_playbook.yml", include_str!("../templates/ansible/playbook.yml.j2")),
    ("ansible_requirements.yml", include_str!("../templates/ansible/requirements.yml.j2")),
    ("ansible_role_meta.yml", include_str!("../templates/ansible/role_meta.yml.j2")),
    ("ansible_role_readme.md", include_str!("../templates/ansible/role_readme.md.j2")),
    ("ansible_role_tasks.yml", include_str!("../templates/ansible/role_tasks.yml.j2")),
];

pub(crate) fn env() -> Environment<'static> {
    let mut env = Environment::new();
    // Keep each file's final newline; building this fixed config cannot fail.
    if let Ok(syntax) = minijinja::syntax::SyntaxConfig::builder().keep_trailing_newline(true).build() {
        env.set_syntax(syntax);
    }
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    for (name, text) in TEMPLATES {
        // The templates are compiled in and covered by tests; a broken one is reported
        // when rendered (as a missing template).
        let _ = env.add_template(name, text);
    }
    env
}

pub(crate) fn render(env: &Environment<'_>, name: &'static str, ctx: &Value) -> Result<String, ScaffoldError> {
    env.get_template(name).and_then(|t| t.render(ctx)).map_err(|source| ScaffoldError::Template { name, source })
}

/// Where the scaffold's opkit dependencies come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpkitSource {
    /// The published crates (`opkit = "0.1.0"`): a CLI built without the sources.
    Registry,
    /// Copies of the crates in the project (`vendor/opkit/`, see [`crate::vendor`]): the
    /// project builds anywhere, its Dockerfile included.
    Vendored,
    /// A local checkout of the opkit repository (its root directory), by path: for the
    /// examples inside the checkout, and for developing opkit itself (`--opkit-path`).
    Checkout(PathBuf),
}

impl OpkitSource {
    /// For a project at `project_root`: inside the checkout this CLI was built from (the
    /// examples), that checkout; else the vendored crates, when the CLI carries them; else
    /// the registry.
    pub(crate) fn detect(project_root: &Path) -> OpkitSource {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        match std::fs::canonicalize(&root) {
            Ok(root) if root.join("crates/opkit/Cargo.toml").is_file() && project_root.starts_with(&root) => {
                OpkitSource::Checkout(root)
            }
            _ if crate::vendor::available() => OpkitSource::Vendored,
            _ => OpkitSource::Registry,
        }
    }

    /// The dependency line for `krate` in a project at `project_root`: a relative path when
    /// the project lives inside the checkout (its examples), else an absolute one.
    fn dependency(&self, krate: &str, project_root: &Path) -> String {
        let version = env!("CARGO_PKG_VERSION");
        match self {
            OpkitSource::Registry => format!("\"{version}\""),
            OpkitSource::Vendored => crate::vendor::dependency(krate),
            OpkitSource::Checkout(root) => {
                let path = match project_root.strip_prefix(root) {
                    Ok(inside) => {
                        let up = inside.components().map(|_| "..").collect::<Vec<_>>().join("/");
                        format!("{up}/crates/{krate}")
                    }
                    Err(_) => root.join("crates").join(krate).display().to_string(),
                };
                format!("{{ version = \"{version}\", path = {path:?} }}")
            }
        }
    }

    /// Whether `project_root` is inside the checkout (then the checkout's workspace and
    /// lock file are used instead of the project's own).
    fn contains(&self, project_root: &Path) -> bool {
        matches!(self, OpkitSource::Checkout(root) if project_root.starts_with(root))
    }
}

/// What `opkit init` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct InitOptions {
    /// The API domain.
    pub domain: String,
    /// The repository (`github.com/example/memcached-operator`).
    pub repo: String,
    /// The project name (Cargo package).
    pub project_name: String,
    /// Copyright owner, if any.
    pub owner: Option<String>,
    /// `apache2` or `none`.
    pub license: String,
    /// Where the opkit crates come from.
    pub opkit: OpkitSource,
}

/// FNV-1a (32 bit) of `s` in hex: the leader election ID's prefix, as kubebuilder's
/// `hashFNV` of the repository. Written by hand: eight lines, no crate needed.
pub(crate) fn fnv32a(s: &str) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

fn header(license: &str, owner: Option<&str>) -> String {
    if license != "apache2" {
        return String::new();
    }
    let year = jiff::Zoned::now().year();
    let who = owner.unwrap_or("The authors");
    format!("// Copyright {year} {who}.\n// SPDX-License-Identifier: Apache-2.0\n\n")
}

/// The files of a new project: path, template.
const INIT_FILES: &[(&str, &str)] = &[
    ("Cargo.toml", "Cargo.toml"),
    ("src/main.rs", "main.rs"),
    ("src/lib.rs", "lib.rs"),
    ("src/api/mod.rs", "api_mod.rs"),
    ("src/controller/mod.rs", "controller_mod.rs"),
    ("Makefile", "Makefile"),
    ("Dockerfile", "Dockerfile"),
    (".dockerignore", "dockerignore"),
    (".gitignore", "gitignore"),
    ("README.md", "README.md"),
    ("config/default/kustomization.yaml", "default_kustomization"),
    ("config/manager/kustomization.yaml", "manager_kustomization"),
    ("config/manager/manager.yaml", "manager.yaml"),
    ("config/crd/kustomization.yaml", "crd_kustomization"),
    ("config/samples/kustomization.yaml", "samples_kustomization"),
    ("config/rbac/kustomization.yaml", "rbac_kustomization"),
    ("config/rbac/role.yaml", "role.yaml"),
    ("config/rbac/role_binding.yaml", "role_binding.yaml"),
    ("config/rbac/service_account.yaml", "service_account.yaml"),
    ("config/rbac/leader_election_role.yaml", "leader_election_role.yaml"),
    ("config/rbac/leader_election_role_binding.yaml", "leader_election_role_binding.yaml"),
    ("rustfmt.toml", "rustfmt.toml"),
    ("tests/e2e.rs", "e2e.rs"),
    ("test/e2e/kuttl/kuttl-test.yaml", "kuttl-test.yaml"),
    ("config/default/manager_metrics_patch.yaml", "manager_metrics_patch.yaml"),
    ("config/default/metrics_service.yaml", "metrics_service.yaml"),
    ("config/rbac/metrics_auth_role.yaml", "metrics_auth_role.yaml"),
    ("config/rbac/metrics_auth_role_binding.yaml", "metrics_auth_role_binding.yaml"),
    ("config/rbac/metrics_reader_role.yaml", "metrics_reader_role.yaml"),
    ("config/prometheus/kustomization.yaml", "prometheus_kustomization"),
    ("config/prometheus/monitor.yaml", "monitor.yaml"),
    ("config/network-policy/kustomization.yaml", "network_policy_kustomization"),
    ("config/network-policy/allow-metrics-traffic.yaml", "allow_metrics_traffic.yaml"),
    ("config/manifests/kustomization.yaml", "manifests_kustomization"),
    ("config/scorecard/kustomization.yaml", "scorecard_kustomization"),
    ("config/scorecard/bases/config.yaml", "scorecard_config.yaml"),
    ("config/scorecard/patches/basic.config.yaml", "scorecard_basic.config.yaml"),
    ("config/scorecard/patches/olm.config.yaml", "scorecard_olm.config.yaml"),
];

/// The files of a new project in `root`.
pub(crate) fn init_plan(root: &Path, opts: &InitOptions) -> Result<(FilePlan, Project), ScaffoldError> {
    let env = env();
    let project = Project {
        domain: opts.domain.clone(),
        layout: vec![project::LAYOUT.to_string()],
        multigroup: false,
        project_name: opts.project_name.clone(),
        repo: opts.repo.clone(),
        resources: Vec::new(),
        version: "3".into(),
    };
    let ctx = context! {
        project_name => &opts.project_name,
        crate_name => project.crate_name(),
        domain => &opts.domain,
        repo => &opts.repo,
        owner => opts.owner.as_deref().unwrap_or(""),
        license => &opts.license,
        header => header(&opts.license, opts.owner.as_deref()),
        leader_election_id => format!("{}.{}", fnv32a(&opts.repo), opts.domain),
        dep_opkit => opts.opkit.dependency("opkit", root),
        dep_testenv => opts.opkit.dependency("opkit-testenv", root),
        vendored => opts.opkit == OpkitSource::Vendored,
        own_workspace => !opts.opkit.contains(root),
        crd_files => Vec::<String>::new(),
        sample_files => Vec::<String>::new(),
        conversion_patches => Vec::<String>::new(),
    };
    let mut plan = FilePlan::new(root);
    for (path, template) in INIT_FILES {
        plan.create(*path, render(&env, template, &ctx)?)?;
    }
    if opts.opkit == OpkitSource::Vendored {
        crate::vendor::plan(&mut plan)?;
    } else if let (OpkitSource::Checkout(checkout), false) = (&opts.opkit, opts.opkit.contains(root)) {
        // The checkout's lock file pins the versions it was tested with (and already
        // downloaded), so the new project builds offline; cargo adds the new package.
        if let Ok(lock) = std::fs::read_to_string(checkout.join("Cargo.lock")) {
            plan.create("Cargo.lock", lock)?;
        }
    }
    plan.create(project::FILE, project.render())?;
    Ok((plan, project))
}

/// What `opkit create api` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct ApiOptions {
    /// Short group (`cache`; `apps` or `core` for a built-in kind).
    pub group: String,
    /// Version (`v1alpha1`).
    pub version: String,
    /// Kind (`Memcached`).
    pub kind: String,
    /// Plural (`memcacheds`).
    pub plural: String,
    /// Scaffold the type.
    pub resource: bool,
    /// Scaffold the controller.
    pub controller: bool,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Where the type comes from.
    pub origin: TypeOrigin,
    /// Overwrite the files of a kind that exists (kubebuilder's `--force`).
    pub force: bool,
}

/// Where the Rust type of an API comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TypeOrigin {
    /// The project defines it (`src/api/`), in the project's domain.
    Project,
    /// A built-in Kubernetes kind: k8s-openapi's type.
    Builtin {
        /// The group's domain as kubebuilder records it (`k8s.io` for `networking`, empty
        /// for `core`, `apps`, `batch`, ...).
        domain: String,
        /// k8s-openapi's module of the group version (`k8s_openapi::api::apps::v1`).
        module: String,
    },
    /// A type from another crate (`--external-api-path`).
    External {
        /// The group's domain (`--external-api-domain`).
        domain: String,
        /// The crate path of the module holding the type (`cert_manager::v1`).
        module: String,
    },
}

/// Where a project keeps one API's code: its module and directories, which depend on
/// the project's layout (single group or `multigroup`).
struct ApiLayout {
    /// The group version's module under `crate::api` (`cache_v1alpha1`, or `cache::v1alpha1`
    /// in a multi-group project).
    gv_module: String,
    /// The group's module in a multi-group project (`cache`).
    group_module: Option<String>,
    /// The group version's directory (`src/api/cache_v1alpha1`).
    gv_dir: String,
    /// The directory of the kind's controller (`src/controller`, or `src/controller/cache`).
    controller_dir: String,
    /// The controller's module path under `crate::controller` (`memcached`, or `cache::memcached`).
    controller_module: String,
    /// What the kind's test, editor and viewer role files start with (`memcached`, or
    /// `cache_memcached` in a multi-group project, as kubebuilder names the roles).
    file_prefix: String,
    /// The editor and viewer roles' name prefix (`memcached`, or `cache-memcached`).
    role_prefix: String,
}

impl ApiLayout {
    fn new(project: &Project, opts: &ApiOptions) -> ApiLayout {
        let kind_module = project::module_name(&opts.kind);
        let kind_lower = opts.kind.to_lowercase();
        if project.multigroup {
            let group = project::module_ident(&opts.group);
            ApiLayout {
                gv_module: format!("{group}::{}", opts.version),
                gv_dir: format!("src/api/{group}/{}", opts.version),
                controller_dir: format!("src/controller/{group}"),
                controller_module: format!("{group}::{kind_module}"),
                file_prefix: format!("{group}_{}", project::snake_case(&opts.kind)),
                role_prefix: format!("{}-{kind_lower}", opts.group),
                group_module: Some(group),
            }
        } else {
            let gv_module = format!("{}_{}", opts.group.replace(['.', '-'], "_"), opts.version);
            ApiLayout {
                gv_dir: format!("src/api/{gv_module}"),
                gv_module,
                group_module: None,
                controller_dir: "src/controller".into(),
                controller_module: kind_module,
                file_prefix: project::snake_case(&opts.kind),
                role_prefix: kind_lower,
            }
        }
    }
}

/// The files `opkit create api` creates and edits in the project at `root`, and the
/// updated project record.
pub(crate) fn api_plan(
    root: &Path,
    project: &Project,
    opts: &ApiOptions,
) -> Result<(FilePlan, Project), ScaffoldError> {
    let api = ApiScaffold::new(root, project, opts);
    let mut plan = FilePlan::new(root);
    plan.set_overwrite(opts.force);
    if opts.resource {
        if let Some(group) = &api.layout.group_module {
            api.plan_group_module(&mut plan, group)?;
        }
        api.plan_version_module(&mut plan)?;
        api.plan_kind(&mut plan)?;
        api.plan_roles(&mut plan)?;
    }
    if opts.controller {
        api.plan_controller(&mut plan)?;
    }
    plan.write(project::FILE, api.updated.render());
    Ok((plan, api.updated))
}

/// One `opkit create api`: the kind's names and layout, the template context and the
/// project record with the kind.
struct ApiScaffold<'a> {
    root: &'a Path,
    opts: &'a ApiOptions,
    env: Environment<'static>,
    layout: ApiLayout,
    /// The kind's module (a keyword gets a trailing `_`).
    kind_snake: String,
    /// The kind's Rust type (`Self_` for `Self`).
    kind_type: String,
    /// The kind's sample (`cache_v1alpha1_memcached.yaml`).
    sample_file: String,
    /// The group with its domain (empty for the core group).
    full_group: String,
    /// The group as RBAC markers name it (`core` for the core group).
    rbac_group: String,
    ctx: Value,
    /// The project record with the kind.
    updated: Project,
}

impl<'a> ApiScaffold<'a> {
    fn new(root: &'a Path, project: &Project, opts: &'a ApiOptions) -> ApiScaffold<'a> {
        let layout = ApiLayout::new(project, opts);
        let gv_module = &layout.gv_module;
        let kind_snake = project::module_name(&opts.kind);
        let kind_type = project::type_name(&opts.kind);
        let kind_lower = opts.kind.to_lowercase();
        let sample_file = format!("{}_{}_{}.yaml", opts.group, opts.version, kind_lower);
        let crate_name = project.crate_name();
        let type_module = match &opts.origin {
            TypeOrigin::Project => format!("crate::api::{gv_module}"),
            TypeOrigin::Builtin { module, .. } | TypeOrigin::External { module, .. } => module.clone(),
        };
        let resource = api_resource(project, opts, &type_module);
        let full_group = resource.full_group();
        let api_version =
            if full_group.is_empty() { opts.version.clone() } else { format!("{full_group}/{}", opts.version) };
        // RBAC markers name the core group `core`, as kubebuilder writes them; `opkit generate`
        // turns it into `""`, as controller-gen does.
        let rbac_group = if full_group.is_empty() { "core".to_string() } else { full_group.clone() };
        // The controller imports the type under its own name, unless that clashes with a name the
        // controller already uses.
        let type_import = if opts.origin == TypeOrigin::Project || kind_type == opts.kind {
            format!("{type_module}::{kind_type}")
        } else {
            format!("{type_module}::{} as {kind_type}", opts.kind)
        };
        let updated = with_resource(project, resource);
        let (crd_files, sample_files) = api_files(&updated);
        let ctx = context! {
            project_name => &project.project_name,
            crate_name => &crate_name,
            header => existing_header(root),
            group => &opts.group,
            version => &opts.version,
            kind => &opts.kind,
            kind_type => &kind_type,
            type_import => &type_import,
            plural => &opts.plural,
            namespaced => opts.namespaced,
            full_group => &full_group,
            api_version => &api_version,
            rbac_group => &rbac_group,
            gv_module => gv_module,
            kind_snake => &kind_snake,
            kind_lower => &kind_lower,
            role_prefix => &layout.role_prefix,
            sample_file => &sample_file,
            crd_files => &crd_files,
            sample_files => &sample_files,
            conversion_patches => conversion_patches(&updated),
        };
        ApiScaffold {
            root,
            opts,
            env: env(),
            layout,
            kind_snake,
            kind_type,
            sample_file,
            full_group,
            rbac_group,
            ctx,
            updated,
        }
    }

    fn render(&self, template: &'static str) -> Result<String, ScaffoldError> {
        render(&self.env, template, &self.ctx)
    }

    /// The group version's module path (`src/api/cache_v1alpha1/mod.rs`).
    fn gv_mod(&self) -> String {
        format!("{}/mod.rs", self.layout.gv_dir)
    }

    /// A multi-group project's group module (`src/api/cache/mod.rs`), made with the
    /// group's first version, and the version's entry in it.
    fn plan_group_module(&self, plan: &mut FilePlan, group: &str) -> Result<(), ScaffoldError> {
        let group_mod = format!("src/api/{group}/mod.rs");
        if plan.current(Path::new(&group_mod))?.is_none() {
            let text = format!(
                "{}//! The `{}` API group, one module per version.\n\n// +opkit:scaffold:versions\n",
                existing_header(self.root),
                self.full_group
            );
            plan.create(&group_mod, text)?;
            plan.insert_module_before_marker(
                "src/api/mod.rs",
                "+opkit:scaffold:api-modules",
                &format!("pub mod {group};"),
            )?;
        }
        if plan.current(Path::new(&self.gv_mod()))?.is_none() {
            plan.insert_module_before_marker(
                &group_mod,
                "+opkit:scaffold:versions",
                &format!("pub mod {};", self.opts.version),
            )?;
        }
        Ok(())
    }

    /// The group version's module, made with its first kind (listed in `src/api/mod.rs`
    /// in a single-group project).
    fn plan_version_module(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        let gv_mod = self.gv_mod();
        if plan.current(Path::new(&gv_mod))?.is_none() {
            plan.create(&gv_mod, self.render("gv_mod.rs")?)?;
            if self.layout.group_module.is_none() {
                plan.insert_module_before_marker(
                    "src/api/mod.rs",
                    "+opkit:scaffold:api-modules",
                    &format!("pub mod {};", self.layout.gv_module),
                )?;
            }
        }
        Ok(())
    }

    /// The kind's type (listed in its version's module and among the CRDs), its sample,
    /// its kuttl test case, and the samples' and CRDs' kustomizations.
    fn plan_kind(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        let (gv_mod, kind_snake, opts) = (self.gv_mod(), &self.kind_snake, self.opts);
        plan.create(format!("{}/{kind_snake}.rs", self.layout.gv_dir), self.render("types.rs")?)?;
        plan.insert_before_marker(&gv_mod, "+opkit:scaffold:kinds", &format!("mod {kind_snake};"))?;
        plan.insert_before_marker(&gv_mod, "+opkit:scaffold:kinds", &format!("pub use {kind_snake}::*;"))?;
        plan.insert_before_marker(
            "src/api/mod.rs",
            "+opkit:scaffold:crds",
            &format!("{}::{}::crd(),", self.layout.gv_module, self.kind_type),
        )?;
        let api_mod = plan.current(Path::new("src/api/mod.rs"))?.unwrap_or_default();
        if !api_mod.contains(CRD_EXT_IMPORT) {
            plan.write("src/api/mod.rs", replace_anchor(&api_mod, "src/api/mod.rs", CRD_IMPORT, CRD_EXT_IMPORT)?);
        }
        plan.create(format!("config/samples/{}", self.sample_file), self.render("sample.yaml")?)?;
        // A kuttl test case for the sample (`make test-kuttl`): a step applying and
        // asserting config/samples' file itself, so the test follows the sample's edits.
        let kuttl_case = format!("test/e2e/kuttl/{}-{}-{}", opts.group, opts.version, opts.kind.to_lowercase());
        plan.create(format!("{kuttl_case}/00-create.yaml"), self.render("kuttl_step.yaml")?)?;
        plan.write("config/samples/kustomization.yaml", self.render("samples_kustomization")?);
        plan.write("config/crd/kustomization.yaml", self.render("crd_kustomization")?);
        Ok(())
    }

    /// The kind's editor and viewer roles. They are per kind: another version of a kind
    /// reuses them.
    fn plan_roles(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        for role in ["editor", "viewer"] {
            let file = format!("{}_{role}_role.yaml", self.layout.file_prefix);
            if plan.current(&Path::new("config/rbac").join(&file))?.is_some() {
                continue;
            }
            let template = if role == "editor" { "editor_role.yaml" } else { "viewer_role.yaml" };
            plan.create(format!("config/rbac/{file}"), self.render(template)?)?;
            plan.insert_before_marker(
                "config/rbac/kustomization.yaml",
                "+opkit:scaffold:rbac-roles",
                &format!("- {file}"),
            )?;
        }
        Ok(())
    }

    /// The kind's controller, its module entries, its `setup` call and (with a type) its
    /// test.
    fn plan_controller(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        let kind_snake = &self.kind_snake;
        let controller_file = format!("{}/{kind_snake}.rs", self.layout.controller_dir);
        plan.create(&controller_file, self.render("controller.rs")?)?;
        match &self.layout.group_module {
            Some(group) => self.plan_controller_group(plan, group)?,
            None => plan.insert_module_before_marker(
                "src/controller/mod.rs",
                "+opkit:scaffold:controller-modules",
                &format!("pub mod {kind_snake};"),
            )?,
        }
        plan.insert_before_marker(
            "src/controller/mod.rs",
            "+opkit:scaffold:controller-setup",
            &format!("{}::setup(mgr)?;", self.layout.controller_module),
        )?;
        let controller_mod = plan.current(Path::new("src/controller/mod.rs"))?.unwrap_or_default();
        plan.write("src/controller/mod.rs", controller_mod.replace(UNUSED_SETUP_SIGNATURE, SETUP_SIGNATURE));
        if self.opts.resource {
            plan.create(
                format!("tests/{}_controller.rs", self.layout.file_prefix),
                self.render("controller_test.rs")?,
            )?;
        }
        Ok(())
    }

    /// A multi-group project's controller module of the group (made with its first kind)
    /// and the kind's entry in it.
    fn plan_controller_group(&self, plan: &mut FilePlan, group: &str) -> Result<(), ScaffoldError> {
        let group_mod = format!("src/controller/{group}/mod.rs");
        if plan.current(Path::new(&group_mod))?.is_none() {
            let text = format!(
                "{}//! The controllers of the `{}` API group, one module per kind.\n\n// +opkit:scaffold:controller-modules\n",
                existing_header(self.root),
                self.rbac_group
            );
            plan.create(&group_mod, text)?;
            plan.insert_module_before_marker(
                "src/controller/mod.rs",
                "+opkit:scaffold:controller-modules",
                &format!("pub mod {group};"),
            )?;
        }
        plan.insert_module_before_marker(
            &group_mod,
            "+opkit:scaffold:controller-modules",
            &format!("pub mod {};", self.kind_snake),
        )?;
        Ok(())
    }
}

/// The PROJECT record of the kind `opts` asks for, its type in `type_module`.
fn api_resource(project: &Project, opts: &ApiOptions, type_module: &str) -> Resource {
    let (domain, external) = match &opts.origin {
        TypeOrigin::Project => (project.domain.clone(), false),
        TypeOrigin::Builtin { domain, .. } => (domain.clone(), false),
        TypeOrigin::External { domain, .. } => (domain.clone(), true),
    };
    Resource {
        api: opts.resource.then(|| ResourceApi { crd_version: "v1".into(), namespaced: opts.namespaced }),
        controller: opts.controller,
        domain,
        external,
        group: opts.group.clone(),
        kind: opts.kind.clone(),
        path: match type_module.strip_prefix("crate::") {
            Some(inside) => format!("{}::{inside}", project.crate_name()),
            None => type_module.to_string(),
        },
        plural: opts.plural.clone(),
        version: opts.version.clone(),
        webhooks: None,
    }
}

/// `project` with `resource` added, or replacing the record of its kind (`--force`: the
/// kind keeps its place, and webhooks, in PROJECT).
fn with_resource(project: &Project, resource: Resource) -> Project {
    let mut updated = project.clone();
    let key = (resource.group.clone(), resource.version.clone(), resource.kind.clone());
    match updated.resources.iter_mut().find(|r| (&r.group, &r.version, &r.kind) == (&key.0, &key.1, &key.2)) {
        Some(existing) => {
            let webhooks = existing.webhooks.take();
            *existing = Resource { webhooks, ..resource };
        }
        None => updated.resources.push(resource),
    }
    updated
}

/// The CRD files and samples of the project's kinds with a type, as the CRDs' and
/// samples' kustomizations list them.
fn api_files(project: &Project) -> (Vec<String>, Vec<String>) {
    let with_api: Vec<&Resource> = project.resources.iter().filter(|r| r.api.is_some()).collect();
    let mut crd_files: Vec<String> = with_api.iter().map(|r| format!("{}_{}.yaml", r.full_group(), r.plural)).collect();
    crd_files.sort();
    crd_files.dedup();
    let mut sample_files: Vec<String> =
        with_api.iter().map(|r| format!("{}_{}_{}.yaml", r.group, r.version, r.kind.to_lowercase())).collect();
    sample_files.sort();
    (crd_files, sample_files)
}

/// The CRD patches (`webhook_in_<plural>.yaml`) config/crd/kustomization.yaml lists: one per
/// kind with a conversion webhook.
fn conversion_patches(project: &Project) -> Vec<String> {
    let mut patches: Vec<String> = project
        .resources
        .iter()
        .filter(|r| r.webhooks.as_ref().is_some_and(|w| w.conversion))
        .map(|r| format!("webhook_in_{}.yaml", r.plural))
        .collect();
    patches.sort();
    patches.dedup();
    patches
}

/// What `opkit create webhook` was asked for.
#[derive(Debug, Clone)]
pub(crate) struct WebhookOptions {
    /// Short group (`flights`).
    pub group: String,
    /// Version (`v1`), the hub for conversion.
    pub version: String,
    /// Kind (`FlightTicket`).
    pub kind: String,
    /// Scaffold a defaulting webhook.
    pub defaulting: bool,
    /// Scaffold a validating webhook.
    pub validation: bool,
    /// Scaffold conversion from and to these versions (empty: no conversion).
    pub spokes: Vec<String>,
    /// Write the webhooks' files again though the API has webhooks (kubebuilder's `--force`).
    pub force: bool,
}

/// src/api/mod.rs imports the CRD type; the trait that makes a kind's CRD is imported with the
/// first kind (before, the import would be unused).
const CRD_IMPORT: &str =
    "use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;\n";
const CRD_EXT_IMPORT: &str = "use kube::CustomResourceExt;\n";
/// src/controller/mod.rs's `setup` as `opkit init` writes it (no controller uses the manager
/// yet) and as the first controller makes it.
const UNUSED_SETUP_SIGNATURE: &str = "pub fn setup(_mgr: &Manager)";
const SETUP_SIGNATURE: &str = "pub fn setup(mgr: &Manager)";

/// Marks in main.rs and lib.rs where a project's first webhook is wired in.
const MAIN_ARGS_ANCHOR: &str = "    manager: ManagerArgs,\n";
const MAIN_ARGS_WEBHOOKS: &str = "    #[command(flatten)]\n    webhooks: opkit::webhook::WebhookArgs,\n";
const LIB_ANCHOR: &str = "pub mod controller;\n";
const MAIN_BUILDER_MARKER: &str = "    // +opkit:scaffold:builder\n";

/// The files `opkit create webhook` creates and edits in the project at `root`, and the
/// updated project record. The resource must exist and have no webhooks yet (checked by the
/// command).
pub(crate) fn webhook_plan(
    root: &Path,
    project: &Project,
    opts: &WebhookOptions,
) -> Result<(FilePlan, Project), ScaffoldError> {
    let webhook = WebhookScaffold::new(root, project, opts);
    let mut plan = FilePlan::new(root);
    let first = plan.current(Path::new("src/webhook/mod.rs"))?.is_none();
    plan.set_overwrite(opts.force);
    if first {
        webhook.plan_webhook_server(&mut plan)?;
        webhook.plan_webhook_config(&mut plan)?;
    }
    webhook.plan_admission_config(&mut plan)?;
    webhook.plan_kind_webhook(&mut plan)?;
    if !opts.spokes.is_empty() {
        webhook.plan_conversion(&mut plan)?;
    }
    plan.write(project::FILE, webhook.updated.render());
    Ok((plan, webhook.updated))
}

/// One `opkit create webhook`: the kind's webhook module, the template context and the
/// project record with the kind's webhooks.
struct WebhookScaffold {
    env: Environment<'static>,
    crate_name: String,
    /// The kind's webhook module (`cache_v1_memcached`).
    module: String,
    /// The kind's plural.
    plural: String,
    /// Whether any kind has a defaulting or a validating webhook.
    has_admission: bool,
    ctx: Value,
    /// The project record with the kind's webhooks.
    updated: Project,
}

impl WebhookScaffold {
    fn new(root: &Path, project: &Project, opts: &WebhookOptions) -> WebhookScaffold {
        let full_group = project.full_group(&opts.group);
        let crate_name = project.crate_name();
        let gv_module = |version: &str| version_module(project, opts, version);
        let kind_snake = project::module_name(&opts.kind);
        let module = format!("{}_{}", gv_module(&opts.version).replace("::", "_"), kind_snake);
        let (updated, plural) = with_webhooks(project, opts);
        let webhooks = |pick: fn(&project::ResourceWebhooks) -> bool| {
            updated.resources.iter().filter_map(|r| r.webhooks.as_ref()).any(pick)
        };
        let has_mutating = webhooks(|w| w.defaulting);
        let has_validating = webhooks(|w| w.validation);
        let spoke_modules: Vec<String> = opts.spokes.iter().map(|v| gv_module(v)).collect();
        // The scaffolded type's example field `foo`, if the user kept it: the webhooks use it as
        // their example, else they are left empty for the user to fill in.
        let type_file = format!("src/api/{}/{kind_snake}.rs", gv_module(&opts.version).replace("::", "/"));
        let example_field =
            std::fs::read_to_string(root.join(&type_file)).is_ok_and(|t| t.contains("pub foo: Option<String>,"));
        let with_api: Vec<&Resource> = updated.resources.iter().filter(|r| r.api.is_some()).collect();
        let mut crd_files: Vec<String> =
            with_api.iter().map(|r| format!("{}_{}.yaml", updated.full_group(&r.group), r.plural)).collect();
        crd_files.sort();
        crd_files.dedup();
        let ctx = context! {
            project_name => &project.project_name,
            crate_name => &crate_name,
            header => existing_header(root),
            group => &opts.group,
            version => &opts.version,
            kind => &opts.kind,
            kind_type => project::type_name(&opts.kind),
            plural => &plural,
            full_group => &full_group,
            gv_module => gv_module(&opts.version),
            kind_lower => opts.kind.to_lowercase(),
            defaulting => opts.defaulting,
            validation => opts.validation,
            conversion => !opts.spokes.is_empty(),
            spokes => &opts.spokes,
            spoke_modules => &spoke_modules,
            has_mutating => has_mutating,
            has_validating => has_validating,
            example_field => example_field,
            crd_files => &crd_files,
            conversion_patches => conversion_patches(&updated),
        };
        let has_admission = has_mutating || has_validating;
        WebhookScaffold { env: env(), crate_name, module, plural, has_admission, ctx, updated }
    }

    fn render(&self, template: &'static str) -> Result<String, ScaffoldError> {
        render(&self.env, template, &self.ctx)
    }

    /// With the project's first webhook: `src/webhook/mod.rs`, listed in lib.rs, and
    /// main.rs taking the webhook server's flags and serving it.
    fn plan_webhook_server(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        plan.create("src/webhook/mod.rs", self.render("webhook_mod.rs")?)?;
        let lib = plan.current(Path::new("src/lib.rs"))?.unwrap_or_default();
        if !lib.contains("pub mod webhook;") {
            plan.write("src/lib.rs", replace_anchor(&lib, "src/lib.rs", LIB_ANCHOR, "pub mod webhook;\n")?);
        }
        let main = plan.current(Path::new("src/main.rs"))?.unwrap_or_default();
        if !main.contains("opkit::webhook::WebhookArgs") {
            plan.write("src/main.rs", replace_anchor(&main, "src/main.rs", MAIN_ARGS_ANCHOR, MAIN_ARGS_WEBHOOKS)?);
        }
        let main = plan.current(Path::new("src/main.rs"))?.unwrap_or_default();
        let serve = format!(
            "    if let Some(server) = args.webhooks.server()? {{\n        \
             mgr.add_webhook_server({}::webhook::setup(&mgr, server))?;\n    }}\n",
            self.crate_name
        );
        plan.write("src/main.rs", insert_before(&main, "src/main.rs", MAIN_BUILDER_MARKER, &serve)?);
        Ok(())
    }

    /// With the project's first webhook: the webhook service, its cert-manager
    /// certificate and the manager's webhook patch; the network policy admitting webhook
    /// calls, `make run` serving them, the bundle's webhook patch, and config/default
    /// deploying it all.
    fn plan_webhook_config(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        for (path, template) in [
            ("config/webhook/kustomizeconfig.yaml", "webhook_kustomizeconfig"),
            ("config/webhook/service.yaml", "service.yaml"),
            ("config/certmanager/certificate.yaml", "certificate.yaml"),
            ("config/certmanager/kustomization.yaml", "certmanager_kustomization"),
            ("config/certmanager/kustomizeconfig.yaml", "certmanager_kustomizeconfig"),
            ("config/default/manager_webhook_patch.yaml", "manager_webhook_patch.yaml"),
        ] {
            plan.create(path, self.render(template)?)?;
        }
        // config/network-policy admits webhook calls too (projects from before it existed lack it).
        let policies = "config/network-policy/kustomization.yaml";
        if plan.current(Path::new(policies))?.is_some() {
            plan.create(
                "config/network-policy/allow-webhook-traffic.yaml",
                self.render("allow_webhook_traffic.yaml")?,
            )?;
            plan.insert_before_marker(policies, "+opkit:scaffold:network-policies", "- allow-webhook-traffic.yaml")?;
        }
        // `make run` serves the webhooks from now on (ENABLE_WEBHOOKS=false turns them off).
        if let Some(makefile) = plan.current(Path::new("Makefile"))? {
            plan.write("Makefile", makefile.replace("ENABLE_WEBHOOKS ?= false", "ENABLE_WEBHOOKS ?= true"));
        }
        // The bundle's Deployment leaves the cert-manager volume to OLM (operator-sdk's
        // [WEBHOOK] patch in config/manifests, here enabled).
        let manifests = "config/manifests/kustomization.yaml";
        if let Some(text) = plan.current(Path::new(manifests))? {
            plan.write(manifests, with_manifests_webhook_patch(&text));
        }
        let default = "config/default/kustomization.yaml";
        let text = plan.current(Path::new(default))?.unwrap_or_default();
        let text = replace_anchor(&text, default, "- ../manager\n", "- ../webhook\n- ../certmanager\n")?;
        plan.write(default, add_default_patches(&text, &["- path: manager_webhook_patch.yaml"]));
        Ok(())
    }

    /// The admission webhooks' configurations (and their CA injection, once a kind has
    /// one).
    fn plan_admission_config(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        plan.write("config/webhook/kustomization.yaml", self.render("webhook_kustomization")?);
        if self.has_admission {
            plan.write("config/default/webhookcainjection_patch.yaml", self.render("cainjection_patch.yaml")?);
            let default = "config/default/kustomization.yaml";
            let text = plan.current(Path::new(default))?.unwrap_or_default();
            plan.write(default, add_default_patches(&text, &["- path: webhookcainjection_patch.yaml"]));
        }
        Ok(())
    }

    /// The kind's webhook module, listed and set up in `src/webhook/mod.rs`.
    fn plan_kind_webhook(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        let module = &self.module;
        plan.create(format!("src/webhook/{module}.rs"), self.render("webhook.rs")?)?;
        plan.insert_module_before_marker(
            "src/webhook/mod.rs",
            "+opkit:scaffold:webhook-modules",
            &format!("pub mod {module};"),
        )?;
        plan.insert_before_marker(
            "src/webhook/mod.rs",
            "+opkit:scaffold:webhook-setup",
            &format!("let server = {module}::setup(mgr, server);"),
        )?;
        Ok(())
    }

    /// The CRD's conversion patch, listed in the CRDs' kustomization.
    fn plan_conversion(&self, plan: &mut FilePlan) -> Result<(), ScaffoldError> {
        plan.create(
            format!("config/crd/patches/webhook_in_{}.yaml", self.plural),
            self.render("crd_conversion_patch.yaml")?,
        )?;
        plan.write("config/crd/kustomization.yaml", self.render("crd_kustomization")?);
        Ok(())
    }
}

/// A version's module under `crate::api`, as PROJECT records it (`cache_v1`, or `cache::v1`
/// in a multi-group project).
fn version_module(project: &Project, opts: &WebhookOptions, version: &str) -> String {
    let api_prefix = format!("{}::api::", project.crate_name());
    match project.find(&opts.group, version, &opts.kind) {
        Some(r) if r.path.starts_with(&api_prefix) => r.path[api_prefix.len()..].to_string(),
        _ => format!("{}_{}", opts.group.replace(['.', '-'], "_"), version),
    }
}

/// `project` with the webhooks `opts` asks for recorded on its kind, and the kind's plural.
fn with_webhooks(project: &Project, opts: &WebhookOptions) -> (Project, String) {
    let mut updated = project.clone();
    let mut plural = String::new();
    for r in &mut updated.resources {
        if r.group == opts.group && r.version == opts.version && r.kind == opts.kind {
            plural = r.plural.clone();
            r.webhooks = Some(project::ResourceWebhooks {
                conversion: !opts.spokes.is_empty(),
                defaulting: opts.defaulting,
                spoke: opts.spokes.clone(),
                validation: opts.validation,
                webhook_version: "v1".into(),
            });
        }
    }
    (updated, plural)
}

/// config/manifests/kustomization.yaml's patches for a project with webhooks: the bundle's
/// Deployment without config/default's cert-manager `cert` volume and its mount, which OLM
/// replaces with a certificate of its own.
const MANIFESTS_WEBHOOK_PATCH: &str = include_str!("../templates/webhook/config/manifests_webhook_patch.yaml.j2");

/// config/manifests/kustomization.yaml `text` with the manifests' webhook patch appended,
/// unless it has the `[WEBHOOK]` section already or patches of its own (which the user
/// then edits, as in operator-sdk).
pub(crate) fn with_manifests_webhook_patch(text: &str) -> String {
    if text.contains("[WEBHOOK]") || text.lines().any(|l| l.starts_with("patches:")) {
        return text.to_owned();
    }
    let mut out = text.to_owned();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(MANIFESTS_WEBHOOK_PATCH);
    out
}

/// config/default/kustomization.yaml with the patch `entries` listed (once each).
fn add_default_patches(text: &str, entries: &[&str]) -> String {
    let mut out = text.to_owned();
    let missing: Vec<&str> = entries.iter().copied().filter(|e| !text.contains(e)).collect();
    if missing.is_empty() {
        return out;
    }
    if !text.lines().any(|l| l.trim_end() == "patches:") {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n# Serve the webhooks from the manager, with the certificate cert-manager issues.\npatches:\n");
        for e in missing {
            out.push_str(e);
            out.push('\n');
        }
        return out;
    }
    let lines: Vec<String> = out.lines().map(str::to_owned).collect();
    let mut result = Vec::with_capacity(lines.len() + missing.len());
    for l in lines {
        let is_patches = l.trim_end() == "patches:";
        result.push(l);
        if is_patches {
            result.extend(missing.iter().map(|e| (*e).to_owned()));
        }
    }
    result.join("\n") + "\n"
}

/// `text` with `insert` added before the first line equal to `anchor`; an error naming the
/// file when it has no such line.
fn insert_before(text: &str, path: &str, anchor: &str, insert: &str) -> Result<String, ScaffoldError> {
    match text.find(anchor) {
        Some(at) => Ok(format!("{}{insert}{}", &text[..at], &text[at..])),
        None => {
            Err(ScaffoldError::Plan(PlanError::MissingMarker { path: path.into(), marker: anchor.trim().to_owned() }))
        }
    }
}

/// `text` with `insert` added after the first line equal to `anchor`; an error naming the file
/// when the project's file no longer has that line (edited by hand).
fn replace_anchor(text: &str, path: &str, anchor: &str, insert: &str) -> Result<String, ScaffoldError> {
    match text.find(anchor) {
        Some(at) => {
            let end = at + anchor.len();
            Ok(format!("{}{insert}{}", &text[..end], &text[end..]))
        }
        None => {
            Err(ScaffoldError::Plan(PlanError::MissingMarker { path: path.into(), marker: anchor.trim().to_owned() }))
        }
    }
}

/// The license header the project's `src/main.rs` starts with, reused for new files.
fn existing_header(root: &Path) -> String {
    let Ok(main) = std::fs::read_to_string(root.join("src/main.rs")) else { return String::new() };
    let lines: Vec<&str> = main.lines().take_while(|l| l.starts_with("// ")).collect();
    if lines.iter().any(|l| l.contains("SPDX-License-Identifier")) {
        format!("{}\n\n", lines.join("\n"))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_hash_is_fnv1a() {
        // FNV-1a 32 of "" and "a" (published test vectors).
        assert_eq!(fnv32a(""), "811c9dc5");
        assert_eq!(fnv32a("a"), "e40c292c");
    }

    #[test]
    fn every_template_renders() {
        let env = env();
        for (name, _) in TEMPLATES {
            assert!(env.get_template(name).is_ok(), "template {name} does not parse");
        }
    }
}
