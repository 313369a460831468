//! Command-line definitions (clap): every subcommand, flag and its help text.

use std::path::PathBuf;

use clap::{ArgAction, Parser, Subcommand, ValueEnum};

use crate::duration_flag::DurationFlag;

/// opkit: build, test and run Kubernetes operators in Rust.
///
/// The workflow of operator-sdk / kubebuilder:
///   opkit init --domain example.com --repo github.com/example/memcached-operator
///   opkit create api --group cache --version v1alpha1 --kind Memcached
///   make manifests install run      (opkit generate, opkit install, opkit run)
///   make deploy IMG=...             (opkit deploy)
///
/// With no cluster at hand, `opkit cluster start` runs a local one.
#[derive(Debug, Parser)]
#[command(name = "opkit", version, verbatim_doc_comment)]
pub struct Cli {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Debug logging for opkit's crates (as operator-sdk's `--verbose`), unless
    /// `OPKIT_LOG` or `RUST_LOG` says otherwise.
    #[arg(long, global = true)]
    pub verbose: bool,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The log level when neither `OPKIT_LOG` nor `RUST_LOG` says: `info` for the operators
    /// opkit runs itself (as operator-sdk's helm and ansible operators log), `warn` for the
    /// other commands; with `--verbose`, `debug` for opkit's own crates on top.
    pub fn default_log_level(&self) -> String {
        let level = match self.command {
            Command::HelmOperator(_) | Command::AnsibleOperator(_) => "info",
            // Each control plane `opkit test` starts (one per run with --perturb) ends
            // with its controllers' watches cut: kube's client warns of each.
            Command::Test(_) => "warn,kube_client::client=error",
            _ => "warn",
        };
        // A directive's target is a prefix: `opkit` covers opkit_cli, opkit_apiserver, ...
        if self.verbose { format!("{level},opkit=debug") } else { level.to_string() }
    }
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// One JSON document, for programs.
    Json,
    /// XUnit XML, as operator-sdk's `scorecard -o xunit` (scorecard only).
    Xunit,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Scaffold a new operator project in the current directory.
    ///
    /// Examples:
    ///   opkit init --domain example.com --repo github.com/example/memcached-operator
    ///   opkit init --domain example.com --repo github.com/me/op --project-name my-op --license none
    #[command(verbatim_doc_comment)]
    Init(InitArgs),
    /// Scaffold an API (type, CRD) or a webhook.
    #[command(subcommand)]
    Create(CreateCommand),
    /// Generate the CRDs (config/crd/bases) from the Rust types and config/rbac/role.yaml
    /// from the RBAC markers: what `make generate manifests` runs.
    ///
    /// Examples:
    ///   opkit generate
    #[command(verbatim_doc_comment)]
    Generate(GenerateArgs),
    /// Change the project's layout in PROJECT, as `kubebuilder edit` does.
    ///
    /// Examples:
    ///   opkit edit --multigroup            (APIs under src/api/GROUP/VERSION/)
    ///   opkit edit --multigroup=false
    #[command(verbatim_doc_comment)]
    Edit(EditArgs),
    /// Install the project's CRDs into the cluster and wait until they are established.
    ///
    /// Examples:
    ///   opkit install
    ///   opkit install --kubeconfig .opkit/cluster/kubeconfig
    #[command(verbatim_doc_comment)]
    Install(ClusterArgs),
    /// Delete the project's CRDs (and so every object of them) and wait until they are gone.
    ///
    /// Examples:
    ///   opkit uninstall
    ///   opkit uninstall --ignore-not-found
    #[command(verbatim_doc_comment)]
    Uninstall(RemoveArgs),
    /// Install the CRDs, then build and run the operator locally against the cluster, as
    /// its ServiceAccount (config/default's RBAC is applied; it impersonates the account),
    /// so a missing RBAC marker shows as `forbidden` here, not after deploy.
    ///
    /// Arguments after `--` go to the operator.
    ///
    /// Examples:
    ///   opkit run
    ///   opkit run --as-admin
    ///   opkit run -- --metrics-bind-address 0 --health-probe-bind-address 0
    #[command(verbatim_doc_comment)]
    Run(RunArgs),
    /// Deploy the operator: apply config/default (namespace, RBAC, CRDs, manager
    /// Deployment) with the image set, and wait until the manager is available.
    ///
    /// Examples:
    ///   opkit deploy --image registry.example.com/memcached-operator:v0.1.0
    #[command(verbatim_doc_comment)]
    Deploy(DeployArgs),
    /// Delete everything `opkit deploy` applied.
    ///
    /// Examples:
    ///   opkit undeploy
    #[command(verbatim_doc_comment)]
    Undeploy(RemoveArgs),
    /// Write config/default rendered with the image set as one YAML file (kubebuilder's
    /// `make build-installer`): users install the operator with `kubectl apply -f` of it.
    ///
    /// Examples:
    ///   opkit build-installer --image registry.example.com/memcached-operator:v0.1.0
    #[command(verbatim_doc_comment)]
    BuildInstaller(BuildInstallerArgs),
    /// Run a local Kubernetes-compatible control plane.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Print the opkit version, the git commit it was built from and, when a cluster is
    /// reachable through the kubeconfig, the Kubernetes version its server reports.
    ///
    /// Examples:
    ///   opkit version
    ///   opkit version --client -o json
    ///   opkit version --kubeconfig .opkit/cluster/kubeconfig
    #[command(verbatim_doc_comment)]
    Version(VersionArgs),
    /// Work with Helm charts without the helm binary.
    #[command(subcommand)]
    Helm(HelmCommand),
    /// Run the Helm-chart operator of a project scaffolded with `--plugins helm`: each
    /// kind in the watches file is reconciled by rendering its chart with the custom
    /// resource's spec as values, as operator-sdk's helm-operator does.
    ///
    /// Examples:
    ///   opkit helm-operator --watches-file watches.yaml
    ///   opkit helm-operator --kubeconfig .opkit/cluster/kubeconfig --metrics-bind-address 0
    #[command(verbatim_doc_comment)]
    HelmOperator(HelmOperatorArgs),
    /// Run kuttl tests (kuttl's format: kuttl-test.yaml, numbered steps, asserts and
    /// errors files), by default against an in-process control plane with the cluster
    /// controllers, as `kubectl kuttl test --start-control-plane` does.
    ///
    /// Examples:
    ///   opkit test                                   (the TestSuite in ./kuttl-test.yaml)
    ///   opkit test ./test/e2e/kuttl --test sample
    ///   opkit test --config test/e2e/kuttl-test.yaml --report junit --artifacts-dir out
    ///   opkit test --kubeconfig ~/.kube/config ./tests
    #[command(verbatim_doc_comment)]
    Test(TestArgs),
    /// Work with OLM bundles (bundle/manifests, bundle/metadata).
    #[command(subcommand)]
    Bundle(BundleCommand),
    /// Run scorecard's basic and OLM tests on a bundle directory, in-process.
    ///
    /// Examples:
    ///   opkit scorecard ./bundle
    ///   opkit scorecard ./bundle --selector suite=olm -o json
    #[command(verbatim_doc_comment)]
    Scorecard(ScorecardArgs),
    /// Run the Ansible operator of a project scaffolded with `--plugins ansible`: each
    /// kind in the watches file is reconciled by running its role or playbook with
    /// ansible-runner, as operator-sdk's ansible-operator does.
    ///
    /// Examples:
    ///   opkit ansible-operator --watches-file watches.yaml
    ///   opkit ansible-operator --kubeconfig .opkit/cluster/kubeconfig --proxy-port 0 --metrics-bind-address 0
    #[command(verbatim_doc_comment)]
    AnsibleOperator(AnsibleOperatorArgs),
    /// KUDO operators (packages of YAML plans) on opkit, as `kubectl kudo` (installed as
    /// `kubectl-kudo`, a link to this binary, it answers `kubectl kudo ...`).
    ///
    /// Examples:
    ///   opkit kudo init --wait
    ///   opkit kudo install ./operator --instance web -p REPLICAS=3 --wait
    ///   opkit kudo plan status --instance web
    #[command(subcommand, verbatim_doc_comment)]
    Kudo(crate::commands::kudo::args::KudoCommand),
    /// The Operator Lifecycle Manager: install it into the cluster, see whether it runs,
    /// remove it.
    #[command(subcommand)]
    Olm(OlmCommand),
    /// File-based catalogs, as `opm`: render one from bundle directories, validate one.
    #[command(subcommand)]
    Catalog(CatalogCommand),
    /// Remove an operator OLM installed (`run bundle`): its Subscription, CSVs, CRDs,
    /// InstallPlans, CatalogSource and, when nothing else uses it, `operator-sdk-og`.
    ///
    /// Examples:
    ///   opkit cleanup memcached-operator
    ///   opkit cleanup memcached-operator --namespace memcached -o json
    #[command(verbatim_doc_comment)]
    Cleanup(CleanupArgs),
    /// Print a shell completion script.
    ///
    /// Examples:
    ///   opkit completion bash > /etc/bash_completion.d/opkit
    ///   opkit completion zsh > ~/.zfunc/_opkit   # a directory on $fpath
    #[command(verbatim_doc_comment)]
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Flags of `opkit init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The domain of the API groups (`cache` becomes `cache.<domain>`).
    #[arg(long)]
    pub domain: String,
    /// [required] The source repository, e.g. github.com/example/memcached-operator (not
    /// used by `--plugins helm` or `ansible`).
    // "[required]" is the help's mark, as operator-sdk's, not a doc link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(
        long,
        required_unless_present = "plugins",
        required_if_eq_any = [("plugins", "go/v4"), ("plugins", "go"), ("plugins", "go.kubebuilder.io/v4"), ("plugins", "rust"), ("plugins", "rust.opkit.dev/v1")]
    )]
    pub repo: Option<String>,
    /// The project (and crate) name (default: the directory's name).
    #[arg(long)]
    pub project_name: Option<String>,
    /// The copyright owner for the license headers.
    #[arg(long)]
    pub owner: Option<String>,
    /// The license of the scaffolded files.
    #[arg(long, value_enum, default_value_t = License::Apache2)]
    pub license: License,
    /// A local checkout of opkit to build against by path, for developing opkit itself
    /// (default: the opkit crates vendored into the project, so it builds anywhere).
    #[arg(long, env = "OPKIT_PATH")]
    pub opkit_path: Option<PathBuf>,
    /// The project's plugin: `helm` scaffolds a Helm-chart operator (no Rust code) run by
    /// `opkit helm-operator`.
    #[arg(long, value_enum)]
    pub plugins: Option<InitPlugin>,
    /// With `--plugins helm`: the chart directory the operator deploys.
    #[arg(long, requires = "plugins")]
    pub helm_chart: Option<PathBuf>,
    /// With `--plugins helm`: the API group (below the domain; default `charts`).
    #[arg(long, requires = "plugins")]
    pub group: Option<String>,
    /// With `--plugins helm`: the API version (default `v1alpha1`).
    #[arg(long, requires = "plugins")]
    pub version: Option<String>,
    /// With `--plugins helm`: the kind (default: the chart's name in UpperCamelCase).
    #[arg(long, requires = "plugins")]
    pub kind: Option<String>,
}

/// Project plugins `opkit init --plugins` knows, by opkit's names or operator-sdk's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitPlugin {
    /// The Rust operator layout (`rust.opkit.dev/v1`), opkit's counterpart of operator-sdk's
    /// `go/v4` (the default).
    #[value(name = "go/v4", aliases = ["go", "go.kubebuilder.io/v4", "rust", "rust.opkit.dev/v1"])]
    Go,
    /// A Helm-chart operator, as operator-sdk's `helm.sdk.operatorframework.io/v1`.
    #[value(aliases = ["helm/v1", "helm.sdk.operatorframework.io/v1"])]
    Helm,
    /// An Ansible operator (roles and playbooks), as operator-sdk's
    /// `ansible.sdk.operatorframework.io/v1`.
    #[value(aliases = ["ansible/v1", "ansible.sdk.operatorframework.io/v1"])]
    Ansible,
}

/// Licenses `opkit init` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum License {
    /// Apache License 2.0 headers.
    Apache2,
    /// No license headers.
    None,
}

/// `opkit create ...`
#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Scaffold a Kubernetes API: the Rust type (CRD), its controller, a sample and a test.
    ///
    /// Examples:
    ///   opkit create api --group cache --version v1alpha1 --kind Memcached
    ///   opkit create api --group ship --version v1 --kind Frigate --namespaced=false
    ///   opkit create api --group cache --version v1 --kind Memcached --controller=false
    ///
    /// A controller for a built-in kind (k8s-openapi's type, no CRD) or another crate's type:
    ///   opkit create api --group apps --version v1 --kind Deployment --resource=false
    ///   opkit create api --group core --version v1 --kind Pod --resource=false
    ///   opkit create api --group cert-manager --version v1 --kind Certificate --resource=false \
    ///     --external-api-path cert_manager::v1 --external-api-domain io
    #[command(verbatim_doc_comment)]
    Api(CreateApiArgs),
    /// Scaffold webhooks for an API created with `create api`: defaulting, validation
    /// and/or conversion (this version the hub, --spoke the others), with their
    /// +kubebuilder:webhook markers (`opkit generate` writes config/webhook/manifests.yaml),
    /// the webhook Service, cert-manager's Certificate and the kustomize patches.
    ///
    /// Examples:
    ///   opkit create webhook --group cache --version v1alpha1 --kind Memcached --defaulting --programmatic-validation
    ///   opkit create webhook --group ship --version v1 --kind Frigate --conversion --spoke v2,v1beta1
    #[command(verbatim_doc_comment)]
    Webhook(CreateWebhookArgs),
}

/// Flags of `opkit create webhook`.
#[derive(Debug, clap::Args)]
pub struct CreateWebhookArgs {
    /// The API group (without the domain), e.g. `cache`.
    #[arg(long)]
    pub group: String,
    /// The API version, e.g. `v1alpha1` (the hub with --conversion).
    #[arg(long)]
    pub version: String,
    /// The kind, in CamelCase, e.g. `Memcached`.
    #[arg(long)]
    pub kind: String,
    /// Scaffold a defaulting (mutating) webhook.
    #[arg(long)]
    pub defaulting: bool,
    /// Scaffold a validating webhook.
    #[arg(long)]
    pub programmatic_validation: bool,
    /// Scaffold a conversion webhook between --version (the hub) and the --spoke versions.
    #[arg(long)]
    pub conversion: bool,
    /// The versions converted to and from the hub (comma-separated), with --conversion.
    #[arg(long, value_delimiter = ',')]
    pub spoke: Vec<String>,
    /// The resource's plural (kubebuilder's `--plural`); it must be the one PROJECT records
    /// for the API.
    #[arg(long)]
    pub plural: Option<String>,
    /// Create the webhooks even if the API has some: their files are written again and
    /// PROJECT records the webhooks asked for now (as kubebuilder's `--force`).
    #[arg(long)]
    pub force: bool,
}

/// Flags of `opkit edit`.
#[derive(Debug, clap::Args)]
pub struct EditArgs {
    /// Lay out new APIs by group: `src/api/<group>/<version>/` and `src/controller/<group>/`, so two
    /// groups can hold kinds of the same name (kubebuilder's multi-group layout).
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub multigroup: Option<bool>,
}

/// Flags of `opkit create api`.
#[derive(Debug, clap::Args)]
pub struct CreateApiArgs {
    /// The API group (without the domain), e.g. `cache`.
    #[arg(long)]
    pub group: String,
    /// The API version, e.g. `v1alpha1`.
    #[arg(long)]
    pub version: String,
    /// The kind, in CamelCase, e.g. `Memcached`.
    #[arg(long)]
    pub kind: String,
    /// The plural resource name (default: the kind in lower case, pluralised).
    #[arg(long)]
    pub plural: Option<String>,
    /// Scaffold the type (CRD).
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub resource: bool,
    /// Scaffold the controller.
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub controller: bool,
    /// Namespaced (true) or cluster-scoped (false) objects.
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub namespaced: bool,
    /// With --resource=false: the Rust path of a type another crate defines (kubebuilder's Go
    /// import path): its module (`cert_manager::v1`) or the type itself
    /// (`cert_manager::v1::Certificate`). Add that crate to Cargo.toml (`cargo add`).
    #[arg(long, requires = "external_api_domain")]
    pub external_api_path: Option<String>,
    /// With --external-api-path: the domain of the type's group (`io` with `--group
    /// cert-manager` makes the group `cert-manager.io`), used in RBAC rules and PROJECT.
    #[arg(long, requires = "external_api_path")]
    pub external_api_domain: Option<String>,
    /// The project's plugin (default: the one PROJECT's `layout` names, as operator-sdk
    /// reads it): `helm` adds a chart and its kind to a Helm operator project, `ansible` a
    /// kind and its role to an Ansible one.
    #[arg(long, value_enum)]
    pub plugins: Option<InitPlugin>,
    /// Create the API even if it exists: its scaffolded files are written again (as
    /// kubebuilder's `--force`), PROJECT keeps one entry.
    #[arg(long)]
    pub force: bool,
    /// Run `make generate` after the files are written, as operator-sdk does by default
    /// (off by default here: `make generate` builds the project).
    #[arg(long, action = ArgAction::Set, default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub make: bool,
    /// In a Helm operator project: the chart directory the new kind deploys.
    #[arg(long)]
    pub helm_chart: Option<PathBuf>,
    /// In an Ansible operator project: scaffold the kind's role under `roles/<kind>`.
    #[arg(long)]
    pub generate_role: bool,
    /// In an Ansible operator project: scaffold a playbook `playbooks/<kind>.yml` (running
    /// the role with `--generate-role`) and point the watch at it.
    #[arg(long)]
    pub generate_playbook: bool,
}

