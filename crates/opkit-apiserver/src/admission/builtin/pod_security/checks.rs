//! The Pod Security Standards' checks (kube's `pod-security-admission/policy`): each
//! looks at a pod's metadata and spec (as JSON) and says why it is forbidden, in kube's
//! words, and in kube's order (the baseline checks, then for `restricted` the restricted
//! ones, else the baseline checks that `restricted` replaces).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Level, LevelVersion};

/// Why one check forbids a pod: kube's `ForbiddenReason` and `ForbiddenDetail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Violation {
    /// The short reason, e.g. `allowPrivilegeEscalation != false`.
    pub reason: String,
    /// The details, e.g. `container "c" must set securityContext.allowPrivilegeEscalation=false`.
    pub detail: String,
}

/// The pod a check looks at, and the policy's minor version.
struct Pod<'a> {
    meta: &'a Value,
    spec: &'a Value,
    minor: u32,
}

impl Pod<'_> {
    /// Init containers, containers, then ephemeral containers, as kube visits them.
    fn containers(&self) -> impl Iterator<Item = &Value> {
        ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .flat_map(|list| self.spec[list].as_array().into_iter().flatten())
    }

    fn pod_sc(&self) -> &Value {
        &self.spec["securityContext"]
    }

    fn windows(&self) -> bool {
        self.spec["os"]["name"] == "windows"
    }

    fn annotations(&self) -> impl Iterator<Item = (&String, &str)> {
        self.meta["annotations"].as_object().into_iter().flatten().filter_map(|(k, v)| Some((k, v.as_str()?)))
    }
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or_default().to_string()
}

/// kube's `pluralize`.
fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// kube's `joinQuote`: `"a", "b"`.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase(names: &[String]) -> String {
    format!("{} {}", pluralize("container", "containers", names.len()), join_quote(names))
}

fn violation(reason: &str, detail: String) -> Option<Violation> {
    Some(Violation { reason: reason.to_string(), detail })
}

/// Whether a check belongs to baseline (and is replaced by a restricted one) or restricted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Baseline,
    BaselineOverlap,
    Restricted,
}

/// One check: its kind, the first policy version it applies to and its function.
struct Check {
    kind: Kind,
    since: u32,
    run: fn(&Pod) -> Option<Violation>,
}

/// Every check, in kube's registration order (its source files' order).
const CHECKS: &[Check] = &[
    Check { kind: Kind::Restricted, since: 8, run: allow_privilege_escalation },
    Check { kind: Kind::Baseline, since: 0, run: app_armor_profile },
    Check { kind: Kind::BaselineOverlap, since: 0, run: capabilities_baseline },
    Check { kind: Kind::Restricted, since: 22, run: capabilities_restricted },
    Check { kind: Kind::Baseline, since: 0, run: host_namespaces },
    Check { kind: Kind::BaselineOverlap, since: 0, run: host_path_volumes },
    Check { kind: Kind::Baseline, since: 0, run: host_ports },
    Check { kind: Kind::Baseline, since: 0, run: privileged },
    Check { kind: Kind::Baseline, since: 0, run: proc_mount },
    Check { kind: Kind::Restricted, since: 0, run: restricted_volumes },
    Check { kind: Kind::Restricted, since: 0, run: run_as_non_root },
    Check { kind: Kind::Restricted, since: 23, run: run_as_user },
    Check { kind: Kind::Baseline, since: 0, run: se_linux_options },
    Check { kind: Kind::BaselineOverlap, since: 0, run: seccomp_profile_baseline },
    Check { kind: Kind::Restricted, since: 19, run: seccomp_profile_restricted },
    Check { kind: Kind::Baseline, since: 0, run: sysctls },
    Check { kind: Kind::Baseline, since: 0, run: windows_host_process },
];

