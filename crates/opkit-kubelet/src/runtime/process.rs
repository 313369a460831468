//! A real container's process: started in its own session and process group, with
//! `PR_SET_PDEATHSIG` SIGKILL as the backstop so it never outlives the kubelet, inside
//! the pod's network sandbox; stopped as the kubelet stops containers (SIGTERM to the
//! group, SIGKILL after the grace period), and whatever is left of its group is killed
//! once it ends, as a container's PID namespace would. A contained process (see
//! [`super::container`]) gets its own namespaces, root and privileges, or joins a running
//! container's.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

#[cfg(unix)]
use rustix::process::{Pid, Signal};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use super::container::{JoinPlan, RootPlan};
use super::volumes::BindMount;
use crate::network::PodSandbox;

/// What to run.
#[derive(Debug, Clone)]
#[cfg_attr(not(unix), allow(dead_code))] // used only by the unix-only real-pod runtime
pub(crate) struct ProcessSpec {
    /// The executable (the image's entrypoint).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// The working directory (made before start).
    pub working_dir: PathBuf,
    /// The pod's projected ServiceAccount files, mounted at
    /// `/var/run/secrets/kubernetes.io/serviceaccount` (where `kube::Config::incluster`,
    /// client-go's `rest.InClusterConfig` and controller-runtime's leader-election
    /// namespace read them) when the process runs in a pod network namespace (the kubelet
    /// is privileged then); `None` mounts nothing.
    pub service_account: Option<PathBuf>,
    /// The container's volume mounts (see `volumes.rs`), bound into its mount namespace
    /// when it runs in a pod network namespace, as the ServiceAccount is.
    pub mounts: Vec<BindMount>,
    /// Whether the process gets a stdin pipe (the container's `stdin: true`, written by
    /// `attach`; [`ContainerProcess::take_stdin`]); else its stdin is `/dev/null`.
    pub stdin: bool,
    /// How the process is contained; `None` runs it as above (host mode, or a
    /// `privileged` container), `program` and `working_dir` being host paths.
    pub containment: Option<Containment>,
}

/// How a contained process starts.
#[derive(Debug, Clone)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) enum Containment {
    /// As a new container: `program` and `working_dir` are paths inside its root.
    New(Box<RootPlan>),
    /// Inside a running container (exec probes).
    Join(JoinPlan),
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExitInfo {
    /// The exit code (128 + the signal when a signal ended it, as runtimes report).
    pub code: i32,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
}

/// A started container process; its group is killed when this is dropped unreaped.
#[derive(Debug)]
pub(crate) struct ContainerProcess {
    child: Child,
    group: Option<Group>,
    exited: Option<ExitInfo>,
}

/// The signals the kubelet sends a container's process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM: please stop.
    Term,
    /// SIGKILL.
    Kill,
}

/// A container's process group (its session leader's pid).
#[cfg(unix)]
type Group = Pid;
/// Elsewhere there are no process groups to signal: the process itself is killed.
#[cfg(not(unix))]
type Group = u32;

/// Makes the child a session (and process group) leader that dies with the kubelet.
#[cfg(unix)]
#[allow(unsafe_code)]
fn detach(cmd: &mut Command) {
    // SAFETY: the hook runs in the forked child before exec and only makes two raw
    // system calls (setsid, prctl), both async-signal-safe; it touches no memory of the
    // parent and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
}

/// A bind mount prepared before the fork: C strings only, so the child allocates
/// nothing.
#[cfg(target_os = "linux")]
struct PreparedMount {
    source: std::ffi::CString,
    target: std::ffi::CString,
    /// The target and its ancestors, outermost first, made when missing.
    directories: Vec<std::ffi::CString>,
    read_only: bool,
}

#[cfg(target_os = "linux")]
fn c_path(path: &std::path::Path) -> std::io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::ffi::CString::new(path.as_os_str().as_bytes())?)
}

#[cfg(target_os = "linux")]
fn prepare(mount: &BindMount) -> std::io::Result<PreparedMount> {
    let directories = mount.target.ancestors().collect::<Vec<_>>().into_iter().rev().skip(1).map(c_path);
    Ok(PreparedMount {
        source: c_path(&mount.source)?,
        target: c_path(&mount.target)?,
        directories: directories.collect::<std::io::Result<_>>()?,
        read_only: mount.read_only,
    })
}

