//! Fifty isolated control planes at once in one test binary.

use futures::future::try_join_all;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use opkit_testenv::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_environments_in_parallel_stay_isolated() {
    let envs = try_join_all((0..50).map(|_| TestEnv::start())).await.expect("start 50 environments");
    let mut ports: Vec<u16> = envs.iter().map(|e| e.server().addr().port()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 50, "every environment has its own port");
    try_join_all(envs.iter().enumerate().map(|(i, env)| async move {
        let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("only-in-{i}"));
        api.create(&PostParams::default(), &cm).await?;
        // Besides each namespace's kube-root-ca.crt, as in any cluster.
        let names: Vec<String> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n != "kube-root-ca.crt")
            .collect();
        assert_eq!(names, vec![format!("only-in-{i}")]);
        Ok::<_, kube::Error>(())
    }))
    .await
    .expect("each environment sees only its own objects");
}
