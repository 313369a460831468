//! Starting and stopping the server: storage selection, TLS, serving HTTP/1.1 and HTTP/2
//! through opkit-serve's accept loop, and the kubeconfig clients use.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::config::Kubeconfig;
use opkit_serve::files::{FileAccess, write_atomic};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::admission::AdmissionChain;
use crate::audit::AuditLog;
use crate::auth::tokens::{TokenKeyError, TokenSigner};
use crate::auth::{Authenticator, random_token};
use crate::bootstrap;
use crate::catalog::Catalog;
use crate::certs::{CertError, TlsMaterial};
use crate::data_dir::{DataDir, DataDirError, owner_only};
use crate::handlers::{self, AppState, RequestHooks};
use crate::kinds;
use crate::kubeconfig::{self, KubeconfigError};
use crate::kubelet_client::KubeletClient;
use crate::limits::ServingLimits;
use crate::perturbation::Perturbations;
use crate::registry::Registry;
use crate::storage::{
    Backend, EncryptingBackend, EncryptionConfig, EncryptionConfigError, SqliteBackend, StorageError, Store,
    StoreOptions,
};
use crate::webhook_client::WebhookClients;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Certificates could not be made or loaded.
    #[error(transparent)]
    Certs(#[from] CertError),
    /// Storage could not be opened.
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// Binding or file I/O failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Bootstrapping the initial objects failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// The kubeconfig could not be serialized or written.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// The data directory is held by another server, or lost its database.
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    /// The ServiceAccount token signing key could not be made or loaded.
    #[error(transparent)]
    TokenKey(#[from] TokenKeyError),
    /// The encryption provider config could not be read or is invalid.
    #[error(transparent)]
    Encryption(#[from] EncryptionConfigError),
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let context = context.into();
    move |source| ServerError::Io { context, source }
}

/// Where objects are kept.
#[derive(Debug, Clone)]
pub enum StorageConfig {
    /// In memory only: for tests.
    InMemory,
    /// SQLite (WAL, synchronous=FULL) at this path.
    Sqlite(PathBuf),
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Storage backend.
    pub storage: StorageConfig,
    /// Directory for certificates and the token (None: generate in memory).
    pub data_dir: Option<PathBuf>,
    /// The admin bearer token (None: read from the data dir or generate).
    pub token: Option<String>,
    /// Watch log capacity.
    pub store: StoreOptions,
    /// Append kube's audit events (level Metadata, JSON lines) to this file.
    pub audit_log: Option<PathBuf>,
    /// Max-in-flight requests, the request-body timeout and the connection cap.
    pub limits: ServingLimits,
    /// An `EncryptionConfiguration` file (kube's `--encryption-provider-config`): the
    /// resources it names are encrypted at rest in durable storage.
    pub encryption_provider_config: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            storage: StorageConfig::InMemory,
            data_dir: None,
            token: None,
            store: StoreOptions::default(),
            audit_log: None,
            limits: ServingLimits::default(),
            encryption_provider_config: None,
        }
    }
}

impl ServerConfig {
    /// In-memory storage on a random loopback port.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Durable storage, certificates and token under `dir`.
    pub fn durable(dir: &Path) -> Self {
        ServerConfig {
            storage: StorageConfig::Sqlite(dir.join("state.db")),
            data_dir: Some(dir.to_path_buf()),
            ..Self::default()
        }
    }
}

/// A running API server. Dropping it stops the server.
pub struct RunningServer {
    addr: SocketAddr,
    tls: TlsMaterial,
    token: String,
    registry: Registry,
    perturbations: Arc<Perturbations>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
    startup: std::time::Duration,
    /// The held data directory (its lock is released when the server is dropped).
    _data_dir: Option<DataDir>,
}

/// The API server.
pub struct ApiServer;

impl ApiServer {
    /// Starts a server as configured and returns once it accepts connections.
    pub async fn start(cfg: ServerConfig) -> Result<RunningServer, ServerError> {
        let started = Instant::now();
        let database = match &cfg.storage {
            StorageConfig::Sqlite(p) => Some(p.as_path()),
            StorageConfig::InMemory => None,
        };
        let encryption = cfg.encryption_provider_config.as_deref().map(EncryptionConfig::load).transpose()?;
        let mut data_dir = cfg.data_dir.as_deref().map(|d| DataDir::open(d, database)).transpose()?;
        // The database first: a directory with a token is one that held a cluster.
        let store = open_store(&cfg, encryption)?;
        let tls = match &cfg.data_dir {
            Some(d) => TlsMaterial::load_or_generate(d)?,
            None => TlsMaterial::generate()?,
        };
        let token = bearer_token(&cfg)?;
        // The registry is configured with the built-in kinds' strategies, as kube's
        // generic store is configured per resource.
        let webhook_clients = Arc::new(WebhookClients::default());
        let admission = Arc::new(AdmissionChain::new(webhook_clients.clone()));
        let registry = Registry::new(store, Arc::new(Catalog::new()), kinds::STRATEGIES, admission, webhook_clients);
        bootstrap::restore_crds(&registry).await.map_err(|e| ServerError::Bootstrap(e.message))?;
        bootstrap::create_initial_objects(&registry).await.map_err(|e| ServerError::Bootstrap(e.message))?;
        let listener = TcpListener::bind(cfg.bind).await.map_err(io(format!("binding {}", cfg.bind)))?;
        let addr = listener.local_addr().map_err(io("reading the bound address"))?;
        if let Some(dir) = data_dir.as_mut() {
            dir.record_url(&format!("https://{addr}"))?;
        }

        let signer = match &cfg.data_dir {
            Some(d) => TokenSigner::load_or_generate(d)?,
            None => TokenSigner::generate()?,
        };
        let audit = match &cfg.audit_log {
            Some(path) => Some(AuditLog::open(path).map_err(io(format!("opening the audit log {}", path.display())))?),
            None => None,
        };
        let kubelet = KubeletClient::new(&tls.ca_pem, &tls.kubelet_client).map_err(CertError::from)?;
        let shutdown = CancellationToken::new();
        let perturbations = Arc::new(Perturbations::default());
        let state = AppState::new(
            registry.clone(),
            Authenticator::new(&token, signer),
            addr.to_string(),
            RequestHooks { audit, perturbations: perturbations.clone() },
            &cfg.limits,
            kubelet,
            shutdown.clone(),
        );
        let service = hyper::service::service_fn(move |req| {
            let state = state.clone();
            async move { Ok::<_, std::convert::Infallible>(handlers::handle(state, req).await) }
        });
        // Watches never end by themselves: shutdown closes every connection at once.
        let mut server =
            opkit_serve::Server::new(listener).tls(tls.server_config()?).shutdown_grace(Some(Duration::ZERO));
        if let Some(cap) = cfg.limits.connection_cap() {
            server = server.max_connections(cap);
        }
        crate::kubernetes_service::spawn(registry.clone(), addr, shutdown.clone())
            .await
            .map_err(|e| ServerError::Bootstrap(e.message))?;
        // Not fatal: on a restart another Service may hold the address of a deleted one.
        if let Err(e) = crate::kube_dns_service::create(&registry).await {
            tracing::warn!(error = %e.message, "creating the kube-dns Service");
        }
        let task = tokio::spawn(server.serve(service, shutdown.clone()));
        Ok(RunningServer {
            addr,
            tls,
            token,
            registry,
            perturbations,
            shutdown,
            task: Some(task),
            startup: started.elapsed(),
            _data_dir: data_dir,
        })
    }
}

