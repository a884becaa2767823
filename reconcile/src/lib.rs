//! Everything that decides, with plain data in and out and no I/O: given what Git renders and
//! what a cluster holds, what should happen.
//!
//! - [`plan`] the plan model; [`planner`] pairs desired and live objects by
//!   [`plan::ObjectRef`] and decides create / update / delete (prune) / conflict / unchanged;
//!   [`diff`] strips server-owned fields, compares and makes unified diffs, with [`redact`]
//!   masking Secret values and URL credentials where plan text is made; [`digest`] the plan
//!   digests a reviewed plan is matched by.
//! - [`ownership`] and [`policy`]: ownership marks and KubeVela's resource policies.
//! - [`health`]: one function per built-in kind, plus definitions' `healthPolicy` /
//!   `customStatus` CUE evaluated against the live objects.
//! - [`tracker`]: the resource tracker's record and its invariant (storing it is the agent's).
//! - [`workflow`]: the workflow engine (`advance(spec, state, now)` returns the effects to run);
//!   [`rollout`]: rollout batches and their gate; [`placement`]: topology policies resolved
//!   against the cluster registry.
//! - [`prune_guard`]: what a whole pass may prune; [`offline_plan`]: the plan against an empty
//!   cluster; [`namespaces`]: which missing namespaces a plan creates; [`boundary`]: the source
//!   boundary checked on the objects as they will be applied.
//!
//! **Invariant:** no I/O. No cluster client, repository, network, file system or clock: `now`
//! is a parameter and live objects come in as JSON. The crate depends on no kube, tokio, git2,
//! reqwest, hyper, axum or tower crate, even transitively (`tests/boundary.rs` checks the
//! resolved dependency graph). What stays in `agent` is what needs those: reading live objects
//! and the tracker (`observe`, `tracker_store`), applying and pruning (`apply`, `writer`),
//! creating namespaces, running a workflow's steps against clusters (`workflow::driver`,
//! `fleet`, `store`, `notify`), sources, forges, the server and the loop.

pub mod boundary;
pub mod diff;
pub mod digest;
pub mod health;
pub mod namespaces;
pub mod offline_plan;
pub mod ownership;
pub mod placement;
pub mod plan;
pub mod planner;
pub mod policy;
pub mod prune_guard;
pub mod redact;
pub mod rollout;
pub mod tracker;
pub mod workflow;
