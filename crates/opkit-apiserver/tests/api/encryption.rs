//! Encryption at rest (`--encryption-provider-config`): Secrets are stored encrypted with
//! kube's `k8s:enc:<provider>:v1:<key>:` prefix and served in plaintext; keys rotate (new
//! key first, old keys still read); identity first writes plaintext; an object whose key
//! is gone is an error for that object only; a bad file stops the start with a clear error.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit_apiserver::{ApiServer, RunningServer, ServerConfig, ServerError};

use crate::common::{client_for, config_map, raw, within};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgSSB0aGluayBzbyE/ISE="; // 32 bytes
const KEY2: &str = "YW5vdGhlciAzMi1ieXRlIGtleSBmb3Igcm90YXRpbmc="; // 32 bytes
const OTHER: &str = "bm90IHRoZSBrZXkgdGhhdCBlbmNyeXB0ZWQgdGhpcyE="; // 32 bytes

const PLAINTEXT: &str = "hunter2-top-secret-value";

/// An EncryptionConfiguration for secrets with these provider blocks.
fn write_config(dir: &Path, providers: &str) -> std::path::PathBuf {
    let path = dir.join("encryption.yaml");
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources:\n  - secrets\n  providers:\n{providers}"
    );
    std::fs::write(&path, text).expect("write the encryption config");
    path
}

fn keys(provider: &str, keys: &[(&str, &str)]) -> String {
    let mut s = format!("  - {provider}:\n      keys:\n");
    for (name, secret) in keys {
        s.push_str(&format!("      - name: {name}\n        secret: {secret}\n"));
    }
    s
}

fn secret(name: &str) -> Secret {
    Secret {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        data: Some(BTreeMap::from([("password".to_string(), ByteString(PLAINTEXT.as_bytes().to_vec()))])),
        ..Default::default()
    }
}

async fn start(data: &Path, config: &Path) -> RunningServer {
    let mut cfg = ServerConfig::durable(data);
    cfg.encryption_provider_config = Some(config.to_path_buf());
    within("start", ApiServer::start(cfg)).await.expect("start with encryption")
}

/// The stored bytes of `default/<name>` as the database holds them.
fn stored(data: &Path, resource: &str, name: &str) -> Vec<u8> {
    let db = rusqlite::Connection::open(data.join("state.db")).expect("open the database");
    db.query_row(
        "SELECT value FROM objects WHERE resource = ?1 AND namespace = 'default' AND name = ?2",
        rusqlite::params![resource, name],
        |r| r.get(0),
    )
    .expect("the stored row")
}

/// Whether any file of the database (main file, WAL) contains `needle`.
fn database_contains(data: &Path, needle: &[u8]) -> bool {
    ["state.db", "state.db-wal"]
        .iter()
        .any(|f| std::fs::read(data.join(f)).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle)))
}

fn password(s: &Secret) -> String {
    let data = s.data.as_ref().expect("data");
    String::from_utf8(data["password"].0.clone()).expect("utf-8")
}

#[tokio::test]
async fn secrets_are_encrypted_at_rest_and_served_in_plaintext() {
    let data = tempfile::tempdir().expect("tempdir");
    let conf = tempfile::tempdir().expect("tempdir");
    let config = write_config(conf.path(), &(keys("aescbc", &[("key1", KEY1)]) + "  - identity: {}\n"));
    let server = start(data.path(), &config).await;
    let client = client_for(&server).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    secrets.create(&PostParams::default(), &secret("db")).await.expect("create secret");
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(&PostParams::default(), &config_map("plain", &[("note", "configmap-plaintext-marker")]))
        .await
        .expect("create configmap");

    assert_eq!(password(&secrets.get("db").await.expect("get")), PLAINTEXT, "the API serves plaintext");
    let row = stored(data.path(), "/secrets", "db");
    assert!(row.starts_with(b"k8s:enc:aescbc:v1:key1:"), "{:?}", String::from_utf8_lossy(&row[..30]));
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(PLAINTEXT);
    for needle in [PLAINTEXT.as_bytes(), encoded.as_bytes(), b"\"password\""] {
        assert!(
            !database_contains(data.path(), needle),
            "{:?} is in the database file",
            String::from_utf8_lossy(needle)
        );
    }
    assert!(database_contains(data.path(), b"configmap-plaintext-marker"), "configmaps are not encrypted");
    server.shutdown().await;
}

