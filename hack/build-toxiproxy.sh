#!/usr/bin/env bash
# Build Toxiproxy (a TCP fault proxy: latency, cut connections, resets, a disabled upstream) from
# its Go module into a version-keyed cache outside the repository. hack/chaos.sh puts it between
# the agent and the apiserver for its fault trials.
#
#   hack/build-toxiproxy.sh    # builds if needed; prints the path of the server binary on stdout
#
# Progress goes to stderr. With the binary present it returns at once.
# Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

TOXIPROXY_VERSION=v2.5.0

CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/toxiproxy-$TOXIPROXY_VERSION
SERVER_BIN=$BIN_DIR/server

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-toxiproxy: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=hack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -x $SERVER_BIN ]]; then
  printf '%s\n' "$SERVER_BIN"
  exit 0
fi

say "building toxiproxy $TOXIPROXY_VERSION (go install github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION)"
go_install_into "$BIN_DIR" "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" server
"$SERVER_BIN" -version >/dev/null 2>&1 || die "the built binary does not run: $SERVER_BIN -version"
say "toxiproxy $TOXIPROXY_VERSION installed in $BIN_DIR"
printf '%s\n' "$SERVER_BIN"
