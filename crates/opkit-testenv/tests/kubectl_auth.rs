//! The kubectl identity suite (1.33 and 1.27): `auth whoami`, `auth can-i` (yes, no,
//! `--list`, `--as`), `create token` and the token used with `--token`, a ServiceAccount
//! forbidden until a RoleBinding grants it, aggregated view/edit roles picking up a CRD's
//! `aggregate-to-view` role, escalation refused, and impersonation refused without the verb.

use crate::kubectl_support as support;

use std::time::{Duration, Instant};

use opkit_testenv::TestEnv;
use support::{FLIGHT_TICKET_CRD as CRD, Kubectl};

/// The role a CRD's operator ships so that `view` (and so `edit` and `admin`) cover it.
const AGGREGATE_TO_VIEW: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: flighttickets-viewer
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- apiGroups: [flights.com]
  resources: [flighttickets]
  verbs: [get, list, watch]
"#;

/// `--token TOKEN` before `args`.
/// `args` as the kubeconfig user `op-token`, whose only credential is the token (with
/// the admin's client certificate in the same user, kube-apiserver would authenticate
/// the certificate first, as it does for any client sending both).
fn as_token<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--user", "op-token"];
    all.extend_from_slice(args);
    all
}

/// Runs `kubectl auth can-i ARGS` and returns its answer (`yes` or `no`).
fn can_i(k: &Kubectl, args: &[&str]) -> String {
    let mut all = vec!["auth", "can-i"];
    all.extend_from_slice(args);
    let out = k.run(&all, None);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits until `kubectl auth can-i ARGS` answers yes (the aggregation controller's work).
fn wait_can_i(k: &Kubectl, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while can_i(k, args) != "yes" {
        assert!(Instant::now() < deadline, "timed out waiting for `kubectl auth can-i {args:?}` to say yes");
    }
}

async fn suite(version: &str) {
    let env = TestEnv::start().await.expect("start control plane");
    let k = Kubectl::new(version, &env);

    let me = k.ok(&["auth", "whoami"], None);
    assert!(me.contains("kubernetes-admin") && me.contains("system:masters"), "{me}");
    assert_eq!(can_i(&k, &["create", "deployments"]), "yes");

    k.ok(&["create", "namespace", "t"], None);
    k.ok(&["create", "serviceaccount", "op", "-n", "t"], None);
    let op = "system:serviceaccount:t:op";
    assert_eq!(can_i(&k, &["list", "pods", "-n", "t", "--as", op]), "no");

    let token = k.ok(&["create", "token", "op", "-n", "t", "--duration", "20m"], None).trim().to_string();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    k.ok(&["config", "set-credentials", "op-token", "--token", &token], None);
    // `--token` as the only credential: the server and its CA from flags, no kubeconfig.
    let ca_file = env.kubeconfig_path().with_file_name("ca.crt");
    std::fs::write(&ca_file, env.server().ca_pem()).expect("write the CA");
    let (url, ca) = (env.server().url(), ca_file.to_string_lossy().into_owned());
    let flags_only = ["--kubeconfig", "/dev/null", "--server", &url, "--certificate-authority", &ca, "--token", &token];
    let whoami = k.ok(&[&flags_only[..], &["auth", "whoami"]].concat(), None);
    assert!(whoami.contains(op), "{whoami}");
    let whoami = k.ok(&as_token(&["auth", "whoami"]), None);
    assert!(whoami.contains(op) && whoami.contains("system:serviceaccounts:t"), "{whoami}");
    let denied = k.fails(&as_token(&["get", "pods", "-n", "t"]), None);
    assert!(
        denied.contains(r#"pods is forbidden: User "system:serviceaccount:t:op" cannot list resource "pods" in API group "" in the namespace "t""#),
        "{denied}"
    );

    k.ok(&["create", "rolebinding", "op-view", "--clusterrole=view", "--serviceaccount=t:op", "-n", "t"], None);
    k.ok(&as_token(&["get", "pods", "-n", "t"]), None);
    assert_eq!(can_i(&k, &["list", "pods", "-n", "t", "--as", op]), "yes");
    assert_eq!(can_i(&k, &["delete", "pods", "-n", "t", "--as", op]), "no");
    let list = k.ok(&as_token(&["auth", "can-i", "--list", "-n", "t"]), None);
    assert!(list.contains("pods") && list.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{list}");

    // A CRD's aggregate-to-view role extends view, and through it edit.
    k.ok(&["apply", "-f", "-"], Some(CRD));
    k.ok(&["wait", "--for", "condition=established", "crd/flighttickets.flights.com", "--timeout=20s"], None);
    assert_eq!(can_i(&k, &["list", "flighttickets.flights.com", "-n", "t", "--as", op]), "no");
    k.ok(&["apply", "-f", "-"], Some(AGGREGATE_TO_VIEW));
    wait_can_i(&k, &["list", "flighttickets.flights.com", "-n", "t", "--as", op]);
    k.ok(&["create", "rolebinding", "bob-edit", "--clusterrole=edit", "--user=bob", "-n", "t"], None);
    wait_can_i(&k, &["watch", "flighttickets.flights.com", "-n", "t", "--as", "bob"]);

    // The ServiceAccount may write Roles, but not one granting more than it holds.
    k.ok(&["create", "role", "rbac-writer", "--verb=create,get", "--resource=roles", "-n", "t"], None);
    k.ok(&["create", "rolebinding", "op-rbac", "--role=rbac-writer", "--serviceaccount=t:op", "-n", "t"], None);
    k.ok(&as_token(&["create", "role", "pod-reader", "--verb=get,list", "--resource=pods", "-n", "t"]), None);
    let escalation =
        k.fails(&as_token(&["create", "role", "greedy", "--verb=get", "--resource=secrets", "-n", "t"]), None);
    assert!(escalation.contains("is attempting to grant RBAC permissions not currently held"), "{escalation}");

    // Impersonation needs the impersonate verb.
    let impersonating = k.fails(&as_token(&["get", "pods", "-n", "t", "--as", "alice"]), None);
    assert!(
        impersonating.contains(r#"users "alice" is forbidden: User "system:serviceaccount:t:op" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{impersonating}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_33_auth() {
    suite("1.33").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_1_27_auth() {
    suite("1.27").await;
}
