//! Everything that touches the world: sources, clusters, observe, plan, diff, apply, tracker,
//! workflow, forges, schedule and the HTTP server. The pure parts (plan, diff, health, the
//! workflow scheduler) take plain data.

pub mod agent_loop;
pub mod apply;
pub mod backoff;
pub mod boundary;
pub mod cluster;
pub mod config;
pub mod diff;
pub mod forge;
pub mod health;
pub mod kube_requests;
pub mod live;
pub mod metrics;
pub mod namespace_contents;
pub mod namespaces;
pub mod notify;
pub mod observe;
pub mod offline_plan;
pub mod ownership;
pub mod placement;
pub mod plan;
pub mod planner;
pub mod policy;
pub mod prune_approval;
pub mod prune_guard;
pub mod redact;
pub mod report;
pub mod review;
pub mod rollout;
pub mod schedule;
pub mod server;
pub mod shard;
pub mod source;
pub mod sync;
pub mod tracker;
pub mod tracker_store;
pub mod watch_cache;
pub mod workflow;
pub mod writer;
