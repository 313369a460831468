//! Property tests (proptest) of the parsers and the patch every request goes through:
//! label and field selectors, strategic merge patch, quantities and durations never
//! panic on any input, and what parses prints back to an equal selector.

use opkit_apimachinery::patch::{ListSemantics, strategic_merge_patch};
use opkit_apimachinery::selector::{FieldSelector, LabelSelector};
use proptest::prelude::*;
use serde_json::Value;

/// Strings shaped like selectors (keys, operators, sets), and anything at all.
fn selector_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        "[a-z]{1,6}",
        "[a-z]{1,4}\\.[a-z]{2,4}/[a-z]{1,6}",
        Just("=".to_string()),
        Just("==".to_string()),
        Just("!=".to_string()),
        Just("!".to_string()),
        Just(" in ".to_string()),
        Just(" notin ".to_string()),
        Just("(".to_string()),
        Just(")".to_string()),
        Just(",".to_string()),
        Just(" ".to_string()),
        Just(">".to_string()),
        Just("<".to_string()),
        "[0-9]{1,3}",
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop_oneof![3 => prop::collection::vec(token, 0..12).prop_map(|t| t.concat()), 1 => any::<String>()]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[a-z$]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-z]{1,3}",
                    Just("$patch".to_string()),
                    Just("$retainKeys".to_string()),
                    Just("$setElementOrder/containers".to_string()),
                    Just("$deleteFromPrimitiveList/finalizers".to_string()),
                    Just("name".to_string()),
                    Just("containers".to_string())
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn label_selectors_parse_or_fail_and_print_back(s in selector_text()) {
        if let Ok(selector) = LabelSelector::parse(&s) {
            let printed = selector.to_string();
            let again = LabelSelector::parse(&printed);
            prop_assert_eq!(again.as_ref().ok(), Some(&selector), "{:?} printed as {:?}", s, printed);
        }
    }

    #[test]
    fn field_selectors_parse_or_fail_and_print_back(s in selector_text()) {
        if let Ok(selector) = FieldSelector::parse(&s) {
            let printed = selector.to_string();
            prop_assert!(FieldSelector::parse(&printed).is_ok(), "{:?} printed as {:?}", s, printed);
        }
    }

    #[test]
    fn strategic_merge_patch_never_panics(doc in json_value(), patch in json_value()) {
        for lists in [ListSemantics::deduced(), ListSemantics::for_builtin("", "Pod")] {
            let _ = strategic_merge_patch(&doc, &patch, &lists);
        }
    }

    #[test]
    fn quantities_and_durations_never_panic(s in prop_oneof!["[0-9.eE+-]{0,12}[KMGTPEmunki]{0,2}", "[0-9.]{0,8}(ns|us|µs|ms|s|m|h){0,3}", any::<String>()]) {
        let _ = opkit_apimachinery::quantity::parse_milli(&s);
        let _ = opkit_apimachinery::duration::parse(&s);
    }
}
