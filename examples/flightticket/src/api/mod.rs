// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The API types of this operator, one module per group and version
//! (`opkit create api` adds them), and [`crds`], the CustomResourceDefinitions they make.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
#[allow(unused_imports)]
use kube::CustomResourceExt;

pub mod flights_v1;
pub mod flights_v2;
// +opkit:scaffold:api-modules

/// Every CRD of this operator. `opkit generate` (`make manifests`) writes them to
/// config/crd/bases; tests install them with `TestEnv::install_crds`. When a kind has
/// several versions, each is listed and joined into one CRD; mark all but the stored
/// version with `#[kube(storage = false)]`.
pub fn crds() -> Vec<CustomResourceDefinition> {
    opkit::crd::merge_versions([
        flights_v1::FlightTicket::crd(),
        flights_v2::FlightTicket::crd(),
        // +opkit:scaffold:crds
    ])
}
