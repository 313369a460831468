//! certificates.k8s.io/v1 CertificateSigningRequests: kube's validation, the requestor
//! recorded at creation, an immutable spec, Approved/Denied only through `approval`
//! (never removed, never both) and the certificate through `status`, once.

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::common::{env, expect_status, raw};

/// A PEM certificate request for user `cn` in group `o`, with a fresh key.
fn request_pem(cn: &str, o: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.distinguished_name.push(rcgen::DnType::OrganizationName, o);
    params.serialize_request(&key).expect("csr").pem().expect("pem")
}

fn csr(name: &str, request: &str, signer: &str) -> CertificateSigningRequest {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"request": ByteString(request.as_bytes().to_vec()), "signerName": signer,
            "usages": ["client auth"], "expirationSeconds": 86400}
    }))
    .expect("csr")
}

fn condition(kind: &str) -> CertificateSigningRequestCondition {
    CertificateSigningRequestCondition {
        type_: kind.into(),
        status: "True".into(),
        reason: Some("Test".into()),
        ..Default::default()
    }
}

#[tokio::test]
async fn creation_validates_and_records_the_requestor() {
    let env = env().await;
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    let pem = request_pem("alice", "dev");
    let mut forged = csr("alice", &pem, "example.com/custom");
    forged.spec.username = Some("someone-else".into());
    let created = api.create(&PostParams::default(), &forged).await.expect("create");
    assert_eq!(created.spec.username.as_deref(), Some("kubernetes-admin"), "the server records who asked");
    assert!(created.spec.groups.as_ref().is_some_and(|g| g.iter().any(|g| g == "system:masters")));

    let refusals = [
        (csr("bad-pem", "not a request", "example.com/custom"), "spec.request"),
        (csr("no-signer", &pem, ""), "spec.signerName"),
        (csr("bad-signer", &pem, "nodomain"), "spec.signerName"),
    ];
    for (body, field) in refusals {
        let status = expect_status(api.create(&PostParams::default(), &body).await, 422, "Invalid");
        assert!(status.message.contains(field), "{field}: {}", status.message);
    }
    let mut short = csr("short", &pem, "example.com/custom");
    short.spec.expiration_seconds = Some(599);
    let status = expect_status(api.create(&PostParams::default(), &short).await, 422, "Invalid");
    assert!(
        status.message.contains(
            "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"
        ),
        "{}",
        status.message
    );
    let mut usages = csr("usages", &pem, "example.com/custom");
    usages.spec.usages = Some(vec!["client auth".into(), "flying".into()]);
    let status = expect_status(api.create(&PostParams::default(), &usages).await, 422, "Invalid");
    assert!(status.message.contains("spec.usages[1]: Unsupported value: \"flying\""), "{}", status.message);

    // CertificateSubjectRestriction: no API server client certificate for system:masters.
    let masters = csr("root", &request_pem("root", "system:masters"), "kubernetes.io/kube-apiserver-client");
    let status = expect_status(api.create(&PostParams::default(), &masters).await, 403, "Forbidden");
    assert_eq!(
        status.message,
        "certificatesigningrequests.certificates.k8s.io \"root\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );

    // The spec never changes after creation.
    let mut edited = api.get("alice").await.expect("get");
    edited.spec.signer_name = "example.com/other".into();
    let updated = api.replace("alice", &PostParams::default(), &edited).await.expect("replace");
    assert_eq!(updated.spec.signer_name, "example.com/custom");
}

#[tokio::test]
async fn approval_and_certificate_follow_kubes_rules() {
    let env = env().await;
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    let created = api
        .create(&PostParams::default(), &csr("bob", &request_pem("bob", "dev"), "example.com/custom"))
        .await
        .expect("create");

    // Approved cannot come through /status.
    let mut through_status = created.clone();
    through_status.status.get_or_insert_default().conditions = Some(vec![condition("Approved")]);
    let status =
        expect_status(api.replace_status("bob", &PostParams::default(), &through_status).await, 422, "Invalid");
    assert!(status.message.contains("updates may not add a condition of type \"Approved\""), "{}", status.message);

    // Nor a certificate before approval.
    let mut early = created.clone();
    early.status.get_or_insert_default().certificate = Some(ByteString(b"-----BEGIN CERTIFICATE-----".to_vec()));
    expect_status(api.replace_status("bob", &PostParams::default(), &early).await, 422, "Invalid");

    // Through /approval it is accepted, with timestamps filled in.
    let approval = json!({"status": {"conditions": [condition("Approved")]}});
    let approved = api.patch_approval("bob", &PatchParams::default(), &Patch::Merge(&approval)).await.expect("approve");
    let conditions = approved.status.as_ref().and_then(|s| s.conditions.clone()).expect("conditions");
    assert_eq!(conditions[0].type_, "Approved");
    assert!(conditions[0].last_update_time.is_some() && conditions[0].last_transition_time.is_some());

    // Approved and Denied are exclusive, and an approval is never withdrawn.
    let both = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]}});
    let status =
        expect_status(api.patch_approval("bob", &PatchParams::default(), &Patch::Merge(&both)).await, 422, "Invalid");
    assert!(status.message.contains("Approved and Denied conditions are mutually exclusive"), "{}", status.message);
    let removed = json!({"status": {"conditions": []}});
    let status = expect_status(
        api.patch_approval("bob", &PatchParams::default(), &Patch::Merge(&removed)).await,
        422,
        "Invalid",
    );
    assert!(status.message.contains("updates may not remove a condition of type \"Approved\""), "{}", status.message);

    // Changes through /approval leave the spec and the certificate alone.
    let sneaky = json!({"spec": {"signerName": "example.com/x"}, "status": {"certificate": "AAAA"}});
    let same =
        api.patch_approval("bob", &PatchParams::default(), &Patch::Merge(&sneaky)).await.expect("patch approval");
    assert_eq!(same.spec.signer_name, "example.com/custom");
    assert!(same.status.and_then(|s| s.certificate).is_none());
}

