//! The kubelet's view of the cluster's Services: two reflectors (Services and
//! EndpointSlices, in every namespace, as kube-proxy lists them) and, after every event,
//! a fresh [`ServiceTable`] published on a `watch` channel. Every pod sandbox's Service
//! proxy and DNS server reads the latest table, so endpoint changes reach them without
//! re-listening. The task stops when the [`ServiceWatch`] is dropped.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::service_table::ServiceTable;

/// The latest table, as sandboxes read it: `None` until both reflectors have listed.
pub(super) type Tables = watch::Receiver<Option<Arc<ServiceTable>>>;

/// A running watch; dropping it stops the reflectors (the last table stays readable).
#[derive(Debug)]
pub(super) struct ServiceWatch {
    tables: Tables,
    task: AbortHandle,
}

impl ServiceWatch {
    /// Starts following the Services of `client`'s cluster (inside a tokio runtime).
    pub(super) fn start(client: kube::Client) -> ServiceWatch {
        let (sender, tables) = watch::channel(None);
        let task = tokio::spawn(follow(client, sender)).abort_handle();
        ServiceWatch { tables, task }
    }

    /// The latest tables.
    pub(super) fn tables(&self) -> Tables {
        self.tables.clone()
    }
}

impl Drop for ServiceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs both reflectors and publishes a table after each of their events, once both
/// have listed.
async fn follow(client: kube::Client, sender: watch::Sender<Option<Arc<ServiceTable>>>) {
    let (services, services_writer) = reflector::store::<Service>();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let service_events = reflector::reflector(
        services_writer,
        watcher(Api::<Service>::all(client.clone()), watcher::Config::default()).default_backoff(),
    )
    .map(|event| (true, matches!(event, Ok(watcher::Event::InitDone))));
    let slice_events = reflector::reflector(
        slices_writer,
        watcher(Api::<EndpointSlice>::all(client), watcher::Config::default()).default_backoff(),
    )
    .map(|event| (false, matches!(event, Ok(watcher::Event::InitDone))));
    let mut events = std::pin::pin!(futures::stream::select(service_events, slice_events));
    let (mut services_listed, mut slices_listed) = (false, false);
    while let Some((of_services, listed)) = events.next().await {
        if of_services {
            services_listed |= listed;
        } else {
            slices_listed |= listed;
        }
        if services_listed && slices_listed {
            publish(&sender, &services, &slices);
        }
    }
}

/// Sends the table of the stores' contents when it differs from the last one.
fn publish(
    sender: &watch::Sender<Option<Arc<ServiceTable>>>,
    services: &Store<Service>,
    slices: &Store<EndpointSlice>,
) {
    let (services, slices) = (services.state(), slices.state());
    let table = ServiceTable::build(services.iter().map(Arc::as_ref), slices.iter().map(Arc::as_ref));
    sender.send_if_modified(|current| {
        let changed = current.as_deref() != Some(&table);
        if changed {
            *current = Some(Arc::new(table));
        }
        changed
    });
}