/// Flags of `opkit generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    /// Check that the generated files are up to date instead of writing them (exit 1 if not).
    #[arg(long)]
    pub check: bool,
    /// OLM generators: `kustomize manifests` and `bundle` (without one, the CRDs and RBAC).
    #[command(subcommand)]
    pub command: Option<GenerateCommand>,
}

/// How to reach the cluster.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// The kubeconfig (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    /// How long to wait for objects to become ready or go away (a Go duration such as
    /// `2m0s`, or seconds).
    #[arg(long, default_value_t = DurationFlag::from_secs(120))]
    pub timeout: DurationFlag,
}

/// Flags of `opkit uninstall` and `opkit undeploy`.
#[derive(Debug, clap::Args)]
pub struct RemoveArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Do not fail when the objects do not exist.
    #[arg(long, action = ArgAction::Set, default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub ignore_not_found: bool,
}

/// Flags of `opkit run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Build with --release.
    #[arg(long)]
    pub release: bool,
    /// Run with the kubeconfig's own identity instead of the manager's ServiceAccount
    /// (whose RBAC objects from config/default are applied first).
    #[arg(long)]
    pub as_admin: bool,
    /// Arguments for the operator.
    #[arg(last = true)]
    pub args: Vec<String>,
    /// Run an operator from an OLM bundle instead of the project (`run bundle`,
    /// `run bundle-upgrade`).
    #[command(subcommand)]
    pub bundle: Option<RunCommand>,
}

