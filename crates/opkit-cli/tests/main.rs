//! The integration tests of this crate, one module per file, built as one test binary:
//! one link instead of one per file keeps the test build's time and disk small.

mod olm_support;
mod support {
    pub(crate) mod scaffold;
    pub(crate) mod workflow;
}

mod ansible_operator;
mod cluster_lifecycle;
mod cluster_ops;
mod cluster_start;
mod create_webhook;
mod helm_operator;
mod helm_template;
mod kudo;
mod kuttl_test;
mod olm;
mod olm_bundle;
mod olm_memcached;
mod perturb;
mod portable;
mod readme_workflow;
mod scaffold;
mod scaffold_compiles;
mod scaffold_config;
mod scorecard_pods;
mod scorecard_xunit;
mod workflow;
mod workflow_webhooks;
