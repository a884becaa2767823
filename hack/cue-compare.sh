#!/usr/bin/env bash
# Side by side: Go CUE (v0.14.1) and Driftless's CUE evaluator on CUE's own benchmark archives
# (../shared/cue/cue/testdata/benchmarks), both in process: each evaluates and exports an
# archive's files N times in one process (hack/cue-bench/main.go for Go, the `cue_bench` example
# of the cue crate for Driftless), so neither time carries process start-up. Prints a markdown
# table on stdout; progress on stderr.
#
#   hack/cue-compare.sh [N]    # default: 20 evaluations per archive
#
# Each archive is exported to JSON (`cue export`'s work); one whose value Go CUE cannot export
# (most benchmarks keep non-concrete values) is evaluated and checked for errors instead
# (`Value.Validate()`), marked "validate". An archive that either side fails gets no ratio
# (CONFORMANCE.md lists those Driftless evaluates differently from `cue export`). Go's module cache must hold
# cuelang.org/go v0.14.1 (hack/build-cue.sh fetches it). Env: CUE_SHARED (default
# ../shared/cue), CARGO_TARGET_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-20}
CUE_VERSION=v0.14.1
SHARED=${CUE_SHARED:-$ROOT/../shared/cue}
[[ -d $SHARED/cue/testdata/benchmarks ]] || SHARED=/work/shared/cue
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cue-compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'cue-compare.sh: error: %s\n' "$*" >&2; exit 1; }

[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$N'"
[[ -d $SHARED/cue/testdata/benchmarks ]] || die "CUE's test data not found under $SHARED"
command -v go >/dev/null || die "go is not installed"

say "building cue-bench against cuelang.org/go $CUE_VERSION"
mkdir -p "$WORK/go"
cp hack/cue-bench/main.go "$WORK/go/main.go"
cat >"$WORK/go/go.mod" <<GOMOD
module example.invalid/cuebench

go 1.24.0

require cuelang.org/go $CUE_VERSION
GOMOD
(cd "$WORK/go" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod tidy >&2 && GOTOOLCHAIN=local go build -o "$WORK/cue-bench" . >&2) ||
  die "go build of cue-bench failed"
say "building the cue crate's cue_bench example"
cargo build --release --quiet -p cue --example cue_bench >&2
RUST_BENCH=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/cue_bench

# files_of ARCHIVE DIR: writes the archive's top-level .cue files into DIR, prints their paths.
files_of() {
  awk -v dir="$2" '
    /^-- .* --$/ { name = $2; out = ""; if (name ~ /\.cue$/ && name !~ /\//) { out = dir "/" name; printf "" > out; print out } ; next }
    out != "" { print >> out }
  ' "$1"
}

field() { sed -E "s/.*\"$1\":([^,}]*).*/\\1/" <<<"$2"; }

printf '| archive | mode | Go CUE %s, per evaluation | Driftless, per evaluation | Go / Driftless |\n|---|---|---|---|---|\n' "$CUE_VERSION"
for archive in "$SHARED"/cue/testdata/benchmarks/*.txtar; do
  name=$(basename "$archive" .txtar)
  dir=$WORK/$name
  mkdir -p "$dir"
  mapfile -t files < <(files_of "$archive" "$dir" | sort -u)
  ((${#files[@]} > 0)) || continue
  say "$name"
  mode=export
  go_json=$(timeout 120 "$WORK/cue-bench" -n "$N" "${files[@]}" 2>/dev/null || echo '{"ok":false}')
  if [[ $(field ok "$go_json") != true ]]; then
    mode=validate
    go_json=$(timeout 120 "$WORK/cue-bench" -validate -n "$N" "${files[@]}" 2>/dev/null || echo '{"ok":false}')
  fi
  rust_args=(-n "$N")
  [[ $mode == validate ]] && rust_args=(--validate -n "$N")
  rust_json=$(timeout 120 "$RUST_BENCH" "${rust_args[@]}" "${files[@]}" 2>/dev/null || echo '{"ok":false}')
  go_ms=$(field per_eval_ms "$go_json")
  rust_ms=$(field per_eval_ms "$rust_json")
  if [[ $(field ok "$go_json") == true && $(field ok "$rust_json") == true ]]; then
    ratio=$(awk -v a="$go_ms" -v b="$rust_ms" 'BEGIN { printf "%.1fx", a / b }')
    printf '| %s | %s | %.2f ms | %.2f ms | %s |\n' "$name" "$mode" "$go_ms" "$rust_ms" "$ratio"
  else
    printf '| %s | %s | %s | %s | - |\n' "$name" "$mode" \
      "$([[ $(field ok "$go_json") == true ]] && printf '%.2f ms' "$go_ms" || echo fails)" \
      "$([[ $(field ok "$rust_json") == true ]] && printf '%.2f ms' "$rust_ms" || echo "fails or times out")"
  fi
done
printf '\n%s evaluations per archive, each side in one process; machine: %s cores, load average %s; %s\n' \
  "$N" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