/// `opkit run bundle|bundle-upgrade`: operator-sdk's commands, from bundle directories.
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Install an operator from a bundle directory through OLM (`opkit olm install` first):
    /// its catalog in a ConfigMap, a CatalogSource, an OperatorGroup and a Subscription;
    /// waits until its ClusterServiceVersion has succeeded.
    ///
    /// Examples:
    ///   opkit run bundle bundle/
    ///   opkit run bundle ../memcached-operator/bundle --namespace memcached --install-mode OwnNamespace
    #[command(verbatim_doc_comment)]
    Bundle(RunBundleArgs),
    /// Upgrade an operator installed with `run bundle` to the version of a bundle
    /// directory (it replaces the installed CSV in the subscription's channel); waits
    /// until the new CSV has succeeded and OLM has removed the old one.
    ///
    /// Examples:
    ///   opkit run bundle-upgrade bundle-0.0.2/
    #[command(verbatim_doc_comment)]
    BundleUpgrade(RunBundleUpgradeArgs),
}

/// Flags of `opkit run bundle`.
#[derive(Debug, clap::Args)]
pub struct RunBundleArgs {
    /// The bundle directory (manifests/ and metadata/).
    pub dir: PathBuf,
    /// The namespace to install the operator in.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The install mode: AllNamespaces, OwnNamespace or SingleNamespace=NS (default:
    /// AllNamespaces when the CSV supports it, else OwnNamespace).
    #[arg(long)]
    pub install_mode: Option<String>,
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Flags of `opkit run bundle-upgrade`.
#[derive(Debug, clap::Args)]
pub struct RunBundleUpgradeArgs {
    /// The bundle directory of the new version.
    pub dir: PathBuf,
    /// The namespace the operator was installed in.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Flags of `opkit cleanup`.
#[derive(Debug, clap::Args)]
pub struct CleanupArgs {
    /// The operator's package.
    pub package: String,
    /// The namespace it was installed in.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Delete everything the other --delete flags name, whatever they say (operator-sdk's
    /// default).
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub delete_all: bool,
    /// Delete the CRDs the operator owns, and so their objects.
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub delete_crds: bool,
    /// Delete the OperatorGroup `run bundle` made, when nothing else uses it.
    #[arg(long, action = ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub delete_operator_groups: bool,
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `opkit olm ...`
#[derive(Debug, Subcommand)]
pub enum OlmCommand {
    /// Install OLM: its CRDs (CatalogSource, Subscription, InstallPlan,
    /// ClusterServiceVersion, OperatorGroup, OperatorCondition), the olm and operators
    /// namespaces, and its controllers, started in a background `opkit olm run`.
    ///
    /// Examples:
    ///   opkit olm install
    ///   opkit olm install --kubeconfig .opkit/cluster/kubeconfig --log-file /tmp/olm.log
    #[command(verbatim_doc_comment)]
    Install(OlmInstallArgs),
    /// Show whether OLM's CRDs are installed and its controllers run (exit 3 if not).
    ///
    /// Examples:
    ///   opkit olm status -o json
    #[command(verbatim_doc_comment)]
    Status(OlmStatusArgs),
    /// Stop OLM's controllers (when they run on this machine) and delete its CRDs, every
    /// OLM object with them, and its namespaces.
    ///
    /// Examples:
    ///   opkit olm uninstall
    #[command(verbatim_doc_comment)]
    Uninstall(OlmUninstallArgs),
    /// Run OLM's controllers in the foreground until Ctrl-C or SIGTERM (what `olm install`
    /// starts in the background).
    ///
    /// Examples:
    ///   opkit olm run --kubeconfig .opkit/cluster/kubeconfig
    #[command(verbatim_doc_comment)]
    Run(OlmRunArgs),
}

/// Flags of `opkit olm install`.
#[derive(Debug, clap::Args)]
pub struct OlmInstallArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the background controllers write their log.
    #[arg(long, default_value = ".opkit/olm/olm.log")]
    pub log_file: PathBuf,
    /// The OLM version to install (operator-sdk's flag). opkit's OLM is built in: one
    /// version, so anything but `latest` is noted and installs that one.
    #[arg(long, default_value = "latest")]
    pub version: String,
}

/// Flags of `opkit olm status`.
#[derive(Debug, clap::Args)]
pub struct OlmStatusArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The OLM version expected (operator-sdk's flag; opkit's OLM is built in, so this is
    /// only noted when it is not `latest`).
    #[arg(long, default_value = "latest")]
    pub version: String,
}

/// Flags of `opkit olm uninstall`.
#[derive(Debug, clap::Args)]
pub struct OlmUninstallArgs {
    /// Cluster access and --ignore-not-found.
    #[command(flatten)]
    pub remove: RemoveArgs,
    /// The OLM version to uninstall (operator-sdk's flag; opkit's OLM is built in, so this
    /// is only noted when it is not `latest`).
    #[arg(long, default_value = "latest")]
    pub version: String,
}

/// Flags of `opkit olm run`.
#[derive(Debug, clap::Args)]
pub struct OlmRunArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// `opkit catalog ...`
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Render the file-based catalog of bundle directories (as `opm render`, plus the
    /// package and channels the bundles' annotations and `replaces`/`skips`/`olm.skipRange`
    /// describe).
    ///
    /// Examples:
    ///   opkit catalog render bundle-0.0.1 bundle-0.0.2 > catalog/index.json
    #[command(verbatim_doc_comment)]
    Render(CatalogRenderArgs),
    /// Validate a file-based catalog directory, as `opm validate`.
    ///
    /// Examples:
    ///   opkit catalog validate catalog/
    #[command(verbatim_doc_comment)]
    Validate(CatalogValidateArgs),
}

/// Flags of `opkit catalog render`.
#[derive(Debug, clap::Args)]
pub struct CatalogRenderArgs {
    /// The bundle directories.
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
}

/// Flags of `opkit catalog validate`.
#[derive(Debug, clap::Args)]
pub struct CatalogValidateArgs {
    /// The catalog directory.
    pub dir: PathBuf,
}

/// Flags of `opkit deploy`.
#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// Cluster access.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The manager image (replaces `controller` in config/manager).
    #[arg(long, env = "IMG", default_value = "controller:latest")]
    pub image: String,
    /// Do not wait for the manager Deployment to become available.
    #[arg(long)]
    pub no_wait: bool,
}

/// Flags of `opkit build-installer`.
#[derive(Debug, clap::Args)]
pub struct BuildInstallerArgs {
    /// The manager image (replaces `controller` in config/manager).
    #[arg(long, env = "IMG", default_value = "controller:latest")]
    pub image: String,
    /// Where to write the manifests, relative to the project (`-o` is the output format).
    #[arg(long, default_value = "dist/install.yaml")]
    pub file: PathBuf,
}

/// `opkit cluster ...`
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start the control plane on 127.0.0.1 and write a kubeconfig (context `opkit`).
    ///
    /// Objects are kept in DATA_DIR/state.db (SQLite), so a restart keeps everything.
    ///
    /// Examples:
    ///   opkit cluster start
    ///   opkit cluster start --detach            (then: opkit cluster status / stop)
    ///   opkit cluster start --detach --data-dir /tmp/c2 --port 0 --context-name c2
    ///   opkit cluster start --port 0 --in-memory --kubeconfig /tmp/kubeconfig
    #[command(verbatim_doc_comment)]
    Start(StartArgs),
    /// Load a local executable as an image's entrypoint, as `kind load docker-image` loads
    /// an image: pods whose containers' images are all loaded run as real processes.
    ///
    /// Without --binary, the current project's binary (`<cargo target dir>/release/<project>`,
    /// built by `make build`; `--profile dev` takes `debug/`) is loaded.
    /// Loaded images are kept in DATA_DIR/images and survive restarts.
    ///
    /// Examples:
    ///   opkit cluster load example.com/memcached-operator:v0.0.1 --binary target/release/memcached-operator
    ///   make cluster-load IMG=example.com/memcached-operator:v0.0.1
    #[command(verbatim_doc_comment)]
    Load(LoadArgs),
    /// List the images loaded into the local cluster.
    Images(ImagesArgs),
    /// Stop the cluster running from a data directory (SIGTERM, then SIGKILL after
    /// --timeout) and wait until it has released the directory.
    ///
    /// Examples:
    ///   opkit cluster stop
    ///   opkit cluster stop --data-dir /tmp/c2 --timeout 10 --ignore-not-running
    #[command(verbatim_doc_comment)]
    Stop(StopArgs),
    /// Show whether a cluster runs from a data directory: its pid, URL, kubeconfig and
    /// uptime. Exits 0 when it runs and 3 when it does not (as `systemctl status`).
    ///
    /// Examples:
    ///   opkit cluster status
    ///   opkit cluster status -o json --data-dir /tmp/c2
    #[command(verbatim_doc_comment)]
    Status(StatusArgs),
    /// Stop the cluster if it runs, then delete its data directory (every object, the
    /// certificates and loaded images) and the kubeconfig it wrote.
    ///
    /// Examples:
    ///   opkit cluster delete
    ///   opkit cluster delete --data-dir /tmp/c2
    #[command(verbatim_doc_comment)]
    Delete(DeleteArgs),
    /// Print the kubeconfig of the cluster of a data directory, e.g. to save it or merge
    /// it with others (`KUBECONFIG=a:b kubectl config view --flatten`).
    ///
    /// Examples:
    ///   opkit cluster kubeconfig > ~/.kube/opkit.yaml
    ///   opkit cluster kubeconfig --context-name dev
    #[command(verbatim_doc_comment)]
    Kubeconfig(KubeconfigArgs),
}

