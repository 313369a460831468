//! Warm standby in real pods: two replicas of an opkit manager (the opkit-bench
//! executable loaded as their image) elect a leader on a Lease far longer than the
//! test's wait, so a standby can only take over that fast by seeing the leader's
//! container end in its Pod's status.

use std::time::Duration;

use opkit::leader::{CONTAINER_ANNOTATION, POD_ANNOTATION};
use opkit_bench::failover::{KillSignal, LeaseTimings, POD_NAMESPACE, PodReplicas};

/// A lease no failover in this test may wait for.
const LONG_LEASE: LeaseTimings = LeaseTimings { duration: 300, renew_deadline: 10, retry_period: 2 };
/// How long the standby may take (well under the lease).
const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_the_standby_takes_the_lease_when_the_leaders_container_ends() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_opkit-bench"));
    let mut replicas = PodReplicas::start(exe, LONG_LEASE).await.expect("two replica pods, the first leading");
    // The leader names its own container, as its Pod's status reports it.
    let published = replicas.wait_published(WAIT).await.expect("the leader publishes its container");
    assert_eq!(replicas.container_id("replica-a").await.expect("pod status"), Some(published.clone()));
    let lease = replicas.lease().await.expect("the lease");
    let annotations = lease.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get(POD_ANNOTATION).map(String::as_str), Some(&*format!("{POD_NAMESPACE}/replica-a")));
    let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);

    let failover = replicas.failover(KillSignal::Sigkill, WAIT).await.expect("the standby reconciles");
    assert_eq!((failover.from.as_str(), failover.to.as_str()), ("replica-a", "replica-b"));
    let lease = replicas.lease().await.expect("the lease");
    let spec = lease.spec.clone().unwrap_or_default();
    assert_eq!(spec.holder_identity.as_deref(), Some("replica-b"));
    assert_eq!(spec.lease_transitions, Some(transitions + 1));
    // The new leader replaced the old one's container with its own.
    let now_published = replicas.wait_published(WAIT).await.expect("the new leader publishes its container");
    assert_ne!(now_published, published);
    let annotations = replicas.lease().await.expect("the lease").metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get(POD_ANNOTATION).map(String::as_str), Some(&*format!("{POD_NAMESPACE}/replica-b")));
    assert_eq!(annotations.get(CONTAINER_ANNOTATION), Some(&now_published));
}
