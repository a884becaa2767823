//! Everything that touches the world: sources, clusters, observe, plan, diff, apply, tracker,
//! workflow, forges, schedule and the HTTP server. The pure parts (plan, diff, health, the
//! workflow scheduler) take plain data.

pub mod apply;
pub mod cluster;
pub mod diff;
pub mod health;
pub mod live;
pub mod observe;
pub mod ownership;
pub mod plan;
pub mod planner;
pub mod policy;
pub mod tracker;
pub mod tracker_store;
pub mod workflow;
pub mod placement;
pub mod rollout;
pub mod backoff;
pub mod config;
pub mod forge;
pub mod metrics;
pub mod source;
pub mod server;
pub mod schedule;
pub mod offline_plan;
pub mod report;
pub mod agent_loop;
