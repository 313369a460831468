//! The kubelet's view of the cluster's Services: three reflectors (Services and
//! EndpointSlices in every namespace, and the Nodes, whose addresses carry NodePorts, as
//! kube-proxy lists them) and, after every event,
//! a fresh [`ServiceTable`] published on a `watch` channel. Every pod sandbox's Service
//! proxy and DNS server reads the latest table, so endpoint changes reach them without
//! re-listening. The task stops when the [`ServiceWatch`] is dropped.

use std::sync::Arc;

use futures::StreamExt;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::service_table::ServiceTable;

/// The latest table, as sandboxes read it: `None` until every reflector has listed.
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

/// Which reflector an event came from.
#[derive(Clone, Copy)]
enum Source {
    Services,
    Slices,
    Nodes,
}

/// Runs the reflectors and publishes a table after each of their events, once all have
/// listed.
async fn follow(client: kube::Client, sender: watch::Sender<Option<Arc<ServiceTable>>>) {
    let (services, services_writer) = reflector::store::<Service>();
    let (slices, slices_writer) = reflector::store::<EndpointSlice>();
    let (nodes, nodes_writer) = reflector::store::<Node>();
    let service_events = reflector::reflector(
        services_writer,
        watcher(Api::<Service>::all(client.clone()), watcher::Config::default()).default_backoff(),
    )
    .map(listed(Source::Services));
    let slice_events = reflector::reflector(
        slices_writer,
        watcher(Api::<EndpointSlice>::all(client.clone()), watcher::Config::default()).default_backoff(),
    )
    .map(listed(Source::Slices));
    let node_events = reflector::reflector(
        nodes_writer,
        watcher(Api::<Node>::all(client), watcher::Config::default()).default_backoff(),
    )
    .map(listed(Source::Nodes));
    let both = futures::stream::select(service_events, slice_events);
    let mut events = std::pin::pin!(futures::stream::select(both, node_events));
    let (mut services_listed, mut slices_listed, mut nodes_listed) = (false, false, false);
    while let Some((source, listed)) = events.next().await {
        match source {
            Source::Services => services_listed |= listed,
            Source::Slices => slices_listed |= listed,
            Source::Nodes => nodes_listed |= listed,
        }
        if services_listed && slices_listed && nodes_listed {
            publish(&sender, &services, &slices, &nodes);
        }
    }
}

/// Tags a reflector's events with their `source` and whether the event ends its list.
fn listed<K>(source: Source) -> impl Fn(Result<watcher::Event<K>, watcher::Error>) -> (Source, bool) {
    move |event| (source, matches!(event, Ok(watcher::Event::InitDone)))
}

/// The InternalIPs (IPv4) of `nodes`, where NodePorts are served.
fn node_ips(nodes: &Store<Node>) -> Vec<Ipv4Addr> {
    let nodes = nodes.state();
    let addresses = nodes.iter().filter_map(|n| n.status.as_ref()?.addresses.as_ref()).flatten();
    addresses.filter(|a| a.type_ == "InternalIP").filter_map(|a| a.address.parse().ok()).collect()
}

/// Sends the table of the stores' contents when it differs from the last one.
fn publish(
    sender: &watch::Sender<Option<Arc<ServiceTable>>>,
    services: &Store<Service>,
    slices: &Store<EndpointSlice>,
    nodes: &Store<Node>,
) {
    let (services, slices) = (services.state(), slices.state());
    let table = ServiceTable::build(services.iter().map(Arc::as_ref), slices.iter().map(Arc::as_ref), &node_ips(nodes));
    sender.send_if_modified(|current| {
        let changed = current.as_deref() != Some(&table);
        if changed {
            *current = Some(Arc::new(table));
        }
        changed
    });
}
