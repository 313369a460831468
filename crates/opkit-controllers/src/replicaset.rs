//! The replicaset controller (being written).

use opkit::Manager;

use crate::ControllersConfig;

/// Registers the replicaset controller(s) with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) {
    let _ = (mgr, cfg);
}
