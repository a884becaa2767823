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

if [[ -x $CUE_BIN ]] && "$CUE_BIN" version 2>/dev/null | grep -q "cue version $CUE_VERSION"; then
  printf '%s\n' "$CUE_BIN"
  exit 0
fi

command -v go >/dev/null || die "go is not installed (hack/install-prereqs.sh installs it)"

# Build into a staging directory and rename it into place, so the cache holds a complete binary
# or nothing, even when two builds race.
mkdir -p "$CACHE/bin"
STAGING=$(mktemp -d "$CACHE/bin/.cue-$CUE_VERSION.XXXXXX")
trap 'rm -rf "$STAGING"' EXIT
say "building cue $CUE_VERSION (go install cuelang.org/go/cmd/cue@$CUE_VERSION)"
GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN=$STAGING \
  go install -trimpath "cuelang.org/go/cmd/cue@$CUE_VERSION" >&2 ||
  die "go install cuelang.org/go/cmd/cue@$CUE_VERSION failed"
"$STAGING/cue" version 2>/dev/null | grep -q "cue version $CUE_VERSION" ||
  die "the built binary does not report cue version $CUE_VERSION"
rm -rf "$BIN_DIR"
mv "$STAGING" "$BIN_DIR"
trap - EXIT
say "cue $CUE_VERSION installed in $BIN_DIR"
printf '%s\n' "$CUE_BIN"
