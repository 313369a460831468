//! The `opkit` command-line tool as a library: the operator-sdk workflow for Rust
//! operators (`init`, `create api`, `generate`, `install`, `run`, `deploy`) and the local
//! control plane (`cluster start`). The binary is a thin `main` over [`run`].
//!
//! The pieces are usable on their own: [`project`] (the PROJECT file and name rules),
//! [`scaffold`] (templates), [`rbac`] (RBAC markers to a ClusterRole), [`kustomize`]
//! (rendering config/ like `kustomize build`) and [`cluster_ops`] (apply, delete, wait).
//!
//! # Example
//! Checking names the way `opkit create api` does, and the role `opkit generate` writes
//! for a marker:
//! ```
//! use opkit_cli::{project, rbac};
//!
//! assert!(project::validate_kind("Memcached").is_ok());
//! assert!(project::validate_version("v1alpha1").is_ok());
//! assert!(project::validate_group("Cache", "example.com").is_err());
//! assert_eq!(project::plural("Memcached"), "memcacheds");
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(
//!     dir.path().join("controller.rs"),
//!     "// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch\n",
//! )?;
//! let markers = rbac::scan_markers(dir.path())?;
//! let role = rbac::render_roles(&markers, "manager-role");
//! assert!(role.contains("kind: ClusterRole") && role.contains("- pods"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cli;
pub mod cluster_ops;
pub mod commands;
pub mod duration_flag;
pub mod fileplan;
pub mod kustomize;
pub mod output;
pub mod project;
pub mod rbac;
pub mod scaffold;
pub mod scaffold_ansible;
pub mod scaffold_helm;
mod scaffold_plugin_config;
pub mod vendor;
pub mod webhook_markers;

pub use commands::{CliError, run};