#[tokio::test]
async fn keys_rotate_identity_first_writes_plaintext_and_a_lost_key_fails_only_its_objects() {
    let data = tempfile::tempdir().expect("tempdir");
    let conf = tempfile::tempdir().expect("tempdir");

    // aesgcm with key1.
    let config = write_config(conf.path(), &keys("aesgcm", &[("key1", KEY1)]));
    let server = start(data.path(), &config).await;
    let secrets: Api<Secret> = Api::namespaced(client_for(&server).await, "default");
    secrets.create(&PostParams::default(), &secret("one")).await.expect("create one");
    server.shutdown().await;
    assert!(stored(data.path(), "/secrets", "one").starts_with(b"k8s:enc:aesgcm:v1:key1:"));

    // Rotation: key2 first writes, key1 still reads.
    let config = write_config(conf.path(), &keys("aesgcm", &[("key2", KEY2), ("key1", KEY1)]));
    let server = start(data.path(), &config).await;
    let secrets: Api<Secret> = Api::namespaced(client_for(&server).await, "default");
    assert_eq!(password(&secrets.get("one").await.expect("old key reads")), PLAINTEXT);
    secrets.create(&PostParams::default(), &secret("two")).await.expect("create two");
    server.shutdown().await;
    assert!(stored(data.path(), "/secrets", "two").starts_with(b"k8s:enc:aesgcm:v1:key2:"));
    assert!(stored(data.path(), "/secrets", "one").starts_with(b"k8s:enc:aesgcm:v1:key1:"), "not rewritten");

    // identity first: new writes are plaintext; encrypted objects still read.
    let config = write_config(
        conf.path(),
        &("  - identity: {}\n".to_string() + &keys("aesgcm", &[("key2", KEY2), ("key1", KEY1)])),
    );
    let server = start(data.path(), &config).await;
    let secrets: Api<Secret> = Api::namespaced(client_for(&server).await, "default");
    secrets.create(&PostParams::default(), &secret("three")).await.expect("create three");
    for name in ["one", "two", "three"] {
        assert_eq!(password(&secrets.get(name).await.expect("read")), PLAINTEXT, "{name}");
    }
    server.shutdown().await;
    assert!(stored(data.path(), "/secrets", "three").starts_with(b"{"), "identity stores plaintext");

    // key1 replaced by a wrong secret: "one" cannot be decrypted; the server starts and
    // serves everything else, and says why for that object.
    let config =
        write_config(conf.path(), &(keys("aesgcm", &[("key2", KEY2), ("key1", OTHER)]) + "  - identity: {}\n"));
    let server = start(data.path(), &config).await;
    let client = client_for(&server).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let r = raw(&client, "GET", "/api/v1/namespaces/default/secrets/one", None, vec![]).await;
    assert_eq!((r.code, r.json["reason"].as_str()), (500, Some("InternalError")), "{}", r.text);
    let message = r.json["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Internal error occurred: unable to transform key \"/registry/secrets/default/one\""),
        "{message}"
    );
    assert_eq!(password(&secrets.get("two").await.expect("two reads")), PLAINTEXT);
    assert_eq!(password(&secrets.get("three").await.expect("three reads")), PLAINTEXT);
    secrets.create(&PostParams::default(), &secret("four")).await.expect("writes go on");
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_encryption_config_stops_the_start_with_a_clear_error() {
    let conf = tempfile::tempdir().expect("tempdir");
    let short = write_config(conf.path(), &keys("aescbc", &[("key1", "dG9vIHNob3J0")]));
    let mut cfg = ServerConfig::in_memory();
    cfg.encryption_provider_config = Some(short.clone());
    let err = within("start", ApiServer::start(cfg.clone())).await.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err.contains("resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 9"),
        "{err}"
    );
    assert!(err.contains(&short.display().to_string()), "{err}");
    cfg.encryption_provider_config = Some(conf.path().join("missing.yaml"));
    let err = within("start", ApiServer::start(cfg)).await.err();
    assert!(matches!(err, Some(ServerError::Encryption(_))), "{err:?}");
}
