//! The garbage_collector controller (being written).

use opkit::Manager;

use crate::ControllersConfig;

/// Registers the garbage_collector controller(s) with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) {
    let _ = (mgr, cfg);
}
