//! OLM bundles, as operator-sdk makes and checks them.
//!
//! - [`csv`]: the ClusterServiceVersion as typed serde structs;
//! - [`bundle`]: [`Bundle::load`], the one reader of a bundle directory (`manifests/`,
//!   `metadata/annotations.yaml`), and the manifests' file layout;
//! - [`crd`]: a bundle's CRDs (v1 and v1beta1) and their conversion to v1;
//! - [`annotations`]: `metadata/annotations.yaml` and `dependencies.yaml`;
//! - [`generate`]: the CSV base from markers on Rust types, and a bundle from the objects
//!   of `config/manifests` (`opkit generate kustomize manifests`, `opkit generate bundle`);
//! - [`validate`]: operator-framework's bundle validators (`opkit bundle validate`);
//! - [`scorecard`]: scorecard's basic and OLM tests (`opkit scorecard`).
//!
//! ```no_run
//! use opkit_olm_bundle::Bundle;
//!
//! let bundle = Bundle::load("bundle")?;
//! println!("{} owns {} CRDs", bundle.csv.name(), bundle.csv.spec.customresourcedefinitions.owned.len());
//! for crd in &bundle.crds {
//!     let _v1 = crd.to_v1(); // ready to apply
//! }
//! let report = opkit_olm_bundle::validate::validate(&bundle, &Default::default());
//! print!("{}", report.to_text(&bundle.dir));
//! # Ok::<(), opkit_olm_bundle::BundleError>(())
//! ```

pub mod annotations;
pub mod bundle;
pub mod crd;
pub mod csv;
pub mod error;
pub mod generate;
pub mod scorecard;
pub mod validate;
pub mod yaml;

pub use bundle::{Bundle, BundleObject};
pub use crd::BundleCrd;
pub use csv::ClusterServiceVersion;
pub use error::BundleError;
