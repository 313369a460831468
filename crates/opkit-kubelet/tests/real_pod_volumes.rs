//! Volumes of real pods, as the kubelet mounts them: a Secret volume (read-only, its
//! keys as files, waited for with `FailedMount` events until the Secret exists, and
//! synced when the Secret changes, as a reissued certificate must reach a webhook
//! server), a ConfigMap volume with `items` and modes, and an `emptyDir` the container
//! writes to.

use crate::common;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use common::real_pods::{event, file, load_script, real_env};
use common::{Error, wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_config_map_and_empty_dir_volumes_are_mounted_and_secrets_synced() -> Result<(), Error> {
    let env = real_env().await?;
    let tmp = tempfile::tempdir()?;
    let out = tmp.path().join("out");
    load_script(
        &env,
        tmp.path(),
        "example.com/mounts:v1",
        r#"V=/var/run/volumes-test
{
  echo "crt=$(cat $V/certs/tls.crt)"
  echo "key=$(cat $V/certs/tls.key)"
  echo "settings=$(cat $V/settings/app.yaml)"
  echo "mode=$(stat -c %a $V/settings/app.yaml)"
  echo "unlisted=$(cat $V/settings/other 2>/dev/null || echo absent)"
  if touch $V/certs/new 2>/dev/null; then echo "certs=writable"; else echo "certs=read-only"; fi
  echo scratch > $V/scratch/file && echo "scratch=$(cat $V/scratch/file)"
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
while [ "$(cat $V/certs/tls.crt)" = "first" ]; do sleep 0.1; done
cat $V/certs/tls.crt > "$OUT.synced.tmp"
mv "$OUT.synced.tmp" "$OUT.synced"
exec sleep 3600"#,
    )?;
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "settings"},
            "data": {"config": "replicas: 3", "other": "not mounted"}}))?,
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "mounter"},
            "spec": {
                "containers": [{"name": "main", "image": "example.com/mounts:v1",
                    "env": [{"name": "OUT", "value": out.display().to_string()}],
                    "volumeMounts": [
                        {"name": "certs", "mountPath": "/var/run/volumes-test/certs", "readOnly": true},
                        {"name": "settings", "mountPath": "/var/run/volumes-test/settings"},
                        {"name": "scratch", "mountPath": "/var/run/volumes-test/scratch"},
                    ]}],
                "volumes": [
                    {"name": "certs", "secret": {"secretName": "serving-certs"}},
                    {"name": "settings", "configMap": {"name": "settings",
                        "items": [{"key": "config", "path": "app.yaml", "mode": 0o600}]}},
                    {"name": "scratch", "emptyDir": {}},
                ],
            },
        }))?,
    )
    .await?;
    // The Secret does not exist yet: the kubelet says so and waits for it.
    event(
        &env,
        "mounter",
        "FailedMount",
        "MountVolume.SetUp failed for volume \"certs\" : secret \"serving-certs\" not found",
    )
    .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "serving-certs"}, "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": "first", "tls.key": "key"}}))?,
        )
        .await?;
    let seen = file(&out).await?;
    for line in [
        "crt=first",
        "key=key",
        "settings=replicas: 3",
        "mode=600",
        "unlisted=absent",
        "certs=read-only",
        "scratch=scratch",
    ] {
        assert!(seen.lines().any(|l| l == line), "{line:?} missing in:\n{seen}");
    }
    // A changed Secret reaches the running container.
    let patch = json!({"stringData": {"tls.crt": "second"}});
    secrets.patch("serving-certs", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    assert_eq!(file(&tmp.path().join("out.synced")).await?, "second");
    wait(&pods, "mounter", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.phase.clone()).as_deref() == Some("Running")
    })
    .await?;
    Ok(())
}
