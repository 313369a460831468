//! Identity and RBAC through kube-rs: ServiceAccount tokens (TokenRequest, revocation,
//! TokenReview), anonymous requests, kube's Forbidden messages, RoleBindings taking
//! effect, the review APIs, escalation prevention and impersonation.

use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, SelfSubjectReview, TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SelfSubjectRulesReview,
    SelfSubjectRulesReviewSpec, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config};
use secrecy::SecretString;
use serde_json::json;

use crate::common::*;

const NS: &str = "t";

async fn client_with(env: &opkit_testenv::TestEnv, auth: AuthInfo) -> Client {
    let mut config = Config::from_custom_kubeconfig(env.server().kubeconfig("opkit"), &Default::default())
        .await
        .expect("kubeconfig");
    config.auth_info = auth;
    Client::try_from(config).expect("client")
}

fn token_auth(token: &str) -> AuthInfo {
    AuthInfo { token: Some(SecretString::from(token.to_string())), ..Default::default() }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    PolicyRule { api_groups: Some(v(groups)), resources: Some(v(resources)), verbs: v(verbs), ..Default::default() }
}

async fn bind(admin: &Client, name: &str, kind: &str, role: &str, sa: &str) {
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(NS.into()), ..Default::default() },
        role_ref: RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: kind.into(), name: role.into() },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.into(),
            namespace: Some(NS.into()),
            api_group: None,
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), NS).create(&PostParams::default(), &binding).await.expect("binding");
}

async fn role(client: &Client, name: &str, rules: Vec<PolicyRule>) -> Result<Role, kube::Error> {
    let role = Role {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(NS.into()), ..Default::default() },
        rules: Some(rules),
    };
    Api::<Role>::namespaced(client.clone(), NS).create(&PostParams::default(), &role).await
}

