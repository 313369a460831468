//! The sandbox holder, as the pause container is: a process sitting in new network, UTS
//! (hostname = the pod's) and IPC namespaces, which the pod's containers share, that
//! keeps them alive for the pod's processes to
//! enter, and dies with the kubelet's process (`PR_SET_PDEATHSIG` `SIGKILL`), taking the
//! namespaces and the pod's end of its veth pair with it.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock, mpsc};

use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::NetworkError;

/// The longest hostname the kernel (and the kubelet) accepts.
const MAX_HOSTNAME: usize = 63;

/// A running holder and the namespaces it holds.
#[derive(Debug)]
pub(super) struct Holder {
    child: Child,
    /// `/proc/<pid>/ns/net`, opened: what processes entering the sandbox `setns` into.
    net: Arc<OwnedFd>,
    /// `/proc/<pid>/ns/uts`, opened.
    uts: Arc<OwnedFd>,
    /// `/proc/<pid>/ns/ipc`, opened.
    ipc: Arc<OwnedFd>,
}

impl Holder {
    /// Starts a holder whose hostname is `hostname` (cut to 63 characters as the
    /// kubelet cuts it).
    pub(super) fn start(hostname: &str) -> Result<Holder, NetworkError> {
        let hostname = pod_hostname(hostname);
        let (reply, answer) = mpsc::sync_channel(1);
        spawner()?
            .send(SpawnRequest { hostname, reply })
            .map_err(|_| NetworkError::Setup("the sandbox spawner thread is gone".to_string()))?;
        let mut child = answer
            .recv()
            .map_err(|_| NetworkError::Setup("the sandbox spawner thread is gone".to_string()))?
            .map_err(|source| NetworkError::Io { step: "starting the sandbox holder (sleep)".to_string(), source })?;
        match open_namespaces(child.id()) {
            Ok((net, uts, ipc)) => Ok(Holder { child, net: Arc::new(net), uts: Arc::new(uts), ipc: Arc::new(ipc) }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The holder's process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The path of the sandbox's network namespace.
    pub(super) fn netns_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.pid()))
    }

    /// Binds a listener on `addr` inside the sandbox. A socket belongs to the namespace
    /// it was made in, so a short-lived thread enters the namespace (only that thread
    /// moves), binds, and hands the listener back.
    pub(super) fn bind_inside(&self, addr: SocketAddr) -> Result<TcpListener, NetworkError> {
        let io = |step: String| move |source| NetworkError::Io { step, source };
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    rustix::thread::move_into_link_name_space(self.net.as_fd(), Some(LinkNameSpaceType::Network))
                        .map_err(|e| io("entering the pod's network namespace".to_string())(e.into()))?;
                    TcpListener::bind(addr).map_err(io(format!("binding {addr} inside the pod")))
                })
                .join()
                .map_err(|_| NetworkError::Setup(format!("the thread binding {addr} inside the pod panicked")))?
        })
    }

    /// Makes `cmd` start inside the sandbox's network, UTS and IPC namespaces.
    #[allow(unsafe_code)]
    pub(super) fn enter(&self, cmd: &mut Command) {
        let (net, uts, ipc) = (self.net.clone(), self.uts.clone(), self.ipc.clone());
        // SAFETY: the closure runs in the forked child before exec; it only makes three
        // `setns` system calls on descriptors opened before the fork (no allocation, no
        // lock), which is async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                rustix::thread::move_into_link_name_space(net.as_fd(), Some(LinkNameSpaceType::Network))?;
                rustix::thread::move_into_link_name_space(
                    uts.as_fd(),
                    Some(LinkNameSpaceType::HostNameAndNISDomainName),
                )?;
                rustix::thread::move_into_link_name_space(
                    ipc.as_fd(),
                    Some(LinkNameSpaceType::InterProcessCommunication),
                )?;
                Ok(())
            });
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // Killing a process we started and have not reaped yet cannot hit another one.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pod's hostname as the kernel gets it: at most 63 characters, without a trailing
/// `-` or `.` left by the cut (the kubelet's `truncatePodHostnameIfNeeded`).
fn pod_hostname(hostname: &str) -> String {
    if hostname.len() <= MAX_HOSTNAME {
        return hostname.to_string();
    }
    let mut cut = MAX_HOSTNAME;
    while !hostname.is_char_boundary(cut) {
        cut -= 1;
    }
    hostname[..cut].trim_end_matches(['-', '.']).to_string()
}

