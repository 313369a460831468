//! A pod's veth pair and routes, as Calico lays them out: the host end `opk<hex>` (no
//! bridge), the pod end `eth0` with the pod IP as a `/32`, a link-local gateway
//! (169.254.1.1) that `eth0` reaches through the host end, `default via` it, and on the
//! host a `<pod ip>/32` route to the host end.
//!
//! The host end carries 169.254.1.1/32 itself (an unnumbered link), and the Services'
//! ClusterIPs for [`super::service_proxy`] and [`super::dns`]; the host answers the pod from the
//! gateway address and needs no address of its own on any other interface; the
//! pod knows the gateway's MAC from a permanent neighbour entry, so no proxy ARP is
//! needed. Forwarding is switched on for the host ends only: what pods send is routed
//! (to other pods; to other machines too, but without NAT, so their answers do not come
//! back), and the host forwards nothing else.
//!
//! The links are made with the `ip` command (iproute2), two `ip -batch` runs per pod (the
//! host's side, then the pod's, started inside the sandbox), rather than with the
//! `rtnetlink` crate: the pod's side needs a netlink socket opened inside the pod's
//! namespace, which `ip` gets for free by being started there, its messages name the
//! failing step, and the two processes cost a few milliseconds per pod.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::NetworkError;
use super::holder::Holder;

/// The pod's gateway, on the host end of every pod's veth pair.
pub(super) const GATEWAY: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// The MAC address of every host end (the pod's neighbour entry for the gateway).
const GATEWAY_MAC: &str = "ee:ee:ee:ee:ee:ee";
/// How long a new pair may take to come up before the sandbox is handed out anyway.
const OPERATIONAL_WAIT: Duration = Duration::from_secs(2);
/// How often its state is read meanwhile.
const OPERATIONAL_POLL: Duration = Duration::from_millis(1);
/// The prefix of host-end names (then 12 hex digits: 15 characters, the kernel's limit).
pub(super) const HOST_END_PREFIX: &str = "opk";

/// A pod's veth pair, named by its host end; dropping it deletes the pair.
#[derive(Debug)]
pub(super) struct HostLink {
    name: String,
}

impl HostLink {
    /// Makes the veth pair of the sandbox `holder` and gives the pod `ip`; `service_ips`
    /// (the `kubernetes` and `kube-dns` Services' ClusterIPs) are put on the host end,
    /// where the sandbox's proxy and DNS server answer them.
    pub(super) fn create(holder: &Holder, ip: Ipv4Addr, service_ips: &[Ipv4Addr]) -> Result<HostLink, NetworkError> {
        let link = HostLink::add_pair(holder.pid())?;
        let name = &link.name;
        let services: String = service_ips.iter().map(|s| format!("addr add {s}/32 dev {name}\n")).collect();
        run_batch(
            Command::new("ip"),
            &format!(
                "addr add {GATEWAY}/32 dev {name}\n\
                 {services}\
                 link set {name} up\n\
                 route replace {ip}/32 dev {name}\n"
            ),
        )?;
        let forwarding = format!("/proc/sys/net/ipv4/conf/{name}/forwarding");
        std::fs::write(&forwarding, "1")
            .map_err(|source| NetworkError::Io { step: format!("writing {forwarding}"), source })?;
        let mut inside = Command::new("ip");
        holder.enter(&mut inside);
        run_batch(
            inside,
            &format!(
                "link set lo up\n\
                 addr add {ip}/32 dev eth0\n\
                 link set eth0 up\n\
                 route add {GATEWAY}/32 dev eth0 scope link\n\
                 route add default via {GATEWAY} dev eth0\n\
                 neigh replace {GATEWAY} lladdr {GATEWAY_MAC} dev eth0 nud permanent\n"
            ),
        )?;
        link.wait_until_operational();
        Ok(link)
    }

    /// Waits until the kernel has brought the pair up (its link watcher activates the
    /// queues of both ends together, some milliseconds after carrier on a busy machine;
    /// until then packets are dropped and a first connection to the pod would wait a
    /// second for its SYN to be sent again).
    fn wait_until_operational(&self) {
        let operstate = format!("/sys/class/net/{}/operstate", self.name);
        let deadline = Instant::now() + OPERATIONAL_WAIT;
        while std::fs::read_to_string(&operstate).is_ok_and(|state| state.trim() != "up") {
            if Instant::now() >= deadline {
                tracing::debug!(link = %self.name, "a pod's veth pair is still not up; going on");
                return;
            }
            std::thread::sleep(OPERATIONAL_POLL);
        }
    }

    /// Adds the pair, its pod end `eth0` put straight into the namespace of `holder_pid`.
    fn add_pair(holder_pid: u32) -> Result<HostLink, NetworkError> {
        let mut last = None;
        // A name clash (one in 2^48) is tried again with another name.
        for _ in 0..3 {
            let name = format!("{HOST_END_PREFIX}{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff);
            let mut cmd = Command::new("ip");
            cmd.args(["link", "add", &name, "address", GATEWAY_MAC, "type", "veth", "peer", "name", "eth0"])
                .args(["netns", &holder_pid.to_string()]);
            match run(cmd, None) {
                Ok(()) => return Ok(HostLink { name }),
                Err(e) if std::path::Path::new("/sys/class/net").join(&name).exists() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| NetworkError::Setup("no veth name was free".to_string())))
    }

    /// The host end's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        // Deleting one end deletes the pair, and the host route with it.
        let mut cmd = Command::new("ip");
        cmd.args(["link", "del", &self.name]);
        if let Err(e) = run(cmd, None) {
            tracing::debug!(link = %self.name, error = %e, "removing a pod's veth pair");
        }
    }
}

/// Runs `ip -batch -` with `commands` on its standard input.
pub(super) fn run_batch(mut cmd: Command, commands: &str) -> Result<(), NetworkError> {
    cmd.args(["-batch", "-"]);
    run(cmd, Some(commands))
}

/// Runs `cmd`, feeding it `input`, and turns a failure into an error carrying its output.
fn run(mut cmd: Command, input: Option<&str>) -> Result<(), NetworkError> {
    let command = format!("{cmd:?}").replace('"', "");
    let failed = |message: String| NetworkError::Command { command: command.clone(), message };
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => failed("`ip` is not on PATH (install iproute2)".to_string()),
        _ => failed(e.to_string()),
    })?;
    let written = match (input, child.stdin.take()) {
        // Dropping stdin after writing closes it: `ip -batch` ends at end of input.
        (Some(input), Some(mut stdin)) => stdin.write_all(input.as_bytes()),
        _ => Ok(()),
    };
    let output = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if output.status.success() {
        return written.map_err(|e| failed(format!("writing its input: {e}")));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(failed(format!("{}: {}", output.status, stderr.trim())))
}
