//! Running the real helm client against the control plane: each call with the cluster's
//! kubeconfig, helm's own state in a private directory, and a deadline.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A helm binary bound to one cluster.
pub(super) struct Helm {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
    deadline: Duration,
}

impl Helm {
    /// Helm at `binary` for the cluster of `kubeconfig`, keeping its cache and config in
    /// `home`; every call is killed after `deadline`.
    pub(super) fn new(binary: &Path, kubeconfig: &Path, home: &Path, deadline: Duration) -> Helm {
        Helm { binary: binary.into(), kubeconfig: kubeconfig.into(), home: home.into(), deadline }
    }

    /// Runs `helm ARGS`; stdout on success, else the reason (stderr, trimmed).
    pub(super) async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(self.deadline, cmd.output()).await {
            Err(_) => return Err(format!("helm {} did not finish within {:?}", args.join(" "), self.deadline)),
            Ok(Err(e)) => return Err(format!("cannot run {}: {e}", self.binary.display())),
            Ok(Ok(out)) => out,
        };
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(trimmed(&String::from_utf8_lossy(&out.stderr)))
        }
    }
}

/// The last lines of helm's error output, at most 600 characters: enough to name the
/// object or request that failed.
fn trimmed(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(4)..].join(" | ");
    let chars: Vec<char> = tail.chars().collect();
    if chars.len() > 600 { chars[chars.len() - 600..].iter().collect() } else { tail }
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_keep_their_last_lines() {
        let text = "a\n\nb\nc\nd\nError: INSTALLATION FAILED: boom\n";
        assert_eq!(super::trimmed(text), "b | c | d | Error: INSTALLATION FAILED: boom");
        assert_eq!(super::trimmed(&"x".repeat(700)).len(), 600);
    }
}
