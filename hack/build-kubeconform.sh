#!/usr/bin/env bash
# Build kubeconform (github.com/yannh/kubeconform) from its Go module into a version-keyed cache
# outside the repository, for the side-by-side speed comparison of hack/kubeconform-compare.sh
# (BENCHMARKS.md, peers). Nothing in `hack/test.sh` needs it.
#
#   hack/build-kubeconform.sh      # builds if needed; prints the path of the binary on stdout
#
# `go install module@version` through the Go module proxy, with the local toolchain and no cgo.
# Progress goes to stderr. Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

KUBECONFORM_VERSION=v0.8.0

CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/kubeconform-$KUBECONFORM_VERSION
BIN=$BIN_DIR/kubeconform

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-kubeconform: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -x $BIN ]]; then
  printf '%s\n' "$BIN"
  exit 0
fi

say "building kubeconform $KUBECONFORM_VERSION"
go_install_into "$BIN_DIR" "github.com/yannh/kubeconform/cmd/kubeconform@$KUBECONFORM_VERSION" kubeconform
say "kubeconform $KUBECONFORM_VERSION installed in $BIN_DIR"
printf '%s\n' "$BIN"