/// Opens the network, UTS and IPC namespaces of holder `pid`, after checking that they
/// are new ones: the host's network must never be configured as a pod's by mistake.
fn open_namespaces(pid: u32) -> Result<(OwnedFd, OwnedFd, OwnedFd), NetworkError> {
    let io = |step: String| move |source| NetworkError::Io { step, source };
    let ours = std::fs::metadata("/proc/self/ns/net").map_err(io("reading this process's network namespace".into()))?;
    let net_path = format!("/proc/{pid}/ns/net");
    let theirs = std::fs::metadata(&net_path).map_err(io(format!("reading {net_path}")))?;
    if (ours.dev(), ours.ino()) == (theirs.dev(), theirs.ino()) {
        return Err(NetworkError::Setup(format!("holder {pid} did not get a network namespace of its own")));
    }
    let net = std::fs::File::open(&net_path).map_err(io(format!("opening {net_path}")))?;
    let uts_path = format!("/proc/{pid}/ns/uts");
    let uts = std::fs::File::open(&uts_path).map_err(io(format!("opening {uts_path}")))?;
    let ipc_path = format!("/proc/{pid}/ns/ipc");
    let ipc = std::fs::File::open(&ipc_path).map_err(io(format!("opening {ipc_path}")))?;
    Ok((net.into(), uts.into(), ipc.into()))
}

/// A request to the spawner thread.
struct SpawnRequest {
    hostname: String,
    reply: mpsc::SyncSender<std::io::Result<Child>>,
}

/// The thread every holder is forked from. `PR_SET_PDEATHSIG` fires when the *thread*
/// that forked the child ends, not the process; a runtime's worker or blocking-pool
/// thread may end long before the kubelet does, so holders are forked by this one
/// thread, which lives as long as the process.
fn spawner() -> Result<&'static mpsc::Sender<SpawnRequest>, NetworkError> {
    static SPAWNER: OnceLock<Result<mpsc::Sender<SpawnRequest>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (requests, incoming) = mpsc::channel::<SpawnRequest>();
            std::thread::Builder::new()
                .name("opkit-pod-sandboxes".to_string())
                .spawn(move || {
                    for request in incoming {
                        let _ = request.reply.send(spawn_holder(&request.hostname));
                    }
                })
                .map(|_| requests)
                .map_err(|e| format!("starting the sandbox spawner thread: {e}"))
        })
        .as_ref()
        .map_err(|e| NetworkError::Setup(e.clone()))
}

/// Forks `sleep infinity` into new network, UTS (named `hostname`) and IPC namespaces.
#[allow(unsafe_code)]
fn spawn_holder(hostname: &str) -> std::io::Result<Child> {
    let parent = rustix::process::getpid();
    let hostname = hostname.as_bytes().to_vec();
    let mut cmd = Command::new("sleep");
    cmd.arg("infinity")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: a terminal's Ctrl-C reaches the kubelet, which then
        // destroys its sandboxes, rather than killing the holders under it.
        .process_group(0);
    // SAFETY: the closure runs in the forked child before exec and makes only system
    // calls (prctl, getppid, unshare, sethostname) on memory allocated before the fork;
    // it allocates nothing and takes no lock. `unshare` gets no `CLONE_FILES`, so no
    // descriptor table is split.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The kubelet died between fork and prctl: the signal will never come.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other("the kubelet exited"));
            }
            rustix::thread::unshare_unsafe(UnshareFlags::NEWNET | UnshareFlags::NEWUTS | UnshareFlags::NEWIPC)?;
            rustix::system::sethostname(&hostname)?;
            Ok(())
        });
    }
    cmd.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_hostnames_are_cut_as_the_kubelet_cuts_them() {
        assert_eq!(pod_hostname("web-0"), "web-0");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(pod_hostname(&long), "a".repeat(62));
        assert_eq!(pod_hostname(&"c".repeat(80)).len(), 63);
    }
}