/// Flags of `opkit version`.
#[derive(Debug, clap::Args)]
pub struct VersionArgs {
    /// Only the client's version: do not contact the cluster.
    #[arg(long)]
    pub client: bool,
    /// Cluster access (for the server's version).
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// Flags of `opkit cluster stop`.
#[derive(Debug, clap::Args)]
pub struct StopArgs {
    /// The cluster's data directory (as given to `opkit cluster start`).
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
    /// How long to wait after SIGTERM before the cluster is killed (SIGKILL): a Go
    /// duration such as `1m0s`, or seconds.
    #[arg(long, default_value_t = DurationFlag::from_secs(60))]
    pub timeout: DurationFlag,
    /// Succeed when no cluster runs from the data directory.
    #[arg(long)]
    pub ignore_not_running: bool,
}

/// Flags of `opkit cluster status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The cluster's data directory (as given to `opkit cluster start`).
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
}

/// Flags of `opkit cluster delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// The cluster's data directory (as given to `opkit cluster start`).
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
    /// How long to wait for a running cluster to stop before it is killed: a Go duration
    /// such as `1m0s`, or seconds.
    #[arg(long, default_value_t = DurationFlag::from_secs(60))]
    pub timeout: DurationFlag,
}

/// Flags of `opkit cluster kubeconfig`.
#[derive(Debug, clap::Args)]
pub struct KubeconfigArgs {
    /// The cluster's data directory (as given to `opkit cluster start`).
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
    /// Name the cluster, context and user (`NAME-admin`) NAME instead of the name the
    /// cluster was started with.
    #[arg(long, value_name = "NAME")]
    pub context_name: Option<String>,
}

