//! Services and cluster DNS seen from contained real pods, through `kubectl exec` and the
//! host's `getent` and busybox: a Service made while the client pod runs resolves by its
//! full and its short name (and its named port as SRV) and answers, by name and by
//! ClusterIP, from a backend pod (busybox `httpd` serving the backend's `/etc`); once its
//! backend is gone the connection is refused at once; a Service spreads over its ready
//! endpoints, one added later included; a headless Service resolves to its pod's IP, by
//! the Service's name and by the pod's hostname (its SRV, PTR, pod A and AAAA answers
//! as kube's DNS specification gives them); a LoadBalancer Service answers at its
//! nodePort on every node and at its load balancer address; a UDP Service port answers
//! by name and by ClusterIP from its backend (a perl echo server), and is refused (ICMP
//! port unreachable) once the backend is gone; an unknown cluster name is NXDOMAIN at
//! once, and a name outside the cluster is answered before glibc would ask again; the
//! pod's `resolv.conf` names the cluster DNS. These tests need root, as the real-pod
//! suites do.

use crate::common;

use std::time::{Duration, Instant};

use common::real_pods::{load_script, real_env_with};
use common::{Error, WAIT, kubectl, wait};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use opkit_kubelet::PodIsolation;
use opkit_testenv::TestEnv;
use serde_json::json;

/// How long a lookup or connection that must fail may take (a stalled resolver takes 5 s
/// and more).
const PROMPT: Duration = Duration::from_secs(3);

/// A contained env with a sleeping client pod `client` and the `web` image (busybox
/// `httpd` on 8080 serving the pod's `/etc`) loaded.
async fn env_with_client() -> Result<(TestEnv, tempfile::TempDir), Error> {
    let env = real_env_with(PodIsolation::Contained).await?;
    let tmp = tempfile::tempdir()?;
    load_script(&env, tmp.path(), "example.com/sleeper:v1", "exec sleep 3600")?;
    load_script(&env, tmp.path(), "example.com/web:v1", "exec busybox httpd -f -p 8080 -h /etc")?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("client", "example.com/sleeper:v1", json!({}))?).await?;
    wait(&pods, "client", running).await?;
    Ok((env, tmp))
}

fn pod(name: &str, image: &str, extra: serde_json::Value) -> Result<Pod, Error> {
    let mut v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": image}]}});
    if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    Ok(serde_json::from_value(v)?)
}

fn running(p: Option<&Pod>) -> bool {
    p.and_then(|p| p.status.as_ref()?.phase.as_deref()) == Some("Running")
}

