//! Namespaced sandboxes on this machine: real namespaces, veth pairs and routes (the
//! tests run as root, as CI does), reached from the test process and from processes
//! started inside them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::thread::LinkNameSpaceType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// How long any one step may take.
const WAIT: Duration = Duration::from_secs(30);

/// Pod networks in namespace mode, forwarding the `kubernetes` Service to `api_server`.
fn namespaced_networks(api_server: SocketAddr) -> PodNetworks {
    let networks = PodNetworks::new(Some(NetworkMode::Namespaces), api_server);
    assert_eq!(networks.mode(), NetworkMode::Namespaces, "fell back: {:?}", networks.fallback_reason());
    networks
}

/// An address nothing listens on, for sandboxes whose Service is not used.
fn no_api_server() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9))
}

/// The sandbox's holder.
fn holder(sandbox: &PodSandbox) -> &holder::Holder {
    &sandbox.namespaced.as_ref().expect("a namespaced sandbox").holder
}

/// The sandbox's network namespace, opened from [`PodSandbox::netns`].
fn netns(sandbox: &PodSandbox) -> OwnedFd {
    std::fs::File::open(sandbox.netns().expect("a namespace")).expect("open the namespace").into()
}

/// The holder's pid, from `/proc/<pid>/ns/net`.
fn holder_pid(sandbox: &PodSandbox) -> String {
    let path = sandbox.netns().expect("netns").to_string_lossy().into_owned();
    path.trim_start_matches("/proc/").split('/').next().expect("pid").to_string()
}

/// Connects to `addr` from inside the namespace `netns` (a thread enters it, connects
/// and returns: the socket stays in the namespace it was made in).
fn connect_inside(netns: &OwnedFd, addr: SocketAddr) -> std::io::Result<TcpStream> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                rustix::thread::move_into_link_name_space(netns.as_fd(), Some(LinkNameSpaceType::Network))?;
                let stream = TcpStream::connect_timeout(&addr, WAIT)?;
                stream.set_read_timeout(Some(WAIT))?;
                Ok(stream)
            })
            .join()
            .expect("connecting thread")
    })
}

/// Serves `reply` to every connection on `listener` (a listener of any namespace).
fn serve_reply(listener: std::net::TcpListener, reply: &'static [u8]) -> tokio::task::JoinHandle<()> {
    listener.set_nonblocking(true).expect("non-blocking");
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let _ = conn.write_all(reply).await;
        }
    })
}

/// Reads what `addr` answers, from the host.
async fn read_from_host(addr: SocketAddr) -> Vec<u8> {
    let mut conn = tokio::time::timeout(WAIT, tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, conn.read_to_end(&mut answer)).await.expect("read in time").expect("read");
    answer
}

