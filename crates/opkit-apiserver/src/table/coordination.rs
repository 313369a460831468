//! The Table printer for leases (coordination.k8s.io).

use super::Printer;
use super::util::{age, age_col, col, name, name_col, s, st};

/// The printer of coordination.k8s.io/leases.
pub(crate) fn leases() -> Printer {
    Printer::of((
        vec![
            name_col(),
            col("Holder", "string", "holderIdentity contains the identity of the holder of a current lease."),
            age_col(),
        ],
        |o, now| vec![name(o), st(s(o, "spec.holderIdentity")), age(o, now)],
    ))
}
