//! Kubernetes apimachinery concepts, implemented once for all of opkit (the API server, the
//! controllers and the CLI):
//!
//! - [`selector`]: label selectors (kube's string grammar incl. set-based requirements, key and
//!   value validation, `metav1.LabelSelector` objects) and the field-selector grammar;
//! - [`patch`]: strategic merge patch and the list semantics (merge keys, sets, atomic lists)
//!   it merges by;
//! - [`duration`]: Go durations (`"1m30s"`), parsed with kube's own parser and printed like Go;
//! - [`quantity`]: resource quantities (`"100m"`, `"1Gi"`);
//! - [`quota`]: what an object charges against a ResourceQuota (the API server's quota
//!   admission and the quota controller share it);
//! - [`aggregation`]: which endpoint serves a service-backed APIService, and a TLS client
//!   for it (the API server's proxy and the availability controller share it);
//! - [`rbac`]: the rules of an aggregated ClusterRole (the API server's bootstrap policy and
//!   the aggregation controller share it);
//! - [`strconv`]: Go's `strconv.Quote` (kube's `%q` in messages, Helm's templates);
//! - [`ipv4_range`]: IPv4 CIDR ranges (the Service cluster-IP range, pod-IP leases and the
//!   LoadBalancer pool share it);
//! - [`resource_path`]: the parts of a resource request's path (the API server's routing,
//!   the Ansible operator's proxy and the runtime's write tracking share it).

pub mod aggregation;
pub mod duration;
pub mod fnv;
pub mod ipv4_range;
pub mod names;
pub mod patch;
pub mod quantity;
pub mod quota;
pub mod rbac;
pub mod resource_path;
pub mod selector;
pub mod strconv;

pub use ipv4_range::{Ipv4Range, Ipv4RangeError};
pub use resource_path::ResourcePath;
