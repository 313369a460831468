//! Conversion between the versions of a CRD by hub and spokes, as controller-runtime's
//! `conversion.Hub` and `conversion.Convertible`: one version (the hub) is what every other
//! version (a spoke) converts to and from, so N versions need N-1 pairs of functions. Served
//! at `/convert` through the [`Converter`] trait, one converter per kind.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::conversion::Converter;

/// The version of a kind every other version converts through (controller-runtime's `Hub`):
/// usually the storage version. Implement it empty: `impl Hub for FlightTicket {}`.
pub trait Hub: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static {}

/// A version of a kind other than the hub `H` (controller-runtime's `Convertible`).
///
/// ```
/// use opkit::webhook::{Convertible, Hub};
///
/// mod v1 {
///     #[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
///     #[kube(group = "example.com", version = "v1", kind = "Person", namespaced)]
///     pub struct PersonSpec { pub name: String }
/// }
/// mod v2 {
///     #[derive(kube::CustomResource, Clone, Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
///     #[kube(group = "example.com", version = "v2", kind = "Person", namespaced)]
///     pub struct PersonSpec { pub first: String, pub last: String }
/// }
///
/// impl Hub for v1::Person {}
/// impl Convertible<v1::Person> for v2::Person {
///     fn convert_to(&self) -> v1::Person {
///         let name = format!("{} {}", self.spec.first, self.spec.last);
///         v1::Person { metadata: self.metadata.clone(), spec: v1::PersonSpec { name } }
///     }
///     fn convert_from(hub: &v1::Person) -> Self {
///         let (first, last) = hub.spec.name.split_once(' ').unwrap_or((&hub.spec.name, ""));
///         let spec = v2::PersonSpec { first: first.into(), last: last.into() };
///         v2::Person { metadata: hub.metadata.clone(), spec }
///     }
/// }
/// ```
pub trait Convertible<H: Hub>:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// This object at the hub version (keep `metadata`).
    fn convert_to(&self) -> H;
    /// The hub object `hub` at this version (keep `metadata`).
    fn convert_from(hub: &H) -> Self;
}

/// One spoke of hub `H`: its apiVersion and its conversions to and from the hub.
pub(crate) struct Spoke<H> {
    api_version: String,
    to_hub: fn(Value) -> Result<H, String>,
    from_hub: fn(&H) -> Result<Value, String>,
}

impl<H> Clone for Spoke<H> {
    fn clone(&self) -> Self {
        Spoke { api_version: self.api_version.clone(), to_hub: self.to_hub, from_hub: self.from_hub }
    }
}

impl<H: Hub> Spoke<H> {
    /// The spoke `S`.
    pub(crate) fn of<S: Convertible<H>>() -> Self {
        Spoke {
            api_version: S::api_version(&()).into_owned(),
            to_hub: |obj| serde_json::from_value::<S>(obj).map(|s| s.convert_to()).map_err(|e| e.to_string()),
            from_hub: |hub| serde_json::to_value(S::convert_from(hub)).map_err(|e| e.to_string()),
        }
    }
}

/// Converts the objects of one kind between its hub `H` and its spokes.
pub(crate) struct HubConverter<H> {
    spokes: Vec<Spoke<H>>,
}

impl<H> HubConverter<H> {
    /// A converter over `spokes`.
    pub(crate) fn new(spokes: Vec<Spoke<H>>) -> Self {
        HubConverter { spokes }
    }
}

impl<H: Hub> HubConverter<H> {
    fn spoke(&self, api_version: &str) -> Result<&Spoke<H>, String> {
        self.spokes
            .iter()
            .find(|s| s.api_version == api_version)
            .ok_or_else(|| format!("{api_version} is neither the hub {} nor one of its spokes", H::api_version(&())))
    }
}

impl<H: Hub> Converter for HubConverter<H> {
    fn convert(&self, obj: Value, desired_api_version: &str) -> Result<Value, String> {
        let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default().to_owned();
        let hub_version = H::api_version(&());
        let hub: H = if from == hub_version {
            serde_json::from_value(obj).map_err(|e| format!("decoding {from}: {e}"))?
        } else {
            (self.spoke(&from)?.to_hub)(obj).map_err(|e| format!("decoding {from}: {e}"))?
        };
        if desired_api_version == hub_version {
            serde_json::to_value(&hub).map_err(|e| e.to_string())
        } else {
            (self.spoke(desired_api_version)?.from_hub)(&hub)
        }
    }
}

/// The converter at `/convert`: picks the kind's converter by the object's group and kind.
pub(crate) struct KindConverters {
    by_kind: HashMap<(String, String), Arc<dyn Converter>>,
}

impl KindConverters {
    /// Converters keyed by (group, kind).
    pub(crate) fn new(by_kind: HashMap<(String, String), Arc<dyn Converter>>) -> Self {
        KindConverters { by_kind }
    }
}

impl Converter for KindConverters {
    fn convert(&self, obj: Value, desired_api_version: &str) -> Result<Value, String> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default().to_owned();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
        match self.by_kind.get(&(group, kind)) {
            Some(converter) => converter.convert(obj, desired_api_version),
            None => Err(format!("no conversion is registered for {api_version}, Kind={}", obj["kind"])),
        }
    }
}
