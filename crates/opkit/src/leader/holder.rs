//! Which pod and container hold the lease. The leader names its own container in the
//! Lease's annotations (found in its Pod's status, as the downward API names the pod);
//! a standby that reads Pods can then tell, from the kubelet's report, that the
//! holder's container ended, and take the lease over before it expires.
//!
//! What makes a takeover safe: a container instance the kubelet reports as terminated
//! (or replaced by a newer instance of the same container) runs no more, so it cannot
//! act as the leader. The leader publishes only an instance that started no earlier
//! than its own process did, and a standby takes over only while the Lease still names
//! that instance and was not renewed after the instance ended.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;

/// Annotation on the Lease: the holder's pod, as `<namespace>/<name>`.
pub const POD_ANNOTATION: &str = "leader.opkit.dev/pod";
/// Annotation on the Lease: the uid of the holder's pod.
pub const POD_UID_ANNOTATION: &str = "leader.opkit.dev/pod-uid";
/// Annotation on the Lease: the holder's container ID, as its Pod's status reports it.
pub const CONTAINER_ANNOTATION: &str = "leader.opkit.dev/container-id";

/// The environment variable naming this process's container in its pod, when the pod
/// has more than one (the scaffolded manager's is `manager`).
pub const CONTAINER_NAME_ENV: &str = "OPKIT_CONTAINER_NAME";

/// How far before this process's start the kubelet may have stamped its container's
/// `startedAt` (whole seconds, taken just before the container's process starts).
const START_SLACK: Duration = Duration::from_secs(2);
/// How much later than a container's `finishedAt` (whole seconds) it may really have
/// ended: a renewal within this much of it may still be the ended instance's own.
const FINISH_SLACK: Duration = Duration::from_secs(1);

/// The pod (and container) this replica runs in, from the downward API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderPod {
    /// The pod's namespace (`POD_NAMESPACE`, else the ServiceAccount's namespace file).
    pub namespace: String,
    /// The pod's name (`POD_NAME`).
    pub name: String,
    /// The container's name ([`CONTAINER_NAME_ENV`]); when unset, the pod's only
    /// container, or the one named `manager`.
    pub container: Option<String>,
}

impl HolderPod {
    /// The pod from `POD_NAME` and `POD_NAMESPACE` (or the mounted ServiceAccount's
    /// namespace), as the scaffolded manager's Deployment sets them; `None` outside a pod.
    pub fn from_env() -> Option<HolderPod> {
        let name = std::env::var("POD_NAME").ok().filter(|n| !n.is_empty())?;
        let namespace = std::env::var("POD_NAMESPACE")
            .ok()
            .or_else(|| std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok())
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())?;
        let container = std::env::var(CONTAINER_NAME_ENV).ok().filter(|c| !c.is_empty());
        Some(HolderPod { namespace, name, container })
    }

    fn reference(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The leader's container as written on the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PublishedContainer {
    /// `<namespace>/<name>` of the pod.
    pub pod: String,
    /// The pod's uid: a new pod of the same name is not this one.
    pub pod_uid: String,
    /// Its container ID.
    pub container_id: String,
}

impl PublishedContainer {
    /// What `lease` says of its holder's container, if anything.
    pub(super) fn of_lease(lease: &Lease) -> Option<PublishedContainer> {
        let annotations = lease.metadata.annotations.as_ref()?;
        let pod = annotations.get(POD_ANNOTATION).filter(|p| p.contains('/'))?.clone();
        let pod_uid = annotations.get(POD_UID_ANNOTATION).filter(|u| !u.is_empty())?.clone();
        let container_id = annotations.get(CONTAINER_ANNOTATION).filter(|c| !c.is_empty())?.clone();
        Some(PublishedContainer { pod, pod_uid, container_id })
    }

    /// Writes this container on `meta`, or (with `None`) removes an earlier holder's.
    pub(super) fn stamp(this: Option<&PublishedContainer>, meta: &mut ObjectMeta) {
        let annotations = meta.annotations.get_or_insert_with(Default::default);
        match this {
            Some(c) => {
                annotations.insert(POD_ANNOTATION.to_string(), c.pod.clone());
                annotations.insert(POD_UID_ANNOTATION.to_string(), c.pod_uid.clone());
                annotations.insert(CONTAINER_ANNOTATION.to_string(), c.container_id.clone());
            }
            None => {
                annotations.remove(POD_ANNOTATION);
                annotations.remove(POD_UID_ANNOTATION);
                annotations.remove(CONTAINER_ANNOTATION);
            }
        }
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }

    /// The pod's namespace and name.
    pub(super) fn pod_name(&self) -> (&str, &str) {
        self.pod.split_once('/').unwrap_or(("", &self.pod))
    }
}

