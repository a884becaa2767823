#!/usr/bin/env bash
# Build KubeVela's `vela` CLI from its Go module into a version-keyed cache outside the repository.
# `vela dry-run --offline` is the reference renderer: hack/regen-conformance.sh uses it to produce
# the checked-in reference outputs of the conformance harness, and hack/scale.sh compares speed.
# Nothing in `hack/test.sh` needs it.
#
#   hack/build-vela.sh          # builds if needed; prints the path of the vela binary on stdout
#   hack/build-vela.sh --bench  # builds vela-render-bench (hack/vela-render-bench/) next to it, in
#                               # the same wrapper module; prints that binary's path. It does not
#                               # build the vela CLI (several times more packages): run both for both
#
# v1.11.0 is the release that pins cuelang.org/go v0.14.1, like the definitions in ../shared/kubevela.
# `go install` cannot build it (its go.mod has replace directives), so a throwaway wrapper module
# requires it with the same replaces. Progress goes to stderr. Environment: DRIFTLESS_CACHE
# (default $HOME/.cache/driftless).
set -euo pipefail

VELA_VERSION=v1.11.0

CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/vela-$VELA_VERSION
VELA_BIN=$BIN_DIR/vela

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-vela: error: %s\n' "$*" >&2; exit 1; }

BENCH_BIN=$BIN_DIR/vela-render-bench
BENCH_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/vela-render-bench
WANT_BENCH=0
case ${1:-} in
  --bench) WANT_BENCH=1 ;;
  "") ;;
  *) die "unknown argument '$1' (usage: hack/build-vela.sh [--bench])" ;;
esac

WANTED_BIN=$VELA_BIN
[[ $WANT_BENCH == 1 ]] && WANTED_BIN=$BENCH_BIN
if [[ -x $WANTED_BIN ]]; then
  printf '%s\n' "$WANTED_BIN"
  exit 0
fi

command -v go >/dev/null || die "go is not installed (hack/install-prereqs.sh installs it)"

# Build in a staging directory and rename into place: the cache holds a complete binary or nothing.
mkdir -p "$CACHE/bin"
STAGING=$(mktemp -d "$CACHE/bin/.vela-$VELA_VERSION.XXXXXX")
trap 'rm -rf "$STAGING"' EXIT
mkdir -p "$STAGING/src"
# The wrapper module: vela and vela-render-bench are built from it, so both run the same KubeVela.
cat >"$STAGING/src/go.mod" <<GOMOD
module example.invalid/velabin

go 1.24.0

require github.com/oam-dev/kubevela $VELA_VERSION

replace (
	cloud.google.com/go => cloud.google.com/go v0.100.2
	github.com/docker/cli => github.com/docker/cli v24.0.9+incompatible
	github.com/docker/docker => github.com/docker/docker v28.3.3+incompatible
	github.com/docker/docker-credential-helpers => github.com/docker/docker-credential-helpers v0.7.0
	github.com/wercker/stern => github.com/oam-dev/stern v1.13.3-0.20250828063553-e1dd6271d131
	sigs.k8s.io/apiserver-network-proxy/konnectivity-client => sigs.k8s.io/apiserver-network-proxy/konnectivity-client v0.0.36
	sigs.k8s.io/apiserver-runtime => github.com/kmodules/apiserver-runtime v1.1.2-0.20250422194347-c5ac4abaf2ae
)
GOMOD
cat >"$STAGING/src/tools.go" <<'GOSRC'
//go:build tools

package tools

import _ "github.com/oam-dev/kubevela/references/cmd/cli"
GOSRC
if [[ $WANT_BENCH == 1 ]]; then
  mkdir -p "$STAGING/src/bench"
  cp "$BENCH_SRC/main.go" "$STAGING/src/bench/main.go"
fi
# The checksum database has no entry for the kmodules/apiserver-runtime pseudo-version that the
# replace pins (its lookup answers 404), although the module proxy serves it: skip the sumdb check for
# that one module only, everything else is still verified.
export GONOSUMDB=github.com/kmodules/apiserver-runtime
say "resolving the modules of kubevela $VELA_VERSION (first run downloads ~1 GB through the Go proxy)"
(cd "$STAGING/src" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod tidy -e >&2) ||
  die "go mod tidy failed for kubevela $VELA_VERSION"
# The binary this run does not build is kept from the cache when it is there.
[[ -x $BENCH_BIN ]] && cp "$BENCH_BIN" "$STAGING/vela-render-bench"
if [[ -x $VELA_BIN ]]; then
  cp "$VELA_BIN" "$STAGING/vela"
elif [[ $WANT_BENCH == 0 ]]; then
  say "building vela $VELA_VERSION (cold: 10-30 min)"
  (cd "$STAGING/src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X github.com/oam-dev/kubevela/version.VelaVersion=$VELA_VERSION" \
    -o "$STAGING/vela" github.com/oam-dev/kubevela/references/cmd/cli >&2) ||
    die "go build of vela $VELA_VERSION failed"
fi
if [[ $WANT_BENCH == 1 ]]; then
  say "building vela-render-bench against vela $VELA_VERSION"
  (cd "$STAGING/src" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X github.com/oam-dev/kubevela/version.VelaVersion=$VELA_VERSION" \
    -o "$STAGING/vela-render-bench" ./bench >&2) ||
    die "go build of vela-render-bench failed"
fi
rm -rf "$STAGING/src"
rm -rf "$BIN_DIR"
mv "$STAGING" "$BIN_DIR"
trap - EXIT
say "$(basename "$WANTED_BIN") ($VELA_VERSION) installed in $BIN_DIR"
printf '%s\n' "$WANTED_BIN"