/// The policy version `latest` stands for: the Kubernetes minor version this server
/// reports (`handlers::discovery::KUBE_MINOR`); newer versions are evaluated as it.
pub(super) const LATEST_MINOR: u32 = 33;

/// Evaluates a pod (its metadata and spec) against a level and version: the violations
/// in kube's order, none for `privileged`.
pub(super) fn evaluate(lv: LevelVersion, meta: &Value, spec: &Value) -> Vec<Violation> {
    let pod = Pod { meta, spec, minor: lv.minor.unwrap_or(LATEST_MINOR).min(LATEST_MINOR) };
    let applies = |c: &&Check| pod.minor >= c.since;
    let kinds: &[Kind] = match lv.level {
        Level::Privileged => return Vec::new(),
        Level::Baseline => &[Kind::Baseline, Kind::BaselineOverlap],
        Level::Restricted => &[Kind::Baseline, Kind::Restricted],
    };
    kinds
        .iter()
        .flat_map(|kind| CHECKS.iter().filter(move |c| c.kind == *kind))
        .filter(applies)
        .filter_map(|c| (c.run)(&pod))
        .collect()
}

fn allow_privilege_escalation(pod: &Pod) -> Option<Violation> {
    if pod.minor >= 25 && pod.windows() {
        return None;
    }
    let bad: Vec<String> =
        pod.containers().filter(|c| c["securityContext"]["allowPrivilegeEscalation"] != false).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "allowPrivilegeEscalation != false",
        format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_phrase(&bad)),
    )
}

fn app_armor_profile(pod: &Pod) -> Option<Violation> {
    let allowed_type = |t: &Value| t == "RuntimeDefault" || t == "Localhost";
    let mut setters = Vec::new();
    let mut values = BTreeSet::new();
    let pod_profile = &pod.pod_sc()["appArmorProfile"];
    if pod_profile.is_object() && !allowed_type(&pod_profile["type"]) {
        setters.push("pod".to_string());
        values.insert(pod_profile["type"].as_str().unwrap_or_default().to_string());
    }
    let mut bad = Vec::new();
    for c in pod.containers() {
        let profile = &c["securityContext"]["appArmorProfile"];
        if profile.is_object() && !allowed_type(&profile["type"]) {
            bad.push(name(c));
            values.insert(profile["type"].as_str().unwrap_or_default().to_string());
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    let mut values: Vec<String> = values.into_iter().collect();
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(k, v)| {
            k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", values.len()),
        format!("{} must not set AppArmor profile type to {}", setters.join(" and "), join_quote(&values)),
    )
}

fn added_capabilities(c: &Value) -> impl Iterator<Item = &str> {
    c["securityContext"]["capabilities"]["add"].as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn capabilities_baseline(pod: &Pod) -> Option<Violation> {
    const ALLOWED: [&str; 13] = [
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    ];
    let mut bad = Vec::new();
    let mut caps = BTreeSet::new();
    for c in pod.containers() {
        let forbidden: Vec<&str> = added_capabilities(c).filter(|cap| !ALLOWED.contains(cap)).collect();
        if !forbidden.is_empty() {
            bad.push(name(c));
            caps.extend(forbidden.into_iter().map(str::to_string));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let caps: Vec<String> = caps.into_iter().collect();
    violation(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quote(&caps)
        ),
    )
}

fn capabilities_restricted(pod: &Pod) -> Option<Violation> {
    if pod.minor >= 25 && pod.windows() {
        return None;
    }
    let mut missing_drop = Vec::new();
    let mut adding = Vec::new();
    let mut caps = BTreeSet::new();
    for c in pod.containers() {
        let capabilities = &c["securityContext"]["capabilities"];
        if !capabilities.is_object() {
            missing_drop.push(name(c));
            continue;
        }
        let drops_all = capabilities["drop"].as_array().is_some_and(|d| d.iter().any(|x| x == "ALL"));
        if !drops_all {
            missing_drop.push(name(c));
        }
        let forbidden: Vec<&str> = added_capabilities(c).filter(|cap| *cap != "NET_BIND_SERVICE").collect();
        if !forbidden.is_empty() {
            adding.push(name(c));
            caps.extend(forbidden.into_iter().map(str::to_string));
        }
    }
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details
            .push(format!("{} must set securityContext.capabilities.drop=[\"ALL\"]", containers_phrase(&missing_drop)));
    }
    if !adding.is_empty() {
        let caps: Vec<String> = caps.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quote(&caps)
        ));
    }
    if details.is_empty() {
        return None;
    }
    violation("unrestricted capabilities", details.join("; "))
}

fn host_namespaces(pod: &Pod) -> Option<Violation> {
    let used: Vec<&str> = ["hostIPC", "hostNetwork", "hostPID"].into_iter().filter(|f| pod.spec[*f] == true).collect();
    if used.is_empty() {
        return None;
    }
    violation("host namespaces", used.join(", "))
}

fn volumes<'a>(pod: &'a Pod) -> impl Iterator<Item = &'a Value> {
    pod.spec["volumes"].as_array().into_iter().flatten()
}