/// What looking up this process's own container found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum OwnContainer {
    /// Not looked up yet, or the kubelet has not reported this instance running yet.
    Pending,
    /// Found: published on the Lease while leading.
    Found(PublishedContainer),
    /// Cannot be known (no pod, no permission, several containers and none named):
    /// standbys fall back to the lease's expiry.
    Unavailable,
}

/// Looks up this process's container in its Pod's status.
pub(super) async fn own_container(client: kube::Client, holder: &HolderPod) -> OwnContainer {
    let Some(process_start) = process_started_at() else {
        tracing::info!("this platform does not say when the process started: standbys wait for the lease to expire");
        return OwnContainer::Unavailable;
    };
    let pods: Api<Pod> = Api::namespaced(client, &holder.namespace);
    let pod = match pods.get_opt(&holder.name).await {
        Ok(Some(pod)) => pod,
        Ok(None) => {
            tracing::info!(pod = %holder.reference(), "the leader's pod does not exist: standbys wait for the lease to expire");
            return OwnContainer::Unavailable;
        }
        Err(kube::Error::Api(s)) if s.code == 403 || s.code == 401 => {
            tracing::info!(pod = %holder.reference(), error = %s.message,
                "cannot read the leader's pod (grant get on pods): standbys wait for the lease to expire");
            return OwnContainer::Unavailable;
        }
        Err(e) => {
            tracing::debug!(pod = %holder.reference(), error = %e, "reading the leader's pod failed; trying again");
            return OwnContainer::Pending;
        }
    };
    let status = match own_status(&pod, holder) {
        Err(NotIdentified) => return OwnContainer::Unavailable,
        Ok(None) => return OwnContainer::Pending,
        Ok(Some(status)) => status,
    };
    // This instance, not one that ran before it: its start was stamped just before ours.
    let earliest = process_start.checked_sub(START_SLACK).unwrap_or(process_start);
    let started = status.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.as_ref());
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    match (status.container_id.as_deref().filter(|id| !id.is_empty()), started) {
        (Some(id), Some(started)) if started.0 >= earliest && !pod_uid.is_empty() => {
            OwnContainer::Found(PublishedContainer { pod: holder.reference(), pod_uid, container_id: id.to_string() })
        }
        _ => OwnContainer::Pending,
    }
}

/// This process's container cannot be told apart in its pod (logged).
struct NotIdentified;

/// The status of this process's container in `pod`; `None` while the kubelet has not
/// reported it.
fn own_status<'a>(pod: &'a Pod, holder: &HolderPod) -> Result<Option<&'a ContainerStatus>, NotIdentified> {
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice()).unwrap_or_default();
    let name = match &holder.container {
        Some(name) => name.as_str(),
        None if containers.len() == 1 => containers[0].name.as_str(),
        None if containers.iter().any(|c| c.name == "manager") => "manager",
        None => {
            tracing::info!(pod = %holder.reference(),
                "the leader's pod has several containers: set {CONTAINER_NAME_ENV} so standbys can tell when it ends");
            return Err(NotIdentified);
        }
    };
    if !containers.iter().any(|c| c.name == name) {
        tracing::info!(pod = %holder.reference(), container = name, "the leader's pod has no such container");
        return Err(NotIdentified);
    }
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    Ok(statuses.iter().find(|s| s.name == name))
}

/// A lease holder whose container the kubelet reported ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct EndedHolder {
    /// The holder identity the Lease named.
    pub identity: String,
    /// The container instance that ended.
    pub container_id: String,
    /// When it ended, if the kubelet said.
    pub finished_at: Option<Timestamp>,
}

impl EndedHolder {
    /// Whether `lease` (as read now) is still held by this ended instance: same holder,
    /// same container, and not renewed after the instance ended.
    pub(super) fn still_holds(&self, lease: &Lease) -> bool {
        let spec = lease.spec.as_ref();
        if spec.and_then(|s| s.holder_identity.as_deref()) != Some(self.identity.as_str()) {
            return false;
        }
        if PublishedContainer::of_lease(lease).is_none_or(|c| c.container_id != self.container_id) {
            return false;
        }
        let renewed = spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0);
        match (renewed, self.finished_at) {
            (Some(renewed), Some(finished)) => renewed <= finished.checked_add(FINISH_SLACK).unwrap_or(finished),
            _ => true,
        }
    }
}

