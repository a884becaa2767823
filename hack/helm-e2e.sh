#!/usr/bin/env bash
# Builds helm (hack/build-helm.sh, cached in ~/.cache/driftless) and runs the end-to-end tests
# that install deploy/helm/driftless into the local cluster and compare it with the kustomize
# base. hack/test.sh runs the same tests only when helm is already built.
#
#   hack/helm-e2e.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
helm=$(hack/build-helm.sh | tail -n 1)
echo "==> helm: $helm" >&2
DRIFTLESS_HELM=$helm exec cargo test --test e2e helm::
