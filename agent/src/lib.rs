//! Everything that touches the world: sources, clusters, observe, apply, the tracker's store,
//! the workflow driver, forges, schedule and the HTTP server. What decides (plan, planner, diff,
//! health, policies, the tracker record, the workflow engine, rollout and placement) is the pure
//! `reconcile` crate, re-exported here so `agent::plan` and `crate::plan` name the same thing.

pub use reconcile::{
    boundary, diff, health, offline_plan, ownership, placement, plan, planner, policy, prune_guard,
    redact, rollout, tracker,
};

pub mod agent_loop;
pub mod apply;
pub mod backoff;
pub mod cluster;
pub mod config;
pub mod forge;
pub mod kube_requests;
pub mod live;
pub mod metrics;
pub mod namespace_contents;
pub mod namespaces;
pub mod notify;
pub mod observe;
pub mod prune_approval;
pub mod report;
pub mod review;
pub mod schedule;
pub mod server;
pub mod shard;
pub mod source;
pub mod sync;
pub mod tracker_store;
pub mod watch_cache;
pub mod workflow;
pub mod writer;
