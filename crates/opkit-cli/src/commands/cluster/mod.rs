//! `opkit cluster start|stop|status|delete|kubeconfig`: the local control plane and its
//! lifecycle, as kind and minikube users know it. A data directory holds one cluster: its
//! lock file says which process runs it (`opkit_apiserver::data_dir`), and
//! `DATA_DIR/cluster.json` what that process started ([`record`]).

mod background;
pub(crate) mod context;
mod detach;
mod lifecycle;
mod record;
mod start;

pub(crate) use background::spawn_background;
pub(crate) use lifecycle::terminate;
pub(super) use lifecycle::{delete, kubeconfig, status, stop};
pub(super) use start::{DEFAULT_DATA_DIR, start};
