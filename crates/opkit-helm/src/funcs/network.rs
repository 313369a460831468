//! Sprig's network and URL functions (`network.go`, `url.go`): `getHostByName`,
//! `urlParse` and `urlJoin`. opkit does not implement them yet: a template that calls one
//! fails with an error naming it.

use super::{ANY, Func, func, unsupported};

/// Sprig's network and URL functions, all unsupported.
pub(super) const FUNCS: &[Func] = &[
    func("getHostByName", 0, ANY, unsupported),
    func("urlParse", 0, ANY, unsupported),
    func("urlJoin", 0, ANY, unsupported),
];
