//! [`decode_object`] on the objects kubectl's typed clients send (`kubectl create
//! namespace|configmap|secret|deployment|service|job|role|serviceaccount`).

use std::collections::BTreeMap;

use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::batch::v1 as batch;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use serde_json::json;

use super::{envelope, go_meta, roundtrip, s};
use crate::protobuf::decode_object;
fn quantity(v: &str) -> Quantity {
    Quantity { string: s(v) }
}

fn map<V: Clone>(entries: &[(&str, V)]) -> BTreeMap<String, V> {
    entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn namespace() {
    let ns = core::Namespace {
        metadata: go_meta("demo", ""),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus { phase: s(""), ..Default::default() }),
    };
    assert_eq!(
        roundtrip(&ns),
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "demo"},
            "spec": {},
            "status": {}
        })
    );
}

#[test]
fn configmap_with_data_and_binary_data() {
    let cm = core::ConfigMap {
        metadata: go_meta("cfg", "default"),
        immutable: None,
        data: map(&[("a.txt", "hello".to_string()), ("empty", String::new())]),
        binary_data: map(&[("bin", vec![0u8, 1, 2, 255])]),
    };
    assert_eq!(
        roundtrip(&cm),
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"a.txt": "hello", "empty": ""},
            "binaryData": {"bin": "AAEC/w=="}
        })
    );
}

#[test]
fn secret_data_is_base64() {
    let secret = core::Secret {
        metadata: go_meta("creds", "default"),
        immutable: None,
        data: map(&[("password", b"s3cr3t".to_vec())]),
        string_data: BTreeMap::new(),
        r#type: s("Opaque"),
    };
    assert_eq!(
        roundtrip(&secret),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"password": "czNjcjN0"},
            "type": "Opaque"
        })
    );
}

#[test]
fn deployment_with_containers_resources_and_intstr() {
    let container = core::Container {
        name: s("web"),
        image: s("nginx:1.27"),
        ports: vec![core::ContainerPort {
            name: s(""),
            host_port: None,
            container_port: Some(80),
            protocol: s("TCP"),
            host_ip: s(""),
        }],
        resources: Some(core::ResourceRequirements {
            limits: map(&[("cpu", quantity("500m")), ("memory", quantity("128Mi"))]),
            requests: map(&[("cpu", quantity("250m"))]),
            claims: vec![],
        }),
        liveness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: s("/healthz"),
                    port: Some(IntOrString { r#type: Some(0), int_val: Some(8080), str_val: s("") }),
                    host: s(""),
                    scheme: s("HTTP"),
                    http_headers: vec![],
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(5),
            ..Default::default()
        }),
        termination_message_path: s("/dev/termination-log"),
        image_pull_policy: s("IfNotPresent"),
        stdin: Some(false),
        ..Default::default()
    };
    let labels = map(&[("app", "web".to_string())]);
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta { labels: labels.clone(), ..go_meta("web", "default").unwrap_or_default() }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(3),
            selector: Some(meta::LabelSelector { match_labels: labels.clone(), match_expressions: vec![] }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta { labels: labels.clone(), ..go_meta("", "").unwrap_or_default() }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    restart_policy: s("Always"),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: s("RollingUpdate"),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString { r#type: Some(1), int_val: Some(0), str_val: s("25%") }),
                    max_surge: Some(IntOrString { r#type: Some(1), int_val: Some(0), str_val: s("25%") }),
                }),
            }),
            min_ready_seconds: Some(0),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    };
    assert_eq!(
        roundtrip(&deployment),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "web",
                            "image": "nginx:1.27",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {
                                "limits": {"cpu": "500m", "memory": "128Mi"},
                                "requests": {"cpu": "250m"}
                            },
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                "initialDelaySeconds": 5
                            },
                            "terminationMessagePath": "/dev/termination-log",
                            "imagePullPolicy": "IfNotPresent",
                            "stdin": false
                        }],
                        "restartPolicy": "Always"
                    }
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}
                },
                "minReadySeconds": 0
            },
            "status": {}
        })
    );
}

#[test]
fn service_with_cluster_ip_and_int_target_port() {
    let service = core::Service {
        metadata: go_meta("web", "default"),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: s(""),
                protocol: s("TCP"),
                port: Some(80),
                target_port: Some(IntOrString { r#type: Some(0), int_val: Some(8080), str_val: s("") }),
                node_port: Some(0),
                ..Default::default()
            }],
            selector: map(&[("app", "web".to_string())]),
            cluster_ip: s("10.96.0.10"),
            cluster_ips: vec!["10.96.0.10".to_string()],
            r#type: s("ClusterIP"),
            external_ips: vec!["1.2.3.4".to_string()],
            session_affinity: s("ClientIP"),
            session_affinity_config: Some(core::SessionAffinityConfig {
                client_ip: Some(core::ClientIpConfig { timeout_seconds: Some(10800) }),
            }),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus::default()),
    };
    assert_eq!(
        roundtrip(&service),
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 0}],
                "selector": {"app": "web"},
                "clusterIP": "10.96.0.10",
                "type": "ClusterIP",
                "externalIPs": ["1.2.3.4"],
                "sessionAffinity": "ClientIP",
                "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
                "clusterIPs": ["10.96.0.10"]
            },
            "status": {}
        })
    );
}