/// Gives the child its own mount namespace in which a fresh tmpfs covers `/run` (so
/// `/var/run`), `service_account` (if any) is bound read-only at
/// `/run/secrets/kubernetes.io/serviceaccount`, as the kubelet mounts the projected
/// volume into a container, and each of `mounts` is bound at its target (made when
/// missing: the container shares the host's file system, so a target outside `/run` is
/// an empty directory left on the host). Nothing is visible outside the child.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn enter_mount_namespace(
    cmd: &mut Command,
    service_account: Option<&std::path::Path>,
    mounts: &[BindMount],
) -> std::io::Result<()> {
    use rustix::mount::{MountFlags, MountPropagationFlags};
    let service_account = service_account.map(c_path).transpose()?;
    let mounts = mounts.iter().map(prepare).collect::<std::io::Result<Vec<_>>>()?;
    // SAFETY: the hook runs in the forked child before exec. It makes raw system calls
    // only (unshare, mount, mkdir) on C strings made before the fork; it allocates
    // nothing and takes no lock. `unshare` gets no `CLONE_FILES`, so no descriptor the
    // child holds is affected.
    unsafe {
        cmd.pre_exec(move || {
            rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS)?;
            rustix::mount::mount_change(c"/", MountPropagationFlags::REC | MountPropagationFlags::PRIVATE)?;
            rustix::mount::mount(c"tmpfs", c"/run", c"tmpfs", MountFlags::NOSUID | MountFlags::NODEV, c"mode=0755")?;
            if let Some(source) = &service_account {
                for path in
                    [c"/run/secrets", c"/run/secrets/kubernetes.io", c"/run/secrets/kubernetes.io/serviceaccount"]
                {
                    rustix::fs::mkdir(path, rustix::fs::Mode::from_raw_mode(0o755))?;
                }
                let target = c"/run/secrets/kubernetes.io/serviceaccount";
                rustix::mount::mount_bind(source.as_c_str(), target)?;
                rustix::mount::mount_remount(target, MountFlags::BIND | MountFlags::RDONLY, c"")?;
            }
            for mount in &mounts {
                for dir in &mount.directories {
                    match rustix::fs::mkdir(dir.as_c_str(), rustix::fs::Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                rustix::mount::mount_bind(mount.source.as_c_str(), mount.target.as_c_str())?;
                if mount.read_only {
                    rustix::mount::mount_remount(mount.target.as_c_str(), MountFlags::BIND | MountFlags::RDONLY, c"")?;
                }
            }
            Ok(())
        });
    }
    Ok(())
}

impl ContainerProcess {
    /// Starts `spec` inside `sandbox`, its output piped.
    pub(crate) fn spawn(
        spec: &ProcessSpec,
        sandbox: &PodSandbox,
    ) -> std::io::Result<(ContainerProcess, Option<ChildStdout>, Option<ChildStderr>)> {
        // Without process groups and a parent-death signal nothing would keep a container
        // from outliving the kubelet: real pods need a Unix kubelet.
        if cfg!(not(unix)) {
            return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "real pods need a Unix kubelet"));
        }
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(if spec.stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if spec.containment.is_none() {
            std::fs::create_dir_all(&spec.working_dir)?;
            cmd.current_dir(&spec.working_dir);
        }
        #[cfg(unix)]
        detach(&mut cmd);
        match &spec.containment {
            None => {
                sandbox.enter(&mut cmd);
                #[cfg(target_os = "linux")]
                if sandbox.netns().is_some() && (spec.service_account.is_some() || !spec.mounts.is_empty()) {
                    enter_mount_namespace(&mut cmd, spec.service_account.as_deref(), &spec.mounts)?;
                }
            }
            #[cfg(target_os = "linux")]
            Some(Containment::New(plan)) => {
                sandbox.enter(&mut cmd);
                super::container::create(cmd.as_std_mut(), plan)?;
            }
            #[cfg(target_os = "linux")]
            Some(Containment::Join(plan)) => {
                super::container::join(cmd.as_std_mut(), plan).map_err(std::io::Error::other)?;
            }
            #[cfg(not(target_os = "linux"))]
            Some(_) => {
                return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "containers need Linux"));
            }
        }
        let mut child = cmd.spawn()?;
        #[cfg(unix)]
        let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        #[cfg(not(unix))]
        let group = child.id();
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        Ok((ContainerProcess { child, group, exited: None }, stdout, stderr))
    }

    /// The process's stdin pipe, when it was started with one ([`ProcessSpec::stdin`]).
    pub(crate) fn take_stdin(&mut self) -> Option<tokio::process::ChildStdin> {
        self.child.stdin.take()
    }

    /// The process's id (a contained container's waiter: its init is the only child).
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Sends `stop` to the process group.
    #[cfg(unix)]
    fn signal_group(&mut self, stop: Stop) {
        let signal = match stop {
            Stop::Term => Signal::TERM,
            Stop::Kill => Signal::KILL,
        };
        if let Some(group) = self.group
            && let Err(e) = rustix::process::kill_process_group(group, signal)
            && e != rustix::io::Errno::SRCH
        {
            tracing::debug!(error = %e, "signalling a container's process group failed");
        }
    }

    /// Kills the process (there is no SIGTERM to send).
    #[cfg(not(unix))]
    fn signal_group(&mut self, stop: Stop) {
        if stop == Stop::Kill && self.group.is_some() {
            let _ = self.child.start_kill();
        }
    }

    /// Waits for the process to exit, then kills what is left of its group.
    pub(crate) async fn wait(&mut self) -> ExitInfo {
        if let Some(done) = self.exited {
            return done;
        }
        let info = match self.child.wait().await {
            Ok(status) => exit_info(status),
            Err(e) => {
                tracing::warn!(error = %e, "waiting for a container process failed");
                ExitInfo { code: 128 + 9, signal: Some(9) }
            }
        };
        self.signal_group(Stop::Kill);
        self.exited = Some(info);
        info
    }

    /// Stops the process as the kubelet does: SIGTERM to its group, SIGKILL after `grace`.
    pub(crate) async fn stop(&mut self, grace: Duration) -> ExitInfo {
        if let Some(done) = self.exited {
            return done;
        }
        self.signal_group(Stop::Term);
        if let Ok(info) = tokio::time::timeout(grace, self.wait()).await {
            return info;
        }
        self.signal_group(Stop::Kill);
        self.wait().await
    }
}

impl Drop for ContainerProcess {
    fn drop(&mut self) {
        // Whatever happens to the task that owns it, the process does not outlive it.
        if self.exited.is_none() {
            self.signal_group(Stop::Kill);
            let _ = self.child.start_kill();
        }
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    #[cfg(not(unix))]
    let signal = None;
    match (status.code(), signal) {
        (Some(code), _) => ExitInfo { code, signal: None },
        (None, Some(sig)) => ExitInfo { code: 128 + sig, signal: Some(sig) },
        (None, None) => ExitInfo { code: 1, signal: None },
    }
}
