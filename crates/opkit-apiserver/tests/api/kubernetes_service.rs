//! The `kubernetes` Service in `default` and its Endpoints and EndpointSlice, kept as
//! kube-apiserver's bootstrap controller keeps them (created at start, recreated when
//! deleted, repaired when changed), its cluster IP reserved, and the serving certificate
//! valid for its in-cluster names.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use opkit_apiserver::{ApiServer, ServerConfig};
use opkit_serve::tls::DevCa;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::json;
use tokio::net::TcpStream;

use crate::common::{env, expect_status, within};
use crate::pod_streaming::run_kubectl;

#[tokio::test]
async fn the_service_and_its_endpoints_name_the_server() {
    let env = env().await;
    let port = i32::from(env.server().addr().port());
    let svc = Api::<Service>::namespaced(env.client(), "default").get("kubernetes").await.expect("the Service");
    let labels = svc.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("component").map(String::as_str), Some("apiserver"));
    assert_eq!(labels.get("provider").map(String::as_str), Some("kubernetes"));
    let spec = svc.spec.expect("spec");
    assert_eq!((spec.type_.as_deref(), spec.cluster_ip.as_deref()), (Some("ClusterIP"), Some("10.96.0.1")));
    assert_eq!(spec.selector, None);
    let ports = spec.ports.expect("ports");
    assert_eq!(
        (ports[0].name.as_deref(), ports[0].port, ports[0].protocol.as_deref()),
        (Some("https"), 443, Some("TCP"))
    );
    assert_eq!(ports[0].target_port, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port)));

    let ep = Api::<Endpoints>::namespaced(env.client(), "default").get("kubernetes").await.expect("the Endpoints");
    let subset = &ep.subsets.expect("subsets")[0];
    assert_eq!(subset.addresses.as_ref().expect("addresses")[0].ip, "127.0.0.1");
    let ep_port = &subset.ports.as_ref().expect("ports")[0];
    assert_eq!((ep_port.name.as_deref(), ep_port.port), (Some("https"), port));

    let slice =
        Api::<EndpointSlice>::namespaced(env.client(), "default").get("kubernetes").await.expect("the EndpointSlice");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("kubernetes.io/service-name").map(String::as_str), Some("kubernetes"));
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.endpoints[0].addresses, ["127.0.0.1"]);
    let slice_port = &slice.ports.expect("ports")[0];
    assert_eq!((slice_port.name.as_deref(), slice_port.port), (Some("https"), Some(port)));

    // Its cluster IP is no other Service's.
    let other: Service = serde_json::from_value(json!({"metadata": {"name": "other"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 80}]}}))
    .expect("service");
    let status = expect_status(
        Api::<Service>::namespaced(env.client(), "default").create(&PostParams::default(), &other).await,
        422,
        "Invalid",
    );
    assert!(status.message.contains("provided IP is already allocated"), "{}", status.message);

    let (ok, stdout, stderr) = run_kubectl("1.33", &env, &["get", "all", "-n", "default"]).await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("service/kubernetes") && stdout.contains("10.96.0.1"), "{stdout}");
}

#[tokio::test]
async fn the_cluster_controllers_leave_the_objects_alone() {
    let env = within("a cluster with its controllers", opkit_testenv::TestEnv::start()).await.expect("TestEnv");
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let (service, endpoints, slice) = (
        services.get("kubernetes").await.expect("service").metadata,
        Api::<Endpoints>::namespaced(env.client(), "default").get("kubernetes").await.expect("endpoints").metadata,
        Api::<EndpointSlice>::namespaced(env.client(), "default").get("kubernetes").await.expect("slice").metadata,
    );
    // A Service the endpoints controller does serve: once its Endpoints exist, the
    // controllers (endpoints, garbage collector) have been through every Service.
    let web: Service = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}))
    .expect("service");
    services.create(&PostParams::default(), &web).await.expect("create web");
    within(
        "the endpoints controller to serve web",
        await_condition(Api::<Endpoints>::namespaced(env.client(), "default"), "web", |e: Option<&Endpoints>| {
            e.is_some()
        }),
    )
    .await
    .expect("watch");
    let now = (
        services.get("kubernetes").await.expect("service").metadata,
        Api::<Endpoints>::namespaced(env.client(), "default").get("kubernetes").await.expect("endpoints").metadata,
        Api::<EndpointSlice>::namespaced(env.client(), "default").get("kubernetes").await.expect("slice").metadata,
    );
    assert_eq!(now.0.resource_version, service.resource_version, "the Service is untouched");
    assert_eq!(now.1.resource_version, endpoints.resource_version, "the Endpoints are untouched");
    assert_eq!(now.2.resource_version, slice.resource_version, "the EndpointSlice is untouched");
    assert!(now.2.owner_references.is_none(), "nothing owns the slice (the garbage collector keeps it)");
}