/// The store `cfg` asks for: in memory, or a SQLite database (encrypted at rest when
/// `encryption` is given) whose files only the owner may read.
fn open_store(cfg: &ServerConfig, encryption: Option<EncryptionConfig>) -> Result<Store, ServerError> {
    let p = match &cfg.storage {
        StorageConfig::InMemory => return Ok(Store::in_memory(cfg.store.clone())),
        StorageConfig::Sqlite(p) => p,
    };
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    let sqlite = SqliteBackend::open(p)?.with_history(cfg.store.persisted_history);
    let backend: Box<dyn Backend> = match encryption {
        Some(config) => Box::new(EncryptingBackend::new(Box::new(sqlite), config)),
        None => Box::new(sqlite),
    };
    let store = Store::open(backend, cfg.store.clone())?;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = p.as_os_str().to_owned();
        file.push(suffix);
        owner_only(Path::new(&file), 0o600)?;
    }
    Ok(store)
}

/// The admin bearer token: the configured one, else the data directory's (written
/// there on first start), else a random one.
fn bearer_token(cfg: &ServerConfig) -> Result<String, ServerError> {
    let token = match (&cfg.token, &cfg.data_dir) {
        (Some(t), _) => t.clone(),
        (None, Some(d)) => {
            let p = d.join("token");
            match std::fs::read_to_string(&p) {
                Ok(t) if !t.trim().is_empty() => t.trim().to_string(),
                _ => {
                    let t = random_token();
                    write_atomic(&p, t.as_bytes(), FileAccess::Private).map_err(|e| ServerError::Io {
                        context: format!("writing {}", e.path.display()),
                        source: e.source,
                    })?;
                    t
                }
            }
        }
        (None, None) => random_token(),
    };
    Ok(token)
}

impl RunningServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
    /// The admin bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }
    /// The CA certificate (PEM) clients should trust.
    pub fn ca_pem(&self) -> &str {
        &self.tls.ca_pem
    }
    /// The CA's private key (PEM), for the controllers that sign with the cluster CA.
    pub fn ca_key_pem(&self) -> &str {
        &self.tls.ca_key_pem
    }
    /// The registry, for in-process access.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
    /// Holds back watch events, for tests: a lagging watch cache on purpose (see
    /// [`WatchDelays`](crate::WatchDelays)).
    pub fn watch_delays(&self) -> &std::sync::Arc<crate::WatchDelays> {
        self.registry.watch_delays()
    }
    /// The faults and request traces tests put on one identity's requests (see
    /// [`crate::perturbation`]).
    pub fn perturbations(&self) -> &Arc<Perturbations> {
        &self.perturbations
    }
    /// How long `start` took.
    pub fn startup_time(&self) -> std::time::Duration {
        self.startup
    }

    /// A kubeconfig for this server as its admin: cluster and context named `context`,
    /// user `<context>-admin` authenticated by the client certificate `kubernetes-admin`
    /// in `system:masters` (as kind writes it), namespace `default`.
    pub fn kubeconfig(&self, context: &str) -> Kubeconfig {
        let url = self.url();
        let endpoint = kubeconfig::Endpoint {
            server: &url,
            ca_pem: &self.tls.ca_pem,
            client_cert_pem: &self.tls.admin.cert_pem,
            client_key_pem: &self.tls.admin.key_pem,
        };
        kubeconfig::build(endpoint, context)
    }

    /// [`Self::kubeconfig`] as the YAML kubectl reads.
    pub fn kubeconfig_yaml(&self, context: &str) -> Result<String, ServerError> {
        Ok(kubeconfig::to_yaml(&self.kubeconfig(context))?)
    }

    /// Writes [`Self::kubeconfig`] as YAML to `path` (mode 0600).
    pub fn write_kubeconfig(&self, path: &Path, context: &str) -> Result<(), ServerError> {
        Ok(kubeconfig::write(&self.kubeconfig(context), path)?)
    }

    /// Stops accepting requests, closes every connection and waits for the server task.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}
