//! List semantics for merging (which lists are keyed by which fields, sets, atomic lists and
//! maps) are `opkit_apimachinery`'s; re-exported here under the API server's patch module.

pub(crate) use opkit_apimachinery::patch::list_semantics::*;
