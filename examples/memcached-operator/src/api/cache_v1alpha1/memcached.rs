// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The Memcached API (cache.example.com/v1alpha1): what a Memcached declares (`spec`)
//! and what its controller reports (`status`).
//!
//! `opkit generate` (`make manifests`) writes the CRD in config/crd/bases from these
//! types. kubebuilder's markers are attributes here:
//!
//! | kubebuilder marker | opkit (kube derive, schemars) |
//! |---|---|
//! | `+kubebuilder:subresource:status` | `#[kube(status = "MemcachedStatus")]` |
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

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired state of a Memcached: how many memcached instances to run.
// The CSV markers (`opkit generate kustomize manifests` reads them into the OLM bundle's
// ClusterServiceVersion, as operator-sdk reads them from Go types):
// +operator-sdk:csv:customresourcedefinitions:displayName="Memcached",resources={{Deployment,v1,memcached-deployment}}
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    plural = "memcacheds",
    namespaced,
    status = "MemcachedStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn(name = "Size", type_ = "integer", json_path = ".spec.size"),
    printcolumn(
        name = "Available",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Available\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// The number of memcached instances (pods) of the deployment, from 1 to 5.
    // +operator-sdk:csv:customresourcedefinitions:type=spec
    #[schemars(range(min = 1, max = 5))]
    pub size: i32,
}

/// The observed state of a Memcached, written by its controller through the status subresource.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// The names of the memcached pods.
    // +operator-sdk:csv:customresourcedefinitions:type=status
    #[serde(default)]
    pub nodes: Vec<String>,
    /// The latest observations of the Memcached's state: `Available` is true once every
    /// memcached pod of the deployment is available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
