//! The operator under test, and killing it: an in-process operator runs on a tokio
//! runtime of its own, dropped at once with every task, connection and cache on it; a
//! process operator runs in a process group of its own, sent SIGKILL. Either is
//! restarted from nothing, as a pod after a crash.

use std::collections::VecDeque;
use std::future::Future;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use futures::future::BoxFuture;
use kube::{Client, Config};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::PerturbError;

/// How many of a process operator's last output lines a finding shows.
const LOG_LINES: usize = 40;

type OperatorFn = Arc<dyn Fn(Client) -> BoxFuture<'static, ()> + Send + Sync>;

/// How the operator under test runs.
#[derive(Clone)]
pub enum OperatorUnderTest {
    /// A future given a client acting as the operator's identity (a Rust operator).
    InProcess(OperatorFn),
    /// A shell command (`sh -c`), run with `KUBECONFIG` naming a kubeconfig of the
    /// operator's identity (an operator in any language).
    Process {
        /// The command line.
        command: String,
        /// Its working directory (default: the current one).
        dir: Option<std::path::PathBuf>,
    },
}

impl OperatorUnderTest {
    /// An in-process operator.
    pub fn in_process<O, OF>(operator: O) -> OperatorUnderTest
    where
        O: Fn(Client) -> OF + Send + Sync + 'static,
        OF: Future<Output = ()> + Send + 'static,
    {
        OperatorUnderTest::InProcess(Arc::new(move |c| Box::pin(operator(c))))
    }

    /// A process operator: `command`, run by `sh -c`.
    pub fn process(command: impl Into<String>) -> OperatorUnderTest {
        OperatorUnderTest::Process { command: command.into(), dir: None }
    }
}

/// A started operator.
pub(super) enum RunningOperator {
    InProcess(Option<tokio::runtime::Runtime>),
    Process { child: tokio::process::Child, log: Arc<Mutex<VecDeque<String>>> },
}

impl RunningOperator {
    /// Starts `operator` as the identity `config` authenticates (written to a
    /// kubeconfig beside `admin_kubeconfig` for a process).
    pub(super) fn start(
        operator: &OperatorUnderTest,
        config: &Config,
        admin_kubeconfig: &Path,
    ) -> Result<RunningOperator, PerturbError> {
        match operator {
            OperatorUnderTest::InProcess(run) => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("operator-under-test")
                    .enable_all()
                    .build()?;
                let (run, config) = (run.clone(), config.clone());
                runtime.spawn(async move {
                    // Made here, so the client's connections live on the operator's runtime.
                    match Client::try_from(config) {
                        Ok(client) => run(client).await,
                        Err(e) => eprintln!("the operator's client: {e}"),
                    }
                });
                Ok(RunningOperator::InProcess(Some(runtime)))
            }
            OperatorUnderTest::Process { command, dir } => {
                let kubeconfig = admin_kubeconfig.with_file_name("operator.kubeconfig");
                write_kubeconfig(&kubeconfig, admin_kubeconfig, config)?;
                let mut process = tokio::process::Command::new("sh");
                process
                    .arg("-c")
                    .arg(command)
                    .env("KUBECONFIG", &kubeconfig)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true);
                if let Some(dir) = dir {
                    process.current_dir(dir);
                }
                #[cfg(unix)]
                process.process_group(0);
                let mut child = process.spawn().map_err(|e| {
                    PerturbError::Operator(format!("the operator command {command:?} did not start: {e}"))
                })?;
                let log = Arc::new(Mutex::new(VecDeque::new()));
                keep_lines(child.stdout.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>), &log);
                keep_lines(child.stderr.take().map(|s| Box::new(s) as Box<dyn AsyncRead + Send + Unpin>), &log);
                Ok(RunningOperator::Process { child, log })
            }
        }
    }

    /// Kills it at once (SIGKILL for a process, and its group); returns what a process
    /// printed last.
    pub(super) async fn kill(&mut self) -> Vec<String> {
        match self {
            RunningOperator::InProcess(runtime) => {
                if let Some(runtime) = runtime.take() {
                    runtime.shutdown_background();
                }
                Vec::new()
            }
            RunningOperator::Process { child, log } => {
                #[cfg(unix)]
                if let Some(group) =
                    child.id().and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw)
                {
                    // The group the child leads (it was started with process_group(0)).
                    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
                }
                let _ = child.start_kill();
                let _ = child.wait().await;
                log.lock().iter().cloned().collect()
            }
        }
    }
}

impl Drop for RunningOperator {
    fn drop(&mut self) {
        if let RunningOperator::InProcess(runtime) = self
            && let Some(runtime) = runtime.take()
        {
            runtime.shutdown_background();
        }
    }
}

/// Keeps the last [`LOG_LINES`] lines of `stream` in `log`.
fn keep_lines(stream: Option<Box<dyn AsyncRead + Send + Unpin>>, log: &Arc<Mutex<VecDeque<String>>>) {
    let Some(stream) = stream else { return };
    let log = log.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut log = log.lock();
            if log.len() == LOG_LINES {
                log.pop_front();
            }
            log.push_back(line);
        }
    });
}

/// Writes a kubeconfig for the identity `config` authenticates: the admin kubeconfig's
/// cluster, with the operator's token as its user.
fn write_kubeconfig(path: &Path, admin: &Path, config: &Config) -> Result<(), PerturbError> {
    let text = std::fs::read_to_string(admin)?;
    let mut kubeconfig: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| PerturbError::Operator(format!("the admin kubeconfig: {e}")))?;
    let token = config
        .auth_info
        .token
        .as_ref()
        .map(|t| secrecy::ExposeSecret::expose_secret(t).to_string())
        .ok_or_else(|| PerturbError::Operator("the operator's identity has no token".into()))?;
    for user in kubeconfig["users"].as_array_mut().into_iter().flatten() {
        user["user"] = serde_json::json!({"token": token});
    }
    let text = serde_json::to_string(&kubeconfig).map_err(|e| PerturbError::Operator(e.to_string()))?;
    std::fs::write(path, text)?;
    Ok(())
}
