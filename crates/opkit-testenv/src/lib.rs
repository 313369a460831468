//! An in-process Kubernetes-compatible control plane for operator tests, like
//! controller-runtime's envtest but with nothing to download: it starts the opkit API
//! server on a random loopback port with in-memory storage, in milliseconds.
//!
//! Each [`TestEnv`] is isolated (its own server, storage, certificates and kubeconfig),
//! so tests run in parallel. Dropping it stops everything. [`wait_for`] waits for an
//! object to reach a state; on timeout it says what it waited for and what it last saw.
//!
//! # Example
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//! use opkit_testenv::TestEnv;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let rt = tokio::runtime::Runtime::new()?;
//! # rt.block_on(async {
//! let env = TestEnv::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! assert!(cms.get("settings").await?.metadata.uid.is_some());
//! // kubectl and other processes can use env.kubeconfig_path().
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::AuthInfo;
use kube::config::KubeConfigOptions;
use kube::core::GroupVersionKind;
use kube::discovery::Discovery;
use kube::runtime::wait::conditions;
use kube::{Client, Config};
use opkit_apiserver::{ApiServer, RunningServer, ServerConfig};
use opkit_controllers::ControllersConfig;
use secrecy::SecretString;
use tokio_util::sync::{CancellationToken, DropGuard};

pub mod perturb;
mod tools;
mod wait;
pub use opkit_apiserver::perturbation::{
    Fault, FaultAction, InjectedFault, RequestFilter, RequestTrace, TracedRequest,
};
pub use opkit_apiserver::{HeldWatchEvents, WatchEventFilter};
pub use tools::{ToolMissing, helm_binary};
pub use wait::{WaitError, wait_for, wait_for_with};

