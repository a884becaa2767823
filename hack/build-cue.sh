#!/usr/bin/env bash
# Build the reference `cue` CLI (the version KubeVela pins) from its Go module into a
# version-keyed cache outside the repository. It produces the expected outputs of the CUE golden
# cases (hack/regen-cue-goldens.sh) and of the txtar differential corpus
# (UPDATE_TXTAR_GOLDENS=1 cargo test -p cue --test txtar_corpus).
#
#   hack/build-cue.sh          # builds if needed; prints the path of the cue binary on stdout
#
# Progress goes to stderr. With the binary present (and reporting the pinned version) it returns
# at once. Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

CUE_VERSION=v0.14.1

CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/cue-$CUE_VERSION
CUE_BIN=$BIN_DIR/cue

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-cue: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -x $CUE_BIN ]] && "$CUE_BIN" version 2>/dev/null | grep -q "cue version $CUE_VERSION"; then
  printf '%s\n' "$CUE_BIN"
  exit 0
fi

say "building cue $CUE_VERSION (go install cuelang.org/go/cmd/cue@$CUE_VERSION)"
go_install_into "$BIN_DIR" "cuelang.org/go/cmd/cue@$CUE_VERSION" cue
"$CUE_BIN" version 2>/dev/null | grep -q "cue version $CUE_VERSION" ||
  die "the built binary does not report cue version $CUE_VERSION"
say "cue $CUE_VERSION installed in $BIN_DIR"
printf '%s\n' "$CUE_BIN"
