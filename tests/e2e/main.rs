//! End-to-end tests of the driftless binary against a real local cluster.
//!
//! The cluster is started on demand by `hack/cluster.sh up --name e2e` (see `support::cluster`)
//! and left running between test runs; stop it with `hack/cluster.sh down --name e2e`.
//!
//! Tests arrange and disturb the cluster by hand (bystanders, out-of-band edits), so kube's write
//! calls, which only `agent::writer` may use in the product, are allowed here.
#![allow(clippy::disallowed_methods)]

mod support;

mod agent;
mod apiserver_diff;
mod chaos;
mod cluster;
mod demo;
mod examples;
mod failclosed;
mod fleet;
mod git_transports;
mod github_app;
mod helm;
mod kubeconfig;
mod notifications;
mod plan_apply;
mod rbac;
mod review;
mod scale;
mod secrets;
mod shards;
mod status_limit;
mod ui;
mod watch_cache;
mod workflow;
