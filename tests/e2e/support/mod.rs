//! Test support for the end-to-end tests: the real local cluster from `hack/cluster.sh`.

pub mod cluster;
