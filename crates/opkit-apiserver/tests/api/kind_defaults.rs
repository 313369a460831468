//! What kube-apiserver adds to built-in objects on create: the DefaultTolerationSeconds
//! admission plugin's pod tolerations and Service node ports.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Toleration};
use kube::api::{Api, ObjectMeta, PostParams};

use crate::common::env;

fn pod(name: &str, tolerations: Option<Vec<Toleration>>) -> Pod {
    Pod {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("busybox:1.36".into()),
                ..Default::default()
            }],
            tolerations,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn no_execute(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        ..Default::default()
    }
}

#[tokio::test]
async fn pods_get_default_not_ready_and_unreachable_tolerations() {
    let env = env().await;
    let pods: Api<Pod> = Api::namespaced(env.client(), "default");

    let created = pods.create(&PostParams::default(), &pod("plain", None)).await.expect("create");
    let tolerations = created.spec.expect("spec").tolerations.expect("tolerations");
    assert_eq!(
        tolerations,
        vec![
            no_execute("node.kubernetes.io/not-ready", Some(300)),
            no_execute("node.kubernetes.io/unreachable", Some(300))
        ]
    );

    // A toleration the pod already has for one key is kept as is; only the other is added.
    let own = no_execute("node.kubernetes.io/unreachable", Some(5));
    let created = pods.create(&PostParams::default(), &pod("own", Some(vec![own.clone()]))).await.expect("create");
    assert_eq!(
        created.spec.expect("spec").tolerations.expect("tolerations"),
        vec![own, no_execute("node.kubernetes.io/not-ready", Some(300))]
    );

    // A toleration of every taint (empty key, operator Exists) covers both.
    let all = Toleration { operator: Some("Exists".into()), ..Default::default() };
    let created = pods.create(&PostParams::default(), &pod("all", Some(vec![all.clone()]))).await.expect("create");
    assert_eq!(created.spec.expect("spec").tolerations.expect("tolerations"), vec![all]);
}
