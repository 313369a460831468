//! What kube-apiserver adds to built-in objects on create: the DefaultTolerationSeconds
//! admission plugin's pod tolerations, and Service cluster IPs, node ports and health
//! check node ports.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Service, ServicePort, ServiceSpec, Toleration};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::common::{env, expect_status};

fn pod(name: &str, tolerations: Option<Vec<Toleration>>) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("busybox:1.36".into()),
                ..Default::default()
            }],
            tolerations,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn no_execute(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        ..Default::default()
    }
}

#[tokio::test]
async fn pods_get_default_not_ready_and_unreachable_tolerations() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    let created = pods.create(&PostParams::default(), &pod("plain", None)).await.expect("create");
    let tolerations = created.spec.expect("spec").tolerations.expect("tolerations");
    assert_eq!(
        tolerations,
        vec![
            no_execute("node.kubernetes.io/not-ready", Some(300)),
            no_execute("node.kubernetes.io/unreachable", Some(300))
        ]
    );

    // A toleration the pod already has for one key is kept as is; only the other is added.
    let own = no_execute("node.kubernetes.io/unreachable", Some(5));
    let created = pods.create(&PostParams::default(), &pod("own", Some(vec![own.clone()]))).await.expect("create");
    assert_eq!(
        created.spec.expect("spec").tolerations.expect("tolerations"),
        vec![own, no_execute("node.kubernetes.io/not-ready", Some(300))]
    );

    // A toleration of every taint (empty key, operator Exists) covers both.
    let all = Toleration { operator: Some("Exists".into()), ..Default::default() };
    let created = pods.create(&PostParams::default(), &pod("all", Some(vec![all.clone()]))).await.expect("create");
    assert_eq!(created.spec.expect("spec").tolerations.expect("tolerations"), vec![all]);
}

fn service(name: &str, type_: &str, ports: &[(i32, Option<i32>)]) -> Service {
    Service {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(port, node_port)| ServicePort {
                        name: Some(format!("p{port}")),
                        port: *port,
                        node_port: *node_port,
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node_ports(svc: &Service) -> Vec<Option<i32>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .map(|ps| ps.iter().map(|p| p.node_port).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn node_port_services_get_free_node_ports_and_conflicts_are_invalid() {
    let env = env().await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let pp = PostParams::default();

    // Each port of a NodePort Service gets its own port of 30000-32767.
    let auto = services.create(&pp, &service("auto", "NodePort", &[(80, None), (443, None)])).await.expect("create");
    let allocated = node_ports(&auto);
    let ports: Vec<i32> = allocated.iter().map(|p| p.expect("nodePort allocated")).collect();
    assert!(ports.iter().all(|p| (30000..=32767).contains(p)), "{ports:?}");
    assert_ne!(ports[0], ports[1]);

    // A ClusterIP Service gets none.
    let plain = services.create(&pp, &service("plain", "ClusterIP", &[(80, None)])).await.expect("create");
    assert_eq!(node_ports(&plain), vec![None]);

    // A requested port is kept; asking for one another Service holds is refused.
    let fixed = services.create(&pp, &service("fixed", "NodePort", &[(80, Some(30080))])).await.expect("create");
    assert_eq!(node_ports(&fixed), vec![Some(30080)]);
    let s =
        expect_status(services.create(&pp, &service("clash", "NodePort", &[(80, Some(30080))])).await, 422, "Invalid");
    assert_eq!(
        s.message,
        "Service \"clash\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let taken = ports[1];
    let s = expect_status(
        services.create(&pp, &service("clash-2", "NodePort", &[(80, Some(taken))])).await,
        422,
        "Invalid",
    );
    assert!(s.message.contains("provided port is already allocated"), "{}", s.message);
    expect_status(services.get("clash").await, 404, "NotFound");

    // Outside the range is refused too.
    let s = expect_status(services.create(&pp, &service("low", "NodePort", &[(80, Some(8080))])).await, 422, "Invalid");
    assert!(s.message.contains("provided port is not in the valid range"), "{}", s.message);

    // An update that leaves nodePort out keeps the allocated ones; the Service's own
    // ports are not a conflict.
    let mut again = services.get("auto").await.expect("get");
    if let Some(ps) = again.spec.as_mut().and_then(|s| s.ports.as_mut()) {
        for p in ps {
            p.node_port = None;
        }
    }
    let replaced = services.replace("auto", &pp, &again).await.expect("replace");
    assert_eq!(node_ports(&replaced), allocated);
}

#[tokio::test]
async fn local_load_balancers_get_a_health_check_node_port() {
    let env = env().await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let pp = PostParams::default();
    let mut lb = service("edge", "LoadBalancer", &[(80, None)]);
    if let Some(spec) = lb.spec.as_mut() {
        spec.external_traffic_policy = Some("Local".into());
    }
    let created = services.create(&pp, &lb).await.expect("create");
    let spec = created.spec.clone().unwrap_or_default();
    let health = spec.health_check_node_port.expect("a health check node port");
    assert!((30000..=32767).contains(&health), "{health}");
    assert_ne!(Some(health), node_ports(&created)[0]);

    // Kept on update; another Service cannot take it.
    let replaced = services.replace("edge", &pp, &created).await.expect("replace");
    assert_eq!(replaced.spec.and_then(|s| s.health_check_node_port), Some(health));
    let s =
        expect_status(services.create(&pp, &service("clash", "NodePort", &[(80, Some(health))])).await, 422, "Invalid");
    assert!(s.message.contains("provided port is already allocated"), "{}", s.message);

    // A Cluster policy has none; a NodePort Service defaults to it.
    let cluster = services.create(&pp, &service("wide", "LoadBalancer", &[(80, None)])).await.expect("create");
    let spec = cluster.spec.unwrap_or_default();
    assert_eq!(spec.health_check_node_port, None);
    assert_eq!(spec.external_traffic_policy.as_deref(), Some("Cluster"));
}

#[tokio::test]
async fn cluster_ips_are_unique_and_in_the_service_range() {
    let env = env().await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let pp = PostParams::default();
    let mut ips = std::collections::BTreeSet::new();
    for i in 0..40 {
        let created =
            services.create(&pp, &service(&format!("s{i}"), "ClusterIP", &[(80, None)])).await.expect("create");
        let ip = created.spec.and_then(|s| s.cluster_ip).expect("a cluster IP");
        let addr: std::net::Ipv4Addr = ip.parse().expect("an IPv4 address");
        assert!(addr.octets()[0] == 10 && (96..=111).contains(&addr.octets()[1]), "{ip} is outside 10.96.0.0/12");
        assert!(ips.insert(ip.clone()), "{ip} handed out twice");
    }
    let with_ip = |name: &str, ip: &str| {
        let mut s = service(name, "ClusterIP", &[(80, None)]);
        if let Some(spec) = s.spec.as_mut() {
            spec.cluster_ip = Some(ip.into());
        }
        s
    };
    let s = expect_status(services.create(&pp, &with_ip("outside", "192.168.1.10")).await, 422, "Invalid");
    assert!(
        s.message.contains(
            "the provided IP (192.168.1.10) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
        ),
        "{}",
        s.message
    );
    let held = ips.iter().next().cloned().unwrap_or_default();
    let s = expect_status(services.create(&pp, &with_ip("twin", &held)).await, 422, "Invalid");
    assert!(s.message.contains("provided IP is already allocated"), "{}", s.message);
    let chosen = services.create(&pp, &with_ip("chosen", "10.100.0.10")).await.expect("a free IP in range");
    assert_eq!(chosen.spec.and_then(|s| s.cluster_ip).as_deref(), Some("10.100.0.10"));
}
