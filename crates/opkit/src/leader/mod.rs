//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! leaderelection semantics: acquire by creating or taking over an expired lease,
//! renew every retry period, give up after the renew deadline, and optionally release
//! the lease on shutdown so another replica takes over at once. Beyond client-go, the
//! leader names its pod's container on the Lease, and a standby takes the lease over as
//! soon as the kubelet reports that container ended (see `holder`), instead of waiting
//! for the lease to expire.

mod holder;
mod lease_watch;

pub use holder::{CONTAINER_ANNOTATION, CONTAINER_NAME_ENV, HolderPod, POD_ANNOTATION, POD_UID_ANNOTATION};

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::holder::{EndedHolder, OwnContainer, PublishedContainer, own_container};
use self::lease_watch::{LeaseSignal, LeaseWatch};
use crate::metrics::Metrics;

/// client-go's jitter factor for the acquire loop (and the renew-deadline check).
const JITTER_FACTOR: f64 = 1.2;

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    /// The durations or names are not usable.
    #[error("invalid leader election config: {0}")]
    InvalidConfig(String),
    /// A call to the API server failed.
    #[error("lease {0}")]
    Kube(#[from] kube::Error),
    /// An attempt took longer than the renew deadline.
    #[error("lease request timed out")]
    Timeout,
}

/// How to elect a leader.
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Name of the Lease object.
    pub lease_name: String,
    /// Namespace of the Lease object.
    pub namespace: String,
    /// This replica's identity, written to `holderIdentity`.
    pub identity: String,
    /// How long a lease is valid after its last renewal (non-leaders wait this long).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew.
    pub retry_period: Duration,
    /// On shutdown, release the lease so another replica can take over at once.
    pub release_on_cancel: bool,
    /// The pod this replica runs in (from the downward API's `POD_NAME` and
    /// `POD_NAMESPACE`): while leading, its container is named on the Lease, so standbys
    /// that may read Pods take over as soon as it ends. `None` outside a pod.
    pub holder_pod: Option<HolderPod>,
}

impl LeaderElectionConfig {
    /// A config with controller-runtime's defaults (15s / 10s / 2s, no release on
    /// cancel), identity `<hostname>_<random uuid>` and the pod from the environment
    /// ([`HolderPod::from_env`]).
    pub fn new(lease_name: impl Into<String>, namespace: impl Into<String>) -> Self {
        LeaderElectionConfig {
            lease_name: lease_name.into(),
            namespace: namespace.into(),
            identity: format!("{}_{}", crate::hostname::hostname(), random_uuid()),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: false,
            holder_pod: HolderPod::from_env(),
        }
    }

