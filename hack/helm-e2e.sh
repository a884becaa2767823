#!/usr/bin/env bash
# Builds helm (hack/build-helm.sh, cached in ~/.cache/driftless) and runs the end-to-end tests
# that install deploy/helm/driftless into the local cluster, compare it with the kustomize base,
# and run the installed chart's agent (the test plays the kubelet for one of its pods) until it
# has deployed examples/repo from the local Gitea. hack/test.sh runs the same tests only when
# helm is already built.
#
#   hack/helm-e2e.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
helm=$(hack/build-helm.sh | tail -n 1)
echo "==> helm: $helm" >&2
DRIFTLESS_HELM=$helm exec cargo test --test e2e helm::
