//! Running a suite's, a step's, an assert's or a collector's commands as kuttl does:
//! `command` split as a shell would with `$VARS` expanded (`$$` is a `$`), `script` run
//! with `sh -c`, `--namespace` appended to `namespaced` commands that name none, and
//! `$NAMESPACE`, `$KUBECONFIG` and `$PATH` (with `<work dir>/bin` first) in the
//! environment. Output is logged line by line; a timeout kills the command; background
//! commands run until the run ends.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Child;

use crate::api::Command;
use crate::log::CaseLog;

/// Where and with what a command runs.
#[derive(Debug, Clone)]
pub(crate) struct CommandEnv {
    /// `$NAMESPACE` (the test's, or `default` for suite commands).
    pub namespace: String,
    /// `$KUBECONFIG`.
    pub kubeconfig: PathBuf,
    /// The run's working directory: `<work dir>/bin` is put first on `$PATH`.
    pub work_dir: PathBuf,
    /// The command's working directory (the test case's directory).
    pub cwd: PathBuf,
}

impl CommandEnv {
    /// The variables kuttl sets.
    fn vars(&self) -> HashMap<String, String> {
        let path = std::env::var("PATH").unwrap_or_default();
        let bin = self.work_dir.join("bin");
        HashMap::from([
            ("NAMESPACE".to_string(), self.namespace.clone()),
            ("KUBECONFIG".to_string(), self.kubeconfig.display().to_string()),
            ("PATH".to_string(), format!("{}/:{path}", bin.display())),
        ])
    }
}

/// Go's `os.Expand` over the process environment and `vars` (`$$` gives `$`).
pub(crate) fn expand(text: &str, vars: &HashMap<String, String>) -> String {
    let lookup = |name: &str| -> String {
        if name == "$" {
            return "$".into();
        }
        vars.get(name).cloned().or_else(|| std::env::var(name).ok()).unwrap_or_default()
    };
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '$' || i + 1 >= chars.len() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let next = chars[i + 1];
        if next == '{' {
            match chars[i + 2..].iter().position(|c| *c == '}') {
                Some(0) | None => i += 2, // bad syntax: eaten, as Go does
                Some(end) => {
                    let name: String = chars[i + 2..i + 2 + end].iter().collect();
                    out.push_str(&lookup(&name));
                    i += 3 + end;
                }
            }
        } else if "*#$@!?-".contains(next) || next.is_ascii_digit() {
            out.push_str(&lookup(&next.to_string()));
            i += 2;
        } else {
            let len = chars[i + 1..].iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '_').count();
            if len == 0 {
                out.push('$');
                i += 1;
            } else {
                let name: String = chars[i + 1..i + 1 + len].iter().collect();
                out.push_str(&lookup(&name));
                i += 1 + len;
            }
        }
    }
    out
}

/// The program and arguments a command runs (kuttl's `GetArgs`).
pub(crate) fn command_line(cmd: &Command, env: &CommandEnv) -> Result<Vec<String>, String> {
    match (cmd.command.is_empty(), cmd.script.is_empty()) {
        (false, false) => return Err("command and script can not be set in the same configuration".into()),
        (true, true) => return Err("command or script must be set".into()),
        (true, false) if cmd.namespaced => {
            return Err("script can not used 'namespaced', use the $NAMESPACE environment variable instead".into());
        }
        (true, false) => return Ok(vec!["sh".into(), "-c".into(), cmd.script.clone()]),
        (false, true) => {}
    }
    let expanded = expand(&cmd.command, &env.vars());
    let mut args = shlex::split(&expanded).ok_or_else(|| format!("invalid command line {expanded:?}"))?;
    if args.is_empty() {
        return Err("command or script must be set".into());
    }
    if cmd.namespaced && !names_namespace(&args) {
        args.push("--namespace".into());
        args.push(env.namespace.clone());
    }
    Ok(args)
}

/// Whether the arguments set `-n`/`--namespace` (as pflag would parse them).
fn names_namespace(args: &[String]) -> bool {
    args.iter().any(|a| {
        a == "-n"
            || a == "--namespace"
            || a.starts_with("--namespace=")
            || (a.starts_with("-n") && !a.starts_with("--"))
    })
}

/// How long [`Background::stop`] waits for the rest of a killed command's output: a
/// process the command started may still hold its stdout open.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// A command started in the background; it is killed when dropped.
pub(crate) struct Background {
    /// What it runs, for the log.
    pub display: String,
    child: Child,
    /// The tasks copying its stdout and stderr into the log.
    forwards: Vec<tokio::task::JoinHandle<()>>,
}

impl Background {
    /// Kills the command and waits for it, and for its output up to [`OUTPUT_DRAIN`].
    pub(crate) async fn stop(mut self) -> String {
        let _ = self.child.start_kill();
        let waited = self.child.wait().await;
        for forward in self.forwards.drain(..) {
            let abort = forward.abort_handle();
            if tokio::time::timeout(OUTPUT_DRAIN, forward).await.is_err() {
                abort.abort();
            }
        }
        match waited {
            Ok(status) => format!("bg process: {:?} exit code {}", self.display, status.code().unwrap_or(-1)),
            Err(e) => format!("bg process: {:?} kill wait error {e}", self.display),
        }
    }
}

