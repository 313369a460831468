// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The FlightTicket API at flights.com/v2: the same ticket as v1 (the hub and storage
//! version, which the conversion webhook converts to and from) with the places named
//! `departure`/`arrival` and the count `seats`. The status is v1's.
//!
//! `opkit generate` (`make manifests`) writes the CRD in config/crd/bases from these
//! types. kubebuilder's markers are attributes here:
//!
//! | kubebuilder marker | opkit (kube derive, schemars) |
//! |---|---|
//! | `+kubebuilder:subresource:status` | `#[kube(status = "FlightTicketStatus")]` |
//! | `+kubebuilder:subresource:scale` | `#[kube(scale(spec_replicas_path = ".spec.size", status_replicas_path = ".status.replicas"))]` |
//! | `+kubebuilder:printcolumn` | `#[kube(printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"))]` |
//! | `+kubebuilder:resource:scope=Cluster` | leave out `namespaced` |
//! | `+kubebuilder:resource:shortName=x;categories=y` | `#[kube(shortname = "x", category = "y")]` |
//! | `+kubebuilder:storageversion` | `#[kube(storage = false)]` on the other versions |
//! | `+kubebuilder:validation:Minimum=1`, `Maximum=5` | `#[schemars(range(min = 1, max = 5))]` |
//! | `+kubebuilder:validation:MinLength`, `MaxLength` | `#[schemars(length(min = 1, max = 63))]` |
//! | `+kubebuilder:validation:Pattern` | `#[schemars(pattern(r"^[a-z]+$"))]` |
//! | `+kubebuilder:validation:Enum` | a Rust `enum` deriving `JsonSchema` |
//! | `+kubebuilder:validation:XValidation` (CEL) | derive `kube::KubeSchema` instead of `JsonSchema`, then `#[x_kube(validation = "self.min <= self.max")]` |
//! | `+kubebuilder:default` | `#[serde(default = "path")]` (the default goes into the schema) |
//! | `+optional` / `+required` | `Option<T>` with `#[serde(default)]` / a plain field |

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::api::flights_v1::FlightTicketStatus;

/// The desired state of a FlightTicket at v2: a flight from `departure` to `arrival` for 1 to
/// 10 passengers.
// clippy mistakes the repeated `type_ = "string"` of two printcolumns for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "flights.com",
    version = "v2",
    kind = "FlightTicket",
    plural = "flighttickets",
    shortname = "ft",
    doc = "FlightTicket is the Schema for the flighttickets API",
    namespaced,
    status = "FlightTicketStatus",
    storage = false,
    printcolumn(name = "Departure", type_ = "string", json_path = ".spec.departure"),
    printcolumn(name = "Arrival", type_ = "string", json_path = ".spec.arrival"),
    printcolumn(name = "Seats", type_ = "integer", json_path = ".spec.seats"),
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct FlightTicketSpec {
    /// Where the flight departs (v1 `from`).
    pub departure: String,
    /// Where the flight arrives (v1 `to`).
    pub arrival: String,
    /// How many seats to book, 1 to 10 (v1 `number`).
    #[schemars(range(min = 1, max = 10))]
    pub seats: i32,
    /// The cabin class: `economy` (the default), `business` or `first`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}
