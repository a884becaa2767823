#!/usr/bin/env bash
# Side by side: KubeVela's renderer (`vela dry-run --offline`, v1.11.0 from hack/build-vela.sh)
# and `driftless render` on the same generated apps (driftless-loadgen). Prints a markdown table
# on stdout; progress on stderr.
#
#   hack/vela-compare.sh [SAMPLE]     # default: 20 apps, each rendered by its own vela process
#
# Method: `vela dry-run` renders the Applications of one invocation, and its offline mode needs
# every definition passed with -d, so each sampled app is one `vela dry-run --offline -f APP -d
# DEFS` process (DEFS: KubeVela's own built-in definitions of the types the apps use, read from
# ../shared/kubevela or $KUBEVELA). The per-app time is the wall time of all SAMPLE processes
# divided by SAMPLE; it includes vela's start-up, which a `vela` user pays per app too. Driftless is
# measured the same way (one process per app, `driftless render FILE`), and in batch (one process
# over the 1,000-app repository, divided by 1,000), which is how the agent renders.
#
# In process: vela-render-bench (hack/vela-render-bench/, built by `hack/build-vela.sh --bench`)
# loads the same definitions once and renders all 1,000 apps through KubeVela's own dry-run
# package in one Go process: KubeVela's renderer without process start-up. Its time leaves out
# reading the files and loading the definitions; Driftless's batch time includes both, and its
# process start-up. The last column is the per-app ratio against that in-process figure.
#
# Env: CARGO_TARGET_DIR (default target), SCALE_BIN_DIR (use the binaries there, build nothing), SCALE_WORK (default /tmp/driftless-scale), KUBEVELA.
# The Go binaries are not built here (a 10-minute Go build): run hack/build-vela.sh --bench first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SAMPLE=${1:-20}
WORK=${SCALE_WORK:-/tmp/driftless-scale}/vela
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KUBEVELA=${KUBEVELA:-$ROOT/../shared/kubevela}
[[ -d $KUBEVELA/vela-templates/definitions/internal ]] || KUBEVELA=/work/shared/kubevela
INTERNAL=$KUBEVELA/vela-templates/definitions/internal
VELA=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/bin/vela-v1.11.0/vela
VELA_BENCH=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/bin/vela-v1.11.0/vela-render-bench

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'vela-compare.sh: error: %s\n' "$*" >&2; exit 1; }

[[ -x $VELA ]] || die "no vela binary at $VELA: run hack/build-vela.sh --bench first"
[[ -x $VELA_BENCH ]] || die "no vela-render-bench at $VELA_BENCH: run hack/build-vela.sh --bench first"
[[ -d $INTERNAL ]] || die "KubeVela's definitions not found under $KUBEVELA"
[[ $SAMPLE =~ ^[1-9][0-9]*$ ]] || die "SAMPLE must be a positive number, not '$SAMPLE'"

say "building the release binaries into $TARGET"
if [[ -n ${SCALE_BIN_DIR:-} ]]; then
  TARGET=$(dirname "$SCALE_BIN_DIR") # binaries built elsewhere (e.g. from a clean worktree)
else
  cargo build --release --quiet -p driftless -p loadgen --bin driftless --bin driftless-loadgen >&2
fi
DRIFTLESS=${SCALE_BIN_DIR:-$TARGET/release}/driftless
LOADGEN=${SCALE_BIN_DIR:-$TARGET/release}/driftless-loadgen

rm -rf "$WORK"
mkdir -p "$WORK/home" "$WORK/defs"
"$LOADGEN" --apps 1000 --out "$WORK/repo" >/dev/null 2>&1
# KubeVela's definitions of the types the generated apps use (copied to a scratch directory at
# run time only; nothing of KubeVela's lands in the repository).
for def in component/webservice.cue component/k8s-objects.cue trait/scaler.cue trait/labels.cue \
  trait/gateway.cue trait/sidecar.cue; do
  cp "$INTERNAL/$def" "$WORK/defs/"
