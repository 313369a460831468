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

fn listable<T: Resource + ListableResource + JsonSchema>(generator: &mut SchemaGenerator, out: &mut Vec<BuiltinKind>) {
    let _ = generator.subschema_for::<T>();
    out.push(BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        definition: T::schema_name().into_owned(),
        list_kind: Some(T::LIST_KIND),
    });
}

fn single<T: Resource + JsonSchema>(generator: &mut SchemaGenerator, out: &mut Vec<BuiltinKind>) {
    let _ = generator.subschema_for::<T>();
    out.push(BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        definition: T::schema_name().into_owned(),
        list_kind: None,
    });
}

macro_rules! register {
    ($generator:ident, $out:ident; listable: [$($l:ty,)*] single: [$($s:ty,)*]) => {
        $( listable::<$l>($generator, &mut $out); )*
        $( single::<$s>($generator, &mut $out); )*
    };
}

/// Registers every built-in kind (and the meta types the documents need) with `generator`
/// and returns the kinds that were registered.
pub(crate) fn register_all(generator: &mut SchemaGenerator) -> Vec<BuiltinKind> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let mut out = Vec::new();
    register! { generator, out;
    listable: [
        k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
        k8s_openapi::api::admissionregistration::v1beta1::ValidatingAdmissionPolicy,
        k8s_openapi::api::admissionregistration::v1beta1::ValidatingAdmissionPolicyBinding,
        k8s_openapi::api::apiserverinternal::v1alpha1::StorageVersion,
        k8s_openapi::api::apps::v1::ControllerRevision,
        k8s_openapi::api::apps::v1::DaemonSet,
        k8s_openapi::api::apps::v1::Deployment,
        k8s_openapi::api::apps::v1::ReplicaSet,
        k8s_openapi::api::apps::v1::StatefulSet,
        k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler,
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
        k8s_openapi::api::batch::v1::CronJob,
        k8s_openapi::api::batch::v1::Job,
        k8s_openapi::api::certificates::v1::CertificateSigningRequest,
        k8s_openapi::api::certificates::v1alpha1::ClusterTrustBundle,
        k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle,
        k8s_openapi::api::coordination::v1::Lease,
        k8s_openapi::api::coordination::v1alpha2::LeaseCandidate,
        k8s_openapi::api::coordination::v1beta1::LeaseCandidate,
        k8s_openapi::api::core::v1::ComponentStatus,
        k8s_openapi::api::core::v1::ConfigMap,
        k8s_openapi::api::core::v1::Endpoints,
        k8s_openapi::api::core::v1::Event,
        k8s_openapi::api::core::v1::LimitRange,
        k8s_openapi::api::core::v1::Namespace,
        k8s_openapi::api::core::v1::Node,
        k8s_openapi::api::core::v1::PersistentVolume,
        k8s_openapi::api::core::v1::PersistentVolumeClaim,
        k8s_openapi::api::core::v1::Pod,
        k8s_openapi::api::core::v1::PodTemplate,
        k8s_openapi::api::core::v1::ReplicationController,
        k8s_openapi::api::core::v1::ResourceQuota,
        k8s_openapi::api::core::v1::Secret,
        k8s_openapi::api::core::v1::Service,
        k8s_openapi::api::core::v1::ServiceAccount,
        k8s_openapi::api::discovery::v1::EndpointSlice,
        k8s_openapi::api::events::v1::Event,
        k8s_openapi::api::flowcontrol::v1::FlowSchema,
        k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
        k8s_openapi::api::networking::v1::IPAddress,
        k8s_openapi::api::networking::v1::Ingress,
        k8s_openapi::api::networking::v1::IngressClass,
        k8s_openapi::api::networking::v1::NetworkPolicy,
        k8s_openapi::api::networking::v1::ServiceCIDR,
        k8s_openapi::api::networking::v1beta1::IPAddress,
        k8s_openapi::api::networking::v1beta1::ServiceCIDR,
        k8s_openapi::api::node::v1::RuntimeClass,
        k8s_openapi::api::policy::v1::PodDisruptionBudget,
        k8s_openapi::api::rbac::v1::ClusterRole,
        k8s_openapi::api::rbac::v1::ClusterRoleBinding,
        k8s_openapi::api::rbac::v1::Role,
        k8s_openapi::api::rbac::v1::RoleBinding,
        k8s_openapi::api::resource::v1alpha3::DeviceClass,
        k8s_openapi::api::resource::v1alpha3::DeviceTaintRule,
        k8s_openapi::api::resource::v1alpha3::ResourceClaim,
        k8s_openapi::api::resource::v1alpha3::ResourceClaimTemplate,
        k8s_openapi::api::resource::v1alpha3::ResourceSlice,
        k8s_openapi::api::resource::v1beta1::DeviceClass,
        k8s_openapi::api::resource::v1beta1::ResourceClaim,
        k8s_openapi::api::resource::v1beta1::ResourceClaimTemplate,
        k8s_openapi::api::resource::v1beta1::ResourceSlice,
        k8s_openapi::api::resource::v1beta2::DeviceClass,
        k8s_openapi::api::resource::v1beta2::ResourceClaim,
        k8s_openapi::api::resource::v1beta2::ResourceClaimTemplate,
        k8s_openapi::api::resource::v1beta2::ResourceSlice,
        k8s_openapi::api::scheduling::v1::PriorityClass,
        k8s_openapi::api::storage::v1::CSIDriver,
        k8s_openapi::api::storage::v1::CSINode,
        k8s_openapi::api::storage::v1::CSIStorageCapacity,
        k8s_openapi::api::storage::v1::StorageClass,
        k8s_openapi::api::storage::v1::VolumeAttachment,
        k8s_openapi::api::storage::v1alpha1::VolumeAttributesClass,
        k8s_openapi::api::storage::v1beta1::VolumeAttributesClass,
        k8s_openapi::api::storagemigration::v1alpha1::StorageVersionMigration,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    ]
    single: [
        k8s_openapi::api::authentication::v1::SelfSubjectReview,
        k8s_openapi::api::authentication::v1::TokenRequest,
        k8s_openapi::api::authentication::v1::TokenReview,
        k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
        k8s_openapi::api::authorization::v1::SelfSubjectAccessReview,
        k8s_openapi::api::authorization::v1::SelfSubjectRulesReview,
        k8s_openapi::api::authorization::v1::SubjectAccessReview,
        k8s_openapi::api::autoscaling::v1::Scale,
        k8s_openapi::api::core::v1::Binding,
        k8s_openapi::api::policy::v1::Eviction,
        meta::Status,
        meta::APIGroup,
        meta::APIGroupList,
        meta::APIResourceList,
        meta::APIVersions,
    ]
    }
    let _ = generator.subschema_for::<meta::DeleteOptions>();
    let _ = generator.subschema_for::<meta::Patch>();
    let _ = generator.subschema_for::<meta::ListMeta>();
    let _ = generator.subschema_for::<meta::WatchEvent<k8s_openapi::api::core::v1::Pod>>();
    out
}
