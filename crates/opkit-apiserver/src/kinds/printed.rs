//! The strategy of built-in resources whose only special behaviour is their Table printer.

use super::Strategy;
use crate::table::Printer;

/// A strategy that only prints: generic in everything else.
pub(super) struct Printed(pub(super) fn() -> Printer);

impl Strategy for Printed {
    fn table(&self) -> Option<Printer> {
        Some((self.0)())
    }
}
