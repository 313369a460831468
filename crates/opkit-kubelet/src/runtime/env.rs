//! A real container's environment, as the kubelet makes it: `envFrom` (ConfigMaps and
//! Secrets, with prefix), `env` with `$(VAR)` expansion and `valueFrom` (fieldRef,
//! resourceFieldRef, configMapKeyRef, secretKeyRef), then the service-link variables of
//! the namespace's Services (with `enableServiceLinks`) and the `kubernetes` Service's,
//! naming the address where the pod reaches the API server.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvFromSource, EnvVarSource, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use opkit_apimachinery::quantity;

/// Why a container's environment cannot be made (the container waits with
/// `CreateContainerConfigError` and this message).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EnvError {
    /// A referenced object or key is missing, or a reference is invalid.
    #[error("{0}")]
    Config(String),
    /// Reading a referenced object failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

/// What a container's environment is made from besides the pod itself.
#[derive(Debug, Clone)]
pub(crate) struct EnvInputs {
    /// The pod's IP (from its sandbox).
    pub pod_ip: String,
    /// The node's InternalIP.
    pub host_ip: String,
    /// Where the pod reaches the API server.
    pub api_server: SocketAddr,
    /// The node's allocatable resources (what a container without limits may use).
    pub node_allocatable: BTreeMap<String, Quantity>,
}

/// Expands `$(VAR)` references in `input` from `lookup` as kube does: `$$` is a literal
/// `$`, an undefined or unterminated reference stays as written.
pub(crate) fn expand(input: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The name of a Service's link variables (`my-svc` → `MY_SVC`).
fn env_name(service: &str) -> String {
    service.to_uppercase().replace('-', "_")
}

/// The docker-link style variables of one Service with a cluster IP.
fn service_vars(name: &str, ip: &str, ports: &[(Option<String>, i32, String)]) -> Vec<(String, String)> {
    let n = env_name(name);
    let mut out = Vec::new();
    let Some((_, first_port, first_proto)) = ports.first() else { return out };
    out.push((format!("{n}_SERVICE_HOST"), ip.to_string()));
    out.push((format!("{n}_SERVICE_PORT"), first_port.to_string()));
    for (pname, port, _) in ports {
        if let Some(pn) = pname.as_deref().filter(|p| !p.is_empty()) {
            out.push((format!("{n}_SERVICE_PORT_{}", env_name(pn)), port.to_string()));
        }
    }
    out.push((format!("{n}_PORT"), format!("{}://{ip}:{first_port}", first_proto.to_lowercase())));
    for (_, port, proto) in ports {
        let prefix = format!("{n}_PORT_{port}_{}", proto.to_uppercase());
        out.push((prefix.clone(), format!("{}://{ip}:{port}", proto.to_lowercase())));
        out.push((format!("{prefix}_PROTO"), proto.to_lowercase()));
        out.push((format!("{prefix}_PORT"), port.to_string()));
        out.push((format!("{prefix}_ADDR"), ip.to_string()));
    }
    out
}

/// The `kubernetes` Service's variables, naming `api_server`.
pub(crate) fn kubernetes_vars(api_server: SocketAddr) -> Vec<(String, String)> {
    let ip = api_server.ip().to_string();
    let ports = [(Some("https".to_string()), i32::from(api_server.port()), "TCP".to_string())];
    service_vars("kubernetes", &ip, &ports)
}

/// The service-link variables of `services` (Services without a cluster IP and the
/// `kubernetes` Service, whose variables are [`kubernetes_vars`], are skipped).
fn service_links(services: &[Service]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in services {
        let name = s.metadata.name.clone().unwrap_or_default();
        let Some(spec) = &s.spec else { continue };
        let Some(ip) = spec.cluster_ip.as_deref().filter(|ip| !ip.is_empty() && *ip != "None") else { continue };
        if name == "kubernetes" && s.metadata.namespace.as_deref() == Some("default") {
            continue;
        }
        let ports: Vec<(Option<String>, i32, String)> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone().unwrap_or_else(|| "TCP".into())))
            .collect();
        out.extend(service_vars(&name, ip, &ports));
    }
    out
}