    /// Checks the constraints client-go enforces: leaseDuration > renewDeadline >
    /// 1.2 × retryPeriod, all positive, and non-empty names.
    pub fn validate(&self) -> Result<(), LeaderElectionError> {
        let bad = |m: &str| Err(LeaderElectionError::InvalidConfig(m.to_string()));
        if self.lease_name.is_empty() || self.namespace.is_empty() {
            return bad("lease name and namespace must not be empty");
        }
        if self.identity.is_empty() {
            return bad("identity must not be empty");
        }
        if self.lease_duration < Duration::from_secs(1) {
            return bad("leaseDuration must be at least one second");
        }
        if self.retry_period.is_zero() || self.renew_deadline.is_zero() {
            return bad("renewDeadline and retryPeriod must be greater than zero");
        }
        if self.lease_duration <= self.renew_deadline {
            return bad("leaseDuration must be greater than renewDeadline");
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return bad("renewDeadline must be greater than retryPeriod*JitterFactor");
        }
        Ok(())
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// The leader-election fields of a Lease, compared to notice changes.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: String,
    duration_seconds: i32,
    acquire_time: Option<MicroTime>,
    renew_time: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    fn from_spec(spec: Option<&LeaseSpec>) -> Record {
        let spec = spec.cloned().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time,
            renew_time: spec.renew_time,
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// Writes the record into `spec`, keeping its other fields.
    fn apply_to(&self, spec: &mut LeaseSpec) {
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.duration_seconds);
        spec.acquire_time = self.acquire_time.clone();
        spec.renew_time = self.renew_time.clone();
        spec.lease_transitions = Some(self.transitions);
    }
}

/// Contends for a Lease and reports whether this replica leads.
pub struct LeaderElector {
    client: kube::Client,
    api: Api<Lease>,
    cfg: LeaderElectionConfig,
    metrics: Option<Metrics>,
    /// The last lease record seen, and when (local clock) it was first seen.
    observed: Option<(Record, Instant)>,
    /// This replica's container, as it is published while leading.
    own: OwnContainer,
    /// The holder whose container the kubelet reported ended, while acquiring.
    ended_holder: Option<EndedHolder>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

/// Why the renew loop ended.
enum Ended {
    Cancelled,
    Lost,
}

impl LeaderElector {
    /// An elector for `cfg.lease_name` in `cfg.namespace`; records
    /// `leader_election_master_status` in `metrics` when given.
    pub fn new(client: kube::Client, cfg: LeaderElectionConfig, metrics: Option<Metrics>) -> Self {
        let own = if cfg.holder_pod.is_some() { OwnContainer::Pending } else { OwnContainer::Unavailable };
        let api = Api::namespaced(client.clone(), &cfg.namespace);
        LeaderElector { client, api, cfg, metrics, observed: None, own, ended_holder: None }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.cfg.identity
    }

    /// Runs until `shutdown`: tries to acquire the coordination.k8s.io/v1 Lease every
    /// retry_period; once leader, renews; if it cannot renew within renew_deadline it has
    /// lost leadership. Publishes leadership on the returned receiver (true = leading).
    /// After losing leadership it does not try again (controller-runtime exits); on
    /// shutdown with release_on_cancel it releases the lease (holderIdentity cleared,
    /// leaseDurationSeconds=1) so another replica takes over at once: waiting replicas
    /// watch the lease and try to acquire it as soon as it is released.
    ///
    /// The release happens in the returned task after `shutdown` is cancelled: await the
    /// [`JoinHandle`] before the process exits, or the runtime drops the task (and the
    /// release) half-way. Cancel `shutdown` only once leader-only work has stopped, so the
    /// next leader never overlaps with this one.
    ///
    /// An invalid config (see [`LeaderElectionConfig::validate`]) is logged and the
    /// task ends at once without leading.
    pub fn start(self, shutdown: CancellationToken) -> (watch::Receiver<bool>, JoinHandle<()>) {
        let (tx, rx) = watch::channel(false);
        let handle = tokio::spawn(self.run(tx, shutdown));
        (rx, handle)
    }

    async fn run(mut self, tx: watch::Sender<bool>, shutdown: CancellationToken) {
        if let Err(e) = self.cfg.validate() {
            tracing::error!(error = %e, "leader election not started");
            return;
        }
        self.set_leading(&tx, false);
        if !self.acquire(&shutdown).await {
            return;
        }
        tracing::info!(lease = %self.lease_ref(), identity = %self.cfg.identity, "successfully acquired lease");
        self.set_leading(&tx, true);
        match self.renew(&shutdown).await {
            Ended::Lost => {
                tracing::error!(lease = %self.lease_ref(), "leader election lost");
            }
            Ended::Cancelled => {
                if self.cfg.release_on_cancel {
                    self.release().await;
                }
            }
        }
        self.set_leading(&tx, false);
    }

    fn set_leading(&self, tx: &watch::Sender<bool>, leading: bool) {
        // Metrics first, so whoever sees the change on the channel also sees the gauge.
        if let Some(m) = &self.metrics {
            m.set_leader(&self.cfg.lease_name, leading);
        }
        tx.send_replace(leading);
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.cfg.namespace, self.cfg.lease_name)
    }

