//! The built-in images: the small shell images charts, KUDO packages and kuttl suites
//! use for init containers, jobs and test pods (`busybox`, `alpine`, `bash`,
//! `curlimages/curl`, any tag or digest). They run for real without `opkit cluster load`:
//! their programs are the host's — BusyBox's applets (`/usr/bin/busybox`, Debian's
//! `busybox-static`) where the host has it, else the host's own `sh`, coreutils, `wget`,
//! `curl` and `bash` — and a container's `command`/`args` run as the image's entrypoint
//! and default command would run them. An image loaded under a reference wins over the
//! built-in one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

use super::normalize;

/// Where the host's BusyBox may be (all under the system directories every contained
/// root binds, so a link to it resolves inside a container too).
const BUSYBOX_PATHS: [&str; 4] = ["/usr/bin/busybox", "/bin/busybox", "/usr/sbin/busybox", "/sbin/busybox"];
/// The directories a bare command name is looked up in (an image's usual `PATH`).
pub const IMAGE_PATH: [&str; 6] = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// One built-in image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum BuiltinImage {
    /// `docker.io/library/busybox`: BusyBox's applets, default command `sh`.
    Busybox,
    /// `docker.io/library/alpine`: BusyBox's applets, default command `/bin/sh`.
    Alpine,
    /// `docker.io/library/bash`: `bash`, its entrypoint prefixing `bash` to flags.
    Bash,
    /// `docker.io/curlimages/curl`: `curl`, its entrypoint prefixing `curl` to flags and
    /// to anything that is not a command.
    Curl,
}

/// Every built-in image, in the order they are listed.
pub const ALL: [BuiltinImage; 4] =
    [BuiltinImage::Busybox, BuiltinImage::Alpine, BuiltinImage::Bash, BuiltinImage::Curl];

/// The repository (without tag or digest) of a normalized reference.
pub fn repository(normalized: &str) -> &str {
    let name = normalized.split('@').next().unwrap_or(normalized);
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    match name[last_slash..].rfind(':') {
        Some(colon) => &name[..last_slash + colon],
        None => name,
    }
}

impl BuiltinImage {
    /// The built-in image `reference` names (any tag or digest of its repository).
    pub fn of(reference: &str) -> Option<BuiltinImage> {
        let normalized = normalize(reference).ok()?;
        let repo = repository(&normalized);
        ALL.into_iter().find(|b| b.repository() == repo)
    }

    /// Its repository, normalized.
    pub fn repository(self) -> &'static str {
        match self {
            BuiltinImage::Busybox => "docker.io/library/busybox",
            BuiltinImage::Alpine => "docker.io/library/alpine",
            BuiltinImage::Bash => "docker.io/library/bash",
            BuiltinImage::Curl => "docker.io/curlimages/curl",
        }
    }

    /// The image's default command (its `CMD`).
    fn default_command(self) -> &'static str {
        match self {
            BuiltinImage::Busybox => "sh",
            BuiltinImage::Alpine => "/bin/sh",
            BuiltinImage::Bash => "bash",
            BuiltinImage::Curl => "curl",
        }
    }

    /// How the image runs, in words (for `opkit cluster images`).
    pub fn description(self) -> String {
        let tools = match busybox() {
            Some(b) => format!("BusyBox applets ({})", b.path.display()),
            None => "the host's sh, coreutils and wget (no BusyBox on this host)".to_string(),
        };
        match self {
            BuiltinImage::Busybox | BuiltinImage::Alpine => {
                format!("{tools}; default command {}", self.default_command())
            }
            BuiltinImage::Bash => format!("the host's bash; {tools}"),
            BuiltinImage::Curl => format!("entrypoint curl (the host's); {tools}"),
        }
    }

    /// The image's digest as the kubelet reports it (`sha256:` of its repository: the
    /// built-in image has no layers to hash, and it is the same on every tag).
    pub fn digest(self) -> String {
        let hash = ring::digest::digest(&ring::digest::SHA256, self.repository().as_bytes());
        let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        format!("sha256:{hex}")
    }

    /// The command line a container of this image runs, as a container runtime makes it
    /// from the image and the container's `command` and `args` (both expanded): `command
    /// ++ args` when `command` is set, else the image's entrypoint with `args` or its
    /// default command. The `bash` image's entrypoint prefixes `bash` when the first
    /// argument is a flag; `curlimages/curl`'s prefixes `curl` when it is a flag or not a
    /// command.
    pub fn command_line(self, command: Option<Vec<String>>, args: Vec<String>) -> Vec<String> {
        if let Some(mut command) = command.filter(|c| !c.is_empty()) {
            command.extend(args);
            return command;
        }
        if args.is_empty() {
            return vec![self.default_command().to_string()];
        }
        let first = args.first().map(String::as_str).unwrap_or_default();
        let prefixed = match self {
            BuiltinImage::Busybox | BuiltinImage::Alpine => false,
            BuiltinImage::Bash => first.starts_with('-'),
            BuiltinImage::Curl => first.starts_with('-') || !is_command(first),
        };
        if prefixed { std::iter::once(self.default_command().to_string()).chain(args).collect() } else { args }
    }
}