#[tokio::test]
async fn served_cluster_scoped_with_its_subresources_and_printed_as_kubectl_does() {
    let env = env().await;
    let api: Api<CertificateSigningRequest> = Api::all(env.client());
    api.create(&PostParams::default(), &csr("carol", &request_pem("carol", "dev"), "example.com/custom"))
        .await
        .expect("create");
    let discovery = raw(&env.client(), "GET", "/apis/certificates.k8s.io/v1", None, Vec::new()).await;
    for name in [
        "\"certificatesigningrequests\"",
        "\"certificatesigningrequests/status\"",
        "\"certificatesigningrequests/approval\"",
    ] {
        assert!(discovery.text.contains(name), "{name} in {}", discovery.text);
    }
    let req = http::Request::builder()
        .uri("/apis/certificates.k8s.io/v1/certificatesigningrequests")
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .expect("request");
    let table: serde_json::Value = env.client().request(req).await.expect("table");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(columns, ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]);
    let row = &table["rows"][0]["cells"];
    assert_eq!(
        [&row[2], &row[3], &row[4], &row[5]],
        [&json!("example.com/custom"), &json!("kubernetes-admin"), &json!("24h"), &json!("Pending")]
    );
}

/// A client acting as `user` (impersonated through the admin's credentials).
async fn impersonating(env: &opkit_testenv::TestEnv, user: &str) -> kube::Client {
    use kube::config::{AuthInfo, KubeConfigOptions};
    let mut config =
        kube::Config::from_custom_kubeconfig(env.server().kubeconfig("opkit"), &KubeConfigOptions::default())
            .await
            .expect("config");
    config.auth_info = AuthInfo { impersonate: Some(user.into()), ..config.auth_info };
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn approving_and_signing_need_the_signers_permission() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let env = env().await;
    let admin: Api<CertificateSigningRequest> = Api::all(env.client());
    admin
        .create(&PostParams::default(), &csr("dave", &request_pem("dave", "dev"), "example.com/custom"))
        .await
        .expect("create");
    let roles: Api<ClusterRole> = Api::all(env.client());
    let role = |signers: bool| {
        let mut rules = vec![
            json!({"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get"]}),
            json!({"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval", "certificatesigningrequests/status"], "verbs": ["patch", "update"]}),
        ];
        if signers {
            rules.push(json!({"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"], "verbs": ["approve", "sign"]}));
        }
        serde_json::from_value::<ClusterRole>(json!({"metadata": {"name": "csr-approver"}, "rules": rules}))
            .expect("role")
    };
    roles.create(&PostParams::default(), &role(false)).await.expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "csr-approver"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-approver"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]}))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(env.client()).create(&PostParams::default(), &binding).await.expect("binding");

    let jane: Api<CertificateSigningRequest> = Api::all(impersonating(&env, "jane").await);
    let approval = json!({"status": {"conditions": [condition("Approved")]}});
    let status = expect_status(
        jane.patch_approval("dave", &PatchParams::default(), &Patch::Merge(&approval)).await,
        403,
        "Forbidden",
    );
    assert_eq!(
        status.message,
        "certificatesigningrequests.certificates.k8s.io \"dave\" is forbidden: user not permitted to approve requests with signerName \"example.com/custom\""
    );
    roles.replace("csr-approver", &PostParams::default(), &role(true)).await.expect("grant approve and sign");
    jane.patch_approval("dave", &PatchParams::default(), &Patch::Merge(&approval)).await.expect("approved by jane");
}
