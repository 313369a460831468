//! A local stand-in for cert-manager, so that the layout operator-sdk and kubebuilder
//! scaffold for webhooks (`config/certmanager/`: a self-signed Issuer, a Certificate for
//! the webhook Service, and `cert-manager.io/inject-ca-from` annotations on the webhook
//! configurations and CRDs) works unchanged on the local cluster, as it works on a
//! cluster where cert-manager is installed:
//!
//! - `crds`: the `cert-manager.io/v1` kinds Issuer, ClusterIssuer and Certificate,
//!   installed when the stand-in is switched on ([`ControllersConfig::cert_manager`]);
//! - `issuers`: issuer readiness (`selfSigned` and `ca` issuers);
//! - `certificates`: a Certificate's key and certificate, written to its Secret with
//!   cert-manager's keys and annotations, reissued when the request changes or the
//!   Secret goes;
//! - `cainjector`: cert-manager's CA injector, filling `caBundle` of webhook
//!   configurations, CRD conversion webhooks and APIServices from a Certificate's Secret.
//!
//! Only what the scaffolds use is implemented: ACME, Vault and other issuers, key
//! rotation policies and renewal before expiry are not.

mod cainjector;
mod certificates;
mod crds;
mod issuers;

use opkit::Manager;

use crate::ControllersConfig;

pub use crds::install;

/// cert-manager's API group.
pub const GROUP: &str = "cert-manager.io";

/// The annotation naming the Certificate (`namespace/name`) whose CA is injected.
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";
/// The annotation naming the Secret (`namespace/name`) whose CA is injected.
pub const INJECT_CA_FROM_SECRET: &str = "cert-manager.io/inject-ca-from-secret";
/// The annotation cert-manager puts on a Certificate's Secret, naming the Certificate.
pub const CERTIFICATE_NAME: &str = "cert-manager.io/certificate-name";

/// The namespace a ClusterIssuer's `ca.secretName` is read from (cert-manager's
/// `--cluster-resource-namespace` default).
pub const CLUSTER_RESOURCE_NAMESPACE: &str = "cert-manager";

/// Registers the issuer, certificate and CA injector controllers when the stand-in is
/// switched on. Its kinds must be installed ([`install`]) before the manager runs.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) -> Result<(), opkit::BuildError> {
    if !cfg.cert_manager {
        return Ok(());
    }
    let client = crate::identity::client_for(mgr, cfg, "cert-manager");
    issuers::register(mgr, client.clone())?;
    certificates::register(mgr, client.clone())?;
    cainjector::register(mgr, client)
}
