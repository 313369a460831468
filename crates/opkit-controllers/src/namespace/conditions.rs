//! The status conditions kube's namespace controller maintains on a terminating
//! namespace, computed from what one deletion pass found (same types, reasons and
//! messages, same update rules).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NamespaceCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Discovery of the namespaced resources failed.
pub(crate) const DISCOVERY_FAILURE: &str = "NamespaceDeletionDiscoveryFailure";
/// A group version could not be parsed.
pub(crate) const GV_PARSING_FAILURE: &str = "NamespaceDeletionGroupVersionParsingFailure";
/// Deleting some content failed.
pub(crate) const CONTENT_FAILURE: &str = "NamespaceDeletionContentFailure";
/// Some content is still there.
pub(crate) const CONTENT_REMAINING: &str = "NamespaceContentRemaining";
/// Some remaining content has finalizers.
pub(crate) const FINALIZERS_REMAINING: &str = "NamespaceFinalizersRemaining";

/// The condition types, in the order kube adds them.
const TYPES: [&str; 5] =
    [DISCOVERY_FAILURE, GV_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING];

/// What one pass over a terminating namespace's content found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeletionReport {
    /// Discovery failed with this message.
    pub discovery_error: Option<String>,
    /// A group version could not be parsed.
    pub group_version_error: Option<String>,
    /// Errors deleting or listing content, one per resource.
    pub content_errors: Vec<String>,
    /// Remaining objects by (group, resource).
    pub remaining: BTreeMap<(String, String), usize>,
    /// Remaining objects by finalizer.
    pub finalizers: BTreeMap<String, usize>,
    /// Seconds kube would estimate until the content is gone (0: nothing to wait for).
    pub estimate: i64,
}

impl DeletionReport {
    /// Whether the pass failed somewhere.
    pub(crate) fn has_errors(&self) -> bool {
        self.discovery_error.is_some() || self.group_version_error.is_some() || !self.content_errors.is_empty()
    }

    /// Whether content is still there.
    pub(crate) fn content_remains(&self) -> bool {
        self.estimate > 0 || self.remaining.values().any(|n| *n > 0)
    }
}

fn condition(type_: &str, ok: bool, reason: &str, message: String, now: &Time) -> NamespaceCondition {
    NamespaceCondition {
        type_: type_.to_string(),
        status: if ok { "False" } else { "True" }.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_transition_time: Some(now.clone()),
    }
}

fn ok_condition(type_: &str, now: &Time) -> NamespaceCondition {
    let (reason, message) = match type_ {
        DISCOVERY_FAILURE => ("ResourcesDiscovered", "All resources successfully discovered"),
        GV_PARSING_FAILURE => ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
        CONTENT_FAILURE => ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
        CONTENT_REMAINING => ("ContentRemoved", "All content successfully removed"),
        _ => ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
    };
    condition(type_, true, reason, message.to_string(), now)
}

/// The five conditions a report calls for.
pub(crate) fn desired(report: &DeletionReport, now: &Time) -> Vec<NamespaceCondition> {
    let mut out = Vec::new();
    for t in TYPES {
        let failing = match t {
            DISCOVERY_FAILURE => {
                report.discovery_error.as_ref().map(|e| condition(t, false, "DiscoveryFailed", e.clone(), now))
            }
            GV_PARSING_FAILURE => report
                .group_version_error
                .as_ref()
                .map(|e| condition(t, false, "GroupVersionParsingFailed", e.clone(), now)),
            CONTENT_FAILURE => (!report.content_errors.is_empty()).then(|| {
                let mut msgs = report.content_errors.clone();
                msgs.sort();
                let msg = format!("Failed to delete all resource types, {} remaining: {}", msgs.len(), msgs.join(", "));
                condition(t, false, "ContentDeletionFailed", msg, now)
            }),
            CONTENT_REMAINING => {
                let mut parts: Vec<String> = report
                    .remaining
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|((group, resource), n)| format!("{resource}.{group} has {n} resource instances"))
                    .collect();
                parts.sort();
                (!report.remaining.is_empty()).then(|| {
                    let msg = format!("Some resources are remaining: {}", parts.join(", "));
                    condition(t, false, "SomeResourcesRemain", msg, now)
                })
            }
            _ => {
                let mut parts: Vec<String> = report
                    .finalizers
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(f, n)| format!("{f} in {n} resource instances"))
                    .collect();
                parts.sort();
                (!report.finalizers.is_empty()).then(|| {
                    let msg = format!("Some content in the namespace has finalizers remaining: {}", parts.join(", "));
                    condition(t, false, "SomeFinalizersRemain", msg, now)
                })
            }
        };
        out.push(failing.unwrap_or_else(|| ok_condition(t, now)));
    }
    out
}