fn can_i(verb: &str, resource: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(NS.into()),
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn allowed(client: &Client, verb: &str, resource: &str) -> bool {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let answer = reviews.create(&PostParams::default(), &can_i(verb, resource)).await.expect("SSAR");
    answer.status.expect("status").allowed
}

#[tokio::test]
async fn a_service_account_is_forbidden_until_a_role_binding_grants_it() {
    let env = env().await;
    let sa = env.service_account_client(NS, "op").await.expect("SA client");
    let pods: Api<Pod> = Api::namespaced(sa.clone(), NS);
    let status = expect_status(pods.list(&ListParams::default()).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        r#"pods is forbidden: User "system:serviceaccount:t:op" cannot list resource "pods" in API group "" in the namespace "t""#
    );
    assert!(!allowed(&sa, "list", "pods").await);
    bind(&env.client(), "op-view", "ClusterRole", "view", "op").await;
    // A binding takes effect for the next request: the authorizer's index follows writes.
    pods.list(&ListParams::default()).await.expect("list after binding");
    assert!(allowed(&sa, "list", "pods").await);
    assert!(!allowed(&sa, "delete", "pods").await, "view does not grant delete");
    let secrets: Api<Secret> = Api::namespaced(sa.clone(), NS);
    expect_status(secrets.list(&ListParams::default()).await, 403, "Forbidden");
    // Another namespace is still out of reach.
    let elsewhere: Api<Pod> = Api::namespaced(sa, "default");
    expect_status(elsewhere.list(&ListParams::default()).await, 403, "Forbidden");
}

#[tokio::test]
async fn whoami_and_the_review_apis_answer_truthfully() {
    let env = env().await;
    let sa = env.service_account_client(NS, "op").await.expect("SA client");
    let me = Api::<SelfSubjectReview>::all(sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("whoami");
    let info = me.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(info.username.as_deref(), Some("system:serviceaccount:t:op"));
    let groups = info.groups.unwrap_or_default();
    for g in ["system:serviceaccounts", "system:serviceaccounts:t", "system:authenticated"] {
        assert!(groups.iter().any(|x| x == g), "{g} in {groups:?}");
    }
    let rules_review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec { namespace: Some(NS.into()) },
        ..Default::default()
    };
    let rules = Api::<SelfSubjectRulesReview>::all(sa.clone())
        .create(&PostParams::default(), &rules_review)
        .await
        .expect("rules review")
        .status
        .expect("status");
    assert!(!rules.resource_rules.iter().any(|r| r.resources.iter().flatten().any(|x| x == "configmaps")));
    role(&env.client(), "cm-reader", vec![rule(&[""], &["configmaps"], &["get", "list"])]).await.expect("role");
    bind(&env.client(), "op-cm", "Role", "cm-reader", "op").await;
    let rules = Api::<SelfSubjectRulesReview>::all(sa)
        .create(&PostParams::default(), &rules_review)
        .await
        .expect("rules review")
        .status
        .expect("status");
    assert!(rules.resource_rules.iter().any(|r| r.resources.iter().flatten().any(|x| x == "configmaps")));
    // The admin asks about the ServiceAccount with a SubjectAccessReview.
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("system:serviceaccount:t:op".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: can_i("get", "configmaps").spec.resource_attributes,
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(env.client()).create(&PostParams::default(), &sar).await.expect("SAR");
    let status = answer.status.expect("status");
    assert!(status.allowed);
    assert_eq!(
        status.reason.as_deref(),
        Some(r#"RBAC: allowed by RoleBinding "op-cm/t" of Role "cm-reader" to ServiceAccount "op/t""#)
    );
}

#[tokio::test]
async fn tokens_are_revoked_with_their_service_account_or_bound_pod() {
    let env = env().await;
    let admin = env.client();
    let token = env.service_account_token(NS, "op").await.expect("token");
    let mut pod = Pod::default();
    pod.metadata.name = Some("holder".into());
    pod.spec = Some(serde_json::from_value(json!({"containers": [{"name": "c", "image": "busybox"}]})).expect("spec"));
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    pods.create(&PostParams::default(), &pod).await.expect("pod");
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let bound_request = TokenRequest {
        spec: TokenRequestSpec {
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some("holder".into()),
                uid: None,
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let bound: TokenRequest =
        accounts.create_subresource("token", "op", &PostParams::default(), &bound_request).await.expect("bound token");
    let bound = bound.status.expect("status").token;

    let review = |token: &str| TokenReview {
        spec: TokenReviewSpec { token: Some(token.into()), audiences: None },
        ..Default::default()
    };
    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let answer = reviews.create(&PostParams::default(), &review(&bound)).await.expect("review").status.expect("status");
    assert_eq!(answer.authenticated, Some(true));
    let user = answer.user.expect("user");
    assert_eq!(user.username.as_deref(), Some("system:serviceaccount:t:op"));
    assert_eq!(user.extra.unwrap_or_default()["authentication.kubernetes.io/pod-name"], vec!["holder".to_string()]);

    // Deleting the pod revokes the token bound to it, not the other one.
    pods.delete("holder", &DeleteParams::default().grace_period(0)).await.expect("delete pod");
    let as_bound = client_with(&env, token_auth(&bound)).await;
    let whoami =
        Api::<SelfSubjectReview>::all(as_bound).create(&PostParams::default(), &SelfSubjectReview::default()).await;
    expect_status(whoami, 401, "Unauthorized");
    let answer = reviews.create(&PostParams::default(), &review(&bound)).await.expect("review").status.expect("status");
    assert_eq!(answer.authenticated, Some(false));
    assert!(answer.error.unwrap_or_default().contains("pod t/holder has been deleted"));
    let as_sa = client_with(&env, token_auth(&token)).await;
    Api::<SelfSubjectReview>::all(as_sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("the unbound token still works");

    // Deleting the ServiceAccount revokes every token it had.
    accounts.delete("op", &DeleteParams::default()).await.expect("delete SA");
    let whoami =
        Api::<SelfSubjectReview>::all(as_sa).create(&PostParams::default(), &SelfSubjectReview::default()).await;
    expect_status(whoami, 401, "Unauthorized");
}

#[tokio::test]
async fn token_requests_are_validated() {
    let env = env().await;
    env.service_account_token(NS, "op").await.expect("token");
    let accounts: Api<ServiceAccount> = Api::namespaced(env.client(), NS);
    let short = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(60), ..Default::default() },
        ..Default::default()
    };
    let status = expect_status(
        accounts.create_subresource::<TokenRequest, TokenRequest>("token", "op", &PostParams::default(), &short).await,
        422,
        "Invalid",
    );
    assert!(status.message.contains("may not specify a duration less than 10 minutes"), "{}", status.message);
    let missing = accounts
        .create_subresource::<TokenRequest, TokenRequest>("token", "nobody", &PostParams::default(), &short)
        .await;
    expect_status(missing, 404, "NotFound");
    let foreign = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA";
    let as_foreign = client_with(&env, token_auth(foreign)).await;
    expect_status(Api::<ConfigMap>::namespaced(as_foreign, NS).list(&ListParams::default()).await, 401, "Unauthorized");
}

#[tokio::test]
async fn anonymous_requests_reach_only_the_public_paths() {
    let env = env().await;
    let anonymous = client_with(&env, AuthInfo::default()).await;
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        assert_eq!(raw(&anonymous, "GET", path, None, Vec::new()).await.code, 200, "{path}");
    }
    for path in ["/api", "/apis", "/api/v1/namespaces/default/configmaps", "/openapi/v2"] {
        let answer = raw(&anonymous, "GET", path, None, Vec::new()).await;
        assert_eq!(answer.code, 401, "{path}");
        assert_eq!(answer.json["reason"], "Unauthorized");
    }
    // Any ServiceAccount may read the issuer's discovery documents.
    let sa = env.service_account_client(NS, "op").await.expect("SA client");
    let config = raw(&sa, "GET", "/.well-known/openid-configuration", None, Vec::new()).await;
    assert_eq!(config.code, 200);
    assert_eq!(config.json["issuer"], "https://kubernetes.default.svc.cluster.local");
    let jwks = raw(&sa, "GET", "/openid/v1/jwks", None, Vec::new()).await;
    assert_eq!(jwks.json["keys"][0]["alg"], "ES256");
}

#[tokio::test]
async fn roles_granting_more_than_the_writer_holds_are_refused() {
    let env = env().await;
    let admin = env.client();
    let sa = env.service_account_client(NS, "op").await.expect("SA client");
    role(
        &admin,
        "rbac-writer",
        vec![
            rule(&["rbac.authorization.k8s.io"], &["roles", "rolebindings"], &["create", "get"]),
            rule(&[""], &["configmaps"], &["get"]),
        ],
    )
    .await
    .expect("role");
    bind(&admin, "op-rbac", "Role", "rbac-writer", "op").await;

    role(&sa, "subset", vec![rule(&[""], &["configmaps"], &["get"])]).await.expect("a role within the writer's rights");
    let status = expect_status(role(&sa, "greedy", vec![rule(&[""], &["secrets"], &["get"])]).await, 403, "Forbidden");
    assert!(
        status.message.starts_with(r#"roles.rbac.authorization.k8s.io "greedy" is forbidden: user "system:serviceaccount:t:op" (groups=["system:serviceaccounts" "system:serviceaccounts:t" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#),
        "{}",
        status.message
    );
    assert!(status.message.contains(r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}"#), "{}", status.message);
    // Binding a role with more than the writer holds is escalation too...
    let binding = RoleBinding {
        metadata: ObjectMeta { name: Some("to-admin".into()), namespace: Some(NS.into()), ..Default::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "admin".into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "op".into(),
            namespace: Some(NS.into()),
            api_group: None,
        }]),
    };
    let bindings: Api<RoleBinding> = Api::namespaced(sa.clone(), NS);
    expect_status(bindings.create(&PostParams::default(), &binding).await, 403, "Forbidden");
    // ...unless the writer may `bind` that role.
    role(
        &admin,
        "binder",
        vec![PolicyRule {
            resource_names: Some(vec!["admin".into()]),
            ..rule(&["rbac.authorization.k8s.io"], &["clusterroles"], &["bind"])
        }],
    )
    .await
    .expect("binder role");
    bind(&admin, "op-binder", "Role", "binder", "op").await;
    bindings.create(&PostParams::default(), &binding).await.expect("binding with the bind verb");
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let env = env().await;
    let token = env.service_account_token(NS, "op").await.expect("token");
    let as_alice = client_with(&env, AuthInfo { impersonate: Some("alice".into()), ..token_auth(&token) }).await;
    let status =
        expect_status(Api::<ConfigMap>::namespaced(as_alice, NS).list(&ListParams::default()).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        r#"users "alice" is forbidden: User "system:serviceaccount:t:op" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    // The admin may impersonate the ServiceAccount, and then has only its rights.
    let admin_as_sa = client_with(
        &env,
        AuthInfo { impersonate: Some("system:serviceaccount:t:op".into()), ..token_auth(env.server().token()) },
    )
    .await;
    let me = Api::<SelfSubjectReview>::all(admin_as_sa.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("whoami");
    let info = me.status.and_then(|s| s.user_info).expect("user info");
    assert_eq!(info.username.as_deref(), Some("system:serviceaccount:t:op"));
    assert!(info.groups.unwrap_or_default().contains(&"system:serviceaccounts:t".to_string()));
    expect_status(Api::<ConfigMap>::namespaced(admin_as_sa, NS).list(&ListParams::default()).await, 403, "Forbidden");
}

async fn whoami(client: &Client) -> k8s_openapi::api::authentication::v1::UserInfo {
    let me = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("whoami");
    me.status.and_then(|s| s.user_info).expect("user info")
}

#[tokio::test]
async fn the_admin_authenticates_with_its_client_certificate_or_the_token() {
    let env = env().await;
    // The kubeconfig carries a client certificate, as kind's does, and no token.
    let kubeconfig = env.server().kubeconfig("opkit");
    let user = kubeconfig.auth_infos[0].auth_info.as_ref().expect("user");
    assert!(user.client_certificate_data.is_some() && user.token.is_none());
    let by_certificate = whoami(&env.client()).await;
    assert_eq!(by_certificate.username.as_deref(), Some("kubernetes-admin"));
    assert_eq!(
        by_certificate.groups.as_deref(),
        Some(&["system:masters".to_string(), "system:authenticated".into()][..])
    );
    let id = &by_certificate.extra.expect("extra")["authentication.kubernetes.io/credential-id"][0];
    assert!(id.starts_with("X509SHA256="), "{id}");
    // The admin bearer token keeps working.
    let by_token = whoami(&client_with(&env, token_auth(env.server().token())).await).await;
    assert_eq!(by_token.username.as_deref(), Some("kubernetes-admin"));
    // A certificate some other CA signed fails the TLS handshake.
    let stranger = opkit_serve::tls::DevCa::generate("other")
        .expect("ca")
        .issue_client_cert("kubernetes-admin", "system:masters")
        .expect("cert");
    let forged = AuthInfo {
        client_certificate_data: Some(base64_of(&stranger.cert_pem)),
        client_key_data: Some(SecretString::from(base64_of(&stranger.key_pem))),
        ..Default::default()
    };
    let refused = Api::<ConfigMap>::namespaced(client_with(&env, forged).await, NS).list(&ListParams::default()).await;
    assert!(matches!(refused, Err(ref e) if !matches!(e, kube::Error::Api(_))), "{refused:?}");
}

fn base64_of(pem: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// `token` with its claims changed by `edit`, signed again with the server's key
/// (`sa.key`, PKCS#8, ES256), as the server would have signed such claims.
fn resigned(token: &str, key_der: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> String {
    use base64::Engine;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = token.split('.');
    let (header, payload) = (parts.next().expect("header"), parts.next().expect("payload"));
    let mut claims: serde_json::Value = serde_json::from_slice(&b64.decode(payload).expect("base64")).expect("claims");
    edit(&mut claims);
    let signing_input = format!("{header}.{}", b64.encode(claims.to_string()));
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, key_der, &rng).expect("key");
    let signature = key.sign(&rng, signing_input.as_bytes()).expect("sign");
    format!("{signing_input}.{}", b64.encode(signature.as_ref()))
}

#[tokio::test]
async fn expired_tokens_are_rejected() {
    let dir = tempfile::tempdir().expect("tmp");
    let env = opkit_testenv::TestEnv::builder()
        .server(opkit_apiserver::ServerConfig::durable(dir.path()))
        .without_controllers()
        .start()
        .await
        .expect("env");
    let token = env.service_account_token(NS, "op").await.expect("token");
    let key = std::fs::read(dir.path().join("sa.key")).expect("the signing key");
    // The same claims signed again still authenticate: the signature is the server's.
    let same = resigned(&token, &key, |_| {});
    assert_eq!(
        whoami(&client_with(&env, token_auth(&same)).await).await.username.as_deref(),
        Some("system:serviceaccount:t:op")
    );
    // Expired a minute ago: 401, as kube answers.
    let expired = resigned(&token, &key, |c| {
        let now = c["iat"].as_i64().expect("iat");
        c["iat"] = json!(now - 3600);
        c["nbf"] = json!(now - 3600);
        c["exp"] = json!(now - 60);
    });
    let refused = Api::<SelfSubjectReview>::all(client_with(&env, token_auth(&expired)).await)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await;
    expect_status(refused, 401, "Unauthorized");
}
