//! OLM bundles, as operator-sdk makes and checks them.
//!
//! The public surface:
//! - [`Bundle`]: a bundle directory read by [`Bundle::load`], the one reader of
//!   `manifests/` and `metadata/annotations.yaml`; [`BundleObject`] one of its manifests
//!   and [`BundleCrd`] one of its CRDs (v1 or v1beta1, [`BundleCrd::to_v1`]).
//! - [`BundleError`]: why a bundle cannot be read.
//! - [`csv`]: the ClusterServiceVersion ([`ClusterServiceVersion`]) as typed serde structs.
//! - [`annotations`]: `metadata/annotations.yaml` and `dependencies.yaml`.
//! - [`generate`]: the CSV base from markers on Rust types, and a bundle from the objects
//!   of `config/manifests` (`opkit generate kustomize manifests`, `opkit generate bundle`).
//! - [`validate`]: operator-framework's bundle validators (`opkit bundle validate`).
//! - [`scorecard`]: scorecard's basic and OLM tests (`opkit scorecard`).
//! - [`yaml`]: YAML documents read and written as operator-sdk does.
//!
//! # Example
//! Read a bundle, convert its CRDs to v1 and validate it:
//! ```
//! use opkit_olm_bundle::Bundle;
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/memcached-0.0.1");
//! let bundle = Bundle::load(dir)?;
//! assert_eq!(bundle.csv.name(), "memcached-operator.v0.0.1");
//! println!("{} owns {} CRDs", bundle.csv.name(), bundle.csv.spec.customresourcedefinitions.owned.len());
//! for crd in &bundle.crds {
//!     let _v1 = crd.to_v1(); // ready to apply
//! }
//! let report = opkit_olm_bundle::validate::validate(&bundle, &Default::default());
//! print!("{}", report.to_text(&bundle.dir));
//! # Ok::<(), opkit_olm_bundle::BundleError>(())
//! ```

pub mod annotations;
pub(crate) mod bundle;
pub(crate) mod crd;
pub mod csv;
pub(crate) mod error;
pub mod generate;
pub mod scorecard;
pub mod validate;
pub mod yaml;

pub use bundle::{Bundle, BundleObject};
pub use crd::BundleCrd;
pub use csv::ClusterServiceVersion;
pub use error::BundleError;