/// The value of a `fieldRef` path.
fn field_value(pod: &Pod, path: &str, inputs: &EnvInputs) -> Result<String, EnvError> {
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let keyed = |prefix: &str, map: &Option<BTreeMap<String, String>>| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.as_ref().and_then(|m| m.get(key)).cloned().unwrap_or_default())
    };
    if let Some(v) = keyed("metadata.labels['", &meta.labels) {
        return Ok(v);
    }
    if let Some(v) = keyed("metadata.annotations['", &meta.annotations) {
        return Ok(v);
    }
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.node_name.unwrap_or_default(),
        "spec.serviceAccountName" => spec.service_account_name.unwrap_or_default(),
        "status.podIP" | "status.podIPs" => inputs.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => inputs.host_ip.clone(),
        other => return Err(EnvError::Config(format!("unsupported fieldRef path {other:?}"))),
    })
}

/// The value of a `resourceFieldRef` of `container` in `pod`.
fn resource_value(
    pod: &Pod,
    container: &Container,
    r: &k8s_openapi::api::core::v1::ResourceFieldSelector,
    inputs: &EnvInputs,
) -> Result<String, EnvError> {
    let target = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
        Some(name) => pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
            .find(|c| c.name == name)
            .ok_or_else(|| EnvError::Config(format!("container {name} not found")))?,
        None => container,
    };
    let res = target.resources.clone().unwrap_or_default();
    let (kind, resource) = r
        .resource
        .split_once('.')
        .ok_or_else(|| EnvError::Config(format!("unsupported container resource : {}", r.resource)))?;
    let limits = res.limits.unwrap_or_default();
    let value = match kind {
        "limits" => limits.get(resource).or_else(|| inputs.node_allocatable.get(resource)),
        "requests" => res.requests.as_ref().and_then(|q| q.get(resource)).or_else(|| limits.get(resource)),
        _ => None,
    };
    let value = match value {
        Some(q) => quantity::milli(q).unwrap_or(0),
        None if kind == "requests" => 0,
        None => return Err(EnvError::Config(format!("unsupported container resource : {}", r.resource))),
    };
    let divisor = r.divisor.as_ref().and_then(quantity::milli).filter(|d| *d > 0).unwrap_or(1000);
    // Rounded up, as kube's ExtractResourceValueByContainerName does.
    Ok((value.max(0) + divisor - 1).div_euclid(divisor).to_string())
}

/// Reads ConfigMaps and Secrets of one namespace once each.
struct Refs<'a> {
    client: &'a kube::Client,
    ns: &'a str,
    config_maps: HashMap<String, Option<ConfigMap>>,
    secrets: HashMap<String, Option<Secret>>,
}

impl Refs<'_> {
    async fn config_map(&mut self, name: &str) -> Result<Option<&ConfigMap>, EnvError> {
        if !self.config_maps.contains_key(name) {
            let got = Api::<ConfigMap>::namespaced(self.client.clone(), self.ns).get_opt(name).await?;
            self.config_maps.insert(name.to_string(), got);
        }
        Ok(self.config_maps.get(name).and_then(Option::as_ref))
    }

    async fn secret(&mut self, name: &str) -> Result<Option<&Secret>, EnvError> {
        if !self.secrets.contains_key(name) {
            let got = Api::<Secret>::namespaced(self.client.clone(), self.ns).get_opt(name).await?;
            self.secrets.insert(name.to_string(), got);
        }
        Ok(self.secrets.get(name).and_then(Option::as_ref))
    }
}

fn config_map_data(cm: &ConfigMap) -> BTreeMap<String, String> {
    let mut out = cm.data.clone().unwrap_or_default();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), String::from_utf8_lossy(&v.0).into_owned());
    }
    out
}

