//! What kube-apiserver's pod REST checks before it streams from a kubelet (`pods/log`,
//! `pods/exec`, `pods/attach`, `pods/portforward`: kube's `LogLocation`, `ExecLocation`,
//! `AttachLocation` and `PortForwardLocation`), with its codes and messages: the pod
//! exists, the container is named (a pod with one container needs no name) and is one of
//! the pod's, the pod is on a node, the log options are valid and the container is not
//! still waiting to start; and where that node's kubelet listens: the node's
//! [`KUBELET_ENDPOINT_ANNOTATION`], else its InternalIP and kubelet port. Only kubelets
//! on this machine's loopback are reached (a simulated node's address leads nowhere).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::Registry;
use crate::error::{ApiError, ApiResult};
use crate::schema::FieldError;
use crate::storage::ResourceId;

/// The Node annotation naming where its kubelet's server listens (`host:port`).
pub(crate) const KUBELET_ENDPOINT_ANNOTATION: &str = "opkit.dev/kubelet-endpoint";
/// The kubelet port kube assumes when a Node reports none.
const DEFAULT_KUBELET_PORT: i64 = 10250;

/// A pod subresource served by the pod's kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PodStream {
    /// `pods/log`: `/containerLogs/{ns}/{pod}/{container}`.
    Log,
    /// `pods/exec`: `/exec/{ns}/{pod}/{container}`.
    Exec,
    /// `pods/attach`: `/attach/{ns}/{pod}/{container}`.
    Attach,
    /// `pods/portforward`: `/portForward/{ns}/{pod}`.
    PortForward,
}

impl PodStream {
    /// The stream a `pods` subresource names, if it is one.
    pub(crate) fn of(subresource: &str) -> Option<PodStream> {
        match subresource {
            "log" => Some(PodStream::Log),
            "exec" => Some(PodStream::Exec),
            "attach" => Some(PodStream::Attach),
            "portforward" => Some(PodStream::PortForward),
            _ => None,
        }
    }

    /// The kubelet's path segment for it.
    fn kubelet_path(self) -> &'static str {
        match self {
            PodStream::Log => "containerLogs",
            PodStream::Exec => "exec",
            PodStream::Attach => "attach",
            PodStream::PortForward => "portForward",
        }
    }
}

/// Where a stream is served: the kubelet's `host:port` and the path there (no query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KubeletLocation {
    /// The kubelet's `host:port`.
    pub address: String,
    /// The path on the kubelet.
    pub path: String,
}

/// The log options kube forwards to the kubelet, in the order it writes them.
pub(crate) const LOG_OPTIONS: [&str; 7] =
    ["follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes"];

impl Registry {
    /// Checks a `kind` request for pod `name` in `namespace` as kube does and finds the
    /// kubelet that serves it. None for the logs of a pod on no node yet (kube answers
    /// them with an empty body).
    pub(crate) async fn pod_stream_location(
        &self,
        kind: PodStream,
        namespace: &str,
        name: &str,
        query: &HashMap<String, String>,
    ) -> ApiResult<Option<KubeletLocation>> {
        if kind == PodStream::Log {
            validate_log_options(name, query)?;
        }
        let pod = self
            .stored(&ResourceId::new("", "pods"), namespace, name)
            .await?
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let container = match kind {
            PodStream::PortForward => None,
            _ => Some(container_of(&pod, name, query.get("container").map(String::as_str).unwrap_or_default())?),
        };
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if node.is_empty() {
            return match kind {
                PodStream::Log => Ok(None),
                _ => Err(ApiError::bad_request(format!("pod {name} does not have a host assigned"))),
            };
        }
        if let Some(container) = &container
            && kind == PodStream::Log
            && !is_true(query, "previous")
        {
            check_started(&pod, name, container)?;
        }
        if kind != PodStream::Log {
            check_runs_for_real(&pod, name, kind, container.as_deref())?;
        }
        let address = self.kubelet_address(node).await?;
        let mut path = format!("/{}/{namespace}/{name}", kind.kubelet_path());
        if let Some(container) = container {
            path.push('/');
            path.push_str(&container);
        }
        Ok(Some(KubeletLocation { address, path }))
    }

