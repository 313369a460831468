//! Table printers for RBAC role bindings and cluster role bindings.

use serde_json::Value;

use super::Printer;
use super::util::{Col, age, age_col, arr, col, name, name_col, s, st, wide};

/// The columns of role bindings and cluster role bindings.
fn binding_cols(kind: &str) -> Vec<Col> {
    vec![
        name_col(),
        col(
            "Role",
            "string",
            &format!(
                "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. This field is immutable. ({kind})"
            ),
        ),
        age_col(),
        wide("Users", "string", &format!("Users in the {kind}")),
        wide("Groups", "string", &format!("Groups in the {kind}")),
        wide("ServiceAccounts", "string", &format!("ServiceAccounts in the {kind}")),
    ]
}

/// The printer of rbac.authorization.k8s.io/rolebindings.
pub(crate) fn rolebindings() -> Printer {
    Printer::of((binding_cols("roleBinding"), binding_row))
}

/// The printer of rbac.authorization.k8s.io/clusterrolebindings.
pub(crate) fn clusterrolebindings() -> Printer {
    Printer::of((binding_cols("clusterRoleBinding"), binding_row))
}

fn binding_row(o: &Value, now: i64) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for sub in arr(o, "subjects") {
        match s(sub, "kind") {
            "User" => users.push(s(sub, "name").to_string()),
            "Group" => groups.push(s(sub, "name").to_string()),
            "ServiceAccount" => sas.push(format!("{}/{}", s(sub, "namespace"), s(sub, "name"))),
            _ => {}
        }
    }
    vec![
        name(o),
        st(format!("{}/{}", s(o, "roleRef.kind"), s(o, "roleRef.name"))),
        age(o, now),
        st(users.join(", ")),
        st(groups.join(", ")),
        st(sas.join(", ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_subjects() {
        let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
        let row = binding_row(&rb, 0);
        assert_eq!(
            (row[1].clone(), row[3].clone(), row[5].clone()),
            (json!("ClusterRole/view"), json!("alice"), json!("ns/sa"))
        );
    }
}
