//! Unit tests for label selectors (strings, `metav1.LabelSelector` objects, matching) and the
//! field-selector grammar.

use super::*;
use serde_json::json;

fn labels(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn parse_and_match_set_based() {
    let s = LabelSelector::parse("app in (a,b),!legacy,tier!=db").unwrap();
    assert_eq!(s.to_string(), "app in (a,b),!legacy,tier!=db");
    assert!(s.matches(Some(&labels(json!({"app": "a", "tier": "web"})))));
    assert!(s.matches(Some(&labels(json!({"app": "b"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "c"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "a", "legacy": "x"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "a", "tier": "db"})))));
    assert!(!s.matches(None));
}

#[test]
fn equality_exists_and_everything() {
    let s = LabelSelector::parse(" env = prod , team==x, owner ").unwrap();
    assert!(s.matches(Some(&labels(json!({"env": "prod", "team": "x", "owner": ""})))));
    assert!(!s.matches(Some(&labels(json!({"env": "prod", "team": "x"})))));
    let e = LabelSelector::parse("").unwrap();
    assert!(e.is_empty() && e.matches(None));
    assert!(LabelSelector::everything().matches(None));
    let n = LabelSelector::parse("x notin (in,notin)").unwrap();
    assert!(n.matches(Some(&labels(json!({"x": "y"})))));
    assert!(!n.matches(Some(&labels(json!({"x": "in"})))));
    let g = LabelSelector::parse("n>3").unwrap();
    assert!(g.matches(Some(&labels(json!({"n": "5"})))) && !g.matches(Some(&labels(json!({"n": "2"})))));
    assert!(LabelSelector::parse("a=").unwrap().matches(Some(&labels(json!({"a": ""})))));
}

#[test]
fn syntax_errors() {
    let e = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
    assert_eq!(e("a,"), "found '', expected: identifier after ','");
    assert_eq!(e("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
    assert_eq!(e("a in b"), "unable to parse requirement: found 'b' expected: '('");
    assert_eq!(e("a=(b"), "unable to parse requirement: found '(', expected: identifier");
    assert_eq!(e(",a"), "found ',', expected: !, identifier, or 'end of string'");
    assert_eq!(e("a=b c"), "found 'c', expected: ',' or 'end of string'");
    assert!(
        e("a@b=c").starts_with("unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist")
    );
    assert!(e("a=b@c").starts_with("unable to parse requirement: values[0][a]: Invalid value: \"b@c\": a valid label"));
    assert!(e("a>b").contains("the value must be an integer"));
    assert_eq!(e("a=!b"), "unable to parse requirement: found '!', expected: identifier");
}

#[test]
fn from_metav1_json() {
    let s = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["fe", "be"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]
    }))
    .unwrap();
    assert_eq!(s.to_string(), "app=web,!legacy,tier in (be,fe)");
    assert!(s.matches(Some(&labels(json!({"app": "web", "tier": "fe"})))));
    assert!(!s.matches(Some(&labels(json!({"app": "web", "tier": "x"})))));
    assert!(LabelSelector::from_label_selector_json(&json!({})).unwrap().matches(None));
    assert!(!LabelSelector::from_label_selector_json(&Value::Null).unwrap().matches(None));
    let bad = LabelSelector::from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "Foo"}]}));
    assert_eq!(bad.unwrap_err().to_string(), "\"Foo\" is not a valid label selector operator");
    let empty_in =
        LabelSelector::from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "In"}]}));
    assert!(empty_in.unwrap_err().to_string().contains("values set can't be empty"));
}

