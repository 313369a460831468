//! Paginated lists: `limit` + `continue` visit every object exactly once, continue tokens
//! read a consistent snapshot, and tokens for compacted revisions answer 410 Expired.

use std::collections::HashSet;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use opkit_apiserver::ServerConfig;
use opkit_apiserver::StoreOptions;
use opkit_testenv::TestEnv;
use serde_json::json;

use crate::common::{config_map, create_cm, env, expect_status, within};

async fn create_many(api: &Api<ConfigMap>, names: impl Iterator<Item = String>) {
    within(
        "bulk creates",
        stream::iter(names).for_each_concurrent(16, |name| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &config_map(&name, &[("n", &name)]))
                    .await
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
            }
        }),
    )
    .await;
}

/// Lists every page with `limit`, returning (names in order, pages, list resourceVersions).
async fn list_all(api: &Api<ConfigMap>, limit: u32) -> (Vec<String>, usize, HashSet<String>) {
    let mut names = Vec::new();
    let mut pages = 0;
    let mut rvs = HashSet::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(limit);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.expect("list page");
        pages += 1;
        assert!(page.items.len() <= limit as usize, "page larger than limit");
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        rvs.insert(page.metadata.resource_version.clone().expect("list resourceVersion"));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => {
                assert!(
                    page.metadata.remaining_item_count.is_some_and(|n| n > 0),
                    "remainingItemCount with a continue token"
                );
                token = Some(next);
            }
            None => break,
        }
        assert!(pages < 1000, "pagination does not terminate");
    }
    (names, pages, rvs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_and_continue_visit_1050_objects_exactly_once() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, (0..1050).map(|i| format!("cm-{i:04}"))).await;

    let (names, pages, rvs) = list_all(&api, 100).await;
    assert_eq!(pages, 11, "1050 objects in pages of 100");
    assert_eq!(names.len(), 1050, "every object listed once");
    let unique: HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), 1050, "no duplicates");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "items come in key order");
    assert_eq!(rvs.len(), 1, "all pages share the first page's resourceVersion: {rvs:?}");

    let first = api.list(&ListParams::default().limit(100)).await.expect("first page");
    assert_eq!(first.metadata.remaining_item_count, Some(950));
    let full = api.list(&ListParams::default()).await.expect("unpaginated list");
    assert_eq!(full.items.len(), 1050);
    assert!(full.metadata.continue_.as_deref().unwrap_or("").is_empty());
}

#[tokio::test]
async fn continue_token_reads_a_consistent_snapshot() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    create_many(&api, (0..30).map(|i| format!("cm-{i:02}"))).await;

    let first = api.list(&ListParams::default().limit(10)).await.expect("first page");
    let snapshot_rv = first.metadata.resource_version.clone().expect("rv");
    let mut names: Vec<String> = first.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    let mut token = first.metadata.continue_.clone().expect("continue token");

    // Changes after the first page: creations on both sides of the cursor, an update
    // and a deletion further on. None may show up in the remaining pages.
    create_cm(&api, "cm-00a").await;
    create_cm(&api, "cm-15a").await;
    create_cm(&api, "zz-new").await;
    api.patch("cm-20", &PatchParams::default(), &Patch::Merge(json!({"data": {"n": "changed"}}))).await.expect("patch");
    api.delete("cm-25", &DeleteParams::default()).await.expect("delete");

    loop {
        let page = api.list(&ListParams::default().limit(10).continue_token(&token)).await.expect("next page");
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(snapshot_rv.as_str()),
            "pages keep the snapshot revision"
        );
        for cm in &page.items {
            if cm.metadata.name.as_deref() == Some("cm-20") {
                assert_eq!(
                    cm.data.as_ref().and_then(|d| d.get("n")).map(String::as_str),
                    Some("cm-20"),
                    "update after the snapshot is invisible"
                );
            }
        }
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(t) => token = t,
            None => break,
        }
    }
    let expected: Vec<String> = (0..30).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected, "exactly the objects of the snapshot, once each");

    // A fresh list sees the new state.
    let now: HashSet<String> = api
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(now.contains("zz-new") && now.contains("cm-15a") && !now.contains("cm-25"));
}

