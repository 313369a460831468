//! What the aggregation layer reads from storage: the service-backed APIServices and the
//! endpoint that serves each (resolved with the shared
//! [`opkit_apimachinery::aggregation::resolve`] from the Service and Endpoints as stored).

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use opkit_apimachinery::aggregation::{self, Backend, Unavailable};

use super::{Registry, parse_stored};
use crate::storage::ResourceId;

impl Registry {
    /// The APIServices served by a Service, highest group priority first, then highest
    /// version priority.
    pub fn aggregated_apiservices(&self) -> Vec<APIService> {
        let stored = self.store.values(&ResourceId::new("apiregistration.k8s.io", "apiservices"));
        let mut apiservices: Vec<APIService> = stored
            .into_iter()
            .filter_map(|(_, bytes)| parse_stored(&bytes).ok())
            .filter_map(|v| serde_json::from_value::<APIService>(v).ok())
            .filter(|a| a.spec.as_ref().is_some_and(|s| s.service.is_some()))
            .collect();
        let priorities = |a: &APIService| {
            let spec = a.spec.clone().unwrap_or_default();
            (std::cmp::Reverse(spec.group_priority_minimum), spec.group, std::cmp::Reverse(spec.version_priority))
        };
        apiservices.sort_by_key(priorities);
        apiservices
    }

    /// The service-backed APIService for `group`/`version`, when that group/version is
    /// not served by this server itself.
    pub fn aggregated_apiservice(&self, group: &str, version: &str) -> Option<APIService> {
        if group.is_empty() || self.catalog.snapshot().serves(group, version) {
            return None;
        }
        self.aggregated_apiservices().into_iter().find(|a| {
            a.spec.as_ref().is_some_and(|s| s.group.as_deref() == Some(group) && s.version.as_deref() == Some(version))
        })
    }

    /// The endpoint that serves `apiservice`, or why there is none.
    pub async fn aggregation_backend(&self, apiservice: &APIService) -> Result<Backend, Unavailable> {
        let reference = apiservice.spec.as_ref().and_then(|s| s.service.clone()).unwrap_or_default();
        let key = (reference.namespace.unwrap_or_default(), reference.name.unwrap_or_default());
        let service: Option<Service> = self.view().read_typed(ResourceId::new("", "services"), &key).await;
        let endpoints: Option<Endpoints> = self.view().read_typed(ResourceId::new("", "endpoints"), &key).await;
        aggregation::resolve(apiservice, service.as_ref(), endpoints.as_ref())
    }
}

/// Whether an APIService's `Available` condition is `True`.
pub(crate) fn is_available(apiservice: &APIService) -> bool {
    let conditions = apiservice.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Available" && c.status == "True"))
}