/// Flags of `opkit cluster load`.
#[derive(Debug, clap::Args)]
pub struct LoadArgs {
    /// The image reference pods name (normalized as Docker does: `busybox` is
    /// `docker.io/library/busybox:latest`).
    pub image: String,
    /// The executable to run as the image's entrypoint (default: the project's binary
    /// built with --profile).
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Without --binary: the cargo profile the project's binary was built with.
    #[arg(long, default_value = "release", conflicts_with = "binary")]
    pub profile: String,
    /// A file or directory the image holds, `SOURCE:TARGET` (an absolute path in the
    /// container, as a Dockerfile's COPY puts it; repeatable), e.g.
    /// `--file watches.yaml:/opt/helm/watches.yaml`.
    #[arg(long = "file", value_name = "SOURCE:TARGET")]
    pub files: Vec<String>,
    /// Which cluster.
    #[command(flatten)]
    pub target: ImageStoreArgs,
}

/// Flags of `opkit cluster images`.
#[derive(Debug, clap::Args)]
pub struct ImagesArgs {
    /// Which cluster.
    #[command(flatten)]
    pub target: ImageStoreArgs,
}

/// The cluster whose image store `opkit cluster load` and `images` use: the opkit cluster
/// the kubeconfig's context names (as `kind load` targets a cluster), unless `--data-dir`
/// names one.
#[derive(Debug, clap::Args)]
pub struct ImageStoreArgs {
    /// The cluster's data directory (as given to `opkit cluster start`; default: that of
    /// the opkit cluster the kubeconfig's current context names, else .opkit/cluster when
    /// there is no kubeconfig).
    #[arg(long, env = "OPKIT_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// The kubeconfig whose context names the cluster (default: $KUBECONFIG, then
    /// ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context naming the cluster (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
}