#[tokio::test]
async fn continue_token_for_a_compacted_revision_is_gone() {
    let cfg =
        ServerConfig { store: StoreOptions { log_capacity: 16, ..Default::default() }, ..ServerConfig::in_memory() };
    let env = within("start", TestEnv::builder().server(cfg).without_controllers().start()).await.expect("start");
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for i in 0..5 {
        create_cm(&api, &format!("cm-{i}")).await;
    }
    let first = api.list(&ListParams::default().limit(2)).await.expect("first page");
    let token = first.metadata.continue_.clone().expect("continue token");
    // Push the first page's revision out of the 16-event log.
    for i in 0..40 {
        create_cm(&api, &format!("filler-{i:02}")).await;
    }
    let s = expect_status(api.list(&ListParams::default().limit(2).continue_token(&token)).await, 410, "Expired");
    let fresh = s.metadata.as_ref().and_then(|m| m.continue_.clone()).filter(|c| !c.is_empty());
    if let Some(fresh) = fresh {
        // kube-apiserver offers a token that continues at the current revision.
        let page = api
            .list(&ListParams::default().limit(2).continue_token(&fresh))
            .await
            .expect("inherited continue token works");
        assert!(!page.items.is_empty());
    }
    // A list from scratch still works.
    assert_eq!(api.list(&ListParams::default()).await.expect("list").items.len(), 45);
}

fn labelled_cm(name: &str, tier: &str) -> ConfigMap {
    let mut cm = config_map(name, &[("k", "v")]);
    cm.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
    cm
}

async fn names_by_label(api: &Api<ConfigMap>, lp: &ListParams) -> (Vec<String>, Option<String>, String) {
    let page = api.list(lp).await.expect("list by label");
    let names = page.items.iter().filter_map(|c| c.metadata.name.clone()).collect();
    let rv = page.metadata.resource_version.clone().expect("list resourceVersion");
    (names, page.metadata.continue_.filter(|c| !c.is_empty()), rv)
}

/// A label-selector list matches each object's labels as of the list's revision: pages
/// after the first (continue tokens) see labels changed since as they were, and a fresh
/// list sees the new ones. More than 512 ConfigMaps, so the filter runs off the async
/// workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selector_pages_match_the_labels_of_their_snapshot() {
    let env = env().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    within(
        "bulk creates",
        stream::iter(0..600).for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let name = format!("cm-{i:03}");
                let tier = ["web", "db", "cache"][i % 3];
                api.create(&PostParams::default(), &labelled_cm(&name, tier))
                    .await
                    .unwrap_or_else(|e| panic!("create {name}: {e}"));
            }
        }),
    )
    .await;
    let web = |limit: u32| ListParams::default().labels("tier=web").limit(limit);
    let (first, token, snapshot_rv) = names_by_label(&api, &web(100)).await;
    assert_eq!(first.len(), 100);
    assert_eq!(first.last().map(String::as_str), Some("cm-297"));
    let token = token.expect("more web ConfigMaps follow");

    // After the first page: a web object further on becomes db, a db one becomes web,
    // and a web one is deleted. The remaining pages still read the snapshot.
    let relabel = |tier: &str| Patch::Merge(json!({"metadata": {"labels": {"tier": tier}}}));
    api.patch("cm-300", &PatchParams::default(), &relabel("db")).await.expect("patch");
    api.patch("cm-301", &PatchParams::default(), &relabel("web")).await.expect("patch");
    api.delete("cm-303", &DeleteParams::default()).await.expect("delete");
    let (rest, none, rv) = names_by_label(&api, &web(500).continue_token(&token)).await;
    assert_eq!(rv, snapshot_rv, "the continued page reads the first page's revision");
    assert!(none.is_none(), "the rest fits the page");
    let expected: Vec<String> = (300..600).step_by(3).map(|i| format!("cm-{i:03}")).collect();
    assert_eq!(rest, expected, "labels as they were at the snapshot");

    let (now, _, _) = names_by_label(&api, &ListParams::default().labels("tier=web")).await;
    assert!(now.contains(&"cm-301".to_string()), "relabelled to web");
    assert!(!now.contains(&"cm-300".to_string()) && !now.contains(&"cm-303".to_string()));
    assert_eq!(now.len(), 200 - 2 + 1);
    let (db, _, _) = names_by_label(&api, &ListParams::default().labels("tier in (db),tier!=web")).await;
    assert_eq!(db.len(), 200 - 1 + 1);
    assert!(db.contains(&"cm-300".to_string()) && !db.contains(&"cm-301".to_string()));
}