fn host_path_volumes(pod: &Pod) -> Option<Violation> {
    let bad: Vec<String> = volumes(pod).filter(|v| v["hostPath"].is_object()).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    violation("hostPath volumes", format!("{} {}", pluralize("volume", "volumes", bad.len()), join_quote(&bad)))
}

fn host_ports(pod: &Pod) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut ports = BTreeSet::new();
    for c in pod.containers() {
        let used: Vec<String> = c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["hostPort"].as_i64())
            .filter(|p| *p != 0)
            .map(|p| p.to_string())
            .collect();
        if !used.is_empty() {
            bad.push(name(c));
            ports.extend(used);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    violation(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn privileged(pod: &Pod) -> Option<Violation> {
    let bad: Vec<String> = pod.containers().filter(|c| c["securityContext"]["privileged"] == true).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    violation("privileged", format!("{} must not set securityContext.privileged=true", containers_phrase(&bad)))
}

fn proc_mount(pod: &Pod) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = BTreeSet::new();
    for c in pod.containers() {
        if let Some(t) = c["securityContext"]["procMount"].as_str()
            && t != "Default"
        {
            bad.push(name(c));
            types.insert(t.to_string());
        }
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<String> = types.into_iter().collect();
    violation(
        "procMount",
        format!("{} must not set securityContext.procMount to {}", containers_phrase(&bad), join_quote(&types)),
    )
}

fn restricted_volumes(pod: &Pod) -> Option<Violation> {
    const ALLOWED: [&str; 8] =
        ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
    let bad: BTreeSet<String> =
        volumes(pod).filter(|v| !ALLOWED.iter().any(|source| v[*source].is_object())).map(name).collect();
    if bad.is_empty() {
        return None;
    }
    // Go's %q of a []string: ["a" "b"].
    let quoted: Vec<String> = bad.iter().map(|v| format!("{v:?}")).collect();
    violation("restricted volume types", format!("volumes [{}] have restricted types", quoted.join(" ")))
}

/// The setters of a bad value: `pod`, `container "a"`, joined with ` and `.
fn setters(pod_bad: bool, containers: &[String]) -> String {
    let mut who = Vec::new();
    if pod_bad {
        who.push("pod".to_string());
    }
    if !containers.is_empty() {
        who.push(containers_phrase(containers));
    }
    who.join(" and ")
}

fn run_as_non_root(pod: &Pod) -> Option<Violation> {
    let pod_value = &pod.pod_sc()["runAsNonRoot"];
    let pod_bad = *pod_value == false;
    let pod_ok = *pod_value == true;
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in pod.containers() {
        match c["securityContext"]["runAsNonRoot"].as_bool() {
            Some(false) => explicit.push(name(c)),
            Some(true) => {}
            None if !pod_ok => implicit.push(name(c)),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!("{} must not set securityContext.runAsNonRoot=false", setters(pod_bad, &explicit)),
        );
    }
    if !implicit.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!("pod or {} must set securityContext.runAsNonRoot=true", containers_phrase(&implicit)),
        );
    }
    None
}

