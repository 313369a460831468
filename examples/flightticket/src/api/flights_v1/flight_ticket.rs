// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The FlightTicket API (flights.com/v1): what a FlightTicket declares (`spec`: a route
//! and a number of seats) and what its controller reports (`status`: the booking phase and
//! a `Ready` condition).
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

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The type of the condition that says whether a FlightTicket is booked.
pub const CONDITION_READY: &str = "Ready";

/// The desired state of a FlightTicket: a flight from one place to another for 1 to 10
/// passengers.
// clippy mistakes the repeated `type_ = "string"` of two printcolumns for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "flights.com",
    version = "v1",
    kind = "FlightTicket",
    plural = "flighttickets",
    shortname = "ft",
    namespaced,
    status = "FlightTicketStatus",
    printcolumn(name = "From", type_ = "string", json_path = ".spec.from"),
    printcolumn(name = "To", type_ = "string", json_path = ".spec.to"),
    printcolumn(name = "Number", type_ = "integer", json_path = ".spec.number"),
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct FlightTicketSpec {
    /// Where the flight departs, e.g. `Mumbai`.
    pub from: String,
    /// Where the flight arrives, e.g. `London`.
    pub to: String,
    /// How many seats to book (1 to 10).
    #[schemars(range(min = 1, max = 10))]
    pub number: i32,
    /// The cabin class: `economy`, `business` or `first`; the defaulting webhook sets
    /// `economy` when it is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
}

/// The phase of a FlightTicket's booking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum FlightTicketPhase {
    /// Not yet looked at by the controller.
    #[default]
    Pending,
    /// The seats are booked.
    Booked,
    /// The ticket cannot be booked (e.g. it departs where it arrives).
    Rejected,
}

impl FlightTicketPhase {
    /// The wire value (`Pending`, `Booked`, `Rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            FlightTicketPhase::Pending => "Pending",
            FlightTicketPhase::Booked => "Booked",
            FlightTicketPhase::Rejected => "Rejected",
        }
    }
}

impl fmt::Display for FlightTicketPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The observed state of a FlightTicket, written by its controller through the status subresource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlightTicketStatus {
    /// Where the booking stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<FlightTicketPhase>,
    /// Whether the seats are booked.
    #[serde(default)]
    pub booked: bool,
    /// The `metadata.generation` of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The latest observations of the FlightTicket's state (`Ready`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::json;

    use super::*;

    #[test]
    fn crd_matches_the_seed() -> Result<(), serde_json::Error> {
        let crd = serde_json::to_value(FlightTicket::crd())?;
        assert_eq!(crd["metadata"]["name"], "flighttickets.flights.com");
        assert_eq!(crd["spec"]["group"], "flights.com");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(
            crd["spec"]["names"],
            json!({"kind": "FlightTicket", "plural": "flighttickets",
                   "shortNames": ["ft"], "singular": "flightticket"})
        );
        let version = &crd["spec"]["versions"][0];
        assert_eq!(
            (&version["name"], &version["served"], &version["storage"]),
            (&json!("v1"), &json!(true), &json!(true))
        );
        assert_eq!(version["subresources"], json!({"status": {}}));
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let mut required: Vec<_> =
            spec["required"].as_array().into_iter().flatten().filter_map(|r| r.as_str()).collect();
        required.sort_unstable();
        assert_eq!(required, ["from", "number", "to"]);
        assert_eq!(spec["properties"]["from"]["type"], "string");
        assert_eq!(spec["properties"]["to"]["type"], "string");
        let number = &spec["properties"]["number"];
        assert_eq!(number["type"], "integer");
        assert_eq!((number["minimum"].as_f64(), number["maximum"].as_f64()), (Some(1.0), Some(10.0)));
        let columns: Vec<_> = version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| (c["name"].clone(), c["jsonPath"].clone()))
            .collect();
        assert_eq!(
            columns,
            vec![
                (json!("From"), json!(".spec.from")),
                (json!("To"), json!(".spec.to")),
                (json!("Number"), json!(".spec.number"))
            ]
        );
        Ok(())
    }

    #[test]
    fn status_serializes_in_camel_case() -> Result<(), serde_json::Error> {
        let status = FlightTicketStatus {
            phase: Some(FlightTicketPhase::Booked),
            booked: true,
            observed_generation: Some(3),
            conditions: vec![],
        };
        assert_eq!(serde_json::to_value(&status)?, json!({"phase": "Booked", "booked": true, "observedGeneration": 3}));
        assert_eq!(FlightTicketPhase::Rejected.to_string(), "Rejected");
        Ok(())
    }
}
