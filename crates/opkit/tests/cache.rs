//! Cached reads on a real (in-process) API server: by namespace and by label selector.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{configmap, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{Expression, Selector};
use opkit::{Cache, CacheScope};
use opkit_testenv::TestEnv;
use tokio_util::sync::CancellationToken;

fn names(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
    let mut n: Vec<String> = objs.iter().filter_map(|c| c.metadata.name.clone()).collect();
    n.sort();
    n
}

#[tokio::test]
async fn lists_by_namespace_and_label_selector() {
    let env = TestEnv::builder().without_controllers().start().await.expect("env");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("other".into());
    namespaces.create(&PostParams::default(), &ns).await.expect("namespace");
    let here: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let there: Api<ConfigMap> = Api::namespaced(env.client(), "other");
    configmap(&here, "web-1", &[("app", "web"), ("tier", "front")]).await;
    configmap(&here, "web-2", &[("app", "web")]).await;
    configmap(&here, "db-1", &[("app", "db")]).await;
    configmap(&here, "plain", &[]).await;
    configmap(&there, "web-3", &[("app", "web")]).await;

    let cache = Cache::new(env.client(), CacheScope::default());
    let _ = cache.informer::<ConfigMap>();
    let stop = CancellationToken::new();
    cache.start(stop.clone());
    let _stop = stop.drop_guard();
    assert!(cache.wait_for_sync(Duration::from_secs(20)).await, "cache sync");

    let own = |v: Vec<Arc<ConfigMap>>| names(v).into_iter().filter(|n| !n.starts_with("kube-")).collect::<Vec<_>>();
    assert_eq!(own(cache.list_in::<ConfigMap>("default")), ["db-1", "plain", "web-1", "web-2"]);
    assert_eq!(own(cache.list_in::<ConfigMap>("other")), ["web-3"]);
    assert!(cache.list_in::<ConfigMap>("nowhere").is_empty());

    let web: Selector = [("app", "web")].into_iter().collect();
    assert_eq!(names(cache.list_matching::<ConfigMap>(Some("default"), &web)), ["web-1", "web-2"]);
    assert_eq!(names(cache.list_matching::<ConfigMap>(None, &web)), ["web-1", "web-2", "web-3"]);
    let front_web: Selector =
        [Expression::In("app".into(), ["web".to_string(), "db".to_string()].into()), Expression::Exists("tier".into())]
            .into_iter()
            .collect();
    assert_eq!(names(cache.list_matching::<ConfigMap>(Some("default"), &front_web)), ["web-1"]);
    let not_web: Selector = [Expression::NotEqual("app".into(), "web".into())].into_iter().collect();
    assert_eq!(own(cache.list_matching::<ConfigMap>(Some("default"), &not_web)), ["db-1", "plain"]);

    // The lookups follow relabels and deletions.
    let relabel = serde_json::json!({"metadata": {"labels": {"app": "db"}}});
    here.patch("web-2", &PatchParams::default(), &Patch::Merge(&relabel)).await.expect("relabel");
    here.delete("web-1", &Default::default()).await.expect("delete");
    eventually("the cache to follow", || async {
        let now = names(cache.list_matching::<ConfigMap>(Some("default"), &web));
        now.is_empty().then_some(())
    })
    .await;
    let db: Selector = [("app", "db")].into_iter().collect();
    assert_eq!(names(cache.list_matching::<ConfigMap>(Some("default"), &db)), ["db-1", "web-2"]);
    assert_eq!(own(cache.list_in::<ConfigMap>("default")), ["db-1", "plain", "web-2"]);
}