/// How `opkit cluster start` networks the pods it runs for real.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PodNetworkFlag {
    /// Network namespaces where this machine can make them (it needs root), else the host.
    Auto,
    /// A network namespace, veth pair and IP per pod.
    Namespaces,
    /// The host network: pods share its ports.
    Host,
}

/// How `opkit cluster start` isolates the containers of the pods it runs for real.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PodIsolationFlag {
    /// Contained (own namespaces and root file system) where this machine can (it needs
    /// root), else the host mode, said at start and in `opkit cluster status`.
    Auto,
    /// The host mode: containers run as the cluster's user on the host's file system.
    Host,
}

/// Flags of `opkit cluster start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    /// Directory for the database, certificates and token.
    #[arg(long, env = "OPKIT_DATA_DIR", default_value = ".opkit/cluster")]
    pub data_dir: PathBuf,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Where to write the kubeconfig (default: DATA_DIR/kubeconfig).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Keep objects in memory only.
    #[arg(long)]
    pub in_memory: bool,
    /// Cluster controllers to switch off (comma-separated names, or `*` for all):
    /// namespace, serviceaccount, serviceaccount-token, root-ca-cert-publisher,
    /// garbagecollector, deployment, replicaset, statefulset, daemonset, job, cronjob,
    /// endpoints, service-lb, apiservice, persistentvolume, disruption, resourcequota,
    /// flowcontrol, clusterrole-aggregation, csrsigning, nodes, scheduler, kubelet.
    #[arg(long, value_delimiter = ',')]
    pub disable_controllers: Vec<String>,
    /// How many simulated nodes to run.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Addresses for Services of type LoadBalancer, as FIRST-LAST
    /// (172.18.255.200-172.18.255.250) or a CIDR; without it they get the nodes' addresses.
    #[arg(long, value_name = "RANGE")]
    pub lb_range: Option<opkit_controllers::LoadBalancerPool>,
    /// Append kube's audit events (level Metadata, one JSON object per line) to FILE:
    /// every request with its user, verb, object, authorization decision and status
    /// code, e.g. to find the call an operator was forbidden to make.
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// An EncryptionConfiguration (apiserver.config.k8s.io/v1), as kube-apiserver's flag:
    /// the resources it names (e.g. secrets) are stored encrypted with its first provider
    /// (aescbc, aesgcm, secretbox or identity) and read with any of them.
    #[arg(long, value_name = "FILE")]
    pub encryption_provider_config: Option<PathBuf>,
    /// How pods that run for real (their image loaded with `opkit cluster load`) are
    /// networked.
    #[arg(long, value_enum, default_value_t = PodNetworkFlag::Auto)]
    pub pod_network: PodNetworkFlag,
    /// How the containers of pods that run for real are isolated from the host
    /// (docs/security.md).
    #[arg(long, value_enum, default_value_t = PodIsolationFlag::Auto)]
    pub pod_isolation: PodIsolationFlag,
    /// Serve cert-manager's Issuers and Certificates with opkit's stand-in, so the
    /// webhook layout operator-sdk scaffolds (`config/certmanager`, CA injection) deploys
    /// unchanged; `--cert-manager=false` leaves `cert-manager.io` free for a real one.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub cert_manager: bool,
    /// The name of the kubeconfig's context, cluster and user (`NAME-admin`), so the
    /// kubeconfigs of several clusters merge without collisions.
    #[arg(long, value_name = "NAME", default_value = "opkit")]
    pub context_name: String,
    /// Run in the background: return once the cluster is ready, with its output in
    /// DATA_DIR/cluster.log; `opkit cluster stop` stops it.
    #[arg(long)]
    pub detach: bool,
    /// With --detach: how long to wait for the cluster to become ready (a Go duration such
    /// as `2m0s`, or seconds).
    #[arg(long, value_name = "DURATION", default_value_t = DurationFlag::from_secs(120))]
    pub ready_timeout: DurationFlag,
    /// The log file of a cluster started with --detach (set by opkit for the background
    /// process, which records it for `opkit cluster status`).
    #[arg(long, hide = true)]
    pub log_file: Option<PathBuf>,
}

/// `opkit helm ...`
#[derive(Debug, Subcommand)]
pub enum HelmCommand {
    /// Render a chart's templates locally and print them exactly as `helm template` does
    /// (values from values.yaml, -f files and --set, subcharts, hooks, `# Source:` headers).
    ///
    /// Examples:
    ///   opkit helm template rel ./charts/nginx --namespace web
    ///   opkit helm template rel ./mychart -f prod.yaml --set replicaCount=3 --kube-version 1.33.0
    #[command(verbatim_doc_comment)]
    Template(HelmTemplateArgs),
}

/// Flags of `opkit helm template`.
#[derive(Debug, clap::Args)]
pub struct HelmTemplateArgs {
    /// The release name.
    pub name: String,
    /// The chart: a directory or a .tgz archive.
    pub chart: PathBuf,
    /// A values file (repeatable; later files win).
    #[arg(short = 'f', long = "values")]
    pub values: Vec<PathBuf>,
    /// A value on the command line, `key=value[,key=value]` (repeatable; wins over files).
    #[arg(long)]
    pub set: Vec<String>,
    /// Like --set, but every value is a string.
    #[arg(long)]
    pub set_string: Vec<String>,
    /// The release namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The Kubernetes version `.Capabilities.KubeVersion` reports.
    #[arg(long)]
    pub kube_version: Option<String>,
    /// An API version `.Capabilities.APIVersions` has, besides the built-in ones
    /// (repeatable, or comma-separated).
    #[arg(short = 'a', long = "api-versions", value_delimiter = ',')]
    pub api_versions: Vec<String>,
    /// Print the chart's crds/ too.
    #[arg(long)]
    pub include_crds: bool,
    /// Leave out test hooks.
    #[arg(long)]
    pub skip_tests: bool,
}

/// Flags of `opkit helm-operator`.
#[derive(Debug, clap::Args)]
pub struct HelmOperatorArgs {
    /// The watches file: which kinds are reconciled with which charts.
    #[arg(long, default_value = "watches.yaml")]
    pub watches_file: PathBuf,
    /// The manager's flags (controller-runtime's names).
    #[command(flatten)]
    pub manager: opkit::ManagerArgs,
}

