#!/usr/bin/env bash
# Side by side: KubeVela's renderer (v1.11.0 from hack/build-vela.sh) and `driftless render` on
# the same generated apps (driftless-loadgen). Prints a markdown table on stdout; progress on
# stderr.
#
#   hack/vela-compare.sh [SAMPLE]     # default: 20 apps, each rendered by its own vela process;
#                                     # 0: the in-process comparison only (no vela CLI needed)
#
# In process (the fair comparison): vela-render-bench (hack/vela-render-bench/, built by
# `hack/build-vela.sh --bench`) loads the definitions once and renders all APPS apps (default
# 1,000) through KubeVela's own dry-run package in one Go process, KubeVela's renderer without
# process start-up. Its time leaves out reading the files and loading the definitions;
# `driftless render` over the same apps in one process is timed whole (start-up, loading,
# rendering, writing YAML), which favours vela. The two alternate ROUNDS times (default 3) so that
# other load on the machine weighs on both alike; the table gives the median of each and the
# ratio of the medians, and the per-round ratios follow it.
#
# Per process (SAMPLE > 0, needs `hack/build-vela.sh` for the vela CLI): `vela dry-run --offline`
# renders the Applications of one invocation, and its offline mode needs every definition passed
# with -d, so each sampled app is one `vela dry-run --offline -f APP -d DEFS` process (DEFS:
# KubeVela's own built-in definitions of the types the apps use, read from ../shared/kubevela or
# $KUBEVELA). The per-app time includes vela's start-up, which a `vela` user pays per app too;
# Driftless is measured the same way (`driftless render FILE`, one process per app).
#
# Env: APPS, ROUNDS, CARGO_TARGET_DIR (default target), SCALE_BIN_DIR (use the binaries there,
# build nothing), SCALE_WORK (default /tmp/driftless-scale), KUBEVELA.
# The Go binaries are not built here (a long Go build): run hack/build-vela.sh --bench first.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
SAMPLE=${1:-20}
APPS=${APPS:-1000}
ROUNDS=${ROUNDS:-3}
WORK=${SCALE_WORK:-/tmp/driftless-scale}/vela
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KUBEVELA=${KUBEVELA:-$ROOT/../shared/kubevela}
[[ -d $KUBEVELA/vela-templates/definitions/internal ]] || KUBEVELA=/work/shared/kubevela
INTERNAL=$KUBEVELA/vela-templates/definitions/internal
VELA=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/bin/vela-v1.11.0/vela
VELA_BENCH=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/bin/vela-v1.11.0/vela-render-bench

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'vela-compare.sh: error: %s\n' "$*" >&2; exit 1; }

[[ $SAMPLE =~ ^[0-9]+$ ]] || die "SAMPLE must be a number, not '$SAMPLE'"
[[ $APPS =~ ^[1-9][0-9]*$ ]] || die "APPS must be a positive number, not '$APPS'"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a positive number, not '$ROUNDS'"
[[ $SAMPLE == 0 || -x $VELA ]] || die "no vela binary at $VELA: run hack/build-vela.sh (or SAMPLE=0)"
[[ -x $VELA_BENCH ]] || die "no vela-render-bench at $VELA_BENCH: run hack/build-vela.sh --bench first"
[[ -d $INTERNAL ]] || die "KubeVela's definitions not found under $KUBEVELA"

if [[ -n ${SCALE_BIN_DIR:-} ]]; then
  TARGET=$(dirname "$SCALE_BIN_DIR") # binaries built elsewhere (e.g. from a clean worktree)
else
  say "building the release binaries into $TARGET"
  cargo build --release --quiet -p driftless -p loadgen --bin driftless --bin driftless-loadgen >&2
fi
DRIFTLESS=${SCALE_BIN_DIR:-$TARGET/release}/driftless
LOADGEN=${SCALE_BIN_DIR:-$TARGET/release}/driftless-loadgen

rm -rf "$WORK"
mkdir -p "$WORK/home" "$WORK/defs"
"$LOADGEN" --apps "$APPS" --out "$WORK/repo" >/dev/null 2>&1
# KubeVela's definitions of the types the generated apps use (copied to a scratch directory at
# run time only; nothing of KubeVela's lands in the repository).
for def in component/webservice.cue component/k8s-objects.cue trait/scaler.cue trait/labels.cue \
  trait/gateway.cue trait/sidecar.cue; do
  cp "$INTERNAL/$def" "$WORK/defs/"
