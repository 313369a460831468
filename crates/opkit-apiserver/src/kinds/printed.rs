//! The strategies of built-in resources whose only special behaviour is their Table
//! printer (and, for some, answering a DELETE with the deleted object).

use super::Strategy;
use crate::table::Printer;

/// A strategy that only prints: generic in everything else.
pub(super) struct Printed(pub(super) fn() -> Printer);

impl Strategy for Printed {
    fn table(&self) -> Option<Printer> {
        Some((self.0)())
    }
}

/// Like [`Printed`], for kinds whose kube registry answers a DELETE with the deleted
/// object (`ReturnDeletedObject`: service accounts).
pub(super) struct PrintedReturningObject(pub(super) fn() -> Printer);

impl Strategy for PrintedReturningObject {
    fn returns_deleted_object(&self) -> bool {
        true
    }

    fn table(&self) -> Option<Printer> {
        Some((self.0)())
    }
}