/// Flags of `opkit test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test directories (each subdirectory a test case); they replace the suite's testDirs.
    pub dirs: Vec<PathBuf>,
    /// The TestSuite file (default: ./kuttl-test.yaml when it exists).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run against this cluster instead of starting an in-process control plane.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Only the test cases whose name matches this regular expression.
    #[arg(long)]
    pub test: Option<String>,
    /// How many test cases run at once (default: the suite's, else 8).
    #[arg(long)]
    pub parallel: Option<usize>,
    /// The default step timeout: a Go duration such as `30s`, or seconds (default: the
    /// suite's, else 30s).
    #[arg(long)]
    pub timeout: Option<DurationFlag>,
    /// Write a report: `junit` (or `xml`) or `json`.
    #[arg(long, value_parser = ["junit", "xml", "json"])]
    pub report: Option<String>,
    /// The report's file name without extension (default: kuttl-report).
    #[arg(long)]
    pub report_name: Option<String>,
    /// Where the report is written (default: the suite's artifactsDir, else here).
    #[arg(long)]
    pub artifacts_dir: Option<PathBuf>,
    /// Run every test in this namespace (created when missing) instead of one each.
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Keep what the tests created, and their namespaces.
    #[arg(long)]
    pub skip_delete: bool,
    /// Directory of CRDs to install before the tests (replaces the suite's crdDir).
    #[arg(long)]
    pub crd_dir: Option<PathBuf>,
    /// Directories of manifests to apply before the tests (replace the suite's).
    #[arg(long)]
    pub manifest_dir: Vec<PathBuf>,
    /// A variable for `.gotmpl.yaml` test files (`.Vars.NAME`), its value read as YAML.
    #[arg(long, value_name = "NAME=VALUE")]
    pub template_var: Vec<String>,
    /// Reliability testing (docs/perturb.md): run the suite once without faults to learn
    /// what the operator does, then once per test plan with one fault in the operator's
    /// requests (a crash after a write, an API error, a timeout after commit), and report
    /// where the end state, the creates and deletes, or convergence differ. Exits 1 on a
    /// finding, 2 when there is no operator or the plan file is bad.
    #[arg(long)]
    pub perturb: bool,
    /// The operator under test, for --perturb: a shell command, run with KUBECONFIG
    /// naming a kubeconfig of its own identity. It replaces the suite's background
    /// commands (default: the suite's background command is the operator).
    #[arg(long, value_name = "CMD", requires = "perturb")]
    pub operator: Option<String>,
    /// The plan classes --perturb makes (default all).
    #[arg(long, value_delimiter = ',', requires = "perturb",
          value_parser = ["intermediate-state", "stale-state", "api-error", "timeout-after-commit"])]
    pub classes: Vec<String>,
    /// Run one plan file (--perturb writes one per finding) instead of the whole set.
    #[arg(long, value_name = "PLAN", requires = "perturb")]
    pub replay: Option<PathBuf>,
}

/// `opkit generate` subcommands for OLM.
#[derive(Debug, Subcommand)]
pub enum GenerateCommand {
    /// Kustomize bases for OLM.
    #[command(subcommand)]
    Kustomize(GenerateKustomizeCommand),
    /// Write an OLM bundle (bundle/manifests, bundle/metadata, bundle.Dockerfile) from
    /// `config/manifests` (kustomize-built, with config/default, samples and scorecard), as
    /// `operator-sdk generate bundle` does.
    ///
    /// Examples:
    ///   opkit generate bundle --version 0.0.1
    ///   opkit generate bundle --version 0.0.2 --channels stable,fast --default-channel stable
    ///   opkit generate bundle --version 0.0.1 --image registry.example.com/memcached-operator:v0.0.1
    #[command(verbatim_doc_comment)]
    Bundle(GenerateBundleArgs),
}

/// `opkit generate kustomize` subcommands.
#[derive(Debug, Subcommand)]
pub enum GenerateKustomizeCommand {
    /// Write `config/manifests/bases/<project>.clusterserviceversion.yaml`: the CSV base with
    /// the descriptions from the `+operator-sdk:csv:customresourcedefinitions` markers on the
    /// Rust types, and the UI metadata from flags (or prompts with --interactive).
    ///
    /// Examples:
    ///   opkit generate kustomize manifests
    ///   opkit generate kustomize manifests --display-name "Memcached Operator" --provider-name Example \
    ///       --maintainers "Dev=dev@example.com" --keywords memcached,cache --install-modes OwnNamespace,AllNamespaces
    #[command(verbatim_doc_comment)]
    Manifests(GenerateKustomizeManifestsArgs),
}

/// Flags of `opkit generate kustomize manifests`.
#[derive(Debug, clap::Args)]
pub struct GenerateKustomizeManifestsArgs {
    /// The package (operator) name (default: the project name).
    #[arg(long)]
    pub package: Option<String>,
    /// Where the API types are (default: src).
    #[arg(long, default_value = "src")]
    pub apis_dir: PathBuf,
    /// The directory of the bases (default: config/manifests).
    #[arg(long, default_value = "config/manifests")]
    pub output_dir: PathBuf,
    /// Ask for the UI metadata on the terminal (default: only when no base exists yet and
    /// stdin is a terminal).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub interactive: Option<bool>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// spec.displayName.
    #[arg(long)]
    pub display_name: Option<String>,
    /// spec.description.
    #[arg(long)]
    pub description: Option<String>,
    /// Comma-separated spec.keywords.
    #[arg(long, value_delimiter = ',')]
    pub keywords: Vec<String>,
    /// Maintainers as NAME=EMAIL (repeat or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub maintainers: Vec<String>,
    /// spec.provider.name.
    #[arg(long)]
    pub provider_name: Option<String>,
    /// spec.provider.url.
    #[arg(long)]
    pub provider_url: Option<String>,
    /// Links as NAME=URL (repeat or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub links: Vec<String>,
    /// An icon file (svg, png, jpeg or gif), base64-encoded into spec.icon.
    #[arg(long)]
    pub icon: Option<PathBuf>,
    /// The capability level (Basic Install, Seamless Upgrades, Full Lifecycle, Deep
    /// Insights, Auto Pilot).
    #[arg(long)]
    pub capabilities: Option<String>,
    /// spec.maturity (alpha, beta, stable, ...).
    #[arg(long)]
    pub maturity: Option<String>,
    /// Comma-separated supported install modes (OwnNamespace, SingleNamespace,
    /// MultiNamespace, AllNamespaces); the others are declared unsupported.
    #[arg(long, value_delimiter = ',')]
    pub install_modes: Vec<String>,
    /// spec.minKubeVersion.
    #[arg(long)]
    pub min_kube_version: Option<String>,
}

