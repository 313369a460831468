//! The list of built-in Kubernetes kinds (from k8s-openapi, Kubernetes 1.33) whose schemas
//! are published in the OpenAPI documents, and the code that feeds them to schemars.

use k8s_openapi::{ListableResource, Resource};
use schemars::{JsonSchema, SchemaGenerator};

/// One built-in kind registered with the schema generator.
#[derive(Debug, Clone)]
pub(crate) struct BuiltinKind {
    /// API group ("" for core).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind name.
    pub kind: &'static str,
    /// Definition name, e.g. "io.k8s.api.apps.v1.Deployment".
    pub definition: String,
    /// List kind name, when the kind is listable.
    pub list_kind: Option<&'static str>,
}

/// Registers one kind's schema with the generator and says what was registered.
type Register = fn(&mut SchemaGenerator) -> BuiltinKind;

fn listable<T: Resource + ListableResource + JsonSchema>(generator: &mut SchemaGenerator) -> BuiltinKind {
    let _ = generator.subschema_for::<T>();
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        definition: T::schema_name().into_owned(),
        list_kind: Some(T::LIST_KIND),
    }
}

fn single<T: Resource + JsonSchema>(generator: &mut SchemaGenerator) -> BuiltinKind {
    let _ = generator.subschema_for::<T>();
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        definition: T::schema_name().into_owned(),
        list_kind: None,
    }
}