fn secret_data(s: &Secret) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> =
        s.data.iter().flatten().map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned())).collect();
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// Whether `name` may be an environment variable's name (kube's C identifier rule,
/// relaxed as for env names: any printable but `=`).
fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && name.chars().all(|c| c.is_ascii_graphic())
}

/// Sets `name` in an ordered environment, replacing an earlier value.
fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(k, _)| *k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name, value)),
    }
}

/// The environment of `container` in `pod`, as the kubelet makes it: `envFrom`, then
/// `env` (expanding `$(VAR)` against what is set so far and the Service variables), then
/// the Service links and `KUBERNETES_*` variables the container does not set itself.
pub(crate) async fn container_env(
    client: &kube::Client,
    pod: &Pod,
    container: &Container,
    inputs: &EnvInputs,
) -> Result<Vec<(String, String)>, EnvError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let service_env = service_env(client, pod, &ns, inputs).await?;
    let mut refs = Refs { client, ns: &ns, config_maps: HashMap::new(), secrets: HashMap::new() };
    let mut env: Vec<(String, String)> = Vec::new();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        for (k, v) in refs.env_from(from).await? {
            let name = format!("{prefix}{k}");
            if valid_env_name(&name) {
                set(&mut env, name, v);
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => {
                let lookup =
                    |name: &str| env.iter().chain(service_env.iter()).find(|(k, _)| k == name).map(|(_, v)| v.clone());
                Some(expand(var.value.as_deref().unwrap_or_default(), &lookup))
            }
            Some(from) => refs.value_from(pod, container, from, inputs).await?,
        };
        if let Some(value) = value {
            set(&mut env, var.name.clone(), value);
        }
    }
    for (k, v) in service_env {
        if !env.iter().any(|(n, _)| *n == k) {
            env.push((k, v));
        }
    }
    Ok(env)
}

/// The Service links of the pod's namespace (unless `enableServiceLinks: false`) and the
/// `KUBERNETES_*` variables of the API server.
async fn service_env(
    client: &kube::Client,
    pod: &Pod,
    ns: &str,
    inputs: &EnvInputs,
) -> Result<Vec<(String, String)>, EnvError> {
    let mut service_env = Vec::new();
    if pod.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false) {
        let services = Api::<Service>::namespaced(client.clone(), ns).list(&ListParams::default()).await?;
        service_env.extend(service_links(&services.items));
    }
    for (k, v) in kubernetes_vars(inputs.api_server) {
        set(&mut service_env, k, v);
    }
    Ok(service_env)
}