    /// Where the kubelet of `node` listens: its annotation, else its InternalIP and
    /// `status.daemonEndpoints.kubeletEndpoint.port`; only a loopback address is used.
    async fn kubelet_address(&self, node_name: &str) -> ApiResult<String> {
        let node = self
            .stored(&ResourceId::new("", "nodes"), "", node_name)
            .await?
            .ok_or_else(|| ApiError::not_found("", "nodes", node_name))?;
        let annotated = node["metadata"]["annotations"][KUBELET_ENDPOINT_ANNOTATION].as_str();
        let address = match annotated.filter(|a| !a.is_empty()) {
            Some(endpoint) => endpoint.to_owned(),
            None => {
                let addresses = node["status"]["addresses"].as_array().cloned().unwrap_or_default();
                let Some(ip) = addresses.iter().find(|a| a["type"] == "InternalIP").and_then(|a| a["address"].as_str())
                else {
                    let known: Vec<String> = addresses
                        .iter()
                        .map(|a| {
                            format!("{{{} {}}}", a["type"].as_str().unwrap_or(""), a["address"].as_str().unwrap_or(""))
                        })
                        .collect();
                    return Err(ApiError::internal_raw(format!(
                        "no preferred addresses found; known addresses: [{}]",
                        known.join(" ")
                    )));
                };
                let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["port"]
                    .as_i64()
                    .filter(|p| *p > 0)
                    .unwrap_or(DEFAULT_KUBELET_PORT);
                if ip.contains(':') { format!("[{ip}]:{port}") } else { format!("{ip}:{port}") }
            }
        };
        let host = address.rsplit_once(':').map_or(address.as_str(), |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if !host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
            return Err(ApiError::internal_raw(format!(
                "the kubelet of node {node_name:?} is at {address}: the local control plane sends no traffic off this machine, and only a kubelet on a loopback address serves pods (annotation {KUBELET_ENDPOINT_ANNOTATION})"
            )));
        }
        Ok(address)
    }
}

fn is_true(query: &HashMap<String, String>, key: &str) -> bool {
    matches!(query.get(key).map(String::as_str), Some("true" | "1"))
}

/// The names of a list of containers (`spec.containers`, `spec.initContainers`, ...).
fn names(containers: &Value) -> Vec<&str> {
    containers.as_array().into_iter().flatten().filter_map(|c| c["name"].as_str()).collect()
}

/// kube's `ValidateContainer`: the named container, which must be one of the pod's
/// (init and ephemeral ones included), or the pod's only container.
fn container_of(pod: &Value, pod_name: &str, requested: &str) -> ApiResult<String> {
    let spec = &pod["spec"];
    let containers = names(&spec["containers"]);
    if requested.is_empty() {
        return match containers.as_slice() {
            [only] => Ok((*only).to_owned()),
            [] => Err(ApiError::bad_request(format!("pod {pod_name} does not have a container"))),
            many => {
                let mut message = format!(
                    "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                    many.join(" ")
                );
                let init = names(&spec["initContainers"]);
                if !init.is_empty() {
                    message.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
                }
                Err(ApiError::bad_request(message))
            }
        };
    }
    let known = containers
        .iter()
        .chain(names(&spec["initContainers"]).iter())
        .chain(names(&spec["ephemeralContainers"]).iter())
        .any(|c| *c == requested);
    if !known {
        return Err(ApiError::bad_request(format!("container {requested} is not valid for pod {pod_name}")));
    }
    Ok(requested.to_owned())
}

/// The kubelet's check before it serves a container's current log: a container still
/// waiting (or not yet reported) has none (`container "c" in pod "p" is waiting to start:
/// ContainerCreating`, the kubelet's words).
fn check_started(pod: &Value, pod_name: &str, container: &str) -> ApiResult<()> {
    let status = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"]
        .iter()
        .filter_map(|list| pod["status"][list].as_array())
        .flatten()
        .find(|s| s["name"] == container);
    let waiting = |reason: &str| {
        let why = match reason {
            "ErrImagePull" => "image can't be pulled".to_owned(),
            "ImagePullBackOff" => "trying and failing to pull image".to_owned(),
            other => other.to_owned(),
        };
        ApiError::bad_request(format!("container {container:?} in pod {pod_name:?} is waiting to start: {why}"))
    };
    let Some(status) = status else { return Err(waiting("ContainerCreating")) };
    let state = &status["state"];
    let has_logs = state["running"].is_object()
        || state["terminated"].is_object()
        || status["lastState"]["terminated"].is_object();
    match state["waiting"].as_object() {
        Some(w) if !has_logs => Err(waiting(w.get("reason").and_then(Value::as_str).unwrap_or_default())),
        _ => Ok(()),
    }
}

/// The container ID prefix of containers the local kubelet runs as real processes
/// (opkit-controllers' `REAL_CONTAINER_ID_PREFIX`; the API server does not depend on it).
/// A simulated container's ID has another runtime's prefix.
const REAL_CONTAINER_ID_PREFIX: &str = "opkit://";

