#!/usr/bin/env bash
# Prints the sharding simulation (agent/src/shard/sim.rs): REPLICAS replicas and APPS apps
# (default 100 and 100,000), a join, a leave and a crash of a tenth of the replicas, with the
# apps moved and the largest load for bounded and plain consistent hashing and round-robin.
# Usage: hack/shard-sim.sh [REPLICAS [APPS]]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --release -p agent --example shard_sim -- "${1:-100}" "${2:-100000}"
