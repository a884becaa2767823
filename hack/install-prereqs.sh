#!/usr/bin/env bash
# Check and install what hack/test.sh needs: Go >= 1.24 (checked, never installed: it must come from
# https://go.dev/dl/), the Rust toolchain (assumed present via rustup), and the small system tools the
# cluster scripts use (installed with apt-get when missing). Safe to re-run; does nothing when all
# is present.
set -euo pipefail

GO_MIN_MINOR=24
# command -> Debian package
declare -A PACKAGES=(
  [curl]=curl [openssl]=openssl [ss]=iproute2 [setsid]=util-linux [flock]=util-linux
  [git]=git [tail]=coreutils [sed]=sed [gcc]=gcc [pkg-config]=pkg-config [perl]=perl [make]=make [jq]=jq
  [ssh-keygen]=openssh-client [ssh-keyscan]=openssh-client
  # The web UI's browser tests (tests/e2e/ui.rs): Debian's Chromium and its WebDriver.
  [chromium]=chromium [chromedriver]=chromium-driver
)

die() { printf 'install-prereqs: error: %s\n' "$*" >&2; exit 1; }
say() { printf '==> %s\n' "$*" >&2; }

if ! command -v go >/dev/null 2>&1; then
  die "Go is not installed (need Go >= 1.$GO_MIN_MINOR to build the local control plane).
  Install it from https://go.dev/dl/ (e.g. tar -C /usr/local -xzf go1.26.*.linux-amd64.tar.gz) and add
  /usr/local/go/bin to PATH. Debian's golang-go package is too old."
fi
go_version=$(go env GOVERSION)
go_minor=$(sed -n 's/^go1\.\([0-9][0-9]*\).*/\1/p' <<<"$go_version")
[[ -n $go_minor && $go_minor -ge $GO_MIN_MINOR ]] ||
  die "Go $go_version is too old; need Go >= 1.$GO_MIN_MINOR (https://go.dev/dl/)."

command -v cargo >/dev/null 2>&1 ||
  die "cargo is not on PATH; install Rust with rustup (https://rustup.rs)."

missing=()
for cmd in "${!PACKAGES[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${PACKAGES[$cmd]}")
done
# git2's https and ssh link OpenSSL: its headers come from libssl-dev.
if ! pkg-config --exists openssl 2>/dev/null; then
  missing+=(libssl-dev)
fi
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  command -v apt-get >/dev/null 2>&1 ||
    die "missing tools from packages: ${missing[*]}; install them with your package manager."
  sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}; run as root or install sudo."
    sudo=(sudo)
  fi
  say "installing ${missing[*]} with apt-get"
  "${sudo[@]}" apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >&2
fi
say "prerequisites present: $go_version, $(cargo --version), curl, openssl, ss, setsid, flock, gcc (cgo for Gitea's sqlite), libssl-dev (git2's https and ssh), openssh-client (SSH e2e tests), jq (hack/demo.sh), chromium + chromedriver (the UI's browser tests)"
