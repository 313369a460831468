//! Event filters (controller-runtime's predicates). They look at object metadata, so one
//! filter applies to every source of a controller: the primary kind and its children.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A change seen by a controller.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// An object appeared (including the initial list).
    Create(&'a ObjectMeta),
    /// An object changed.
    Update {
        /// Before.
        old: &'a ObjectMeta,
        /// After.
        new: &'a ObjectMeta,
    },
    /// An object was deleted.
    Delete(&'a ObjectMeta),
}

/// Decides whether an event should enqueue a reconcile.
pub trait Predicate: Send + Sync + 'static {
    /// True to let the event through.
    fn filter(&self, event: &Event<'_>) -> bool;
}

impl<F: Fn(&Event<'_>) -> bool + Send + Sync + 'static> Predicate for F {
    fn filter(&self, event: &Event<'_>) -> bool {
        self(event)
    }
}

impl Predicate for Arc<dyn Predicate> {
    fn filter(&self, event: &Event<'_>) -> bool {
        (**self).filter(event)
    }
}

macro_rules! update_only {
    ($(#[$doc:meta])* $name:ident, |$old:ident, $new:ident| $changed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;
        impl Predicate for $name {
            fn filter(&self, event: &Event<'_>) -> bool {
                match event {
                    Event::Update { old: $old, new: $new } => $changed,
                    _ => true,
                }
            }
        }
    };
}

update_only!(
    /// Passes updates that change `metadata.generation` (spec changes), so status-only
    /// updates do not trigger reconciles.
    GenerationChanged,
    |old, new| old.generation != new.generation
);
update_only!(
    /// Passes updates that change labels.
    LabelsChanged,
    |old, new| old.labels != new.labels
);
update_only!(
    /// Passes updates that change annotations.
    AnnotationsChanged,
    |old, new| old.annotations != new.annotations
);
update_only!(
    /// Passes updates that change `metadata.resourceVersion` (drops resyncs of identical objects).
    ResourceVersionChanged,
    |old, new| old.resource_version != new.resource_version
);

/// Both must pass.
pub struct And<A, B>(pub A, pub B);
/// Either may pass.
pub struct Or<A, B>(pub A, pub B);
/// Inverts a predicate.
pub struct Not<A>(pub A);

impl<A: Predicate, B: Predicate> Predicate for And<A, B> {
    fn filter(&self, e: &Event<'_>) -> bool {
        self.0.filter(e) && self.1.filter(e)
    }
}
impl<A: Predicate, B: Predicate> Predicate for Or<A, B> {
    fn filter(&self, e: &Event<'_>) -> bool {
        self.0.filter(e) || self.1.filter(e)
    }
}
impl<A: Predicate> Predicate for Not<A> {
    fn filter(&self, e: &Event<'_>) -> bool {
        !self.0.filter(e)
    }
}

/// `a and b`.
pub fn and<A: Predicate, B: Predicate>(a: A, b: B) -> And<A, B> {
    And(a, b)
}
/// `a or b`.
pub fn or<A: Predicate, B: Predicate>(a: A, b: B) -> Or<A, B> {
    Or(a, b)
}
/// `not a`.
pub fn not<A: Predicate>(a: A) -> Not<A> {
    Not(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(generation: i64, label: &str) -> ObjectMeta {
        ObjectMeta {
            generation: Some(generation),
            labels: Some([("l".to_string(), label.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn generation_and_labels() {
        let (a, b, c) = (meta(1, "x"), meta(1, "y"), meta(2, "x"));
        let status_only = Event::Update { old: &a, new: &a };
        let relabel = Event::Update { old: &a, new: &b };
        let spec = Event::Update { old: &a, new: &c };
        assert!(!GenerationChanged.filter(&status_only));
        assert!(GenerationChanged.filter(&spec));
        assert!(GenerationChanged.filter(&Event::Create(&a)));
        assert!(LabelsChanged.filter(&relabel) && !LabelsChanged.filter(&spec));
        assert!(or(GenerationChanged, LabelsChanged).filter(&relabel));
        assert!(!and(GenerationChanged, LabelsChanged).filter(&relabel));
        assert!(not(GenerationChanged).filter(&status_only));
        let custom = |e: &Event<'_>| matches!(e, Event::Delete(_));
        assert!(custom.filter(&Event::Delete(&a)) && !custom.filter(&Event::Create(&a)));
    }
}
