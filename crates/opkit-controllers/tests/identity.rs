//! The identity controllers against a real opkit API server: the `kube-root-ca.crt`
//! ConfigMap published in every namespace (recreated when deleted, restored when
//! edited), and legacy ServiceAccount token Secrets filled with a token that
//! authenticates as the account until the Secret is deleted.

use crate::common;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions};
use kube::runtime::wait::await_condition;
use kube::{Client, Config};
use opkit_testenv::TestEnv;
use secrecy::SecretString;
use serde_json::json;

use common::{Error, WAIT, wait};

fn bundle_is(ca: String) -> impl Fn(Option<&ConfigMap>) -> bool {
    move |cm| cm.and_then(|c| c.data.as_ref()).and_then(|d| d.get("ca.crt")) == Some(&ca)
}

#[tokio::test]
async fn every_namespace_gets_the_root_ca_bundle_back_after_deletion_or_edits() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let ca = env.server().ca_pem().to_string();
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "team"}}))?).await?;
    let bundles: Api<ConfigMap> = Api::namespaced(env.client(), "team");
    wait(&bundles, "kube-root-ca.crt", bundle_is(ca.clone())).await?;
    // The bootstrap namespaces have it too.
    wait(&Api::<ConfigMap>::namespaced(env.client(), "kube-system"), "kube-root-ca.crt", bundle_is(ca.clone())).await?;

    bundles
        .patch("kube-root-ca.crt", &PatchParams::default(), &Patch::Merge(json!({"data": {"ca.crt": "tampered"}})))
        .await?;
    wait(&bundles, "kube-root-ca.crt", bundle_is(ca.clone())).await?;
    let before = bundles.get("kube-root-ca.crt").await?.metadata.uid;
    bundles.delete("kube-root-ca.crt", &DeleteParams::default()).await?;
    let again = wait(&bundles, "kube-root-ca.crt", bundle_is(ca)).await?;
    assert_ne!(again.metadata.uid, before, "a new ConfigMap");
    Ok(())
}

async fn client_with_token(env: &TestEnv, token: &str) -> Result<Client, Error> {
    let mut config =
        Config::from_custom_kubeconfig(env.server().kubeconfig("opkit"), &KubeConfigOptions::default()).await?;
    config.auth_info = AuthInfo { token: Some(SecretString::from(token.to_string())), ..Default::default() };
    config.default_retry = false;
    Ok(Client::try_from(config)?)
}

async fn whoami(client: Client) -> kube::Result<Option<String>> {
    let review =
        Api::<SelfSubjectReview>::all(client).create(&PostParams::default(), &SelfSubjectReview::default()).await?;
    Ok(review.status.and_then(|s| s.user_info).and_then(|u| u.username))
}

fn token_secret(name: &str, account: &str) -> Result<Secret, Error> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"kubernetes.io/service-account.name": account}},
        "type": "kubernetes.io/service-account-token",
    }))?)
}

#[tokio::test]
async fn legacy_token_secrets_are_filled_and_their_tokens_die_with_them() -> Result<(), Error> {
    let env = TestEnv::start().await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), "default");
    let sa = accounts
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "builder"}}))?)
        .await?;
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    secrets.create(&PostParams::default(), &token_secret("builder-token", "builder")?).await?;
    let filled = wait(&secrets, "builder-token", |s: Option<&Secret>| {
        s.and_then(|s| s.data.as_ref()).is_some_and(|d| d.contains_key("token"))
    })
    .await?;
    let data = filled.data.clone().unwrap_or_default();
    assert_eq!(data["namespace"].0, b"default");
    assert_eq!(data["ca.crt"].0, env.server().ca_pem().as_bytes());
    assert_eq!(
        filled.metadata.annotations.unwrap_or_default().get("kubernetes.io/service-account.uid"),
        sa.metadata.uid.as_ref()
    );
    let token = String::from_utf8(data["token"].0.clone())?;
    let as_builder = client_with_token(&env, &token).await?;
    assert_eq!(whoami(as_builder.clone()).await?.as_deref(), Some("system:serviceaccount:default:builder"));

    secrets.delete("builder-token", &DeleteParams::default()).await?;
    match whoami(as_builder).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("the token outlived its Secret: {other:?}"),
    }

    // A token Secret for an account that does not exist is deleted.
    secrets.create(&PostParams::default(), &token_secret("orphan-token", "nobody")?).await?;
    let deleted = await_condition(secrets, "orphan-token", |s: Option<&Secret>| s.is_none());
    tokio::time::timeout(WAIT, deleted).await.map_err(|_| "the orphan token Secret was not deleted")??;
    Ok(())
}