#[test]
fn job_with_times() {
    let job = batch::Job {
        metadata: Some(meta::ObjectMeta {
            creation_timestamp: Some(meta::Time { seconds: Some(1_767_323_045), nanos: Some(0) }),
            annotations: map(&[("note", "x".to_string())]),
            ..go_meta("pi", "default").unwrap_or_default()
        }),
        spec: Some(batch::JobSpec {
            backoff_limit: Some(4),
            active_deadline_seconds: Some(600),
            template: Some(core::PodTemplateSpec {
                metadata: go_meta("", ""),
                spec: Some(core::PodSpec {
                    containers: vec![core::Container {
                        name: s("pi"),
                        image: s("perl"),
                        command: vec!["perl".into(), "-e".into(), "".into()],
                        ..Default::default()
                    }],
                    restart_policy: s("Never"),
                    security_context: Some(core::PodSecurityContext {
                        supplemental_groups: vec![1000, 2000],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: Some(batch::JobStatus {
            start_time: Some(meta::Time { seconds: Some(1_767_323_046), nanos: Some(5) }),
            ..Default::default()
        }),
    };
    assert_eq!(
        roundtrip(&job),
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "pi",
                "namespace": "default",
                "creationTimestamp": "2026-01-02T03:04:05Z",
                "annotations": {"note": "x"}
            },
            "spec": {
                "activeDeadlineSeconds": 600,
                "backoffLimit": 4,
                "template": {
                    "metadata": {},
                    "spec": {
                        "containers": [{"name": "pi", "image": "perl", "command": ["perl", "-e", ""]}],
                        "restartPolicy": "Never",
                        "securityContext": {"supplementalGroups": [1000, 2000]}
                    }
                }
            },
            "status": {"startTime": "2026-01-02T03:04:06Z"}
        })
    );
}

#[test]
fn role_keeps_empty_strings_in_lists() {
    let role = rbac::Role {
        metadata: go_meta("reader", "default"),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into(), "list".into()],
            api_groups: vec![String::new()],
            resources: vec!["pods".into()],
            resource_names: vec![],
            non_resource_ur_ls: vec![],
        }],
    };
    assert_eq!(
        roundtrip(&role),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": "default"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]
        })
    );
}

#[test]
fn service_account_keeps_false_bools() {
    let sa = core::ServiceAccount {
        metadata: go_meta("bot", "default"),
        secrets: vec![core::ObjectReference { name: s("bot-token"), ..Default::default() }],
        image_pull_secrets: vec![core::LocalObjectReference { name: s("regcred") }],
        automount_service_account_token: Some(false),
    };
    assert_eq!(
        roundtrip(&sa),
        json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "bot", "namespace": "default"},
            "secrets": [{"name": "bot-token"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "automountServiceAccountToken": false
        })
    );
}

#[test]
fn pod_acronyms_and_embedded_structs() {
    let pod = core::Pod {
        metadata: go_meta("p", "default"),
        spec: Some(core::PodSpec {
            host_ipc: Some(true),
            set_hostname_as_fqdn: Some(true),
            containers: vec![core::Container {
                name: s("c"),
                env: vec![core::EnvVar {
                    name: s("PASSWORD"),
                    value: s(""),
                    value_from: Some(core::EnvVarSource {
                        secret_key_ref: Some(core::SecretKeySelector {
                            local_object_reference: Some(core::LocalObjectReference { name: s("creds") }),
                            key: s("password"),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                }],
                ..Default::default()
            }],
            volumes: vec![core::Volume {
                name: s("cfg"),
                volume_source: Some(core::VolumeSource {
                    config_map: Some(core::ConfigMapVolumeSource {
                        local_object_reference: Some(core::LocalObjectReference { name: s("cm") }),
                        default_mode: Some(420),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            ..Default::default()
        }),
        status: Some(core::PodStatus {
            pod_ip: s("10.0.0.5"),
            host_ips: vec![core::HostIp { ip: s("192.168.1.2") }],
            ..Default::default()
        }),
    };
    assert_eq!(
        roundtrip(&pod),
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "volumes": [{"name": "cfg", "configMap": {"name": "cm", "defaultMode": 420}}],
                "containers": [{
                    "name": "c",
                    "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]
                }],
                "hostIPC": true,
                "setHostnameAsFQDN": true
            },
            "status": {"podIP": "10.0.0.5", "hostIPs": [{"ip": "192.168.1.2"}]}
        })
    );
}

#[test]
fn unknown_fields_are_skipped() {
    let mut raw = core::Namespace { metadata: go_meta("demo", ""), spec: None, status: None }.encode_to_vec();
    // Fields 90 (varint), 91 (fixed64), 92 (bytes) and 93 (fixed32) are not in Namespace.
    raw.extend([0xd0, 0x05, 0x2a]);
    raw.extend([0xd9, 0x05, 1, 2, 3, 4, 5, 6, 7, 8]);
    raw.extend([0xe2, 0x05, 0x02, b'h', b'i']);
    raw.extend([0xed, 0x05, 1, 2, 3, 4]);
    let value = decode_object(&envelope("v1", "Namespace", raw)).unwrap();
    assert_eq!(value, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}));
}
