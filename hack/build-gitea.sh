#!/usr/bin/env bash
# Build Gitea from its Go module (through the wrapper module in hack/gitea/) into a version-keyed
# cache outside the repository, for the end-to-end tests of the agent.
#
#   hack/build-gitea.sh              # builds if needed; prints the binary directory on stdout
#   hack/build-gitea.sh --regen      # re-creates hack/gitea/go.mod from Gitea's own go.mod
#
# `go install code.gitea.io/gitea@v…` refuses Gitea's go.mod (it has replace and godebug
# directives), so hack/gitea/go.mod requires Gitea as a `tool` and mirrors those directives
# mechanically (--regen). Built without `bindata`: templates, locales and options are read from the
# read-only module cache directory (STATIC_ROOT_PATH in hack/gitea.sh); the web UI's JS/CSS is not
# needed for the API and git-over-HTTP the tests use.
#
# Progress goes to stderr. A second run with the binary present returns at once.
# Environment: DRIFTLESS_CACHE (default $HOME/.cache/driftless).
set -euo pipefail

GITEA_VERSION=v1.26.0 # v1.25.x is not served by the module proxy; >= v1.27 is renamed gitea.dev
GO_MIN_MINOR=26       # Gitea v1.26.0 declares go 1.26.2
TAGS='sqlite sqlite_unlock_notify'

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOD_DIR=$HACK_DIR/gitea
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
BIN_DIR=$CACHE/bin/gitea-$GITEA_VERSION
LOG_DIR=$CACHE/logs

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'build-gitea: error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null 2>&1 ||
  die "Go is not installed. Install Go >= 1.$GO_MIN_MINOR (https://go.dev/dl/) and put it on PATH (or run hack/install-prereqs.sh)."
export GOTOOLCHAIN=local GOFLAGS=-trimpath GOMAXPROCS=${GOMAXPROCS:-2}

# regen: rewrite the wrapper go.mod from Gitea's go.mod (module→module replaces, excludes, godebug).
regen() {
  local gomod
  gomod=$(cd "$(mktemp -d)" && go mod download -json "code.gitea.io/gitea@$GITEA_VERSION" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  cd "$MOD_DIR"
  rm -f go.mod go.sum
  go mod init driftless.invalid/hack/gitea
  go mod edit -json "$gomod" | python3 -c '
import json, sys
m = json.load(sys.stdin)
out = ["-go=" + m["Go"]]
for r in m.get("Replace") or []:
    o, n = r["Old"], r["New"]
    if n["Path"].startswith((".", "/")):
        continue  # a local path only exists in Gitea'"'"'s own checkout
    out.append("-replace=%s%s=%s%s" % (o["Path"], "@" + o["Version"] if o.get("Version") else "",
                                       n["Path"], "@" + n["Version"] if n.get("Version") else ""))
for e in m.get("Exclude") or []:
    out.append("-exclude=%s@%s" % (e["Path"], e["Version"]))
for g in m.get("GoDebug") or m.get("Godebug") or []:
    out.append("-godebug=%s=%s" % (g["Key"], g["Value"]))
print("\n".join(out))' | xargs -r go mod edit
  GOFLAGS=-mod=mod go get -tool "code.gitea.io/gitea@$GITEA_VERSION"
  go mod tidy
}

if [[ ${1:-} == --regen ]]; then
  regen
  exit 0
fi

if [[ -x $BIN_DIR/gitea ]]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

go_minor=$(go env GOVERSION | sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p')
[[ -n $go_minor && $go_minor -ge $GO_MIN_MINOR ]] ||
  die "Go $(go env GOVERSION) is too old; need Go >= 1.$GO_MIN_MINOR (https://go.dev/dl/)."
command -v gcc >/dev/null 2>&1 || die "gcc is required (cgo, for SQLite); run hack/install-prereqs.sh"

mkdir -p "$CACHE/bin" "$LOG_DIR"
exec 9>"$CACHE/bin/.build-gitea.lock"
if ! flock -n 9; then
  say "another Gitea build is running; waiting for it (lock $CACHE/bin/.build-gitea.lock)"
  flock 9
fi
if [[ -x $BIN_DIR/gitea ]]; then
  printf '%s\n' "$BIN_DIR"
  exit 0
fi

STAGE=$(mktemp -d "$CACHE/bin/.stage-gitea.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
log=$LOG_DIR/build-gitea.log
start=$SECONDS
say "building Gitea $GITEA_VERSION into $BIN_DIR (cold: ~10-15 min on 2 cores; log: $log)"
if ! (cd "$MOD_DIR" && CGO_ENABLED=1 go build -mod=readonly -p 2 -tags "$TAGS" \
  -ldflags "-s -w -X main.Version=${GITEA_VERSION#v} -X 'main.Tags=$TAGS'" \
  -o "$STAGE/gitea" code.gitea.io/gitea) >"$log" 2>&1; then
  printf 'build-gitea: error: go build failed; last lines of %s:\n' "$log" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
"$STAGE/gitea" --version >&2 || die "the built binary does not run"
# The module cache directory holds templates/, options/ and public/ (STATIC_ROOT_PATH).
(cd "$MOD_DIR" && go list -mod=readonly -m -f '{{.Dir}}' code.gitea.io/gitea) >"$STAGE/static-root"
rm -rf "$BIN_DIR"
mv "$STAGE" "$BIN_DIR"
chmod 755 "$BIN_DIR"
trap - EXIT
say "built Gitea in $((SECONDS - start))s: $BIN_DIR"
printf '%s\n' "$BIN_DIR"
