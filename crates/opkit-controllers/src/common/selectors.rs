//! The label selector of a workload (ReplicaSet, Deployment, ...), as the controllers use it
//! to find the pods they own: `opkit_apimachinery`'s selector (match with
//! `LabelSelector::matches_labels`), refusing an empty one (which would select every pod).

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use opkit_apimachinery::selector::LabelSelector;

/// A workload's label selector that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SelectorError {
    /// The selector has an invalid requirement.
    #[error("invalid label selector: {0}")]
    Invalid(String),
    /// The selector is empty, which would select every pod.
    #[error("empty label selector selects everything")]
    Empty,
}

/// Converts a workload's `spec.selector` into a matcher, refusing empty selectors.
pub(crate) fn selector(sel: Option<&metav1::LabelSelector>) -> Result<LabelSelector, SelectorError> {
    let parsed = LabelSelector::from_k8s(Some(sel.unwrap_or(&metav1::LabelSelector::default())))
        .map_err(|e| SelectorError::Invalid(e.to_string()))?;
    if parsed.is_empty() {
        return Err(SelectorError::Empty);
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn workload_selectors() {
        assert_eq!(selector(None).err(), Some(SelectorError::Empty));
        assert_eq!(selector(Some(&metav1::LabelSelector::default())).err(), Some(SelectorError::Empty));
        let web: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let mut typed = metav1::LabelSelector { match_labels: Some(web.clone()), ..Default::default() };
        let sel = selector(Some(&typed)).unwrap();
        assert!(sel.matches_labels(Some(&web)));
        assert!(!sel.matches_labels(None));
        typed.match_expressions =
            Some(vec![LabelSelectorRequirement { key: "tier".into(), operator: "Exists".into(), values: None }]);
        assert!(!selector(Some(&typed)).unwrap().matches_labels(Some(&web)));
        typed.match_expressions =
            Some(vec![LabelSelectorRequirement { key: "tier".into(), operator: "Frob".into(), values: None }]);
        assert!(matches!(selector(Some(&typed)), Err(SelectorError::Invalid(_))));
    }
}
