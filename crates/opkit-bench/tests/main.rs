//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod cluster_smoke;
mod failover_pods;
mod helm_client;
mod memcached_smoke;
mod runtime_smoke;
mod scaling_smoke;
mod sharding_smoke;
mod smoke;