/// Flags of `opkit generate bundle`.
#[derive(Debug, clap::Args)]
pub struct GenerateBundleArgs {
    /// The bundle's semantic version (the CSV is named `<package>.v<version>`).
    #[arg(long, short = 'v')]
    pub version: Option<String>,
    /// Comma-separated channels (default: alpha).
    #[arg(long)]
    pub channels: Option<String>,
    /// The package's default channel.
    #[arg(long)]
    pub default_channel: Option<String>,
    /// The package (default: the project name).
    #[arg(long)]
    pub package: Option<String>,
    /// Write only the manifests (with --metadata: both, the default).
    #[arg(long)]
    pub manifests: bool,
    /// Write only the metadata and bundle.Dockerfile (with --manifests: both, the default).
    #[arg(long)]
    pub metadata: bool,
    /// Overwrite existing metadata (operator-sdk's default).
    #[arg(long, num_args = 0..=1, default_value_t = true, default_missing_value = "true")]
    pub overwrite: bool,
    /// The kustomization to build (default: config/manifests).
    #[arg(long, default_value = "config/manifests")]
    pub kustomize_dir: PathBuf,
    /// Read the manifests from this directory of YAML files instead of building the kustomization.
    #[arg(long)]
    pub input_dir: Option<PathBuf>,
    /// The bundle directory (default: bundle).
    #[arg(long, default_value = "bundle")]
    pub output_dir: PathBuf,
    /// Set the manager's image (`controller`) first, as `kustomize edit set image
    /// controller=IMG` does in operator-sdk's Makefile.
    #[arg(long)]
    pub image: Option<String>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `opkit bundle` subcommands.
#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Validate a bundle directory as `operator-sdk bundle validate` does: the required
    /// validators, and the optional ones --select-optional picks. Exits 1 on an error.
    ///
    /// Examples:
    ///   opkit bundle validate ./bundle
    ///   opkit bundle validate ./bundle --select-optional suite=operatorframework
    ///   opkit bundle validate ./bundle --select-optional name=good-practices -o json
    ///   opkit bundle validate ./bundle --list-optional
    #[command(verbatim_doc_comment)]
    Validate(BundleValidateArgs),
}

/// Flags of `opkit bundle validate`.
#[derive(Debug, clap::Args)]
pub struct BundleValidateArgs {
    /// The bundle directory.
    #[arg(required_unless_present = "list_optional")]
    pub dir: Option<PathBuf>,
    /// A label selector over the optional validators (suite=operatorframework, name=...).
    #[arg(long)]
    pub select_optional: Option<String>,
    /// Values for the optional validators, as KEY=VALUE (k8s-version=1.22).
    #[arg(long, value_delimiter = ',')]
    pub optional_values: Vec<String>,
    /// List the optional validators and run none.
    #[arg(long)]
    pub list_optional: bool,
}

/// Flags of `opkit scorecard`.
#[derive(Debug, clap::Args)]
pub struct ScorecardArgs {
    /// The bundle directory.
    pub dir: PathBuf,
    /// The scorecard configuration (default: the bundle's tests/scorecard/config.yaml,
    /// else the six built-in tests).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// A label selector over the tests (suite=basic, suite=olm, test=olm-spec-descriptors-test).
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// List the selected tests and run none.
    #[arg(long, short = 'L')]
    pub list: bool,
    /// The kubeconfig of the cluster custom tests run in as pods (default: $KUBECONFIG,
    /// then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace the test pods run in (default: the context's, else `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The ServiceAccount the test pods run as (default: the configuration's, else
    /// `default`).
    #[arg(long, short = 's')]
    pub service_account: Option<String>,
    /// How long each test pod may take: a Go duration such as `30s`, or seconds.
    #[arg(long, short = 'w', default_value_t = DurationFlag::from_secs(30))]
    pub wait_time: DurationFlag,
    /// Leave the test pods and the bundle's ConfigMap in the cluster.
    #[arg(long, short = 'x')]
    pub skip_cleanup: bool,
    /// The image of the init container that unpacks the bundle for the test pods.
    #[arg(long, default_value = "docker.io/busybox:1.36")]
    pub untar_image: String,
}

/// Flags of `opkit ansible-operator` (ansible-operator's names).
#[derive(Debug, clap::Args)]
pub struct AnsibleOperatorArgs {
    /// The watches file: which kinds are reconciled with which roles or playbooks.
    #[arg(long, default_value = "watches.yaml")]
    pub watches_file: PathBuf,
    /// How many resources of each kind are reconciled at once (a kind's
    /// `MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>` wins).
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, usize::from))]
    pub max_concurrent_reconciles: usize,
    /// Ansible's verbosity, 0 to 7 (`-v` count).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub ansible_verbosity: u8,
    /// Extra arguments for ansible-playbook, e.g. "--tags setup".
    #[arg(long)]
    pub ansible_args: Option<String>,
    /// How often a resource is reconciled without events, when its watch sets no
    /// reconcilePeriod (a Go duration).
    #[arg(long, default_value = "10h")]
    pub reconcile_period: String,
    /// The port of the API proxy the runs' Kubernetes modules talk to (0: any free port).
    #[arg(long, default_value_t = 8888)]
    pub proxy_port: u16,
    /// Whether the API proxy adds owner references (or owner annotations) to what runs
    /// create and watches those kinds.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true, num_args = 0..=1, default_missing_value = "true")]
    pub inject_owner_ref: bool,
    /// Roles paths searched before ANSIBLE_ROLES_PATH (colon-separated); the watches
    /// file's `roles/` is always searched.
    #[arg(long)]
    pub ansible_roles_path: Option<String>,
    /// Collections paths searched after opkit's operator_sdk.util and before
    /// ANSIBLE_COLLECTIONS_PATH (colon-separated).
    #[arg(long)]
    pub ansible_collections_path: Option<String>,
    /// What is logged of each run's events as they come: Tasks (task starts, debug
    /// output, failures), Everything, or Nothing.
    #[arg(long, default_value = "Tasks")]
    pub ansible_log_events: String,
    /// The manager's flags (controller-runtime's names).
    #[command(flatten)]
    pub manager: opkit::ManagerArgs,
}