fn run_as_user(pod: &Pod) -> Option<Violation> {
    let pod_bad = pod.pod_sc()["runAsUser"] == 0;
    let bad: Vec<String> = pod.containers().filter(|c| c["securityContext"]["runAsUser"] == 0).map(name).collect();
    if !pod_bad && bad.is_empty() {
        return None;
    }
    violation("runAsUser=0", format!("{} must not set runAsUser=0", setters(pod_bad, &bad)))
}

fn se_linux_options(pod: &Pod) -> Option<Violation> {
    let mut allowed_types = vec!["", "container_t", "container_init_t", "container_kvm_t"];
    if pod.minor >= 31 {
        allowed_types.push("container_engine_t");
    }
    let mut bad_types = BTreeSet::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |opts: &Value| {
        if !opts.is_object() {
            return true;
        }
        let mut ok = true;
        let t = opts["type"].as_str().unwrap_or_default();
        if !allowed_types.contains(&t) {
            ok = false;
            bad_types.insert(t.to_string());
        }
        if opts["user"].as_str().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if opts["role"].as_str().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_bad = !valid(&pod.pod_sc()["seLinuxOptions"]);
    let bad: Vec<String> =
        pod.containers().filter(|c| !valid(&c["securityContext"]["seLinuxOptions"])).map(name).collect();
    if !pod_bad && bad.is_empty() {
        return None;
    }
    let mut data = Vec::new();
    // As kube words it, the user and role are only mentioned next to a bad type.
    if !bad_types.is_empty() {
        let types: Vec<String> = bad_types.into_iter().collect();
        data.push(format!("{} {}", pluralize("type", "types", types.len()), join_quote(&types)));
        if set_user {
            data.push("user may not be set".to_string());
        }
        if set_role {
            data.push("role may not be set".to_string());
        }
    }
    violation(
        "seLinuxOptions",
        format!("{} set forbidden securityContext.seLinuxOptions: {}", setters(pod_bad, &bad), data.join("; ")),
    )
}

fn valid_seccomp(t: &Value) -> bool {
    t == "RuntimeDefault" || t == "Localhost"
}

fn seccomp_profile_baseline(pod: &Pod) -> Option<Violation> {
    if pod.minor < 19 {
        let valid = |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
        let mut forbidden = BTreeSet::new();
        let pod_key = "seccomp.security.alpha.kubernetes.io/pod";
        let container_keys: Vec<String> =
            pod.containers().map(|c| format!("container.seccomp.security.alpha.kubernetes.io/{}", name(c))).collect();
        for (k, v) in pod.annotations() {
            if (k == pod_key || container_keys.contains(k)) && !valid(v) {
                forbidden.insert(format!("{k}={v:?}"));
            }
        }
        if forbidden.is_empty() {
            return None;
        }
        let list: Vec<String> = forbidden.into_iter().collect();
        return violation(
            "seccompProfile",
            format!("forbidden {} {}", pluralize("annotation", "annotations", list.len()), list.join(", ")),
        );
    }
    let mut values = BTreeSet::new();
    let profile = &pod.pod_sc()["seccompProfile"];
    let pod_bad = profile.is_object() && !valid_seccomp(&profile["type"]);
    if pod_bad {
        values.insert(profile["type"].as_str().unwrap_or_default().to_string());
    }
    let mut bad = Vec::new();
    for c in pod.containers() {
        let profile = &c["securityContext"]["seccompProfile"];
        if profile.is_object() && !valid_seccomp(&profile["type"]) {
            bad.push(name(c));
            values.insert(profile["type"].as_str().unwrap_or_default().to_string());
        }
    }
    if !pod_bad && bad.is_empty() {
        return None;
    }
    let values: Vec<String> = values.into_iter().collect();
    violation(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            setters(pod_bad, &bad),
            join_quote(&values)
        ),
    )
}