/// Runs `program args` inside `sandbox` and returns its standard output.
async fn run_inside(sandbox: &PodSandbox, program: &str, args: &[&str]) -> String {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).kill_on_drop(true);
    sandbox.enter(&mut cmd);
    let output = tokio::time::timeout(WAIT, cmd.output()).await.expect("in time").expect("runs");
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sandboxes_serve_the_same_port_each_at_its_own_ip() {
    let networks = namespaced_networks(no_api_server());
    let a = networks.create("uid-a", "pod-a", Some("10.244.1.0/24")).await.expect("sandbox a");
    let b = networks.create("uid-b", "pod-b", Some("10.244.1.0/24")).await.expect("sandbox b");
    assert_ne!(a.ip(), b.ip());
    assert_eq!(a.api_server(), KUBERNETES_SERVICE);
    let _a_server = serve_reply(holder(&a).bind_inside(SocketAddr::new(a.ip(), 8081)).expect("a binds :8081"), b"a");
    let _b_server = serve_reply(holder(&b).bind_inside(SocketAddr::new(b.ip(), 8081)).expect("b binds :8081"), b"b");
    assert_eq!(read_from_host(SocketAddr::new(a.ip(), 8081)).await, b"a");
    assert_eq!(read_from_host(SocketAddr::new(b.ip(), 8081)).await, b"b");
    // Pods reach each other (through the host) and the host (at their gateway).
    let mut conn = connect_inside(&netns(&a), SocketAddr::new(b.ip(), 8081)).expect("a reaches b");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("b answers a");
    assert_eq!(answer, "b");
    let on_host = std::net::TcpListener::bind((links::GATEWAY, 0)).expect("host listener on the gateway");
    let host_addr = on_host.local_addr().expect("addr");
    let _host_server = serve_reply(on_host, b"host");
    let mut conn = connect_inside(&netns(&b), host_addr).expect("b reaches the host");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("the host answers b");
    assert_eq!(answer, "host");
    a.destroy().await;
    b.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_entering_a_sandbox_see_its_hostname_and_address() {
    let networks = namespaced_networks(no_api_server());
    let sandbox = networks.create("uid-h", "web-0", Some("10.244.2.0/24")).await.expect("sandbox");
    assert_eq!(run_inside(&sandbox, "hostname", &[]).await.trim(), "web-0");
    let addresses = run_inside(&sandbox, "ip", &["-4", "-o", "addr", "show", "dev", "eth0"]).await;
    assert!(addresses.contains(&format!("inet {}/32", sandbox.ip())), "{addresses}");
    let routes = run_inside(&sandbox, "ip", &["route", "show", "default"]).await;
    assert!(routes.contains("default via 169.254.1.1 dev eth0"), "{routes}");
    // The host keeps its own hostname.
    let ours = rustix::system::uname();
    assert_ne!(ours.nodename().to_string_lossy(), "web-0");
    sandbox.destroy().await;
}

/// Reads what `addr` answers, from inside `sandbox`.
async fn read_from_inside(sandbox: &PodSandbox, addr: SocketAddr) -> std::io::Result<String> {
    let ns = netns(sandbox);
    tokio::task::spawn_blocking(move || {
        let mut answer = String::new();
        connect_inside(&ns, addr)?.read_to_string(&mut answer)?;
        Ok(answer)
    })
    .await
    .expect("joins")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubernetes_service_inside_reaches_each_clusters_api_server() {
    // Two clusters on one host, a TCP server standing in for each one's API server.
    let mut sandboxes = Vec::new();
    for (name, reply) in [("one", b"api server one" as &'static [u8]), ("two", b"api server two")] {
        let api_server = std::net::TcpListener::bind("127.0.0.1:0").expect("stand-in");
        let networks = namespaced_networks(api_server.local_addr().expect("addr"));
        let _served = serve_reply(api_server, reply);
        let sandbox = networks.create(name, name, Some("10.244.3.0/24")).await.expect("sandbox");
        assert_eq!(sandbox.api_server(), KUBERNETES_SERVICE);
        // The pod keeps port 443 for itself, on every address.
        let _own_443 =
            holder(&sandbox).bind_inside(SocketAddr::from(([0, 0, 0, 0], 443))).expect("the pod binds *:443");
        let answer = read_from_inside(&sandbox, KUBERNETES_SERVICE).await.expect("10.96.0.1:443 answers inside");
        assert_eq!(answer.as_bytes(), reply);
        sandboxes.push(sandbox);
    }
    for sandbox in sandboxes {
        sandbox.destroy().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_inside_a_sandbox_reaches_a_real_api_server_through_the_service() {
    let env = opkit_testenv::TestEnv::builder().without_controllers().start().await.expect("test env");
    let networks = namespaced_networks(env.server().addr());
    let sandbox = networks.create("uid-k", "kubectl", Some("10.244.4.0/24")).await.expect("sandbox");
    let kubeconfig = env.kubeconfig_path().to_string_lossy().into_owned();
    let server = format!("https://{}", sandbox.api_server());
    let version = run_inside(
        &sandbox,
        "kubectl",
        &[
            "--kubeconfig",
            &kubeconfig,
            "--server",
            &server,
            // The serving certificate names the Service by DNS, as pods resolve it.
            "--tls-server-name",
            "kubernetes.default.svc",
            "get",
            "--raw",
            "/version",
        ],
    )
    .await;
    assert!(version.contains("gitVersion"), "{version}");
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroy_and_drop_leave_no_veth_holder_or_lease() {
    let networks = namespaced_networks(no_api_server());
    let destroyed = networks.create("uid-d1", "gone-1", Some("10.244.5.0/24")).await.expect("sandbox");
    let dropped = networks.create("uid-d2", "gone-2", Some("10.244.5.0/24")).await.expect("sandbox");
    let mut remains = Vec::new();
    for sandbox in [&destroyed, &dropped] {
        let link = sandbox.host_interface().expect("host end").to_string();
        assert!(link.starts_with(links::HOST_END_PREFIX) && link.len() <= 15, "{link}");
        let paths = [
            format!("/sys/class/net/{link}"),
            format!("/proc/{}", holder_pid(sandbox)),
            format!("{}/{}", LEASE_DIR, sandbox.ip()),
        ];
        for path in &paths {
            assert!(Path::new(path).exists(), "{path} exists while the sandbox does");
        }
        remains.extend(paths);
    }
    destroyed.destroy().await;
    drop(dropped);
    for path in &remains {
        assert!(!Path::new(path).exists(), "{path} is left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_with_the_same_range_never_share_an_ip() {
    let (first, second) = (namespaced_networks(no_api_server()), namespaced_networks(no_api_server()));
    let make = async |networks: &PodNetworks, i: usize| {
        networks.create(&format!("uid-{i}"), "twin", Some("10.244.6.0/24")).await.expect("sandbox")
    };
    let sandboxes = futures::future::join_all((0..8).map(|i| make(if i % 2 == 0 { &first } else { &second }, i))).await;
    let ips: std::collections::BTreeSet<_> = sandboxes.iter().map(PodSandbox::ip).collect();
    assert_eq!(ips.len(), sandboxes.len(), "{ips:?}");
    for sandbox in sandboxes {
        sandbox.destroy().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_network_is_the_servers_own_address() {
    let api_server = SocketAddr::from(([127, 0, 0, 1], 6443));
    let networks = PodNetworks::new(Some(NetworkMode::Host), api_server);
    assert_eq!((networks.mode(), networks.fallback_reason()), (NetworkMode::Host, None));
    let sandbox = networks.create("uid", "host", Some("10.244.7.0/24")).await.expect("sandbox");
    assert_eq!(sandbox.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!((sandbox.api_server(), sandbox.netns(), sandbox.host_interface()), (api_server, None, None));
    assert_eq!(
        run_inside(&sandbox, "hostname", &[]).await.trim(),
        rustix::system::uname().nodename().to_string_lossy()
    );
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_network_pods_stay_on_the_host_when_namespaces_are_in_use() {
    let api_server = SocketAddr::from(([127, 0, 0, 1], 6443));
    let networks = namespaced_networks(api_server);
    let sandbox = networks.host_network();
    assert_eq!(sandbox.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!((sandbox.api_server(), sandbox.netns(), sandbox.host_interface()), (api_server, None, None));
    sandbox.destroy().await;
}

/// Creates and destroys sandboxes one after another and prints what each costs: the
/// time until its IP answers, the time to destroy it, its holder's memory and the
/// kernel's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_come_and_go_quickly() {
    const COUNT: usize = 10;
    let networks = namespaced_networks(no_api_server());
    let kernel_before = kernel_memory_kib();
    let (mut created, mut usable) = (Duration::ZERO, Duration::ZERO);
    let mut sandboxes = Vec::new();
    for i in 0..COUNT {
        let start = Instant::now();
        let sandbox = networks.create(&format!("uid-{i}"), "cost", Some("10.244.8.0/24")).await.expect("sandbox");
        created += start.elapsed();
        let listener = holder(&sandbox).bind_inside(SocketAddr::new(sandbox.ip(), 80)).expect("bind");
        let _served = serve_reply(listener, b"up");
        assert_eq!(read_from_host(SocketAddr::new(sandbox.ip(), 80)).await, b"up");
        usable += start.elapsed();
        sandboxes.push(sandbox);
    }
    let kernel_kib = kernel_memory_kib().saturating_sub(kernel_before) / COUNT as u64;
    let holder_pss_kib = sandboxes.iter().map(holder_pss_kib).sum::<u64>() / COUNT as u64;
    let start = Instant::now();
    for sandbox in sandboxes {
        sandbox.destroy().await;
    }
    let destroyed = start.elapsed();
    let n = COUNT as u32;
    eprintln!(
        "per sandbox: create {:?}, create → serving {:?}, destroy {:?}, holder PSS {holder_pss_kib} KiB, \
         kernel memory (the whole host's, noisy) {kernel_kib} KiB",
        created / n,
        usable / n,
        destroyed / n
    );
    assert!(usable / n < Duration::from_secs(2), "a sandbox took {:?} to be usable", usable / n);
}

/// The kernel's own memory (slab, per-CPU, stacks, page tables) from `/proc/meminfo`,
/// in KiB: the whole host's, so other processes add noise.
fn kernel_memory_kib() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    meminfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(key, _)| ["Slab", "Percpu", "KernelStack", "PageTables"].contains(key))
        .filter_map(|(_, value)| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .sum()
}

#[test]
fn namespaces_that_cannot_be_made_fall_back_to_the_host_network_with_the_reason() {
    let api_server = SocketAddr::from(([127, 0, 0, 1], 6443));
    // No lease can be taken under a file: the probe fails at its first step.
    let unusable = Path::new("/dev/null/pod-ips");
    for requested in [None, Some(NetworkMode::Namespaces)] {
        let networks = PodNetworks::choose(requested, api_server, || probe(unusable));
        assert_eq!(networks.mode(), NetworkMode::Host, "{requested:?}");
        let reason = networks.fallback_reason().expect("a reason");
        assert!(reason.contains("/dev/null/pod-ips"), "{reason}");
    }
    let host = PodNetworks::choose(Some(NetworkMode::Host), api_server, || panic!("the host network needs no probe"));
    assert_eq!((host.mode(), host.fallback_reason()), (NetworkMode::Host, None));
    assert_eq!(probe(Path::new(LEASE_DIR)), Ok(()), "this machine makes namespaces");
}

/// Set for the child process of [`a_crashed_kubelet_leaves_nothing_behind`].
const CRASH_CHILD: &str = "OPKIT_PODNET_CRASH_CHILD";
/// The range the crashing child takes its address from (no other test uses it).
const CRASH_RANGE: &str = "10.244.10.0/24";

/// The child process of [`a_crashed_kubelet_leaves_nothing_behind`] (started with
/// [`CRASH_CHILD`] set; without it this returns at once): makes a sandbox, prints its
/// host end, holder pid and IP, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child_makes_a_sandbox_and_waits_to_be_killed() {
    if std::env::var_os(CRASH_CHILD).is_none() {
        return;
    }
    let networks = namespaced_networks(no_api_server());
    let sandbox = networks.create("uid-crash", "crash", Some(CRASH_RANGE)).await.expect("sandbox");
    println!("SANDBOX {} {} {}", sandbox.host_interface().expect("host end"), holder_pid(&sandbox), sandbox.ip());
    std::io::stdout().flush().expect("flush");
    // Killed while waiting here. Should the parent test end first (closing stdin), the
    // sandbox is removed as usual.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    sandbox.destroy().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_kubelet_leaves_nothing_behind() {
    let mut child = ChildGuard(
        std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "network::tests::crash_child_makes_a_sandbox_and_waits_to_be_killed"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CRASH_CHILD, "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("child"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        std::io::BufRead::lines(std::io::BufReader::new(stdout))
            .map_while(Result::ok)
            // libtest may have printed the test's name on the same line.
            .find_map(|l| l.split_once("SANDBOX ").map(|(_, sandbox)| sandbox.to_string()))
    });
    let line = tokio::time::timeout(WAIT, line).await.expect("in time").expect("joins").expect("the child's sandbox");
    let [link, pid, ip] = line.split(' ').collect::<Vec<_>>()[..] else { panic!("{line}") };
    let (link_path, holder_path) = (format!("/sys/class/net/{link}"), format!("/proc/{pid}"));
    assert!(Path::new(&link_path).exists() && Path::new(&holder_path).exists(), "the child's sandbox is up");
    // While the child lives, its address is its own, host-wide.
    let child_pid = child.0.id();
    assert_eq!(locks_held_by(child_pid), 1, "the child holds its lease");
    let beside = leases::IpLease::acquire(Path::new(LEASE_DIR), Some(CRASH_RANGE)).expect("lease");
    assert_ne!(beside.ip().to_string(), ip, "another process's address was leased again");
    drop(beside);
    child.0.kill().expect("kill the child");
    child.0.wait().expect("reap the child");
    // The kernel tears the namespace down asynchronously: wait for it.
    let deadline = Instant::now() + WAIT;
    loop {
        let holder_gone = std::fs::read_to_string(format!("{holder_path}/stat"))
            .map_or(true, |stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')));
        if holder_gone && !Path::new(&link_path).exists() {
            break;
        }
        assert!(Instant::now() < deadline, "holder {pid} or veth {link} outlived the crashed process");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The lease's lock died with the process (someone else may lease the address now).
    assert_eq!(locks_held_by(child_pid), 0, "the crashed process still holds a lease");
}

/// A child process killed (if still running) and reaped when the test ends, also when
/// it fails.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// How many file locks process `pid` holds, from `/proc/locks`.
fn locks_held_by(pid: u32) -> usize {
    let pid = pid.to_string();
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks.lines().filter(|l| l.split_whitespace().any(|field| field == pid)).count()
}

/// The proportional set size of `sandbox`'s holder, in KiB.
fn holder_pss_kib(sandbox: &PodSandbox) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{}/smaps_rollup", holder_pid(sandbox))).expect("smaps_rollup");
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("Pss")
}