done
mapfile -t apps < <(find "$WORK/repo/apps" -name '*.yaml' | sort | head -n "$SAMPLE")

now() { date +%s.%N; }
per_app_ms() { awk -v s="$1" -v e="$2" -v n="$3" 'BEGIN { printf "%.1f", (e - s) * 1000 / n }'; }

say "vela dry-run --offline: $SAMPLE apps, one process each"
export HOME=$WORK/home # vela writes $HOME/.vela
# vela v1.11 exits 1 without a kubeconfig, even offline: give it one whose server is a closed port
# (nothing is contacted successfully), as hack/regen-conformance.sh does.
cat >"$WORK/kubeconfig" <<'KUBECONFIG'
apiVersion: v1
kind: Config
clusters:
- cluster: {server: "https://127.0.0.1:1"}
  name: offline
contexts:
- context: {cluster: offline, user: offline, namespace: default}
  name: offline
current-context: offline
users:
- name: offline
  user: {token: offline}
KUBECONFIG
export KUBECONFIG=$WORK/kubeconfig
vela_objects=0
start=$(now)
for app in "${apps[@]}"; do
  "$VELA" dry-run --offline -f "$app" -d "$WORK/defs" >"$WORK/vela.out" 2>"$WORK/vela.err" ||
    { cat "$WORK/vela.err" >&2; die "vela dry-run failed on $app"; }
  vela_objects=$((vela_objects + $(grep -c '^kind:' "$WORK/vela.out")))
done
end=$(now)
vela_ms=$(per_app_ms "$start" "$end" "$SAMPLE")

say "driftless render: the same $SAMPLE apps, one process each"
driftless_objects=0
start=$(now)
for app in "${apps[@]}"; do
  "$DRIFTLESS" render "$app" >"$WORK/driftless.out" 2>"$WORK/driftless.err" ||
    { cat "$WORK/driftless.err" >&2; die "driftless render failed on $app"; }
  driftless_objects=$((driftless_objects + $(grep -c '^kind:' "$WORK/driftless.out")))
done
end=$(now)
driftless_ms=$(per_app_ms "$start" "$end" "$SAMPLE")

say "driftless render: 1,000 apps in one process"
start=$(now)
"$DRIFTLESS" render "$WORK/repo" -o json >/dev/null 2>"$WORK/driftless.err" ||
  { cat "$WORK/driftless.err" >&2; die "driftless render of 1,000 apps failed"; }
end=$(now)
batch_ms=$(per_app_ms "$start" "$end" 1000)

say "KubeVela's dry-run package in one process: the same 1,000 apps"
bench_json=$("$VELA_BENCH" -d "$WORK/defs" -apps "$WORK/repo/apps" 2>"$WORK/bench.err") ||
  { cat "$WORK/bench.err" >&2; die "vela-render-bench failed"; }
inprocess_ms=$(printf '%s' "$bench_json" | sed -E 's/.*"per_app_ms":([0-9.]+).*/\1/')
inprocess_objects=$(printf '%s' "$bench_json" | sed -E 's/.*"objects":([0-9]+).*/\1/')
say "vela-render-bench: $bench_json"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0fx", a / b }'; }
printf '\n| renderer | per app | objects | vela / driftless |\n|---|---|---|---|\n'
printf '| `vela dry-run --offline` v1.11.0, one process per app | %s ms | %s (sample) | 1x |\n' "$vela_ms" "$vela_objects"
printf '| `driftless render FILE`, one process per app | %s ms | %s (sample) | %s |\n' "$driftless_ms" "$driftless_objects" "$(ratio "$vela_ms" "$driftless_ms")"
printf '| KubeVela v1.11.0 dry-run package, 1,000 apps in one process | %s ms | %s | 1x |\n' "$inprocess_ms" "$inprocess_objects"
printf '| `driftless render` over the same 1,000 apps, one process | %s ms | - | %s |\n' "$batch_ms" "$(ratio "$inprocess_ms" "$batch_ms")"
printf '\nsample: %s apps; machine: %s cores, load average %s; %s\n' "$SAMPLE" "$(nproc)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