/// Runs `script` in the client pod until its output satisfies `ok`, returning it.
async fn exec_until(env: &TestEnv, script: &str, ok: impl Fn(&str) -> bool) -> Result<String, Error> {
    let deadline = Instant::now() + WAIT;
    loop {
        let out = kubectl(env, &["exec", "client", "--", "sh", "-c", script]).await.unwrap_or_else(|e| e.to_string());
        if ok(&out) {
            return Ok(out);
        }
        if Instant::now() > deadline {
            return Err(format!("`{script}` never gave the wanted output; last:\n{out}").into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until the Service `name` in `default` has no endpoint left.
async fn no_endpoints_left(env: &TestEnv, name: &str) -> Result<(), Error> {
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), "default");
    let selector = ListParams::default().labels(&format!("kubernetes.io/service-name={name}"));
    let deadline = Instant::now() + WAIT;
    while slices.list(&selector).await?.items.iter().any(|s| !s.endpoints.is_empty()) {
        if Instant::now() > deadline {
            return Err(format!("the deleted backend of {name} stayed an endpoint").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The ClusterIP of Service `name` in `default`.
async fn cluster_ip(env: &TestEnv, name: &str) -> Result<String, Error> {
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = services.get(name).await?;
    Ok(svc.spec.and_then(|s| s.cluster_ip).ok_or("no clusterIP")?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reaches_a_service_by_name_and_cluster_ip() -> Result<(), Error> {
    let (env, _tmp) = env_with_client().await?;
    let resolv = kubectl(&env, &["exec", "client", "--", "cat", "/etc/resolv.conf"]).await?;
    assert!(
        resolv.starts_with("nameserver 10.96.0.10\nsearch default.svc.cluster.local svc.cluster.local cluster.local")
    );
    assert!(resolv.contains("options ndots:5"), "{resolv}");

    // The Service and its backend come after the client pod: the kubelet follows them.
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("web", "example.com/web:v1", json!({}))?).await?;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}});
    services.create(&PostParams::default(), &serde_json::from_value(svc)?).await?;
    let ip = cluster_ip(&env, "web").await?;

    let full = exec_until(&env, "getent hosts web.default.svc.cluster.local", |o| o.starts_with(&ip)).await?;
    assert!(full.contains("web.default.svc.cluster.local"), "{full}");
    let short = exec_until(&env, "getent hosts web", |o| o.starts_with(&ip)).await?;
    assert!(short.contains("web"), "{short}");
    let srv = "busybox nslookup -type=SRV _http._tcp.web.default.svc.cluster.local 10.96.0.10";
    exec_until(&env, srv, |o| o.contains("80 web.default.svc.cluster.local")).await?;
    exec_until(&env, "wget -q -T 5 -O - http://web/hostname", |o| o.trim() == "web").await?;
    let by_ip = format!("wget -q -T 5 -O - http://{ip}/hostname");
    exec_until(&env, &by_ip, |o| o.trim() == "web").await?;

    // No endpoint left: refused at once, as kube-proxy's REJECT.
    pods.delete("web", &DeleteParams::default()).await?;
    no_endpoints_left(&env, "web").await?;
    let failed = format!("wget -T 10 -O - http://{ip}/hostname 2>&1; echo rc=$?");
    exec_until(&env, &failed, |o| o.contains("refused")).await?;
    let started = Instant::now();
    let out = kubectl(&env, &["exec", "client", "--", "sh", "-c", &failed]).await?;
    assert!(started.elapsed() < PROMPT, "a Service without endpoints did not refuse at once: {out}");
    assert!(out.contains("Connection refused") && !out.contains("rc=0"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_service_resolves_to_its_pods() -> Result<(), Error> {
    let (env, _tmp) = env_with_client().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    let db = pod("db", "example.com/web:v1", json!({"hostname": "db-0", "subdomain": "db"}))?;
    pods.create(&PostParams::default(), &db).await?;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"name": "http", "port": 8080}]}});
    services.create(&PostParams::default(), &serde_json::from_value(svc)?).await?;
    let db = wait(&pods, "db", |p: Option<&Pod>| p.and_then(|p| p.status.as_ref()?.pod_ip.as_ref()).is_some()).await?;
    let pod_ip = db.status.and_then(|s| s.pod_ip).ok_or("no pod IP")?;

    exec_until(&env, "getent hosts db", |o| o.starts_with(&pod_ip)).await?;
    exec_until(&env, "getent hosts db-0.db.default.svc.cluster.local", |o| o.starts_with(&pod_ip)).await?;
    exec_until(&env, "wget -q -T 5 -O - http://db-0.db:8080/hostname", |o| o.trim() == "db-0" || o.trim() == "db")
        .await?;
    // Its named port's SRV names the endpoint; the endpoint's address names it back (PTR);
    // the pod's dashed address is an A record under `<ns>.pod`.
    let srv = "busybox nslookup -type=SRV _http._tcp.db.default.svc.cluster.local 10.96.0.10";
    exec_until(&env, srv, |o| o.contains("8080 db-0.db.default.svc.cluster.local")).await?;
    let ptr = format!("busybox nslookup {pod_ip} 10.96.0.10");
    exec_until(&env, &ptr, |o| o.contains("db-0.db.default.svc.cluster.local")).await?;
    let dashed = pod_ip.replace('.', "-");
    let pod_record = format!("getent hosts {dashed}.default.pod.cluster.local");
    exec_until(&env, &pod_record, |o| o.starts_with(&pod_ip)).await?;
    // An IPv4-only name answers AAAA with no records (NOERROR), not NXDOMAIN.
    let aaaa = "busybox nslookup -type=AAAA db.default.svc.cluster.local 10.96.0.10; echo rc=$?";
    let out = exec_until(&env, aaaa, |o| o.contains("rc=")).await?;
    assert!(!out.contains("NXDOMAIN"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_cluster_name_is_nxdomain_at_once() -> Result<(), Error> {
    let (env, _tmp) = env_with_client().await?;
    // The kube-dns Service answers, by its own name too.
    exec_until(&env, "getent hosts kube-dns.kube-system", |o| o.starts_with("10.96.0.10")).await?;
    let script = "getent hosts nothing.default.svc.cluster.local; echo rc=$?; \
                  busybox nslookup nothing.default.svc.cluster.local. 10.96.0.10 2>&1; true";
    let started = Instant::now();
    let out = kubectl(&env, &["exec", "client", "--", "sh", "-c", script]).await?;
    assert!(started.elapsed() < PROMPT, "an unknown name took {:?}: {out}", started.elapsed());
    assert!(out.contains("rc=2"), "getent found an unknown name: {out}");
    assert!(out.contains("NXDOMAIN"), "not NXDOMAIN: {out}");
    // A name outside the cluster goes to the host's nameservers: answered (or SERVFAIL
    // when they are silent, as in a sandbox) before glibc's 5 s retry.
    let started = Instant::now();
    kubectl(&env, &["exec", "client", "--", "sh", "-c", "getent hosts opkit-test.invalid.; true"]).await?;
    assert!(started.elapsed() < Duration::from_secs(5), "a forwarded name took {:?}", started.elapsed());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_spreads_over_its_ready_endpoints() -> Result<(), Error> {
    let (env, _tmp) = env_with_client().await?;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "spread"},
        "spec": {"selector": {"tier": "spread"}, "ports": [{"port": 80, "targetPort": 8080}]}});
    services.create(&PostParams::default(), &serde_json::from_value(svc)?).await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    // The second backend comes while the Service already has the first: the listener
    // made for the first serves both.
    for name in ["spread-a", "spread-b"] {
        let mut backend = pod(name, "example.com/web:v1", json!({}))?;
        backend.metadata.labels.get_or_insert_default().insert("tier".into(), "spread".into());
        pods.create(&PostParams::default(), &backend).await?;
        exec_until(&env, "wget -q -T 5 -O - http://spread/hostname", |o| o.trim() == name).await?;
    }
    exec_until(&env, "wget -q -T 5 -O - http://spread/hostname", |o| o.trim() == "spread-a").await?;
    Ok(())
}

/// A LoadBalancer Service answers as kube-proxy makes it answer: at its ClusterIP, at its
/// nodePort on every node's address, and at its load balancer address and port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reaches_a_service_at_its_node_port_on_every_node_and_at_its_load_balancer() -> Result<(), Error> {
    let (env, _tmp) = env_with_client().await?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("web", "example.com/web:v1", json!({}))?).await?;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}});
    services.create(&PostParams::default(), &serde_json::from_value(svc)?).await?;
    let spec = services.get("web").await?.spec.ok_or("no spec")?;
    let node_port = spec.ports.iter().flatten().find_map(|p| p.node_port).ok_or("no nodePort allocated")?;

    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client());
    let node_ips: Vec<String> = nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.status?.addresses?.into_iter().find(|a| a.type_ == "InternalIP").map(|a| a.address))
        .collect();
    assert!(!node_ips.is_empty(), "the cluster lists no node address");
    for ip in &node_ips {
        exec_until(&env, &format!("wget -q -T 5 -O - http://{ip}:{node_port}/hostname"), |o| o.trim() == "web").await?;
    }

    let deadline = Instant::now() + WAIT;
    let ingress = loop {
        let status = services.get("web").await?.status;
        let ingress = status.and_then(|s| s.load_balancer?.ingress?.into_iter().find_map(|i| i.ip));
        match ingress {
            Some(ip) => break ip,
            None if Instant::now() > deadline => return Err("the LoadBalancer got no address".into()),
            None => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    exec_until(&env, &format!("wget -q -T 5 -O - http://{ingress}/hostname"), |o| o.trim() == "web").await?;
    // A port nothing serves on a node's address is refused, not proxied.
    let unused = if node_port == 32767 { 32766 } else { node_port + 1 };
    let refused = format!("wget -T 5 -O - http://{}:{unused}/hostname 2>&1; echo rc=$?", node_ips[0]);
    let out = kubectl(&env, &["exec", "client", "--", "sh", "-c", &refused]).await?;
    assert!(!out.contains("rc=0"), "{out}");
    Ok(())
}

/// A UDP echo server on 5353 (Debian's perl-base, from the host's `/usr`), answering
/// `<its hostname>:<datagram>`.
const UDP_ECHO: &str = r#"exec perl -MIO::Socket::INET -e 'open(my $f, "<", "/etc/hostname"); chomp(my $h = <$f>); my $s = IO::Socket::INET->new(LocalPort => 5353, Proto => "udp") or die "bind: $!"; while (defined(my $peer = $s->recv(my $m, 2048))) { $s->send("$h:$m", 0, $peer) }'"#;

/// A perl UDP client sending `ping` to `target` (`host:port`) and printing `reply=…`, or
/// `no reply: …` with the error after 2 s.
fn udp_ping(target: &str) -> String {
    format!(
        r#"perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => "{target}", Proto => "udp") or die "socket: $!"; $s->send("ping"); $r = ""; eval {{ local $SIG{{ALRM}} = sub {{ die "timeout
" }}; alarm 2; $s->recv($r, 2048) or die "$!
"; alarm 0 }}; print $r ne "" ? "reply=$r
" : "no reply: $@
"'"#
    )
}

/// A UDP Service port is proxied as kube-proxy proxies it: each client's datagrams reach
/// a ready endpoint at the target port, its replies come back from the ClusterIP, and
/// with no endpoint left a datagram is refused (port unreachable) at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reaches_a_udp_service_by_name_and_cluster_ip() -> Result<(), Error> {
    let (env, tmp) = env_with_client().await?;
    load_script(&env, tmp.path(), "example.com/udp-echo:v1", UDP_ECHO)?;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");
    pods.create(&PostParams::default(), &pod("echo", "example.com/udp-echo:v1", json!({}))?).await?;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"},
                 "ports": [{"name": "echo", "port": 7, "targetPort": 5353, "protocol": "UDP"}]}});
    services.create(&PostParams::default(), &serde_json::from_value(svc)?).await?;
    let ip = cluster_ip(&env, "echo").await?;

    exec_until(&env, &udp_ping("echo:7"), |o| o.trim() == "reply=echo:ping").await?;
    exec_until(&env, &udp_ping(&format!("{ip}:7")), |o| o.trim() == "reply=echo:ping").await?;
    // Its named port is an SRV record under `_udp`.
    let srv = "busybox nslookup -type=SRV _echo._udp.echo.default.svc.cluster.local 10.96.0.10";
    exec_until(&env, srv, |o| o.contains("7 echo.default.svc.cluster.local")).await?;

    pods.delete("echo", &DeleteParams::default()).await?;
    no_endpoints_left(&env, "echo").await?;
    let refused = udp_ping(&format!("{ip}:7"));
    exec_until(&env, &refused, |o| o.contains("refused")).await?;
    let started = Instant::now();
    let out = kubectl(&env, &["exec", "client", "--", "sh", "-c", &refused]).await?;
    assert!(started.elapsed() < PROMPT, "a UDP Service without endpoints did not refuse at once: {out}");
    assert!(out.contains("no reply: Connection refused"), "{out}");
    Ok(())
}
