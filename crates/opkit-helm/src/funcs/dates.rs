//! Sprig's date functions (`date.go`). opkit does not implement them yet: a template that
//! calls one fails with an error naming it.

use super::{ANY, Func, func, unsupported};

/// Sprig's date functions, all unsupported.
pub(super) const FUNCS: &[Func] = &[
    func("now", 0, ANY, unsupported),
    func("date", 0, ANY, unsupported),
    func("dateInZone", 0, ANY, unsupported),
    func("date_in_zone", 0, ANY, unsupported),
    func("dateModify", 0, ANY, unsupported),
    func("mustDateModify", 0, ANY, unsupported),
    func("ago", 0, ANY, unsupported),
    func("toDate", 0, ANY, unsupported),
    func("mustToDate", 0, ANY, unsupported),
    func("unixEpoch", 0, ANY, unsupported),
    func("duration", 0, ANY, unsupported),
    func("durationRound", 0, ANY, unsupported),
    func("htmlDate", 0, ANY, unsupported),
    func("htmlDateInZone", 0, ANY, unsupported),
];