/// The built-in kinds, in the order their schemas are registered: the listable kinds,
/// then the kinds without a list (reviews, subresources, the meta types).
static BUILTIN_KINDS: &[Register] = &[
    listable::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>,
    listable::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>,
    listable::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>,
    listable::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>,
    listable::<k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy>,
    listable::<k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding>,
    listable::<k8s_openapi::api::admissionregistration::v1beta1::ValidatingAdmissionPolicy>,
    listable::<k8s_openapi::api::admissionregistration::v1beta1::ValidatingAdmissionPolicyBinding>,
    listable::<k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion>,
    listable::<k8s_openapi::api::apps::v1::ControllerRevision>,
    listable::<k8s_openapi::api::apps::v1::DaemonSet>,
    listable::<k8s_openapi::api::apps::v1::Deployment>,
    listable::<k8s_openapi::api::apps::v1::ReplicaSet>,
    listable::<k8s_openapi::api::apps::v1::StatefulSet>,
    listable::<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler>,
    listable::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
    listable::<k8s_openapi::api::batch::v1::CronJob>,
    listable::<k8s_openapi::api::batch::v1::Job>,
    listable::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>,
    listable::<k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle>,
    listable::<k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle>,
    listable::<k8s_openapi::api::coordination::v1::Lease>,
    listable::<k8s_openapi::api::coordination::v1alpha2::LeaseCandidate>,
    listable::<k8s_openapi::api::coordination::v1beta1::LeaseCandidate>,
    listable::<k8s_openapi::api::core::v1::ComponentStatus>,
    listable::<k8s_openapi::api::core::v1::ConfigMap>,
    listable::<k8s_openapi::api::core::v1::Endpoints>,
    listable::<k8s_openapi::api::core::v1::Event>,
    listable::<k8s_openapi::api::core::v1::LimitRange>,
    listable::<k8s_openapi::api::core::v1::Namespace>,
    listable::<k8s_openapi::api::core::v1::Node>,
    listable::<k8s_openapi::api::core::v1::PersistentVolume>,
    listable::<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    listable::<k8s_openapi::api::core::v1::Pod>,
    listable::<k8s_openapi::api::core::v1::PodTemplate>,
    listable::<k8s_openapi::api::core::v1::ReplicationController>,
    listable::<k8s_openapi::api::core::v1::ResourceQuota>,
    listable::<k8s_openapi::api::core::v1::Secret>,
    listable::<k8s_openapi::api::core::v1::Service>,
    listable::<k8s_openapi::api::core::v1::ServiceAccount>,
    listable::<k8s_openapi::api::discovery::v1::EndpointSlice>,
    listable::<k8s_openapi::api::events::v1::Event>,
    listable::<k8s_openapi::api::flowcontrol::v1::FlowSchema>,
    listable::<k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration>,
    listable::<k8s_openapi::api::networking::v1::IPAddress>,
    listable::<k8s_openapi::api::networking::v1::Ingress>,
    listable::<k8s_openapi::api::networking::v1::IngressClass>,
    listable::<k8s_openapi::api::networking::v1::NetworkPolicy>,
    listable::<k8s_openapi::api::networking::v1::ServiceCIDR>,
    listable::<k8s_openapi::api::networking::v1beta1::IPAddress>,
    listable::<k8s_openapi::api::networking::v1beta1::ServiceCIDR>,
    listable::<k8s_openapi::api::node::v1::RuntimeClass>,
    listable::<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    listable::<k8s_openapi::api::rbac::v1::ClusterRole>,
    listable::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>,
    listable::<k8s_openapi::api::rbac::v1::Role>,
    listable::<k8s_openapi::api::rbac::v1::RoleBinding>,
    listable::<k8s_openapi::api::resource::v1alpha3::DeviceClass>,
    listable::<k8s_openapi::api::resource::v1alpha3::DeviceTaintRule>,
    listable::<k8s_openapi::api::resource::v1alpha3::ResourceClaim>,
    listable::<k8s_openapi::api::resource::v1alpha3::ResourceClaimTemplate>,
    listable::<k8s_openapi::api::resource::v1alpha3::ResourceSlice>,
    listable::<k8s_openapi::api::resource::v1beta1::DeviceClass>,
    listable::<k8s_openapi::api::resource::v1beta1::ResourceClaim>,
    listable::<k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate>,
    listable::<k8s_openapi::api::resource::v1beta1::ResourceSlice>,
    listable::<k8s_openapi::api::resource::v1beta2::DeviceClass>,
    listable::<k8s_openapi::api::resource::v1beta2::ResourceClaim>,
    listable::<k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate>,
    listable::<k8s_openapi::api::resource::v1beta2::ResourceSlice>,
    listable::<k8s_openapi::api::scheduling::v1::PriorityClass>,
    listable::<k8s_openapi::api::storage::v1::CSIDriver>,
    listable::<k8s_openapi::api::storage::v1::CSINode>,
    listable::<k8s_openapi::api::storage::v1::CSIStorageCapacity>,
    listable::<k8s_openapi::api::storage::v1::StorageClass>,
    listable::<k8s_openapi::api::storage::v1::VolumeAttachment>,
    listable::<k8s_openapi::api::storage::v1alpha1::VolumeAttributesClass>,
    listable::<k8s_openapi::api::storage::v1beta1::VolumeAttributesClass>,
    listable::<k8s_openapi::api::storagemigration::v1alpha1::StorageVersionMigration>,
    listable::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    listable::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>,
    single::<k8s_openapi::api::authentication::v1::SelfSubjectReview>,
    single::<k8s_openapi::api::authentication::v1::TokenRequest>,
    single::<k8s_openapi::api::authentication::v1::TokenReview>,
    single::<k8s_openapi::api::authorization::v1::LocalSubjectAccessReview>,
    single::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>,
    single::<k8s_openapi::api::authorization::v1::SelfSubjectRulesReview>,
    single::<k8s_openapi::api::authorization::v1::SubjectAccessReview>,
    single::<k8s_openapi::api::autoscaling::v1::Scale>,
    single::<k8s_openapi::api::core::v1::Binding>,
    single::<k8s_openapi::api::policy::v1::Eviction>,
    single::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
    single::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup>,
    single::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroupList>,
    single::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList>,
    single::<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIVersions>,
];

/// Registers every built-in kind (and the meta types the documents need) with `generator`
/// and returns the kinds that were registered.
pub(crate) fn register_all(generator: &mut SchemaGenerator) -> Vec<BuiltinKind> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let out = BUILTIN_KINDS.iter().map(|register| register(generator)).collect();
    let _ = generator.subschema_for::<meta::DeleteOptions>();
    let _ = generator.subschema_for::<meta::Patch>();
    let _ = generator.subschema_for::<meta::ListMeta>();
    let _ = generator.subschema_for::<meta::WatchEvent<k8s_openapi::api::core::v1::Pod>>();
    out
}
