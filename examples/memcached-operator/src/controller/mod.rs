// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The controllers of this operator, one module per kind (`opkit create api` adds them),
//! and [`setup`], which registers them all with a manager.

use opkit::{BuildError, Manager};

pub mod memcached;
// +opkit:scaffold:controller-modules

/// Registers every controller of this operator with `mgr`.
pub fn setup(mgr: &Manager) -> Result<(), BuildError> {
    let _ = mgr;
    memcached::setup(mgr)?;
    // +opkit:scaffold:controller-setup
    Ok(())
}