/// Whether `name` is a command of the built-in images (`command -v`): a program's
/// absolute path, an applet, or a program in one of [`IMAGE_PATH`] on the host (whose system directories a
/// contained root binds).
fn is_command(name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    if name.contains('/') {
        // A path is a command when it is a program (the host's system directories are
        // the container's).
        return name.starts_with('/') && Path::new(name).is_file();
    }
    if busybox().is_some_and(|b| b.applets.iter().any(|a| a == name)) {
        return true;
    }
    IMAGE_PATH.iter().any(|dir| Path::new(dir).join(name).is_file())
}

/// The host's BusyBox.
#[derive(Debug, Clone)]
pub struct Busybox {
    /// The binary.
    pub path: PathBuf,
    /// Its applets (`busybox --list`).
    pub applets: Vec<String>,
}

/// The host's BusyBox, found once per process; `None` when the host has none (the
/// built-in images then run the host's own tools).
pub fn busybox() -> Option<&'static Busybox> {
    static FOUND: OnceLock<Option<Busybox>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let path = BUSYBOX_PATHS.iter().map(PathBuf::from).find(|p| p.is_file())?;
            let listed = std::process::Command::new(&path).arg("--list").output().ok()?;
            let applets = String::from_utf8_lossy(&listed.stdout)
                .lines()
                .map(str::trim)
                .filter(|a| !a.is_empty() && !a.contains('/'))
                .map(str::to_string)
                .collect();
            Some(Busybox { path, applets })
        })
        .as_ref()
}

/// Writes the directory of a built-in image's tools: a link to BusyBox under each applet
/// name (and `busybox` itself), so a lookup on `PATH` with `dir` first finds them as in
/// the image. Empty when the host has no BusyBox.
pub fn write_tools(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let Some(busybox) = busybox() else { return Ok(()) };
    for applet in busybox.applets.iter().map(String::as_str).chain(["busybox"]) {
        let link = dir.join(applet);
        match std::fs::symlink_metadata(&link) {
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(&busybox.path, &link)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_tag_or_digest_of_the_repositories_is_built_in() {
        assert_eq!(BuiltinImage::of("busybox"), Some(BuiltinImage::Busybox));
        assert_eq!(BuiltinImage::of("busybox:1.36"), Some(BuiltinImage::Busybox));
        assert_eq!(BuiltinImage::of("docker.io/library/busybox@sha256:abc"), Some(BuiltinImage::Busybox));
        assert_eq!(BuiltinImage::of("busybox:1.36@sha256:abc"), Some(BuiltinImage::Busybox));
        assert_eq!(BuiltinImage::of("alpine:3.19"), Some(BuiltinImage::Alpine));
        assert_eq!(BuiltinImage::of("bash:5"), Some(BuiltinImage::Bash));
        assert_eq!(BuiltinImage::of("curlimages/curl:8.5.0"), Some(BuiltinImage::Curl));
        assert_eq!(BuiltinImage::of("example.com/busybox:1"), None);
        assert_eq!(BuiltinImage::of("busyboxes"), None);
        assert_eq!(BuiltinImage::of("Not A Ref"), None);
        assert_eq!(repository("localhost:5000/op:v1"), "localhost:5000/op");
    }

    #[test]
    fn command_lines_follow_the_images_entrypoints() {
        let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let b = BuiltinImage::Busybox;
        assert_eq!(b.command_line(None, vec![]), ["sh"]);
        assert_eq!(b.command_line(Some(s(&["sh", "-c"])), s(&["echo hi"])), ["sh", "-c", "echo hi"]);
        assert_eq!(b.command_line(None, s(&["sleep", "1"])), ["sleep", "1"]);
        assert_eq!(BuiltinImage::Alpine.command_line(None, vec![]), ["/bin/sh"]);
        assert_eq!(BuiltinImage::Bash.command_line(None, s(&["-c", "echo"])), ["bash", "-c", "echo"]);
        assert_eq!(BuiltinImage::Bash.command_line(None, s(&["echo", "x"])), ["echo", "x"]);
        let curl = BuiltinImage::Curl;
        assert_eq!(curl.command_line(None, s(&["-s", "http://x"])), ["curl", "-s", "http://x"]);
        assert_eq!(curl.command_line(None, s(&["http://x"])), ["curl", "http://x"]);
        assert_eq!(curl.command_line(None, s(&["sh", "-c", "true"])), ["sh", "-c", "true"]);
        assert_eq!(curl.command_line(None, s(&["/bin/sh", "-c", "true"])), ["/bin/sh", "-c", "true"]);
        assert_eq!(curl.command_line(Some(vec![]), vec![]), ["curl"]);
    }
}
