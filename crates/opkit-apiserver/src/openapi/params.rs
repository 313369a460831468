//! Path and query parameters of the resource operations: their types, kube's parameter sets
//! for list, write, patch and delete operations, and their descriptions.

/// The JSON type of a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamType {
    /// A string.
    String,
    /// An integer.
    Integer,
    /// A boolean.
    Boolean,
}

impl ParamType {
    /// The OpenAPI type name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
        }
    }
}

/// A path or query parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Param {
    /// Parameter name.
    pub name: &'static str,
    /// "path" or "query".
    pub location: &'static str,
    /// Human description.
    pub description: String,
    /// Value type.
    pub ty: ParamType,
    /// Whether the parameter is required (path parameters are).
    pub required: bool,
}

pub(crate) fn query(name: &'static str, ty: ParamType, description: &str) -> Param {
    Param { name, location: "query", description: description.to_string(), ty, required: false }
}

pub(crate) fn path_param(name: &'static str, description: String) -> Param {
    Param { name, location: "path", description, ty: ParamType::String, required: true }
}

pub(crate) const PRETTY: &str = "If 'true', the output is pretty printed.";
const DRY_RUN: &str = "When present, the changes are not persisted. The only valid value is All (process every dry-run stage); any other value is rejected.";
const FIELD_MANAGER: &str = "Name of the actor making the change, used to track field ownership. At most 128 printable characters. Required for apply patches, optional otherwise.";
const FIELD_VALIDATION: &str = "How the server treats unknown or duplicate fields in the request body: Ignore (drop them silently), Warn (drop them and return a warning header; the default) or Strict (fail the request).";
const FORCE: &str =
    "Force an apply request to take ownership of fields other managers own. Only valid for apply patches.";

/// Parameters accepted by every write that stores an object (create, replace).
pub(crate) fn write_params() -> Vec<Param> {
    vec![
        query("dryRun", ParamType::String, DRY_RUN),
        query("fieldManager", ParamType::String, FIELD_MANAGER),
        query("fieldValidation", ParamType::String, FIELD_VALIDATION),
    ]
}

pub(crate) fn patch_params() -> Vec<Param> {
    let mut p = write_params();
    p.push(query("force", ParamType::Boolean, FORCE));
    p
}

pub(crate) fn list_params(watch: bool) -> Vec<Param> {
    let mut p = vec![
        query(
            "allowWatchBookmarks",
            ParamType::Boolean,
            "Ask for BOOKMARK watch events. Servers may ignore it; ignored unless watching.",
        ),
        query(
            "continue",
            ParamType::String,
            "The continue token returned by a previous paginated list call, to fetch the next page.",
        ),
        query(
            "fieldSelector",
            ParamType::String,
            "Restrict the returned objects by their fields. Defaults to everything.",
        ),
        query(
            "labelSelector",
            ParamType::String,
            "Restrict the returned objects by their labels. Defaults to everything.",
        ),
        query(
            "limit",
            ParamType::Integer,
            "Maximum number of objects to return in one page; a continue token is returned when more exist.",
        ),
        query(
            "resourceVersion",
            ParamType::String,
            "Which resource version the list or watch is served from. Defaults to the most recent.",
        ),
        query(
            "resourceVersionMatch",
            ParamType::String,
            "How resourceVersion is applied to list calls: Exact or NotOlderThan.",
        ),
        query(
            "sendInitialEvents",
            ParamType::Boolean,
            "With watch=true, start the watch with synthetic ADDED events for the current state, followed by a bookmark.",
        ),
        query("timeoutSeconds", ParamType::Integer, "Timeout of the list or watch call, regardless of activity."),
    ];
    if watch {
        p.push(query(
            "watch",
            ParamType::Boolean,
            "Watch for changes to the described resources and return them as a stream of add, update and remove notifications.",
        ));
    } else {
        p.retain(|q| q.name != "allowWatchBookmarks");
    }
    p
}

pub(crate) fn delete_params() -> Vec<Param> {
    vec![
        query("dryRun", ParamType::String, DRY_RUN),
        query(
            "gracePeriodSeconds",
            ParamType::Integer,
            "Seconds before the object is deleted; must be non-negative, zero means immediately.",
        ),
        query(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            ParamType::Boolean,
            "Delete an object that cannot be read from storage (unsafe).",
        ),
        query(
            "orphanDependents",
            ParamType::Boolean,
            "Deprecated: use propagationPolicy. Whether dependents are orphaned.",
        ),
        query(
            "propagationPolicy",
            ParamType::String,
            "Whether and how garbage collection runs: Orphan, Background or Foreground.",
        ),
    ]
}
