#!/usr/bin/env bash
# The one test command: installs missing prerequisites, builds (or reuses) the local control plane,
# then runs the whole workspace's tests. Extra arguments go to `cargo test --workspace`.
#
#   hack/test.sh
#   hack/test.sh -- --nocapture
#
# The end-to-end tests start the shared cluster `e2e` on demand and leave it running for the next
# run; stop it with `hack/cluster.sh down --name e2e`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

hack/install-prereqs.sh
echo "==> control plane binaries (first build on a fresh machine takes ~15-25 min)" >&2
bin=$(hack/build-cluster.sh | tail -n 1)
echo "==> control plane binaries: $bin" >&2
echo "==> Gitea for the agent tests: $(hack/build-gitea.sh | tail -n 1) (first build ~10-15 min)" >&2
helm=$(hack/build-helm.sh --if-built)
echo "==> helm for the chart tests: ${helm:-not built, so they are skipped (hack/helm-e2e.sh builds it and runs them)}" >&2
# A test that fails with an error prints its whole cause chain; a backtrace captured for every
# error would bury it (panics still show theirs under RUST_BACKTRACE).
export RUST_LIB_BACKTRACE="${RUST_LIB_BACKTRACE:-0}"
echo "==> cargo test --workspace $*" >&2
exec cargo test --workspace "$@"