done
now() { date +%s.%N; }
per_app_ms() { awk -v s="$1" -v e="$2" -v n="$3" 'BEGIN { printf "%.2f", (e - s) * 1000 / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0fx", a / b }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# vela v1.11 exits 1 without a kubeconfig, even offline: give it one whose server is a closed port
# (nothing is contacted successfully), as hack/regen-conformance.sh does.
export HOME=$WORK/home # vela writes $HOME/.vela
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

vela_rounds=() driftless_rounds=() round_ratios=()
for ((round = 1; round <= ROUNDS; round++)); do
  say "round $round of $ROUNDS: KubeVela's dry-run package in one process, $APPS apps"
  bench_json=$("$VELA_BENCH" -d "$WORK/defs" -apps "$WORK/repo/apps" 2>"$WORK/bench.err") ||
    { tail -n 20 "$WORK/bench.err" >&2; die "vela-render-bench failed"; }
  say "vela-render-bench: $bench_json"
  inprocess_ms=$(printf '%s' "$bench_json" | sed -E 's/.*"per_app_ms":([0-9.]+).*/\1/')
  inprocess_objects=$(printf '%s' "$bench_json" | sed -E 's/.*"objects":([0-9]+).*/\1/')
  say "round $round of $ROUNDS: driftless render, the same $APPS apps in one process"
  start=$(now)
  "$DRIFTLESS" render "$WORK/repo" -o yaml >"$WORK/driftless.yaml" 2>"$WORK/driftless.err" ||
    { cat "$WORK/driftless.err" >&2; die "driftless render of $APPS apps failed"; }
  end=$(now)
  batch_ms=$(per_app_ms "$start" "$end" "$APPS")
  say "driftless render: $batch_ms ms per app"
  vela_rounds+=("$inprocess_ms")
  driftless_rounds+=("$batch_ms")
  round_ratios+=("$(ratio "$inprocess_ms" "$batch_ms")")
done
vela_median=$(printf '%s\n' "${vela_rounds[@]}" | median)
driftless_median=$(printf '%s\n' "${driftless_rounds[@]}" | median)
driftless_objects=$(grep -c "^kind:" "$WORK/driftless.yaml")

rows=()
if ((SAMPLE > 0)); then
  mapfile -t apps < <(find "$WORK/repo/apps" -name '*.yaml' | sort | head -n "$SAMPLE")
  say "vela dry-run --offline: $SAMPLE apps, one process each"
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
  sample_objects=0
  start=$(now)
  for app in "${apps[@]}"; do
    "$DRIFTLESS" render "$app" >"$WORK/driftless.out" 2>"$WORK/driftless.err" ||
      { cat "$WORK/driftless.err" >&2; die "driftless render failed on $app"; }
    sample_objects=$((sample_objects + $(grep -c '^kind:' "$WORK/driftless.out")))
  done
  end=$(now)
  driftless_ms=$(per_app_ms "$start" "$end" "$SAMPLE")
  rows+=("| \`vela dry-run --offline\` v1.11.0, one process per app | $vela_ms ms | $vela_objects (sample) | 1x |")
  rows+=("| \`driftless render FILE\`, one process per app | $driftless_ms ms | $sample_objects (sample) | $(ratio "$vela_ms" "$driftless_ms") |")
fi

printf '\n| renderer | per app | objects | vela / driftless |\n|---|---|---|---|\n'
printf '| KubeVela v1.11.0 dry-run package, %s apps in one process (median of %s) | %s ms | %s | 1x |\n' \
  "$APPS" "$ROUNDS" "$vela_median" "$inprocess_objects"
printf '| `driftless render` over the same %s apps, one process, start-up included (median of %s) | %s ms | %s | %s |\n' \
  "$APPS" "$ROUNDS" "$driftless_median" "$driftless_objects" "$(ratio "$vela_median" "$driftless_median")"
((${#rows[@]} == 0)) || printf '%s\n' "${rows[@]}"
printf '\nper round (vela ms / driftless ms = ratio):'
for ((i = 0; i < ROUNDS; i++)); do
  printf ' %s / %s = %s;' "${vela_rounds[i]}" "${driftless_rounds[i]}" "${round_ratios[i]}"
done
printf '\nsample: %s apps; machine: %s cores, load average %s; %s\n' "$SAMPLE" "$(nproc)" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