/// Errors from the test environment.
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    /// The server did not start.
    #[error("starting the API server: {0}")]
    Server(#[from] opkit_apiserver::ServerError),
    /// A client call failed.
    #[error("kubernetes client: {0}")]
    Kube(#[from] kube::Error),
    /// The kubeconfig could not be used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// I/O on the temporary directory failed.
    #[error("temporary directory: {0}")]
    Io(#[from] std::io::Error),
    /// YAML given to [`TestEnv::apply_yaml`] is invalid.
    #[error("invalid YAML: {0}")]
    Yaml(String),
    /// A document names a kind the server does not serve.
    #[error("the server does not serve {0}")]
    UnknownKind(String),
    /// Waiting for an object's state failed or took too long (see [`wait_for`]).
    #[error("{0}")]
    Wait(#[from] WaitError),
    /// An image could not be loaded (see [`TestEnv::load_image`]).
    #[error("{0}")]
    Image(#[from] opkit_kubelet::images::ImageError),
    /// [`TestEnv::load_image`] on an environment built without
    /// [`TestEnvBuilder::real_pods`].
    #[error("this environment runs no real pods (build it with TestEnvBuilder::real_pods)")]
    NoImageStore,
}

/// How long helpers wait for the server to reach a state.
pub const WAIT: Duration = Duration::from_secs(30);

/// Configures a [`TestEnv`] before starting it.
#[derive(Debug, Clone, Default)]
pub struct TestEnvBuilder {
    server: ServerConfig,
    controllers: Option<ControllersConfig>,
    real_pods: bool,
}

impl TestEnvBuilder {
    /// Uses this server configuration (storage, port, token).
    pub fn server(mut self, cfg: ServerConfig) -> Self {
        self.server = cfg;
        self
    }
    /// Runs the cluster controllers with this configuration.
    pub fn controllers(mut self, cfg: ControllersConfig) -> Self {
        self.controllers = Some(cfg);
        self
    }
    /// Runs no cluster controllers: a bare API server, like envtest.
    pub fn without_controllers(self) -> Self {
        self.controllers(ControllersConfig::none())
    }
    /// Switches off one controller by name (see `opkit_controllers::ALL`).
    pub fn disable_controller(mut self, name: &str) -> Self {
        self.controllers = Some(self.controllers.unwrap_or_default().disable(name));
        self
    }
    /// Runs pods whose images are loaded (see [`TestEnv::load_image`]) as real
    /// processes, with the image store and the pods' directories (see
    /// [`TestEnv::pod_root`]) in the environment's temporary directory.
    pub fn real_pods(mut self) -> Self {
        self.real_pods = true;
        self
    }
    /// Runs the cert-manager stand-in (`opkit_controllers::certmanager`): its kinds are
    /// served when [`Self::start`] returns, and Certificates are issued and CA bundles
    /// injected as cert-manager does.
    pub fn cert_manager(mut self) -> Self {
        let mut controllers = self.controllers.unwrap_or_default();
        controllers.cert_manager = true;
        self.controllers = Some(controllers);
        self
    }
    /// Starts the environment.
    pub async fn start(self) -> Result<TestEnv, TestEnvError> {
        let server = ApiServer::start(self.server).await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig_path = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig_path, "opkit")?;
        let admin = config_for(&server).await?;
        let client = Client::try_from(admin.clone())?;
        let mut controllers = self
            .controllers
            .unwrap_or_default()
            .root_ca(server.ca_pem())
            .cluster_signing(server.ca_pem(), server.ca_key_pem())
            .with_identities(admin);
        if self.real_pods {
            controllers.images = Some(dir.path().join("images"));
            controllers.pod_root = Some(dir.path().join("pods"));
        }
        if controllers.cert_manager {
            opkit_controllers::certmanager::install(client.clone()).await?;
        }
        let images = controllers.images.clone();
        let pod_root = controllers.pod_root.clone();
        let token = CancellationToken::new();
        opkit_controllers::spawn(client.clone(), &controllers, token.clone());
        Ok(TestEnv { server, client, kubeconfig_path, images, pod_root, _controllers: token.drop_guard(), _dir: dir })
    }
}

/// A running in-process control plane. Dropping it stops the controllers and the server.
pub struct TestEnv {
    server: RunningServer,
    client: Client,
    kubeconfig_path: PathBuf,
    images: Option<PathBuf>,
    pod_root: Option<PathBuf>,
    _controllers: DropGuard,
    _dir: tempfile::TempDir,
}

impl TestEnv {
    /// Starts a control plane with in-memory storage on a random loopback port, with the
    /// cluster controllers (garbage collection, namespaces, workloads, simulated nodes),
    /// each acting as its own identity under RBAC, as kube-controller-manager's do.
    pub async fn start() -> Result<TestEnv, TestEnvError> {
        Self::builder().start().await
    }

    /// Configures an environment: server settings, which controllers run.
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }

    /// Starts a control plane with a custom server configuration.
    pub async fn start_with(cfg: ServerConfig) -> Result<TestEnv, TestEnvError> {
        Self::builder().server(cfg).start().await
    }

    /// Loads the executable `binary` as image `reference` into the environment's image
    /// store: pods whose every image is loaded run as real processes.
    pub fn load_image(
        &self,
        reference: &str,
        binary: &Path,
    ) -> Result<opkit_kubelet::images::LoadedImage, TestEnvError> {
        self.load_image_with_files(reference, binary, &[])
    }

    /// As [`TestEnv::load_image`], with `files` in the image at their targets (as
    /// `opkit cluster load --file` puts them; a contained container sees them).
    pub fn load_image_with_files(
        &self,
        reference: &str,
        binary: &Path,
        files: &[opkit_kubelet::images::ImageFile],
    ) -> Result<opkit_kubelet::images::LoadedImage, TestEnvError> {
        let dir = self.images.as_ref().ok_or(TestEnvError::NoImageStore)?;
        Ok(opkit_kubelet::images::ImageStore::new(dir).load_with_files(reference, binary, files)?)
    }

    /// Where real pods get their directories (`<ns>_<name>_<uid>/`), when the
    /// environment runs real pods.
    pub fn pod_root(&self) -> Option<&Path> {
        self.pod_root.as_deref()
    }

    /// A client authenticated as the cluster admin.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// A client authenticated as the cluster admin that does not retry 429, 503 and 504
    /// answers (kube's client retries them by default), for tests that expect the
    /// server's first answer, such as an eviction a disruption budget refuses.
    pub async fn client_without_retry(&self) -> Result<Client, TestEnvError> {
        let mut config = config_for(&self.server).await?;
        config.default_retry = false;
        Ok(Client::try_from(config)?)
    }

    /// A token for ServiceAccount `name` in `namespace` from the TokenRequest API (valid
    /// for an hour), creating the namespace and the ServiceAccount when missing.
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> Result<String, TestEnvError> {
        let admin = self.client();
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        let ns = Namespace {
            metadata: ObjectMeta { name: Some(namespace.into()), ..Default::default() },
            ..Default::default()
        };
        ignore_exists(namespaces.create(&PostParams::default(), &ns).await)?;
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, namespace);
        let sa = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            ..Default::default()
        };
        ignore_exists(accounts.create(&PostParams::default(), &sa).await)?;
        let request = TokenRequest { spec: TokenRequestSpec::default(), ..Default::default() };
        let answer: TokenRequest = accounts.create_subresource("token", name, &PostParams::default(), &request).await?;
        Ok(answer.status.map(|s| s.token).unwrap_or_default())
    }

    /// A client that acts as ServiceAccount `name` in `namespace` (created when missing),
    /// authenticated with a token from the TokenRequest API: RBAC applies to it as it
    /// does to an operator deployed in a cluster.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> Result<Client, TestEnvError> {
        Ok(Client::try_from(self.service_account_config(namespace, name).await?)?)
    }

    /// The client configuration of [`TestEnv::service_account_client`], for a client
    /// made elsewhere (on another runtime, say).
    pub async fn service_account_config(&self, namespace: &str, name: &str) -> Result<Config, TestEnvError> {
        let token = self.service_account_token(namespace, name).await?;
        let mut config = config_for(&self.server).await?;
        config.auth_info = AuthInfo { token: Some(SecretString::from(token)), ..Default::default() };
        Ok(config)
    }

    /// As [`TestEnv::service_account_config`], for a ServiceAccount that a
    /// ClusterRoleBinding `<namespace>-<name>-cluster-admin` makes a cluster admin. It is
    /// not in `system:masters`, so RBAC still decides for it, as for an operator that was
    /// granted everything.
    pub async fn cluster_admin_service_account_config(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Config, TestEnvError> {
        let config = self.service_account_config(namespace, name).await?;
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta { name: Some(format!("{namespace}-{name}-cluster-admin")), ..Default::default() },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: "cluster-admin".into(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.into(),
                namespace: Some(namespace.into()),
                ..Default::default()
            }]),
        };
        let bindings: Api<ClusterRoleBinding> = Api::all(self.client());
        ignore_exists(bindings.create(&PostParams::default(), &binding).await)?;
        Ok(config)
    }

    /// Applies a project's RBAC directory (`config/rbac`: every manifest its
    /// `kustomization.yaml` lists) into `namespace`, as `make deploy` does, and returns a
    /// client acting as the ServiceAccount it defines. An operator run with this client
    /// gets `forbidden` wherever its generated role lacks a permission, as in a cluster.
    pub async fn client_with_rbac(&self, rbac_dir: &Path, namespace: &str) -> Result<Client, TestEnvError> {
        let kustomization = std::fs::read_to_string(rbac_dir.join("kustomization.yaml"))?;
        let listed: serde_json::Value =
            serde_saphyr::from_str(&kustomization).map_err(|e| TestEnvError::Yaml(e.to_string()))?;
        let mut documents = Vec::new();
        let mut account = None;
        for file in listed["resources"].as_array().into_iter().flatten().filter_map(|f| f.as_str()) {
            let text = std::fs::read_to_string(rbac_dir.join(file))?;
            let docs: Vec<serde_json::Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| TestEnvError::Yaml(format!("{file}: {e}")))?;
            for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
                if matches!(doc["kind"].as_str(), Some("ServiceAccount" | "Role" | "RoleBinding")) {
                    doc["metadata"]["namespace"] = namespace.into();
                }
                if doc["kind"] == "ServiceAccount" {
                    account = doc["metadata"]["name"].as_str().map(String::from);
                }
                for subject in doc["subjects"].as_array_mut().into_iter().flatten() {
                    if subject["kind"] == "ServiceAccount" {
                        subject["namespace"] = namespace.into();
                    }
                }
                documents.push(doc.to_string());
            }
        }
        let account =
            account.ok_or_else(|| TestEnvError::Yaml(format!("{} defines no ServiceAccount", rbac_dir.display())))?;
        self.service_account_token(namespace, &account).await?;
        self.apply_yaml(&documents.join("\n---\n")).await?;
        self.service_account_client(namespace, &account).await
    }

    /// The path of a kubeconfig for subprocess clients such as kubectl.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The server, e.g. for its URL or in-process registry.
    pub fn server(&self) -> &RunningServer {
        &self.server
    }

    /// Holds back the watch events `filter` matches, on every watch of this server, until
    /// the returned handle is released or dropped: a lagging watch cache, to test that a
    /// controller does not act on a cache older than its own writes.
    ///
    /// ```no_run
    /// # async fn f(env: &opkit_testenv::TestEnv) {
    /// use opkit_testenv::WatchEventFilter;
    /// let held = env.hold_watch_events(WatchEventFilter::new("", "configmaps").named("child"));
    /// // ... the controller writes `child`, its cache does not see it yet ...
    /// held.release();
    /// # }
    /// ```
    pub fn hold_watch_events(&self, filter: WatchEventFilter) -> HeldWatchEvents {
        self.server.watch_delays().hold(filter)
    }

    /// Arms `fault` on this server until the returned handle is dropped: the `nth`
    /// request of one identity that its filter matches is answered with an error, or
    /// runs and then fails or never answers (see [`FaultAction`]). Other identities see
    /// a normal server.
    ///
    /// ```no_run
    /// # async fn f(env: &opkit_testenv::TestEnv) {
    /// use opkit_testenv::{Fault, FaultAction, RequestFilter};
    /// let user = "system:serviceaccount:operators:memcached";
    /// let fault = env.inject_fault(Fault {
    ///     filter: RequestFilter::user(user).writes(),
    ///     nth: 2,
    ///     action: FaultAction::FailAfterCommit,
    /// });
    /// // ... the operator's second write applies, and it is answered 504 ...
    /// fault.wait_fired().await;
    /// # }
    /// ```
    pub fn inject_fault(&self, fault: Fault) -> InjectedFault {
        self.server.perturbations().inject(fault)
    }

    /// Records every request of `user` until the returned handle is dropped: verb,
    /// object, the code answered, and whether a write changed anything.
    pub fn trace_requests(&self, user: &str) -> RequestTrace {
        self.server.perturbations().trace(user)
    }

    /// Creates or updates CRDs and returns once each is Established and served.
    pub async fn install_crds(
        &self,
        crds: impl IntoIterator<Item = CustomResourceDefinition>,
    ) -> Result<(), TestEnvError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client());
        let pp = PatchParams::apply("opkit-testenv").force();
        for crd in crds {
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(&name, &pp, &Patch::Apply(&crd)).await?;
            wait_for(&api, &name, "to be established", conditions::is_crd_established(), WAIT).await?;
        }
        Ok(())
    }

    /// Applies every document of a (multi-document) YAML string with server-side apply,
    /// defaulting namespaced objects to `default`. Returns the applied objects.
    pub async fn apply_yaml(&self, yaml: &str) -> Result<Vec<DynamicObject>, TestEnvError> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(yaml).map_err(|e| TestEnvError::Yaml(e.to_string()))?;
        let mut out = Vec::new();
        let mut discovery = Discovery::new(self.client()).run().await?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let obj: DynamicObject = serde_json::from_value(doc).map_err(|e| TestEnvError::Yaml(e.to_string()))?;
            let types =
                obj.types.clone().ok_or_else(|| TestEnvError::Yaml("a document has no apiVersion/kind".into()))?;
            let gvk = GroupVersionKind::try_from(&types).map_err(|e| TestEnvError::Yaml(e.to_string()))?;
            let found = match discovery.resolve_gvk(&gvk) {
                Some(f) => Some(f),
                None => {
                    discovery = Discovery::new(self.client()).run().await?;
                    discovery.resolve_gvk(&gvk)
                }
            };
            let (ar, caps) =
                found.ok_or_else(|| TestEnvError::UnknownKind(format!("{}/{}", types.api_version, types.kind)))?;
            let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
                let ns = obj.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                Api::namespaced_with(self.client(), &ns, &ar)
            } else {
                Api::all_with(self.client(), &ar)
            };
            let name = obj
                .metadata
                .name
                .clone()
                .ok_or_else(|| TestEnvError::Yaml("a document has no metadata.name".into()))?;
            let applied = api.patch(&name, &PatchParams::apply("opkit-testenv").force(), &Patch::Apply(&obj)).await?;
            out.push(applied);
        }
        Ok(out)
    }
}

/// Ok for a create that found the object already there.
fn ignore_exists<T>(result: Result<T, kube::Error>) -> Result<(), TestEnvError> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn config_for(server: &RunningServer) -> Result<Config, TestEnvError> {
    Config::from_custom_kubeconfig(server.kubeconfig("opkit"), &KubeConfigOptions::default())
        .await
        .map_err(|e| TestEnvError::Kubeconfig(e.to_string()))
}
