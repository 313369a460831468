// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The `flights.com/v2` API group version.

mod flight_ticket;
pub use flight_ticket::*;
// +opkit:scaffold:kinds