impl Refs<'_> {
    /// The variables one `envFrom` source brings (none for a missing optional source).
    async fn env_from(&mut self, from: &EnvFromSource) -> Result<BTreeMap<String, String>, EnvError> {
        if let Some(r) = &from.config_map_ref {
            return match self.config_map(&r.name).await? {
                Some(cm) => Ok(config_map_data(cm)),
                None if r.optional == Some(true) => Ok(BTreeMap::new()),
                None => Err(EnvError::Config(format!("configmap \"{}\" not found", r.name))),
            };
        }
        if let Some(r) = &from.secret_ref {
            return match self.secret(&r.name).await? {
                Some(s) => Ok(secret_data(s)),
                None if r.optional == Some(true) => Ok(BTreeMap::new()),
                None => Err(EnvError::Config(format!("secret \"{}\" not found", r.name))),
            };
        }
        Ok(BTreeMap::new())
    }

    /// A variable's `valueFrom`: a field, a resource, or a ConfigMap or Secret key
    /// (`None` for a missing optional one).
    async fn value_from(
        &mut self,
        pod: &Pod,
        container: &Container,
        from: &EnvVarSource,
        inputs: &EnvInputs,
    ) -> Result<Option<String>, EnvError> {
        if let Some(f) = &from.field_ref {
            return field_value(pod, &f.field_path, inputs).map(Some);
        }
        if let Some(r) = &from.resource_field_ref {
            return resource_value(pod, container, r, inputs).map(Some);
        }
        let ns = self.ns.to_string();
        let (kind, name, key, optional, data) = if let Some(r) = &from.config_map_key_ref {
            let data = self.config_map(&r.name).await?.map(config_map_data);
            ("ConfigMap", &r.name, &r.key, r.optional == Some(true), data)
        } else if let Some(r) = &from.secret_key_ref {
            let data = self.secret(&r.name).await?.map(secret_data);
            ("Secret", &r.name, &r.key, r.optional == Some(true), data)
        } else {
            return Ok(None);
        };
        match data.map(|mut d| d.remove(key)) {
            Some(Some(v)) => Ok(Some(v)),
            Some(None) | None if optional => Ok(None),
            Some(None) => Err(EnvError::Config(format!("couldn't find key {key} in {kind} {ns}/{name}"))),
            None => Err(EnvError::Config(format!("{} \"{name}\" not found", kind.to_lowercase()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_as_kube() {
        let vars: HashMap<&str, &str> = [("A", "x"), ("B", "y")].into();
        let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
        assert_eq!(expand("$(A)-$(B)", &lookup), "x-y");
        assert_eq!(expand("$$(A) $(C) $(A", &lookup), "$(A) $(C) $(A");
        assert_eq!(expand("a$b$", &lookup), "a$b$");
    }

    #[test]
    fn resource_values_round_up_by_divisor() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "c",
            "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}, "requests": {"cpu": "250m"}}}]}}))
        .expect("pod");
        let c = pod.spec.as_ref().map(|s| s.containers[0].clone()).unwrap_or_default();
        let inputs = EnvInputs {
            pod_ip: String::new(),
            host_ip: String::new(),
            api_server: "127.0.0.1:6443".parse().expect("addr"),
            node_allocatable: [("ephemeral-storage".to_string(), Quantity("1Gi".into()))].into(),
        };
        let field = |resource: &str, divisor: Option<&str>| {
            let r = k8s_openapi::api::core::v1::ResourceFieldSelector {
                resource: resource.into(),
                divisor: divisor.map(|d| Quantity(d.into())),
                container_name: None,
            };
            resource_value(&pod, &c, &r, &inputs).unwrap_or_default()
        };
        assert_eq!(field("limits.cpu", None), "1");
        assert_eq!(field("limits.cpu", Some("1m")), "500");
        assert_eq!(field("requests.cpu", Some("100m")), "3");
        assert_eq!(field("limits.memory", Some("1Mi")), "64");
        assert_eq!(field("limits.ephemeral-storage", Some("1Mi")), "1024", "from the node's allocatable");
    }

    #[test]
    fn service_link_variables() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "my-db", "namespace": "d"},
            "spec": {"clusterIP": "10.96.3.4", "ports": [{"name": "sql", "port": 5432, "protocol": "TCP"}]}
        }))
        .expect("service");
        let vars: HashMap<String, String> = service_links(&[svc]).into_iter().collect();
        assert_eq!(vars["MY_DB_SERVICE_HOST"], "10.96.3.4");
        assert_eq!(vars["MY_DB_SERVICE_PORT_SQL"], "5432");
        assert_eq!(vars["MY_DB_PORT"], "tcp://10.96.3.4:5432");
        assert_eq!(vars["MY_DB_PORT_5432_TCP_ADDR"], "10.96.3.4");
        let k: HashMap<String, String> = kubernetes_vars("10.96.0.1:443".parse().expect("addr")).into_iter().collect();
        assert_eq!(k["KUBERNETES_SERVICE_HOST"], "10.96.0.1");
        assert_eq!(k["KUBERNETES_PORT_443_TCP"], "tcp://10.96.0.1:443");
    }
}
