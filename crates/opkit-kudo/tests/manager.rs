//! KUDO's manager objects (`opkit_kudo::manager`) applied to an in-process control
//! plane: everything `kubectl kudo init` creates exists, and a second run is a no-op.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::ResourceExt;
use opkit_kudo::manager::{self, ManagerOptions};
use opkit_testenv::TestEnv;

#[tokio::test]
async fn the_manager_objects_are_applied_idempotently() {
    let env = TestEnv::start().await.expect("testenv");
    let client = env.client();
    let opts =
        ManagerOptions { image: "opkit:dev".into(), command: vec!["opkit".into(), "kudo".into(), "manager".into()] };
    manager::install_manager(&client, &opts).await.expect("first install");
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), manager::MANAGER_NAMESPACE);
    let first = sts.get(manager::MANAGER_STATEFULSET).await.expect("the StatefulSet");
    manager::install_manager(&client, &opts).await.expect("second install");
    let second = sts.get(manager::MANAGER_STATEFULSET).await.expect("the StatefulSet");
    assert_eq!(first.metadata.generation, second.metadata.generation, "a re-run changes nothing");
    let container = &second.spec.expect("spec").template.spec.expect("pod spec").containers[0];
    assert_eq!(container.image.as_deref(), Some("opkit:dev"));
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), manager::MANAGER_NAMESPACE);
    sas.get(manager::MANAGER_SERVICE_ACCOUNT).await.expect("the ServiceAccount");
    let crb = Api::<ClusterRoleBinding>::all(client).get(manager::MANAGER_ROLE_BINDING).await.expect("the binding");
    assert_eq!(crb.role_ref.name, "cluster-admin", "{}", crb.name_any());
}
