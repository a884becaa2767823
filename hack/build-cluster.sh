#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
# from the upstream Go modules into a version-keyed cache outside the repository.
#
#   hack/build-cluster.sh            # builds if needed; prints the binary directory on stdout
#
# Progress goes to stderr. A second run with the binaries present returns in well under a second.
# Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

K8S_VERSION=v1.34.3
KWOK_VERSION=v0.7.0
GO_MIN_MINOR=24 # Go >= 1.24 (tool directives in hack/k8s/go.mod)

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/k8s-$K8S_VERSION-kwok-$KWOK_VERSION
LOG_DIR=$CACHE/logs
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-cluster: error: %s\n' "$*" >&2; exit 1; }

have_all() {
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x $BIN_DIR/$b ]] || return 1
  done
}

if have_all; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

command -v go >/dev/null 2>&1 ||
  die "Go is not installed. Install Go >= 1.$GO_MIN_MINOR (https://go.dev/dl/) and put it on PATH (or run hack/install-prereqs.sh)."
go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p')
[[ -n $go_minor && $go_minor -ge $GO_MIN_MINOR ]] ||
  die "Go $(go env GOVERSION) is too old; need Go >= 1.$GO_MIN_MINOR (https://go.dev/dl/)."

mkdir -p "$CACHE/bin" "$LOG_DIR"

# One build at a time per cache (parallel test processes may all call us).
exec 9>"$CACHE/bin/.build.lock"
if ! flock -n 9; then
  say "another build is running; waiting for it (lock $CACHE/bin/.build.lock)"
  flock 9
fi
if have_all; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath GOMAXPROCS=${GOMAXPROCS:-2}

STAGE=$(mktemp -d "$CACHE/bin/.stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

# step NAME CMD...: run CMD with output to a log; on failure name the step and show the log's tail.
step() {
  local name=$1 log=$LOG_DIR/build-$1.log start=$SECONDS
  shift
  say "building $name ($K8S_VERSION / kwok $KWOK_VERSION; log: $log)"
  if ! "$@" >"$log" 2>&1; then
    printf 'build-cluster: error: build step "%s" failed; last lines of %s:\n' "$name" "$log" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  say "built $name in $((SECONDS - start))s"
}

minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
LDFLAGS="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  LDFLAGS+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  LDFLAGS+=" -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000"
  LDFLAGS+=" -X $p.buildDate=1970-01-01T00:00:00Z"
done

k8s_build() { (cd "$HACK_DIR/k8s" && go build -mod=readonly -p 2 -ldflags "$LDFLAGS" -o "$STAGE/$1" "$2"); }

total_start=$SECONDS
say "building the local control plane into $BIN_DIR (cold: ~15-25 min on 2 cores; later runs reuse it)"
step modules bash -c "cd '$HACK_DIR/k8s' && go mod download -x"
step kube-apiserver k8s_build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
step kube-controller-manager k8s_build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
step kube-scheduler k8s_build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
step etcd k8s_build etcd ./cmd/etcd
step kwok env GOBIN="$STAGE" GOFLAGS=-trimpath bash -c \
  "cd / && go install -ldflags '-s -w' sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
step verify bash -c "'$STAGE/kube-apiserver' --version && '$STAGE/etcd' --version && go version -m '$STAGE/kwok' | head -n 3"

# Publish atomically: the cache directory either has every binary or does not exist.
rm -rf "$BIN_DIR"
mv "$STAGE" "$BIN_DIR"
chmod 755 "$BIN_DIR"
trap - EXIT
say "control plane binaries ready in $((SECONDS - total_start))s: $BIN_DIR"
printf '%s\n' "$BIN_DIR"