/// Merges the desired conditions into the current ones as kube does: missing types
/// are appended, changed ones updated in place (the transition time moves only when
/// the status flips). Returns the new list and whether anything changed.
pub(crate) fn merge(
    current: &[NamespaceCondition],
    desired: Vec<NamespaceCondition>,
) -> (Vec<NamespaceCondition>, bool) {
    let mut out = current.to_vec();
    let mut changed = false;
    for new in desired {
        match out.iter_mut().find(|c| c.type_ == new.type_) {
            None => {
                out.push(new);
                changed = true;
            }
            Some(old) => {
                if old.status != new.status || old.reason != new.reason || old.message != new.message {
                    if old.status != new.status {
                        old.last_transition_time = new.last_transition_time.clone();
                    }
                    old.status = new.status;
                    old.reason = new.reason;
                    old.message = new.message;
                    changed = true;
                }
            }
        }
    }
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::now;

    fn find<'a>(c: &'a [NamespaceCondition], t: &str) -> &'a NamespaceCondition {
        c.iter().find(|x| x.type_ == t).expect("condition present")
    }

    #[test]
    fn remaining_content_and_finalizers_are_reported_like_kube() {
        let mut r = DeletionReport::default();
        r.remaining.insert((String::new(), "configmaps".into()), 1);
        r.remaining.insert(("example.com".into(), "widgets".into()), 2);
        r.finalizers.insert("example.com/hold".into(), 1);
        r.estimate = 15;
        let c = desired(&r, &now());
        assert_eq!(c.len(), 5);
        let rem = find(&c, CONTENT_REMAINING);
        assert_eq!(rem.status, "True");
        assert_eq!(rem.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            rem.message.as_deref(),
            Some(
                "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 2 resource instances"
            )
        );
        let fin = find(&c, FINALIZERS_REMAINING);
        assert_eq!(fin.reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            fin.message.as_deref(),
            Some("Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
        );
        assert_eq!(find(&c, DISCOVERY_FAILURE).reason.as_deref(), Some("ResourcesDiscovered"));
        assert_eq!(find(&c, CONTENT_FAILURE).status, "False");
        assert!(r.content_remains());
    }

    #[test]
    fn errors_become_failure_conditions() {
        let r = DeletionReport {
            discovery_error: Some("boom".into()),
            content_errors: vec!["b failed".into(), "a failed".into()],
            ..DeletionReport::default()
        };
        let c = desired(&r, &now());
        assert_eq!(find(&c, DISCOVERY_FAILURE).reason.as_deref(), Some("DiscoveryFailed"));
        assert_eq!(
            find(&c, CONTENT_FAILURE).message.as_deref(),
            Some("Failed to delete all resource types, 2 remaining: a failed, b failed")
        );
        assert!(r.has_errors());
    }

    #[test]
    fn merge_updates_in_place_and_reports_changes() {
        let mut r = DeletionReport::default();
        r.remaining.insert((String::new(), "configmaps".into()), 1);
        let (first, changed) = merge(&[], desired(&r, &now()));
        assert!(changed);
        let (same, changed) = merge(&first, desired(&r, &now()));
        assert!(!changed);
        assert_eq!(same, first);
        let (done, changed) = merge(&first, desired(&DeletionReport::default(), &now()));
        assert!(changed);
        assert_eq!(done.len(), 5);
        assert_eq!(find(&done, CONTENT_REMAINING).reason.as_deref(), Some("ContentRemoved"));
    }
}
