//! kube-rs integration suites against the opkit API server, one module per topic. Every
//! test starts its own isolated server, so they all run in parallel.

#[path = "../common/mod.rs"]
mod common;

mod admission_builtin;
mod admission_policy;
mod admission_webhooks;
mod apiservices;
mod apply;
mod audit;
mod autoscaling_v1;
mod builtin_validation;
mod cel_cost;
mod cel_cost_real;
mod cel_depth;
mod certificates;
mod concurrency;
mod crd_conversion;
mod crd_lifecycle;
mod crud;
mod custom;
mod data_dir;
mod delete_status;
mod depth;
mod disk_full;
mod encryption;
mod ephemeral_containers;
mod errors;
mod finalizers;
mod flowcontrol;
mod hostile;
mod kind_defaults;
mod kubernetes_service;
mod limits;
mod meta_validation;
mod metadata_only;
mod names;
mod no_500;
mod pagination;
mod pod_security;
mod pod_streaming;
mod pod_streams_as_kube;
mod priority;
mod rbac;
mod restart;
mod runtimeclasses;
mod schema_causes;
mod stale_discovery;
mod status;
mod watch;
mod watch_history;
mod webhook_certificates;