fn seccomp_profile_restricted(pod: &Pod) -> Option<Violation> {
    if pod.minor >= 25 && pod.windows() {
        return None;
    }
    let mut values = BTreeSet::new();
    let profile = &pod.pod_sc()["seccompProfile"];
    let (mut pod_bad, mut pod_set) = (false, false);
    if profile.is_object() {
        if valid_seccomp(&profile["type"]) {
            pod_set = true;
        } else {
            pod_bad = true;
            values.insert(profile["type"].as_str().unwrap_or_default().to_string());
        }
    }
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    for c in pod.containers() {
        let profile = &c["securityContext"]["seccompProfile"];
        if profile.is_object() {
            if !valid_seccomp(&profile["type"]) {
                explicit.push(name(c));
                values.insert(profile["type"].as_str().unwrap_or_default().to_string());
            }
        } else if !pod_set {
            implicit.push(name(c));
        }
    }
    if pod_bad || !explicit.is_empty() {
        let values: Vec<String> = values.into_iter().collect();
        return violation(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                setters(pod_bad, &explicit),
                join_quote(&values)
            ),
        );
    }
    if !implicit.is_empty() {
        return violation(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_phrase(&implicit)
            ),
        );
    }
    None
}

fn sysctls(pod: &Pod) -> Option<Violation> {
    let mut allowed = vec![
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ];
    if pod.minor >= 27 {
        allowed.push("net.ipv4.ip_local_reserved_ports");
    }
    if pod.minor >= 29 {
        allowed.extend([
            "net.ipv4.tcp_keepalive_time",
            "net.ipv4.tcp_fin_timeout",
            "net.ipv4.tcp_keepalive_intvl",
            "net.ipv4.tcp_keepalive_probes",
        ]);
    }
    if pod.minor >= 32 {
        allowed.extend(["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]);
    }
    let bad: Vec<&str> = pod.pod_sc()["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
        .filter(|n| !allowed.contains(n))
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation("forbidden sysctls", bad.join(", "))
}

fn windows_host_process(pod: &Pod) -> Option<Violation> {
    let host_process = |sc: &Value| sc["windowsOptions"]["hostProcess"] == true;
    let pod_bad = host_process(pod.pod_sc());
    let bad: Vec<String> = pod.containers().filter(|c| host_process(&c["securityContext"])).map(name).collect();
    if !pod_bad && bad.is_empty() {
        return None;
    }
    violation(
        "hostProcess",
        format!("{} must not set securityContext.windowsOptions.hostProcess=true", setters(pod_bad, &bad)),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn restricted() -> LevelVersion {
        LevelVersion { level: Level::Restricted, minor: None }
    }

    #[test]
    fn a_bare_pod_violates_restricted_in_kubes_order() {
        let spec = json!({"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}]});
        let reasons: Vec<String> = evaluate(restricted(), &json!({}), &spec).into_iter().map(|v| v.reason).collect();
        assert_eq!(
            reasons,
            [
                "privileged",
                "allowPrivilegeEscalation != false",
                "unrestricted capabilities",
                "runAsNonRoot != true",
                "seccompProfile"
            ]
        );
    }

    #[test]
    fn restricted_volume_names_are_printed_as_go_prints_a_string_slice() {
        let spec = json!({"containers": [], "volumes": [{"name": "b", "nfs": {}}, {"name": "a", "hostPath": {}}]});
        let v = restricted_volumes(&Pod { meta: &json!({}), spec: &spec, minor: LATEST_MINOR });
        assert_eq!(v.map(|v| v.detail).as_deref(), Some("volumes [\"a\" \"b\"] have restricted types"));
    }
}