/// Refuses an exec, attach or port-forward to a simulated pod, which the kubelet shows as
/// Running but runs no process: the answer says so and names the images `opkit cluster
/// load` would have to load (the kubelet itself would only say the pod does not exist).
/// A pod whose containers have no ID yet is left to the kubelet.
fn check_runs_for_real(pod: &Value, pod_name: &str, kind: PodStream, container: Option<&str>) -> ApiResult<()> {
    let statuses: Vec<&Value> = ["containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"]
        .iter()
        .filter_map(|list| pod["status"][list].as_array())
        .flatten()
        .collect();
    let simulated = |s: &&Value| {
        s["containerID"].as_str().is_some_and(|id| !id.is_empty() && !id.starts_with(REAL_CONTAINER_ID_PREFIX))
    };
    if !statuses.iter().any(simulated) {
        return Ok(());
    }
    let spec = &pod["spec"];
    let image_of = |name: &str| {
        ["containers", "initContainers", "ephemeralContainers"]
            .iter()
            .filter_map(|list| spec[list].as_array())
            .flatten()
            .find(|c| c["name"] == name)
            .and_then(|c| c["image"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut images: Vec<String> = match container {
        Some(c) => vec![image_of(c)],
        None => names(&spec["containers"]).into_iter().map(image_of).collect(),
    };
    images.retain(|i| !i.is_empty());
    images.dedup();
    let what = match kind {
        PodStream::PortForward => "port-forward",
        PodStream::Attach => "attach",
        _ => "exec",
    };
    let subject = match container {
        Some(c) => format!("container {c:?} of pod {pod_name:?} is simulated: it runs no process to {what} to"),
        None => format!("pod {pod_name:?} is simulated: it runs no process to {what} to"),
    };
    let load = match images.as_slice() {
        [] => String::new(),
        [image] => format!(
            "; to run it for real, load its image with `opkit cluster load {image} --binary PATH` and recreate the pod"
        ),
        many => format!(
            "; to run it for real, load its images ({}) with `opkit cluster load IMAGE --binary PATH` and recreate the pod",
            many.join(", ")
        ),
    };
    Err(ApiError::bad_request(format!("{subject}{load}")))
}

/// kube's `PodPortForwardOptions` read from a `pods/portforward` query (`ports`, repeated
/// or comma-separated) and written as the kubelet's query, as kube's `streamParams` does:
/// one `port` with the ports comma-separated, nothing else. None when no port is named
/// (a SPDY client names them in its streams instead).
pub(crate) fn kubelet_port_forward_query(raw_query: Option<&str>) -> ApiResult<Option<String>> {
    let mut ports: Vec<String> = Vec::new();
    for pair in raw_query.unwrap_or_default().split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key != "ports" {
            continue;
        }
        let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
        for port in value.split(',') {
            let parsed: i32 = port.trim().parse().map_err(|e: std::num::ParseIntError| {
                let why = match e.kind() {
                    std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => "value out of range",
                    _ => "invalid syntax",
                };
                ApiError::bad_request(format!("strconv.ParseInt: parsing {port:?}: {why}"))
            })?;
            ports.push(parsed.to_string());
        }
    }
    Ok((!ports.is_empty()).then(|| format!("port={}", ports.join("%2C"))))
}

/// kube's `ValidatePodLogOptions`, after its query decoding (a value that is not a number
/// or a time is a 400).
fn validate_log_options(name: &str, query: &HashMap<String, String>) -> ApiResult<()> {
    let int = |key: &str| -> ApiResult<Option<i64>> {
        match query.get(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("{key}: strconv.ParseInt: parsing {v:?}: invalid syntax"))),
        }
    };
    let (tail_lines, limit_bytes, since_seconds) = (int("tailLines")?, int("limitBytes")?, int("sinceSeconds")?);
    let since_time = query.get("sinceTime").filter(|v| !v.is_empty());
    if let Some(t) = since_time
        && t.parse::<jiff::Timestamp>().is_err()
    {
        return Err(ApiError::bad_request(format!(
            "sinceTime: parsing time {t:?} as \"2006-01-02T15:04:05Z07:00\": cannot parse"
        )));
    }
    let mut errs = Vec::new();
    if let Some(n) = tail_lines.filter(|n| *n < 0) {
        errs.push(FieldError::invalid("tailLines", &json!(n), "must be greater than or equal to 0"));
    }
    if let Some(n) = limit_bytes.filter(|n| *n < 1) {
        errs.push(FieldError::invalid("limitBytes", &json!(n), "must be greater than 0"));
    }
    match (since_seconds, since_time) {
        (Some(_), Some(_)) => {
            errs.push(FieldError::forbidden("", "at most one of `sinceTime` or `sinceSeconds` may be specified"));
        }
        (Some(n), None) if n < 1 => {
            errs.push(FieldError::invalid("sinceSeconds", &json!(n), "must be greater than 0"));
        }
        _ => {}
    }
    if errs.is_empty() { Ok(()) } else { Err(ApiError::invalid("", "PodLogOptions", name, &errs)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n",
            "containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "init"}]},
            "status": {"containerStatuses": [
                {"name": "a", "state": {"waiting": {"reason": "ContainerCreating"}}},
                {"name": "b", "state": {"running": {}}}]}})
    }

    #[test]
    fn containers_are_chosen_as_kube_does() {
        let err = container_of(&pod(), "p", "").expect_err("two containers");
        assert_eq!(
            err.message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]"
        );
        let err = container_of(&pod(), "p", "x").expect_err("no such container");
        assert_eq!(err.message, "container x is not valid for pod p");
        assert_eq!(container_of(&pod(), "p", "init").expect("init container"), "init");
        let single = json!({"spec": {"containers": [{"name": "only"}]}});
        assert_eq!(container_of(&single, "p", "").expect("the only container"), "only");
    }

    #[test]
    fn a_waiting_container_has_no_log_yet() {
        let err = check_started(&pod(), "p", "a").expect_err("waiting");
        assert_eq!(err.message, "container \"a\" in pod \"p\" is waiting to start: ContainerCreating");
        check_started(&pod(), "p", "b").expect("running");
    }

    #[test]
    fn the_clients_ports_become_the_kubelets_port() {
        assert_eq!(kubelet_port_forward_query(Some("ports=8080")).expect("one"), Some("port=8080".to_owned()));
        assert_eq!(
            kubelet_port_forward_query(Some("ports=80%2C443&ports=9000&other=x")).expect("several"),
            Some("port=80%2C443%2C9000".to_owned())
        );
        assert_eq!(kubelet_port_forward_query(None).expect("none"), None);
        assert_eq!(kubelet_port_forward_query(Some("port=80")).expect("the kubelet's own name is not kube's"), None);
        let err = kubelet_port_forward_query(Some("ports=http")).expect_err("not a number");
        assert_eq!((err.code, err.message.as_str()), (400, r#"strconv.ParseInt: parsing "http": invalid syntax"#));
    }

    #[test]
    fn a_simulated_pod_says_so_and_names_its_image() {
        let pod = json!({"spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
            "status": {"containerStatuses": [{"name": "app", "containerID": "containerd://0123"}]}});
        let err = check_runs_for_real(&pod, "web", PodStream::Exec, Some("app")).expect_err("simulated");
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "container \"app\" of pod \"web\" is simulated: it runs no process to exec to; to run it for real, load its image with `opkit cluster load nginx:1.25 --binary PATH` and recreate the pod"
        );
        let err = check_runs_for_real(&pod, "web", PodStream::PortForward, None).expect_err("simulated");
        assert!(err.message.starts_with("pod \"web\" is simulated: it runs no process to port-forward to"));
        let real = json!({"spec": pod["spec"], "status": {"containerStatuses": [{"name": "app", "containerID": "opkit://0123"}]}});
        check_runs_for_real(&real, "web", PodStream::Exec, Some("app")).expect("a real pod");
        let starting = json!({"spec": pod["spec"], "status": {"containerStatuses": [{"name": "app"}]}});
        check_runs_for_real(&starting, "web", PodStream::Exec, Some("app")).expect("left to the kubelet");
    }

    #[test]
    fn log_options_are_validated_with_causes() {
        let q = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let err = validate_log_options("p", &q(&[("tailLines", "-1"), ("limitBytes", "0")])).expect_err("invalid");
        assert_eq!(err.code, 422);
        assert_eq!(err.details.causes.len(), 2);
        assert_eq!(err.details.causes[0].field, "tailLines");
        let err = validate_log_options("p", &q(&[("sinceSeconds", "5"), ("sinceTime", "2024-01-01T00:00:00Z")]))
            .expect_err("exclusive");
        assert_eq!(err.code, 422);
        assert_eq!(validate_log_options("p", &q(&[("tailLines", "x")])).expect_err("not a number").code, 400);
        validate_log_options("p", &q(&[("tailLines", "0"), ("sinceSeconds", "10")])).expect("valid");
    }
}
