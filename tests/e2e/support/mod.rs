//! Test support for the end-to-end tests: the real local cluster from `hack/cluster.sh`, and
//! the agent process with a git work tree to commit from.

pub mod agent;
pub mod cluster;
