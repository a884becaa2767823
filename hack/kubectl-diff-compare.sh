#!/usr/bin/env bash
# Side by side on one cluster, in one run: `kubectl diff --server-side` and `driftless plan
# --kubeconfig` over the same N unchanged apps (driftless-loadgen). Prints a markdown table on
# stdout; progress on stderr.
#
#   hack/kubectl-diff-compare.sh [N]    # default: 1,000 apps
#
# Method: the apps are rendered once (`driftless render -o yaml`) and applied once (`driftless
# apply`), so every object is in the cluster and unchanged. Then both tools compare the same
# objects with the cluster: `kubectl diff --server-side -f rendered.yaml` (one server-side-apply
# dry run per object, what a `kubectl`-based preview pays) and `driftless plan --kubeconfig`
# (its dry runs are skipped for objects the resource tracker proves unchanged). Both must report
# no change. Wall times, with process start-up; the two alternate ROUNDS times (default 3) and
# the table gives the medians.
#
# The cluster is the local kwok control plane of hack/cluster.sh, under its own name
# (CLUSTER_NAME, default `peers`), stopped at the end unless KEEP_CLUSTER=1. kubectl comes from
# PATH (KUBECTL to override). Env: ROUNDS, CARGO_TARGET_DIR (default target), SCALE_BIN_DIR (use
# the binaries there, build nothing), SCALE_WORK (default /tmp/driftless-scale), SOURCE (the
# source identity of the apply and plan, default `peers`: with CLUSTER_NAME=scale and
# SOURCE=scale-all a cluster where hack/scale.sh applied the same N apps is reused, and the
# setup apply finds them unchanged instead of creating them).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
N=${1:-1000}
ROUNDS=${ROUNDS:-3}
NAMESPACES=10
CLUSTER=${CLUSTER_NAME:-peers}
WORK=${SCALE_WORK:-/tmp/driftless-scale}/kubectl-diff
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KUBECTL=${KUBECTL:-kubectl}

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'kubectl-diff-compare.sh: error: %s\n' "$*" >&2; exit 1; }

[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$N'"
command -v "$KUBECTL" >/dev/null || die "no kubectl on PATH (set KUBECTL)"

if [[ -n ${SCALE_BIN_DIR:-} ]]; then
  BIN=$SCALE_BIN_DIR
else
  say "building the release binaries into $TARGET"
  cargo build --release --quiet -p driftless -p loadgen --bin driftless --bin driftless-loadgen >&2
  BIN=$TARGET/release
fi
DRIFTLESS=$BIN/driftless
LOADGEN=$BIN/driftless-loadgen

rm -rf "$WORK"
mkdir -p "$WORK"
"$LOADGEN" --apps "$N" --out "$WORK/repo" --namespaces "$NAMESPACES" >/dev/null 2>&1

say "starting kwok cluster $CLUSTER"
KUBECONFIG_FILE=$(hack/cluster.sh up --name "$CLUSTER" | tail -n 1)
if [[ ${KEEP_CLUSTER:-0} != 1 ]]; then
  trap 'hack/cluster.sh down --name "$CLUSTER" >/dev/null 2>&1 || true' EXIT
fi
export KUBECONFIG=$KUBECONFIG_FILE
for ns in $("$LOADGEN" --apps "$N" --out /dev/null --namespaces "$NAMESPACES" --print-namespaces) driftless-system; do
  "$KUBECTL" create namespace "$ns" >/dev/null 2>&1 || true
done

live=(--kubeconfig "$KUBECONFIG_FILE" --qps 1000 --burst 2000 --source "${SOURCE:-peers}" --timeout-seconds 600)
say "rendering and applying $N apps"
"$DRIFTLESS" render "$WORK/repo" -o yaml >"$WORK/rendered.yaml" 2>"$WORK/render.err" ||
  { cat "$WORK/render.err" >&2; die "driftless render failed"; }
"$DRIFTLESS" apply "$WORK/repo" --yes "${live[@]}" >/dev/null 2>"$WORK/apply.err" ||
  { cat "$WORK/apply.err" >&2; die "driftless apply failed"; }
objects=$(grep -c '^kind:' "$WORK/rendered.yaml")

now() { date +%s.%N; }
seconds() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.2f", e - s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0fx", a / b }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# The two tools alternate ROUNDS times, so that other load on the machine weighs on both alike.
kubectl_rounds=() plan_rounds=()
for ((round = 1; round <= ROUNDS; round++)); do
  say "round $round of $ROUNDS: kubectl diff --server-side over $objects objects"
  start=$(now)
  # Exit 0: no differences; 1: differences; >1: an error.
  code=0
  "$KUBECTL" diff --server-side --force-conflicts -f "$WORK/rendered.yaml" >"$WORK/kubectl.diff" 2>"$WORK/kubectl.err" || code=$?
  end=$(now)
  ((code <= 1)) || { tail -n 20 "$WORK/kubectl.err" >&2; die "kubectl diff failed (exit $code)"; }
  kubectl_rounds+=("$(seconds "$start" "$end")")
  kubectl_lines=$(wc -l <"$WORK/kubectl.diff")
  say "kubectl diff: ${kubectl_rounds[-1]} s, $kubectl_lines diff lines"

  say "round $round of $ROUNDS: driftless plan --kubeconfig over the same apps"
  start=$(now)
  code=0
  "$DRIFTLESS" plan "$WORK/repo" -o json "${live[@]}" >"$WORK/plan.json" 2>"$WORK/plan.err" || code=$?
  end=$(now)
  ((code == 0 || code == 2)) || { tail -n 20 "$WORK/plan.err" >&2; die "driftless plan failed (exit $code)"; }
  plan_rounds+=("$(seconds "$start" "$end")")
  changes=$(grep -o '"action": *"[a-z]*"' "$WORK/plan.json" | grep -vc unchanged || true)
  say "driftless plan: ${plan_rounds[-1]} s, $changes changes"
done
kubectl_s=$(printf '%s\n' "${kubectl_rounds[@]}" | median)
plan_s=$(printf '%s\n' "${plan_rounds[@]}" | median)

printf '\n| tool, %s unchanged apps (%s objects), median of %s alternated runs | wall time | changes reported | ratio |\n|---|---|---|---|\n' "$N" "$objects" "$ROUNDS"
printf '| `kubectl diff --server-side -f rendered.yaml` (kubectl %s) | %s s | %s diff lines | 1x |\n' \
  "$("$KUBECTL" version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -n 1)" "$kubectl_s" "$kubectl_lines"
printf '| `driftless plan --kubeconfig` | %s s | %s | %s |\n' "$plan_s" "$changes" "$(ratio "$kubectl_s" "$plan_s")"
printf '\nper round (kubectl s / driftless s):'
for ((i = 0; i < ROUNDS; i++)); do printf ' %s / %s;' "${kubectl_rounds[i]}" "${plan_rounds[i]}"; done
printf '\nmachine: %s cores, load average %s; %s\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
