//! Name rules per kind, as kube-apiserver's validation gives them: RBAC names are path
//! segments (`:` allowed), Services DNS-1035 labels, Namespaces and StatefulSets DNS
//! labels, CronJobs subdomains of at most 52 characters, everything else subdomains.

use serde_json::{Value, json};

use crate::common::{env, raw};

/// One kind: where it is created, a valid body without a name, and names it must accept
/// and reject (with the message's distinguishing text).
struct Rule {
    path: &'static str,
    body: Value,
    accepted: &'static [&'static str],
    rejected: &'static [(&'static str, &'static str)],
}

fn pod_template() -> Value {
    json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

fn rules() -> Vec<Rule> {
    let rbac_rejected: &'static [(&'static str, &'static str)] =
        &[("a/b", "may not contain '/'"), ("a%b", "may not contain '%'"), ("..", "may not be '..'")];
    vec![
        Rule {
            path: "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "rules": []}),
            accepted: &["a:b", "system:controller:Job-Thing", "cert-manager:leaderelection"],
            rejected: rbac_rejected,
        },
        Rule {
            path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "rules": []}),
            accepted: &["ns:reader"],
            rejected: rbac_rejected,
        },
        Rule {
            path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "a:b"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
            accepted: &["a:b"],
            rejected: rbac_rejected,
        },
        Rule {
            path: "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            body: json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ns:reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]}),
            accepted: &["ns:reader"],
            rejected: rbac_rejected,
        },
        Rule {
            path: "/api/v1/namespaces/default/services",
            body: json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}),
            accepted: &["web", "web-1"],
            rejected: &[("1web", "a DNS-1035 label"), ("web.example", "a DNS-1035 label"), ("a:b", "a DNS-1035 label")],
        },
        Rule {
            path: "/api/v1/namespaces",
            body: json!({"apiVersion": "v1", "kind": "Namespace"}),
            accepted: &["team-1"],
            rejected: &[("team.one", "a lowercase RFC 1123 label"), ("a:b", "a lowercase RFC 1123 label")],
        },
        Rule {
            path: "/apis/apps/v1/namespaces/default/statefulsets",
            body: json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"serviceName": "s",
                "selector": {"matchLabels": {"app": "a"}}, "template": pod_template()}}),
            accepted: &["db-0"],
            rejected: &[("db.primary", "a lowercase RFC 1123 label")],
        },
        Rule {
            path: "/apis/batch/v1/namespaces/default/cronjobs",
            body: json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
            accepted: &["nightly.backup", "c234567890123456789012345678901234567890123456789012"],
            rejected: &[
                ("c2345678901234567890123456789012345678901234567890123", "must be no more than 52 characters"),
                ("a:b", "a lowercase RFC 1123 subdomain"),
            ],
        },
        Rule {
            path: "/api/v1/namespaces/default/configmaps",
            body: json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            accepted: &["app.config-1"],
            rejected: &[("a:b", "a lowercase RFC 1123 subdomain"), ("Upper", "a lowercase RFC 1123 subdomain")],
        },
        Rule {
            path: "/apis/apps/v1/namespaces/default/deployments",
            body: json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
                "selector": {"matchLabels": {"app": "a"}}, "template": pod_template()}}),
            accepted: &["web.v2"],
            rejected: &[("a:b", "a lowercase RFC 1123 subdomain")],
        },
    ]
}

fn named(body: &Value, name: &str) -> Vec<u8> {
    let mut body = body.clone();
    body["metadata"] = json!({"name": name});
    serde_json::to_vec(&body).expect("a JSON value serialises")
}

#[tokio::test]
async fn every_kind_validates_its_name_with_kubes_rule() {
    let env = env().await;
    let client = env.client();
    for rule in rules() {
        for name in rule.accepted {
            let res = raw(&client, "POST", rule.path, Some("application/json"), named(&rule.body, name)).await;
            assert_eq!(res.code, 201, "{} {name:?} must be accepted: {}", rule.path, res.text);
            assert_eq!(res.json["metadata"]["name"], *name);
        }
        for (name, why) in rule.rejected {
            let res = raw(&client, "POST", rule.path, Some("application/json"), named(&rule.body, name)).await;
            assert_eq!(res.code, 422, "{} {name:?} must be rejected: {}", rule.path, res.text);
            assert_eq!(res.json["reason"], "Invalid", "{}", res.text);
            let cause = &res.json["details"]["causes"][0];
            assert_eq!(cause["field"], "metadata.name", "{}", res.text);
            assert_eq!(cause["reason"], "FieldValueInvalid", "{}", res.text);
            let message = cause["message"].as_str().unwrap_or_default();
            assert!(message.contains(why), "{} {name:?}: {message:?} should say {why:?}", rule.path);
        }
    }
}
