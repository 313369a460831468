//! RBAC policy rules: whether a rule allows a request (kube's `RuleAllows`), and whether a
//! set of rules covers another (kube's `Covers`, the heart of escalation prevention).

use k8s_openapi::api::rbac::v1::PolicyRule;

use super::{Action, Object};

const ALL: &str = "*";

fn list(v: &Option<Vec<String>>) -> &[String] {
    v.as_deref().unwrap_or_default()
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

fn group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups).iter().any(|g| g == ALL || g == group)
}

/// `resource` is `pods` or `pods/log`; a rule's `*/log` matches any resource's `log`.
fn resource_matches(rule: &PolicyRule, resource: &str, subresource: &str) -> bool {
    list(&rule.resources)
        .iter()
        .any(|r| r == ALL || r == resource || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource)))
}

fn name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || has(names, name)
}

fn url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls)
        .iter()
        .any(|u| u == ALL || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

/// Whether `rule` allows `action`.
pub(crate) fn allows(rule: &PolicyRule, action: &Action) -> bool {
    if !verb_matches(rule, &action.verb) {
        return false;
    }
    match &action.object {
        Object::Resource(r) => {
            let combined = r.combined_resource();
            group_matches(rule, &r.group)
                && resource_matches(rule, &combined, &r.subresource)
                && name_matches(rule, &r.name)
        }
        Object::NonResource { path } => url_matches(rule, path),
    }
}

/// Whether `owner` holds everything `servant` grants, as kube's `ruleCovers`.
fn rule_covers(owner: &PolicyRule, servant: &PolicyRule) -> bool {
    let verbs_ok = has(&owner.verbs, ALL) || servant.verbs.iter().all(|v| has(&owner.verbs, v));
    let groups_ok =
        has(list(&owner.api_groups), ALL) || list(&servant.api_groups).iter().all(|g| has(list(&owner.api_groups), g));
    let resources_ok = resources_cover(list(&owner.resources), list(&servant.resources));
    let urls_ok = list(&servant.non_resource_urls).iter().all(|u| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| o == ALL || o == u || o.strip_suffix('*').is_some_and(|prefix| u.starts_with(prefix)))
    });
    let owner_names = list(&owner.resource_names);
    let names_ok = owner_names.is_empty()
        || (!list(&servant.resource_names).is_empty()
            && list(&servant.resource_names).iter().all(|n| has(owner_names, n)));
    verbs_ok && groups_ok && resources_ok && urls_ok && names_ok
}

fn resources_cover(owner: &[String], servant: &[String]) -> bool {
    if has(owner, ALL) {
        return true;
    }
    servant.iter().all(|r| has(owner, r) || r.split_once('/').is_some_and(|(_, sub)| has(owner, &format!("*/{sub}"))))
}

/// Splits a rule into rules of one verb, group, resource and name each (or one verb and
/// URL), so that coverage is checked atom by atom.
fn atoms(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let one = |s: &String| Some(vec![s.clone()]);
    for verb in &rule.verbs {
        for group in list(&rule.api_groups) {
            for resource in list(&rule.resources) {
                let names = list(&rule.resource_names);
                if names.is_empty() {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        ..Default::default()
                    });
                }
                for name in names {
                    out.push(PolicyRule {
                        verbs: vec![verb.clone()],
                        api_groups: one(group),
                        resources: one(resource),
                        resource_names: one(name),
                        ..Default::default()
                    });
                }
            }
        }
        for url in list(&rule.non_resource_urls) {
            out.push(PolicyRule { verbs: vec![verb.clone()], non_resource_urls: one(url), ..Default::default() });
        }
    }
    out
}

/// The parts of `servant` that `owner` does not cover (empty when it covers them all).
pub(crate) fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant.iter().flat_map(atoms).filter(|atom| !owner.iter().any(|o| rule_covers(o, atom))).collect()
}

/// A rule in kube's compact form, e.g. `{APIGroups:[""], Resources:["pods"], Verbs:["list"]}`.
pub(crate) fn compact(rule: &PolicyRule) -> String {
    let quoted = |v: &[String]| v.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(" ");
    let mut parts = Vec::new();
    if !list(&rule.api_groups).is_empty() {
        parts.push(format!("APIGroups:[{}]", quoted(list(&rule.api_groups))));
    }
    if !list(&rule.resources).is_empty() {
        parts.push(format!("Resources:[{}]", quoted(list(&rule.resources))));
    }
    if !list(&rule.resource_names).is_empty() {
        parts.push(format!("ResourceNames:[{}]", quoted(list(&rule.resource_names))));
    }
    if !list(&rule.non_resource_urls).is_empty() {
        parts.push(format!("NonResourceURLs:[{}]", quoted(list(&rule.non_resource_urls))));
    }
    parts.push(format!("Verbs:[{}]", quoted(&rule.verbs)));
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::super::ResourceAttributes;
    use super::*;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        let v = |s: &[&str]| Some(s.iter().map(|x| x.to_string()).collect());
        PolicyRule {
            api_groups: v(groups),
            resources: v(resources),
            verbs: v(verbs).unwrap_or_default(),
            ..Default::default()
        }
    }

    fn on(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Action {
        Action::resource(
            verb,
            ResourceAttributes {
                group: group.into(),
                resource: resource.into(),
                subresource: sub.into(),
                name: name.into(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn resource_rules_match_kube() {
        let r = rule(&[""], &["pods", "*/status"], &["get", "list"]);
        assert!(allows(&r, &on("get", "", "pods", "", "x")));
        assert!(!allows(&r, &on("delete", "", "pods", "", "x")));
        assert!(!allows(&r, &on("get", "apps", "pods", "", "x")));
        assert!(!allows(&r, &on("get", "", "pods", "log", "x")), "pods does not grant pods/log");
        assert!(allows(&r, &on("get", "", "services", "status", "x")), "*/status grants every status");
        let mut named = rule(&["*"], &["*"], &["*"]);
        named.resource_names = Some(vec!["a".into()]);
        assert!(allows(&named, &on("update", "x", "y", "", "a")));
        assert!(!allows(&named, &on("update", "x", "y", "", "b")));
        assert!(!allows(&named, &on("list", "x", "y", "", "")));
    }

    #[test]
    fn non_resource_urls_match_prefixes() {
        let r = PolicyRule {
            non_resource_urls: Some(vec!["/apis/*".into(), "/version".into()]),
            verbs: vec!["get".into()],
            ..Default::default()
        };
        let get = |p: &str| Action { verb: "get".into(), object: Object::NonResource { path: p.into() } };
        assert!(allows(&r, &get("/apis/apps/v1")));
        assert!(allows(&r, &get("/version")));
        assert!(!allows(&r, &get("/version/x")));
        assert!(!allows(&r, &get("/api")));
    }

    #[test]
    fn coverage_is_checked_atom_by_atom() {
        let owner = [rule(&[""], &["pods"], &["get", "list"]), rule(&["apps"], &["*"], &["*"])];
        assert!(uncovered(&owner, &[rule(&[""], &["pods"], &["list"])]).is_empty());
        assert!(uncovered(&owner, &[rule(&["apps"], &["deployments/scale"], &["update"])]).is_empty());
        let missing = uncovered(&owner, &[rule(&["", "apps"], &["pods"], &["list", "delete"])]);
        assert_eq!(missing.len(), 1);
        assert_eq!(compact(&missing[0]), r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#);
    }
}
