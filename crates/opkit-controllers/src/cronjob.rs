//! The cronjob controller (being written).

use opkit::Manager;

use crate::ControllersConfig;

/// Registers the cronjob controller(s) with `mgr`.
pub fn register(mgr: &Manager, cfg: &ControllersConfig) {
    let _ = (mgr, cfg);
}
