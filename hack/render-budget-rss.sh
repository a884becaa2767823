#!/usr/bin/env bash
# Peak memory of `driftless render` over a repository of N generated apps plus the hostile
# definition of analyzer/tests/cases/render/render-budget (two nested comprehensions over
# list.Range(0, 3000, 1): nine million fields), against the same repository without the
# hostile app. The evaluation budget must block that app, render the others, and keep the
# extra peak memory under LIMIT_MB (default 400: at most one over-budget evaluation per render
# thread, each within ~150 MB at the default 500,000 steps).
#
#   hack/render-budget-rss.sh BIN [N]
#
# BIN: a driftless binary (release for the recorded figures); driftless-loadgen is taken from
# beside it (LOADGEN overrides). RAYON_NUM_THREADS sets the render threads (default: cores).
# Prints one line per run: apps, peak RSS (MiB), elapsed (s), and the hostile app's diagnostic.
set -euo pipefail
BIN=$(realpath "$1"); N=${2:-1000}; LIMIT_MB=${LIMIT_MB:-400}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOADGEN=${LOADGEN:-$(dirname "$BIN")/driftless-loadgen}
CASE=$ROOT/analyzer/tests/cases/render/render-budget
OUT=$(mktemp -d /tmp/driftless-render-rss.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

"$LOADGEN" --apps "$N" --out "$OUT/repo" >/dev/null 2>&1
mkdir -p "$OUT/repo/definitions" "$OUT/repo/apps/hostile"
cp -r "$CASE/definitions/." "$OUT/repo/definitions/"
cp "$CASE/apps/notes.yaml" "$CASE/apps/small-grid.yaml" "$OUT/repo/apps/hostile/"

# One render: peak RSS in KiB and elapsed seconds (render exits 1 when an app is blocked).
measure() {
  /usr/bin/time -f '%M %e' -o "$OUT/time" "$BIN" render "$OUT/repo" >"$OUT/stdout" 2>"$OUT/stderr" || true
  # (time adds a "Command exited with non-zero status" line before the figures.)
  read -r kib seconds < <(tail -n 1 "$OUT/time")
  echo "$((kib / 1024)) $seconds"
}

read -r base_mib base_s < <(measure)
echo "without the hostile app: $((N + 2)) apps, peak RSS ${base_mib} MiB, ${base_s} s"
cp "$CASE/apps/grid.yaml" "$OUT/repo/apps/hostile/"
read -r hostile_mib hostile_s < <(measure)
diagnostic=$(grep -o 'error\[render-[a-z]*\][^[]*' "$OUT/stderr" | head -n 1 || true)
echo "with the hostile app:    $((N + 3)) apps, peak RSS ${hostile_mib} MiB, ${hostile_s} s"
echo "hostile app: ${diagnostic:-NOT BLOCKED}"

status=0
if [[ -z $diagnostic ]]; then echo "FAIL: the hostile app was not blocked"; status=1; fi
rendered=$(grep -o '^# Source: app [^,]*' "$OUT/stdout" | sort -u | wc -l)
if (( rendered != N + 2 )); then
  echo "FAIL: $rendered apps rendered (want the $((N + 2)) others)"; status=1
fi
extra=$((hostile_mib - base_mib))
if (( extra > LIMIT_MB )); then
  echo "FAIL: the hostile app added ${extra} MiB of peak memory (limit ${LIMIT_MB} MiB)"; status=1
else
  echo "ok: the hostile app added ${extra} MiB of peak memory (limit ${LIMIT_MB} MiB)"
fi
exit $status