#[test]
fn from_typed_label_selector_and_typed_labels() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector as K8sSelector, LabelSelectorRequirement};
    let typed = K8sSelector {
        match_labels: Some([("app".to_string(), "web".to_string())].into()),
        match_expressions: Some(vec![
            LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: Some(vec!["a".into(), "b".into()]),
            },
            LabelSelectorRequirement { key: "legacy".into(), operator: "DoesNotExist".into(), values: None },
        ]),
    };
    let s = LabelSelector::from_k8s(Some(&typed)).unwrap();
    assert_eq!(s.to_string(), "app=web,env in (a,b),!legacy");
    let l = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert!(s.matches_labels(Some(&l(&[("app", "web"), ("env", "b")]))));
    assert!(!s.matches_labels(Some(&l(&[("app", "web"), ("env", "c")]))));
    assert!(!s.matches_labels(Some(&l(&[("app", "web"), ("env", "a"), ("legacy", "")]))));
    assert!(!s.matches_labels(None));
    assert!(LabelSelector::from_k8s(Some(&K8sSelector::default())).unwrap().matches_labels(None));
    assert!(!LabelSelector::from_k8s(None).unwrap().matches_labels(Some(&l(&[("app", "web")]))));
    let bad = K8sSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "n".into(),
            operator: "Gt".into(),
            values: None,
        }]),
        ..K8sSelector::default()
    };
    assert_eq!(
        LabelSelector::from_k8s(Some(&bad)).unwrap_err().to_string(),
        "\"Gt\" is not a valid label selector operator"
    );
    let bad_key = K8sSelector { match_labels: Some(l(&[("a b", "x")])), ..K8sSelector::default() };
    assert!(
        LabelSelector::from_k8s(Some(&bad_key)).unwrap_err().to_string().starts_with("key: Invalid value: \"a b\"")
    );
}

#[test]
fn set_based_values_with_commas_and_spaces() {
    let s = LabelSelector::parse("env in ( a , b ),tier notin (db)").unwrap();
    assert_eq!(s.requirements()[0].values, ["a", "b"]);
    assert!(s.matches(Some(&labels(json!({"env": "b", "tier": "web"})))));
    assert!(!s.matches(Some(&labels(json!({"env": "b", "tier": "db"})))));
    assert!(LabelSelector::parse("env in ()").unwrap().matches(Some(&labels(json!({"env": ""})))));
    assert_eq!(
        LabelSelector::parse("env in (a b)").unwrap_err().to_string(),
        "unable to parse requirement: found 'b', expected: ',' or ')'"
    );
    assert!(LabelSelector::parse("env notin").is_err());
}

#[test]
fn node_selector_operators() {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let gt = Operator::from_node_selector_operator("Gt").unwrap();
    assert!(gt.evaluate(Some("5"), &v(&["3"])));
    assert!(!gt.evaluate(Some("x"), &v(&["3"])));
    assert!(!gt.evaluate(None, &v(&["3"])));
    assert!(Operator::from_node_selector_operator("Lt").unwrap().evaluate(Some("1"), &v(&["3"])));
    assert!(Operator::from_node_selector_operator("NotIn").unwrap().evaluate(None, &v(&["a"])));
    assert_eq!(Operator::from_label_selector_operator("Gt"), None);
    assert_eq!(Operator::from_node_selector_operator("Frob"), None);
}

#[test]
fn field_selector_grammar() {
    let fs = FieldSelector::parse("status.phase!=Running,metadata.name=foo").unwrap();
    assert_eq!(fs.to_string(), "metadata.name=foo,status.phase!=Running");
    assert_eq!(fs.requirements().count(), 2);
    assert_eq!(fs.exact_value("metadata.name"), Some("foo"));
    let value_of = |phase: &'static str| {
        move |f: &str| -> Result<String, ()> { Ok(if f == "status.phase" { phase.into() } else { "foo".into() }) }
    };
    assert_eq!(fs.try_matches(value_of("Pending")), Ok(true));
    assert_eq!(fs.try_matches(value_of("Running")), Ok(false));
    assert_eq!(fs.try_matches(|_| Err::<String, _>("unsupported")), Err("unsupported"));
    assert!(FieldSelector::parse("").unwrap().is_empty());
    assert_eq!(FieldSelector::parse("a").unwrap_err().to_string(), "invalid selector: 'a'; can't understand 'a'");
    assert_eq!(FieldSelector::parse(r"a=b\\q").unwrap().exact_value("a"), Some(r"b\q"));
    assert!(FieldSelector::parse(r"a=b\").is_err());
    assert_eq!(
        FieldSelector::parse("a=b\\x").unwrap_err().to_string(),
        "invalid field selector: invalid escape sequence: \\x"
    );
    let escaped = FieldSelector::parse("a=x\\,y").unwrap();
    assert_eq!(escaped.exact_value("a"), Some("x,y"));
    assert_eq!(escaped.to_string(), "a=x\\,y");
}