    /// Tries every retry_period (jittered), and at once whenever the lease is released or
    /// deleted or its holder's container ended, until the lease is ours; false on shutdown.
    async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        tracing::info!(lease = %self.lease_ref(), "attempting to acquire leader lease");
        let mut watch = LeaseWatch::start(self.api.clone(), self.client.clone(), &self.cfg.lease_name);
        loop {
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return false,
                r = tokio::time::timeout(self.cfg.renew_deadline, self.try_acquire_or_renew()) => r,
            };
            if self.attempt_succeeded(attempt.unwrap_or(Err(LeaderElectionError::Timeout))) {
                self.ended_holder = None;
                return true;
            }
            let wait = jittered(self.cfg.retry_period);
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = tokio::time::sleep(wait) => {}
                signal = watch.next() => match signal {
                    LeaseSignal::Released => {
                        tracing::debug!(lease = %self.lease_ref(), "lease released; trying to acquire it now");
                    }
                    LeaseSignal::HolderEnded(ended) => {
                        tracing::info!(lease = %self.lease_ref(), holder = %ended.identity, container = %ended.container_id,
                            "the leader's container ended; trying to take the lease over now");
                        self.ended_holder = Some(ended);
                    }
                },
            }
        }
    }

    /// Renews every retry_period while leading; each renewal may retry until the
    /// renew deadline.
    async fn renew(&mut self, shutdown: &CancellationToken) -> Ended {
        loop {
            let deadline = Instant::now() + self.cfg.renew_deadline;
            loop {
                let attempt = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Ended::Cancelled,
                    r = tokio::time::timeout_at(deadline, self.try_acquire_or_renew()) => r,
                };
                let Ok(attempt) = attempt else {
                    tracing::error!(lease = %self.lease_ref(), "failed to renew lease: timed out");
                    return Ended::Lost;
                };
                if self.attempt_succeeded(attempt) {
                    break;
                }
                let next = (Instant::now() + self.cfg.retry_period).min(deadline);
                tokio::select! {
                    () = shutdown.cancelled() => return Ended::Cancelled,
                    () = tokio::time::sleep_until(next) => {}
                }
                if Instant::now() >= deadline {
                    tracing::error!(lease = %self.lease_ref(), "failed to renew lease before the renew deadline");
                    return Ended::Lost;
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ended::Cancelled,
                () = tokio::time::sleep(self.cfg.retry_period) => {}
            }
        }
    }

    /// Logs a failed acquire/renew attempt; true when it succeeded.
    fn attempt_succeeded(&self, attempt: Result<bool, LeaderElectionError>) -> bool {
        match attempt {
            Ok(true) => return true,
            Ok(false) => {
                tracing::debug!(lease = %self.lease_ref(), "lease is held by another replica")
            }
            Err(e) => {
                tracing::warn!(lease = %self.lease_ref(), error = %e, "failed to acquire or renew lease")
            }
        }
        false
    }

    /// Whether the last observed record names this replica.
    fn is_leader(&self) -> bool {
        self.observed.as_ref().is_some_and(|(r, _)| r.holder == self.cfg.identity)
    }

    fn observe(&mut self, record: Record) {
        let changed = self.observed.as_ref().is_none_or(|(r, _)| *r != record);
        if changed {
            self.observed = Some((record, Instant::now()));
        }
    }

    /// One attempt: creates the lease, renews it, or takes it over when it expired.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderElectionError> {
        let now = MicroTime(jiff::Timestamp::now());
        let mut desired = Record {
            holder: self.cfg.identity.clone(),
            duration_seconds: self.cfg.lease_duration_seconds(),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            transitions: 0,
        };
        let Some(mut lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            let mut spec = LeaseSpec::default();
            desired.apply_to(&mut spec);
            let mut lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.lease_name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            self.stamp_own_container(&mut lease).await;
            self.api.create(&PostParams::default(), &lease).await?;
            self.observed = Some((desired, Instant::now()));
            return Ok(true);
        };

        let old = Record::from_spec(lease.spec.as_ref());
        self.observe(old.clone());
        if !old.holder.is_empty() && !self.is_leader() && self.lease_valid(&old) {
            if !self.ended_holder.as_ref().is_some_and(|e| e.still_holds(&lease)) {
                return Ok(false);
            }
            tracing::info!(lease = %self.lease_ref(), holder = %old.holder,
                "the leader's container ended before its lease expired: taking the lease over");
        }
        if self.is_leader() {
            desired.acquire_time = old.acquire_time;
            desired.transitions = old.transitions;
        } else {
            desired.transitions = old.transitions.saturating_add(1);
        }
        desired.apply_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        self.stamp_own_container(&mut lease).await;
        // The resourceVersion from the GET makes this a compare-and-swap (409 on a race).
        self.api.replace(&self.cfg.lease_name, &PostParams::default(), &lease).await?;
        self.observed = Some((desired, Instant::now()));
        Ok(true)
    }

    /// Names this replica's container on `lease` (looking it up while the kubelet has not
    /// reported it yet), or removes an earlier holder's.
    async fn stamp_own_container(&mut self, lease: &mut Lease) {
        if let (OwnContainer::Pending, Some(pod)) = (&self.own, &self.cfg.holder_pod) {
            self.own = own_container(self.client.clone(), pod).await;
        }
        let published = match &self.own {
            OwnContainer::Found(c) => Some(c),
            OwnContainer::Pending | OwnContainer::Unavailable => None,
        };
        PublishedContainer::stamp(published, &mut lease.metadata);
    }

    /// Whether the lease observed last is still within its duration (local clock).
    fn lease_valid(&self, record: &Record) -> bool {
        let Some((_, seen)) = &self.observed else {
            return false;
        };
        let secs = u64::try_from(record.duration_seconds).unwrap_or(0);
        *seen + Duration::from_secs(secs) > Instant::now()
    }

    /// Clears the holder (leaseDurationSeconds=1) if this replica still holds the lease.
    async fn release(&mut self) {
        // A renewal cancelled mid-flight may still land on the server after our GET, so a
        // 409 means "look again", not "give up": retry until the renew deadline.
        let attempt = tokio::time::timeout(self.cfg.renew_deadline, async {
            loop {
                match self.try_release().await {
                    Err(LeaderElectionError::Kube(kube::Error::Api(s))) if s.is_conflict() => {
                        tokio::time::sleep(self.cfg.retry_period / 4).await;
                    }
                    other => return other,
                }
            }
        })
        .await;
        match attempt {
            Ok(Ok(true)) => tracing::info!(lease = %self.lease_ref(), "released leader lease"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.lease_ref(), error = %e, "failed to release lease")
            }
            Err(_) => {
                tracing::warn!(lease = %self.lease_ref(), "failed to release lease: timed out")
            }
        }
    }

    async fn try_release(&mut self) -> Result<bool, LeaderElectionError> {
        let Some(mut lease) = self.api.get_opt(&self.cfg.lease_name).await? else {
            return Ok(false);
        };
        let current = Record::from_spec(lease.spec.as_ref());
        if !self.is_leader() || current.holder != self.cfg.identity {
            return Ok(false);
        }
        let now = MicroTime(jiff::Timestamp::now());
        let released = Record {
            holder: String::new(),
            duration_seconds: 1,
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            transitions: current.transitions,
        };
        released.apply_to(lease.spec.get_or_insert_with(LeaseSpec::default));
        PublishedContainer::stamp(None, &mut lease.metadata);
        self.api.replace(&self.cfg.lease_name, &PostParams::default(), &lease).await?;
        self.observed = Some((released, Instant::now()));
        Ok(true)
    }
}

/// `d` plus up to `JITTER_FACTOR × d` at random, like client-go's `wait.Jitter`.
fn jittered(d: Duration) -> Duration {
    d + d.mul_f64(JITTER_FACTOR * rand::random::<f64>())
}

/// A random (version 4) UUID in its usual text form.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests;
