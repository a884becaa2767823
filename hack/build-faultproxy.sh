#!/usr/bin/env bash
# Build hack/faultproxy (an HTTPS reverse proxy that answers a share of the apiserver's requests
# with a 5xx; the standard library only) into a cache outside the repository, keyed by its
# source, so an edit rebuilds it. The chaos trials put it between the agent and the apiserver.
#
#   hack/build-faultproxy.sh    # builds if needed; prints the path of the binary on stdout
#
# Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/faultproxy" && pwd)
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
KEY=$(cat "$SRC/go.mod" "$SRC/main.go" | sha256sum | cut -c1-12)
BIN=$CACHE/bin/faultproxy-$KEY/faultproxy

die() { printf 'build-faultproxy: error: %s\n' "$*" >&2; exit 1; }

if [[ -x $BIN ]]; then
  printf '%s\n' "$BIN"
  exit 0
fi
command -v go >/dev/null || die "go is not installed (hack/install-prereqs.sh installs it)"
printf '==> building hack/faultproxy\n' >&2
staging=$(mktemp -d "$CACHE/bin/.faultproxy.XXXXXX" 2>/dev/null || { mkdir -p "$CACHE/bin"; mktemp -d "$CACHE/bin/.faultproxy.XXXXXX"; })
(cd "$SRC" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -o "$staging/faultproxy" .) || { rm -rf "$staging"; die "go build failed"; }
rm -rf "$(dirname "$BIN")"
mv "$staging" "$(dirname "$BIN")"
printf '%s\n' "$BIN"