#[tokio::test]
async fn deleted_objects_come_back_and_changed_ones_are_repaired() {
    let env = env().await;
    let services: Api<Service> = Api::namespaced(env.client(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(env.client(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(env.client(), "default");

    let old = slices.get("kubernetes").await.expect("slice").metadata.uid;
    slices.delete("kubernetes", &DeleteParams::default()).await.expect("delete the slice");
    within(
        "the EndpointSlice to be recreated",
        await_condition(slices.clone(), "kubernetes", |s: Option<&EndpointSlice>| {
            s.is_some_and(|s| s.metadata.uid != old)
        }),
    )
    .await
    .expect("watch");

    let old = services.get("kubernetes").await.expect("service").metadata.uid;
    services.delete("kubernetes", &DeleteParams::default()).await.expect("delete the Service");
    let back = within(
        "the Service to be recreated",
        await_condition(services.clone(), "kubernetes", |s: Option<&Service>| s.is_some_and(|s| s.metadata.uid != old)),
    )
    .await
    .expect("watch")
    .expect("the Service");
    assert_eq!(back.spec.and_then(|s| s.cluster_ip).as_deref(), Some("10.96.0.1"));

    let broken = json!({"subsets": [{"addresses": [{"ip": "10.1.2.3"}], "ports": [{"name": "https", "port": 1}]}]});
    endpoints.patch("kubernetes", &PatchParams::default(), &Patch::Merge(&broken)).await.expect("break the Endpoints");
    within(
        "the Endpoints to be repaired",
        await_condition(endpoints.clone(), "kubernetes", |e: Option<&Endpoints>| {
            e.and_then(|e| e.subsets.as_ref())
                .is_some_and(|s| s[0].addresses.as_ref().is_some_and(|a| a[0].ip == "127.0.0.1"))
        }),
    )
    .await
    .expect("watch");

    let selector = json!({"spec": {"selector": {"app": "x"}, "ports": [{"name": "web", "port": 80}]}});
    services.patch("kubernetes", &PatchParams::default(), &Patch::Merge(&selector)).await.expect("change the Service");
    within(
        "the Service to be repaired",
        await_condition(services.clone(), "kubernetes", |s: Option<&Service>| {
            s.and_then(|s| s.spec.as_ref())
                .is_some_and(|spec| spec.selector.is_none() && spec.ports.as_ref().is_some_and(|p| p[0].port == 443))
        }),
    )
    .await
    .expect("watch");
}

/// A TLS handshake with the server at `addr` for `name`, trusting `ca_pem`.
async fn handshake(addr: std::net::SocketAddr, ca_pem: &str, name: &str) -> std::io::Result<()> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("ca")).expect("root");
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await?;
    let server_name = ServerName::try_from(name.to_owned()).expect("a server name");
    within(
        &format!("a handshake for {name}"),
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(server_name, tcp),
    )
    .await
    .map(|_| ())
}

#[tokio::test]
async fn a_data_directorys_certificate_without_the_service_names_is_reissued_by_its_ca() {
    let dir = tempfile::tempdir().expect("tmp");
    let server = within("a durable server", ApiServer::start(ServerConfig::durable(dir.path()))).await.expect("start");
    let ca_pem = server.ca_pem().to_owned();
    let ca = DevCa::from_pem(server.ca_pem(), server.ca_key_pem()).expect("ca");
    within("the server to stop", server.shutdown()).await;
    // A certificate from before the Service's names were added.
    let old = ca.issue_serving_cert("opkit-apiserver", &["localhost".to_owned(), "127.0.0.1".to_owned()]).expect("old");
    std::fs::write(dir.path().join("apiserver.crt"), &old.cert_pem).expect("write crt");
    std::fs::write(dir.path().join("apiserver.key"), &old.key_pem).expect("write key");

    let server = within("the restart", ApiServer::start(ServerConfig::durable(dir.path()))).await.expect("restart");
    assert_eq!(server.ca_pem(), ca_pem, "the same CA");
    handshake(server.addr(), &ca_pem, "kubernetes.default.svc").await.expect("the new certificate names the Service");
    within("the server to stop", server.shutdown()).await;
}

#[tokio::test]
async fn the_serving_certificate_names_the_service() {
    let env = env().await;
    for name in [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "10.96.0.1",
    ] {
        handshake(env.server().addr(), env.server().ca_pem(), name)
            .await
            .unwrap_or_else(|e| panic!("the certificate is not valid for {name}: {e}"));
    }
}
