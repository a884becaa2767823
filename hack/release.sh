#!/usr/bin/env bash
# Release binaries of `driftless` for Linux amd64 and arm64, with SHA-256 checksums.
#
#   hack/release.sh [OUT_DIR]   # default: target/release-artifacts
#
# Each binary links OpenSSL statically (the `vendored-openssl` feature: built from source), so it
# needs no libssl at runtime and cross-compiling needs no target libssl-dev. The amd64 binary is
# then tested: `--version`, and an offline plan of examples/repo against its golden.
#
# arm64 needs the Rust target (`rustup target add aarch64-unknown-linux-gnu`) and a cross C
# compiler for OpenSSL, libssh2 and libgit2 (Debian: `apt-get install gcc-aarch64-linux-gnu`);
# when either is missing the script stops and says which.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HACK_DIR/.." && pwd)
OUT=${1:-$ROOT/target/release-artifacts}
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'release.sh: error: %s\n' "$*" >&2; exit 1; }

[[ -n $VERSION ]] || die "cannot read the workspace version from Cargo.toml"
command -v cargo >/dev/null || die "cargo is not on PATH (https://rustup.rs)"
command -v perl >/dev/null || die "perl is needed to build OpenSSL from source (apt-get install perl)"
command -v make >/dev/null || die "make is needed to build OpenSSL from source (apt-get install make)"

AMD64=x86_64-unknown-linux-gnu
ARM64=aarch64-unknown-linux-gnu
ARM64_CC=aarch64-linux-gnu-gcc

# Checked before anything is built, so a missing piece costs no build time.
rustup target list --installed 2>/dev/null | grep -qx "$ARM64" ||
  die "the Rust target $ARM64 is not installed: rustup target add $ARM64"
command -v "$ARM64_CC" >/dev/null ||
  die "no arm64 cross compiler ($ARM64_CC): apt-get install gcc-aarch64-linux-gnu (Debian/Ubuntu)"

build() {
  local target=$1 arch=$2
  say "building driftless $VERSION for linux/$arch ($target)"
  (cd "$ROOT" && cargo build --release --locked --features vendored-openssl --bin driftless --target "$target")
  install -D -m 0755 "$ROOT/target/$target/release/driftless" "$OUT/driftless-$VERSION-linux-$arch"
}

mkdir -p "$OUT"
build "$AMD64" amd64
CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$ARM64_CC CC_aarch64_unknown_linux_gnu=$ARM64_CC \
  build "$ARM64" arm64

say "testing the amd64 binary"
bin=$OUT/driftless-$VERSION-linux-amd64
"$bin" --version | grep -q "$VERSION" || die "$bin --version does not print $VERSION"
plan=$(cd "$ROOT" && env -u KUBECONFIG HOME=/nonexistent "$bin" plan examples/repo 2>/dev/null) || [[ $? == 2 ]] ||
  die "$bin plan examples/repo failed"
diff <(printf '%s\n' "$plan") "$ROOT/tests/cli/golden/plan.txt" >/dev/null ||
  die "$bin plan examples/repo differs from tests/cli/golden/plan.txt"
if ldd "$bin" 2>/dev/null | grep -q 'libssl\|libcrypto'; then
  die "$bin links the system OpenSSL; it should be vendored"
fi
file "$OUT/driftless-$VERSION-linux-arm64" 2>/dev/null | grep -q aarch64 ||
  { command -v file >/dev/null && die "the arm64 binary is not an aarch64 executable"; }

(cd "$OUT" && sha256sum "driftless-$VERSION-linux-amd64" "driftless-$VERSION-linux-arm64" >SHA256SUMS)
say "done: $OUT"
cat "$OUT/SHA256SUMS"
