// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The `cache.example.com/v1alpha1` API group version.

mod memcached;
pub use memcached::*;
// +opkit:scaffold:kinds
