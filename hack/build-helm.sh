#!/usr/bin/env bash
# Build Helm from its Go module into a version-keyed cache outside the repository, for the
# end-to-end test that installs deploy/helm/driftless into the local cluster.
#
#   hack/build-helm.sh            # builds if needed; prints the path of the helm binary on stdout
#   hack/build-helm.sh --if-built # prints the path only when it is built already (never builds)
#
# Cold, the build takes ~5-7 minutes on 2 cores, so hack/test.sh does not run it: the Helm
# end-to-end tests run when the binary is built (hack/helm-e2e.sh builds it and runs them) and
# otherwise say how to run them.
# Progress goes to stderr. With the binary present it returns at once.
# Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

HELM_VERSION=v3.22.0

CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/helm-$HELM_VERSION
HELM_BIN=$BIN_DIR/helm

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-helm: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -x $HELM_BIN ]]; then
  printf '%s\n' "$HELM_BIN"
  exit 0
fi
if [[ ${1:-} == --if-built ]]; then
  exit 0
fi

mkdir -p "$CACHE/bin"
exec 9>"$CACHE/bin/.build-helm.lock"
if ! flock -n 9; then
  say "another Helm build is running; waiting for it (lock $CACHE/bin/.build-helm.lock)"
  flock 9
fi
if [[ -x $HELM_BIN ]]; then
  printf '%s\n' "$HELM_BIN"
  exit 0
fi

start=$SECONDS
say "building helm $HELM_VERSION (go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION)"
GOMAXPROCS=${GOMAXPROCS:-2} GOFLAGS=-p=2 \
  go_install_into "$BIN_DIR" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" helm
"$HELM_BIN" version --short >&2 || die "the built binary does not run: $HELM_BIN version"
say "helm $HELM_VERSION installed in $BIN_DIR in $((SECONDS - start))s"
printf '%s\n' "$HELM_BIN"
