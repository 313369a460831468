//! The `opkit` command-line tool as a library: the operator-sdk workflow for Rust
//! operators (`init`, `create api`, `generate`, `install`, `run`, `deploy`) and the local
//! control plane (`cluster start`). The binary is a thin `main` over [`run`].
//!
//! The public surface:
//!
//! - [`Cli`] (the parsed command line, with the [`cli`] module's argument types) and
//!   [`run`], which runs it; [`CliError`] is why it failed;
//! - [`OutputFormat`], [`json_requested`] and [`print_error`]: how the binary reports;
//! - [`kubectl_kudo_args`]: the arguments of `kubectl kudo ARGS` as `opkit kudo ARGS`;
//! - [`project`]: the PROJECT file and the name rules of `create api`;
//! - [`rbac`]: RBAC markers to a ClusterRole, as `opkit generate` writes it;
//! - [`kustomize`]: rendering `config/` as `kustomize build` does;
//! - [`cluster_ops`]: applying, deleting and waiting for objects, as `install` and
//!   `deploy` do.
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
mod commands;
mod duration_flag;
mod fileplan;
pub mod kustomize;
mod output;
pub mod project;
pub mod rbac;
mod scaffold;
mod scaffold_ansible;
mod scaffold_helm;
mod scaffold_plugin_config;
mod vendor;
mod webhook_markers;

pub use cli::{Cli, OutputFormat};
pub use commands::kudo::plugin_args as kubectl_kudo_args;
pub use commands::{CliError, run};
pub use output::{json_requested, print_error};