/// Whether `pod`'s status shows the published container instance ended: terminated, or
/// replaced by a newer instance. Returns when it ended, if known; `None` while it may
/// still run. A new pod of the same name proves nothing (a force-deleted pod's process
/// may still run), nor does a pod's deletion.
pub(super) fn ended_in(pod: &Pod, published: &PublishedContainer) -> Option<Option<Timestamp>> {
    if pod.metadata.uid.as_deref() != Some(published.pod_uid.as_str()) {
        return None;
    }
    let container_id = published.container_id.as_str();
    let status = pod.status.as_ref()?;
    let statuses = status.container_statuses.as_deref().unwrap_or_default();
    for s in statuses {
        let terminated_here = s.state.as_ref().and_then(|st| st.terminated.as_ref());
        if s.container_id.as_deref() == Some(container_id) {
            return match terminated_here {
                Some(t) => Some(t.finished_at.as_ref().map(|f| f.0)),
                None if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) => Some(None),
                None => None,
            };
        }
        let last = s.last_state.as_ref().and_then(|l| l.terminated.as_ref());
        if let Some(t) = last.filter(|t| t.container_id.as_deref() == Some(container_id)) {
            return Some(t.finished_at.as_ref().map(|f| f.0));
        }
    }
    // Reported statuses, none of them this instance's: it ended two or more restarts ago.
    (!statuses.is_empty()).then_some(None)
}

/// When this process started (whole seconds are enough), from the kernel.
#[cfg(target_os = "linux")]
fn process_started_at() -> Option<Timestamp> {
    // /proc/self/stat's 22nd field is the start in clock ticks after boot; /proc/stat's
    // `btime` is the boot in seconds since the epoch. No crate reads these two.
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot: i64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let per_second = rustix::param::clock_ticks_per_second();
    if per_second == 0 {
        return None;
    }
    let after_boot = Duration::from_secs_f64(ticks as f64 / per_second as f64);
    Timestamp::from_second(boot).ok()?.checked_add(after_boot).ok()
}

/// Elsewhere the start is not known, so nothing is published.
#[cfg(not(target_os = "linux"))]
fn process_started_at() -> Option<Timestamp> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStateTerminated, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn terminated(id: &str, finished: i64) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(id.into()),
                exit_code: 137,
                finished_at: Some(Time(Timestamp::from_second(finished).unwrap())),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn published(id: &str) -> PublishedContainer {
        PublishedContainer { pod: "ns/p".into(), pod_uid: "u-1".into(), container_id: id.into() }
    }

    fn pod(current: &str, state: ContainerState, last: Option<ContainerState>) -> Pod {
        Pod {
            metadata: ObjectMeta { uid: Some("u-1".into()), ..Default::default() },
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "manager".into(),
                    container_id: Some(current.into()),
                    state: Some(state),
                    last_state: last,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn running() -> ContainerState {
        ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() }
    }

    #[test]
    fn a_running_instance_has_not_ended() {
        assert_eq!(ended_in(&pod("c://1", running(), None), &published("c://1")), None);
    }

    #[test]
    fn a_terminated_or_replaced_instance_has_ended_and_says_when() {
        let at = Some(Timestamp::from_second(100).unwrap());
        let ended = pod("c://1", terminated("c://1", 100), None);
        assert_eq!(ended_in(&ended, &published("c://1")), Some(at));
        assert_eq!(ended_in(&pod("c://2", running(), Some(terminated("c://1", 100))), &published("c://1")), Some(at));
        // Two restarts later: ended, time unknown.
        let later = pod("c://3", running(), Some(terminated("c://2", 100)));
        assert_eq!(ended_in(&later, &published("c://1")), Some(None));
        // A new pod of the same name proves nothing; nor does a pod with nothing reported.
        let mut new_pod = ended.clone();
        new_pod.metadata.uid = Some("u-2".into());
        assert_eq!(ended_in(&new_pod, &published("c://1")), None);
        assert_eq!(ended_in(&Pod::default(), &published("c://1")), None);
    }

    #[test]
    fn a_lease_renewed_after_the_instance_ended_is_not_taken_over() {
        let mut lease = Lease::default();
        PublishedContainer::stamp(Some(&published("c://1")), &mut lease.metadata);
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = Some("a".into());
        spec.renew_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::from_second(100).unwrap()));
        let ended = |finished: i64| EndedHolder {
            identity: "a".into(),
            container_id: "c://1".into(),
            finished_at: Some(Timestamp::from_second(finished).unwrap()),
        };
        assert!(ended(100).still_holds(&lease));
        assert!(ended(99).still_holds(&lease), "a renewal within a second of the end may be its own");
        assert!(!ended(97).still_holds(&lease), "renewed after it ended: someone else holds it");
        let other = EndedHolder { container_id: "c://2".into(), ..ended(100) };
        assert!(!other.still_holds(&lease));
        PublishedContainer::stamp(None, &mut lease.metadata);
        assert_eq!(lease.metadata.annotations, None);
        assert!(!ended(100).still_holds(&lease));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_start_is_in_the_past() {
        let started = process_started_at().expect("linux says when a process started");
        assert!(started <= Timestamp::now());
        assert!(started > Timestamp::now().checked_sub(Duration::from_secs(24 * 3600)).unwrap());
    }
}
