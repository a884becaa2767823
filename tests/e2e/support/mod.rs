//! Test support for the end-to-end tests: the real local cluster from `hack/cluster.sh`, the
//! `driftless` binary run over a temporary repository, and the agent process with a git work
//! tree to commit from.

pub mod agent;
pub mod apps;
pub mod browser;
pub mod cli;
pub mod cluster;
pub mod corpus;
pub mod gitea;
pub mod gitea_agent;
