//! A waiting replica's watch on the lease: it notices the lease released (holder
//! cleared) or deleted, and, where the holder published its container and this replica
//! may read Pods, the kubelet reporting that container ended. Either way the replica
//! tries to acquire at once instead of at its next retry tick.
//!
//! client-go only polls, so after a release a follower may wait a whole jittered retry
//! period (up to 2.2 × retryPeriod), and after a crash the whole lease duration. Polling
//! stays the fallback: a failing watch only costs speed.

use futures::stream::BoxStream;
use futures::{StreamExt, future};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use super::holder::{EndedHolder, PublishedContainer, ended_in};

/// What the watch noticed.
#[derive(Debug)]
pub(super) enum LeaseSignal {
    /// Nobody holds the lease, or it was deleted.
    Released,
    /// The holder's container ended.
    HolderEnded(EndedHolder),
}

/// The running watch; dropping it stops it.
pub(super) struct LeaseWatch {
    signals: mpsc::Receiver<LeaseSignal>,
    _task: AbortOnDropHandle<()>,
}

impl LeaseWatch {
    /// Watches lease `name` of `leases`, and its holder's pod through `client`.
    pub(super) fn start(leases: Api<Lease>, client: kube::Client, name: &str) -> LeaseWatch {
        let (tx, signals) = mpsc::channel(8);
        let task = tokio::spawn(watch_lease(leases, client, name.to_string(), tx));
        LeaseWatch { signals, _task: AbortOnDropHandle::new(task) }
    }

    /// The next signal; pending for ever once the watch ended.
    pub(super) async fn next(&mut self) -> LeaseSignal {
        match self.signals.recv().await {
            Some(s) => s,
            None => future::pending().await,
        }
    }
}

/// The holder whose pod is watched.
struct WatchedHolder {
    identity: String,
    published: PublishedContainer,
    events: BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>,
    /// Its end was already signalled.
    signalled: bool,
    /// A watch error was already logged.
    warned: bool,
}

async fn watch_lease(leases: Api<Lease>, client: kube::Client, name: String, tx: mpsc::Sender<LeaseSignal>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut lease_events = watcher(leases, config).default_backoff().boxed();
    let mut holder: Option<WatchedHolder> = None;
    loop {
        let pod_event = async {
            match holder.as_mut() {
                Some(h) => h.events.next().await,
                None => future::pending().await,
            }
        };
        // select! drops both futures before a handler runs, so handlers may change `holder`.
        tokio::select! {
            event = lease_events.next() => {
                let signal = match event {
                    None => return,
                    Some(Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease))) => {
                        follow_holder(&mut holder, &lease, &client);
                        is_released(&lease).then_some(LeaseSignal::Released)
                    }
                    Some(Ok(watcher::Event::Delete(_))) => {
                        holder = None;
                        Some(LeaseSignal::Released)
                    }
                    Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => None,
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "watching the leader lease failed; polling only until it recovers");
                        None
                    }
                };
                if let Some(signal) = signal && tx.send(signal).await.is_err() {
                    return;
                }
            }
            Some(event) = pod_event => {
                let Some(h) = holder.as_mut() else { continue };
                if let Some(ended) = holder_ended(h, event) && tx.send(LeaseSignal::HolderEnded(ended)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Starts watching the pod `lease` names for its holder, unless it is the one watched.
fn follow_holder(holder: &mut Option<WatchedHolder>, lease: &Lease, client: &kube::Client) {
    let identity = lease.spec.as_ref().and_then(|s| s.holder_identity.clone()).unwrap_or_default();
    let published = PublishedContainer::of_lease(lease).filter(|_| !identity.is_empty());
    let same = |h: &WatchedHolder| Some(&h.published) == published.as_ref() && h.identity == identity;
    if holder.as_ref().is_some_and(same) {
        return;
    }
    *holder = published.map(|published| {
        let (namespace, name) = published.pod_name();
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let events = watcher(pods, config).default_backoff().boxed();
        WatchedHolder { identity, published, events, signalled: false, warned: false }
    });
}

/// The holder's end, the first time a pod event shows it.
fn holder_ended(h: &mut WatchedHolder, event: Result<watcher::Event<Pod>, watcher::Error>) -> Option<EndedHolder> {
    let pod = match event {
        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
        Ok(_) => return None,
        Err(e) => {
            if !h.warned {
                h.warned = true;
                tracing::info!(pod = %h.published.pod, error = %e,
                    "cannot watch the leader's pod (grant get, list and watch on pods): if it crashes, this replica waits for the lease to expire");
            }
            return None;
        }
    };
    if h.signalled {
        return None;
    }
    let finished_at = ended_in(&pod, &h.published)?;
    h.signalled = true;
    Some(EndedHolder { identity: h.identity.clone(), container_id: h.published.container_id.clone(), finished_at })
}

/// Whether nobody holds `lease`.
fn is_released(lease: &Lease) -> bool {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).is_none_or(str::is_empty)
}