/// Runs one command (kuttl's `RunCommand`); `timeout` is in seconds (0: none), overridden
/// by the command's own. A background command is returned running.
pub(crate) async fn run_command(
    cmd: &Command,
    env: &CommandEnv,
    timeout: i64,
    log: &CaseLog,
) -> Result<Option<Background>, String> {
    let timeout = match cmd.timeout {
        t if t < 0 => 0,
        t if t > 0 => t,
        _ => timeout,
    };
    let args = command_line(cmd, env).map_err(|e| format!("processing command {:?} with {e}", cmd.display()))?;
    log.log(format!("running command: [{}]", args.join(" ")));
    let mut process = tokio::process::Command::new(&args[0]);
    process
        .args(&args[1..])
        .current_dir(&env.cwd)
        .envs(env.vars())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = process.spawn().map_err(|e| format!("command {:?} failed, {e}", cmd.display()))?;
    let forward = |stream: Option<Box<dyn AsyncRead + Send + Unpin>>| {
        let log = log.clone();
        let quiet = cmd.skip_log_output;
        tokio::spawn(async move {
            let Some(stream) = stream else { return };
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if !quiet {
                    log.log(line);
                }
            }
        })
    };
    let stdout = forward(child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>));
    let stderr = forward(child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>));
    if cmd.background {
        return Ok(Some(Background { display: cmd.display(), child, forwards: vec![stdout, stderr] }));
    }
    let waited = if timeout > 0 {
        match tokio::time::timeout(Duration::from_secs(timeout.unsigned_abs()), child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                let _ = child.kill().await;
                return Err(format!(
                    "command {:?} exceeded {timeout} sec timeout, context deadline exceeded",
                    cmd.display()
                ));
            }
        }
    } else {
        child.wait().await
    };
    let _ = stdout.await;
    let _ = stderr.await;
    match waited {
        Ok(status) if status.success() => Ok(None),
        Ok(_) if cmd.ignore_failure => Ok(None),
        Ok(status) => Err(format!("command {:?} failed, {}", cmd.display(), exit_text(status))),
        Err(e) => Err(format!("command {:?} failed, {e}", cmd.display())),
    }
}

/// Go's `ExitError` text: `exit status 1`, or the signal.
fn exit_text(status: std::process::ExitStatus) -> String {
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => "signal: killed".into(),
    }
}

/// Runs commands in order (kuttl's `RunCommands`); the first failure stops the rest.
/// Returns the background commands started (also when a later one failed).
pub(crate) async fn run_commands(
    commands: &[Command],
    env: &CommandEnv,
    timeout: i64,
    log: &CaseLog,
) -> (Vec<Background>, Result<(), String>) {
    let mut background = Vec::new();
    for (i, cmd) in commands.iter().enumerate() {
        match run_command(cmd, env, timeout, log).await {
            Ok(Some(bg)) => background.push(bg),
            Ok(None) => {}
            Err(e) => {
                if i + 1 < commands.len() {
                    log.log(format!("command failure, skipping {} additional commands", commands.len() - i - 1));
                }
                return (background, Err(e));
            }
        }
    }
    (background, Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> CommandEnv {
        CommandEnv {
            namespace: "kuttl-test-x".into(),
            kubeconfig: "/tmp/kc".into(),
            work_dir: "/w".into(),
            cwd: "/w".into(),
        }
    }

    #[test]
    fn commands_expand_variables_and_get_the_namespace() {
        let cmd =
            Command { command: "kubectl get cm -n $NAMESPACE '${NAMESPACE} x' $$HOME".into(), ..Command::default() };
        assert_eq!(
            command_line(&cmd, &env()),
            Ok(vec![
                "kubectl".into(),
                "get".into(),
                "cm".into(),
                "-n".into(),
                "kuttl-test-x".into(),
                "kuttl-test-x x".into(),
                "$HOME".into()
            ])
        );
        let namespaced = Command { command: "kubectl get pods".into(), namespaced: true, ..Command::default() };
        assert_eq!(
            command_line(&namespaced, &env()).map(|a| a.join(" ")).as_deref(),
            Ok("kubectl get pods --namespace kuttl-test-x")
        );
        let has_ns = Command { command: "kubectl get pods -n other".into(), namespaced: true, ..Command::default() };
        assert_eq!(command_line(&has_ns, &env()).map(|a| a.join(" ")).as_deref(), Ok("kubectl get pods -n other"));
        let script = Command { script: "echo $NAMESPACE | wc".into(), namespaced: true, ..Command::default() };
        assert!(command_line(&script, &env()).is_err_and(|e| e.contains("script can not used 'namespaced'")));
    }
}
