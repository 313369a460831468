//! How a real container's image runs ([`ImageRun`]): a loaded image's binary is its
//! entrypoint, the container's `command[1..]` and `args` its arguments; a built-in image
//! (see [`crate::images::builtin`]) runs the command line the container and the image
//! make, looked up on the image's `PATH`, whose first directory holds the image's tools
//! (bound at [`TOOLS_MOUNT`] in a contained root).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;

use super::container::ENTRYPOINT;
use super::env;
use crate::images::builtin::{self, BuiltinImage};

/// Where a built-in image's tools directory is bound inside a contained root.
pub(crate) const TOOLS_MOUNT: &str = "/opkit/bin";

/// How the image of a real container runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImageRun {
    /// Loaded with `opkit cluster load`: this executable is the entrypoint, and the
    /// image's files (its root's tree), when it carries any.
    Loaded {
        /// The entrypoint.
        binary: PathBuf,
        /// The image's files.
        files: Option<crate::images::ImageTree>,
    },
    /// A built-in image.
    Builtin(BuiltinImage),
}

/// The container's `command` and `args`, `$(VAR)` expanded from `env`.
fn expanded(c: &Container, env: &[(String, String)]) -> (Option<Vec<String>>, Vec<String>) {
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let expand = |list: &Vec<String>| list.iter().map(|a| env::expand(a, &lookup)).collect::<Vec<_>>();
    (c.command.as_ref().map(expand), c.args.as_ref().map(expand).unwrap_or_default())
}

/// The argv of `c` whose image's entrypoint is a loaded binary: `command[1..] ++ args`
/// when `command` is set, else `args`, with `$(VAR)` expanded from `env`.
pub(crate) fn argv(c: &Container, env: &[(String, String)]) -> Vec<String> {
    let (command, args) = expanded(c, env);
    command.into_iter().flatten().skip(1).chain(args).collect()
}

/// The directory of a pod's built-in image tools, under the pod's directory `pod_dir`.
pub(crate) fn tools_dir(pod_dir: &Path) -> PathBuf {
    pod_dir.join("image-tools")
}

impl ImageRun {
    /// The program and arguments of an instance of `c` (`contained`: the program is a
    /// path inside the container's root, or a name looked up on its `PATH`).
    pub(crate) fn command_line(
        &self,
        c: &Container,
        env: &[(String, String)],
        contained: bool,
    ) -> (PathBuf, Vec<String>) {
        match self {
            ImageRun::Loaded { binary, .. } => {
                let program = if contained { PathBuf::from(ENTRYPOINT) } else { binary.clone() };
                (program, argv(c, env))
            }
            ImageRun::Builtin(image) => {
                let (command, args) = expanded(c, env);
                let mut line = image.command_line(command, args).into_iter();
                (PathBuf::from(line.next().unwrap_or_default()), line.collect())
            }
        }
    }

    /// A loaded image's files, each bound at its target in a contained root (parents
    /// before what lies below them), so the rest of the root, volumes and the
    /// ServiceAccount's mount included, is untouched.
    pub(crate) fn file_mounts(&self) -> Vec<super::volumes::BindMount> {
        let ImageRun::Loaded { files: Some(tree), .. } = self else { return Vec::new() };
        let mut mounts: Vec<_> = tree
            .targets
            .iter()
            .map(|target| super::volumes::BindMount {
                source: tree.root.join(target.strip_prefix("/").unwrap_or(target)),
                target: target.clone(),
                read_only: true,
            })
            .collect();
        mounts.sort_by(|a, b| a.target.cmp(&b.target));
        mounts
    }

    /// Whether the image carries files (which only a contained container sees).
    pub(crate) fn has_files(&self) -> bool {
        matches!(self, ImageRun::Loaded { files: Some(_), .. })
    }

    /// The `PATH` a container of this image gets when its environment sets none: the
    /// image's usual one, after the tools directory of a built-in image (`tools`, as the
    /// container sees it).
    pub(crate) fn default_path(&self, tools: &Path) -> String {
        let usual = builtin::IMAGE_PATH.join(":");
        match self {
            ImageRun::Loaded { .. } => usual,
            ImageRun::Builtin(_) => format!("{}:{usual}", tools.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(value: serde_json::Value) -> Container {
        serde_json::from_value(value).unwrap_or_default()
    }

    #[test]
    fn argv_is_command_tail_and_args_expanded() {
        let c = container(serde_json::json!({
            "name": "c", "command": ["entry", "-v"], "args": ["$(A)", "$$(A)", "$(B)"]
        }));
        let env = vec![("A".to_string(), "x".to_string())];
        assert_eq!(argv(&c, &env), ["-v", "x", "$(A)", "$(B)"]);
    }

    #[test]
    fn a_builtin_image_runs_the_whole_command_line() {
        let env = vec![("A".to_string(), "x".to_string())];
        let c = container(serde_json::json!({"name": "c", "command": ["sh", "-c"], "args": ["echo $(A)"]}));
        let run = ImageRun::Builtin(BuiltinImage::Busybox);
        assert_eq!(run.command_line(&c, &env, true), (PathBuf::from("sh"), vec!["-c".into(), "echo x".into()]));
        let bare = container(serde_json::json!({"name": "c"}));
        assert_eq!(run.command_line(&bare, &env, false), (PathBuf::from("sh"), vec![]));
        let loaded = ImageRun::Loaded { binary: PathBuf::from("/store/blob"), files: None };
        assert_eq!(
            loaded.command_line(&c, &env, true),
            (PathBuf::from(ENTRYPOINT), vec!["-c".into(), "echo x".into()])
        );
        assert_eq!(loaded.command_line(&c, &env, false).0, PathBuf::from("/store/blob"));
        assert!(run.default_path(Path::new(TOOLS_MOUNT)).starts_with("/opkit/bin:/usr/local/sbin:"));
    }
}
