#!/usr/bin/env bash
# The crash and fault trials of the agent against a real local cluster, recorded in
# RELIABILITY.md. Each trial SIGKILLs the agent at a random instant of a first deploy, an update,
# a prune, a workflow with a suspend or a rollout in batches (crash trials), or puts a fault
# between it and the apiserver through Toxiproxy or hack/faultproxy (fault trials: latency,
# connections cut mid-response, the apiserver unreachable, an apiserver restart, 5xx answers),
# then checks: no orphan, no wrong prune, convergence on what Git says. The work is done by the e2e test
# `chaos::killed_and_faulted_agents_leave_no_orphan_prune_nothing_wrong_and_converge` on a
# cluster of its own (`chaos`, started and stopped by the test).
#
#   hack/chaos.sh                      # 100 crash trials and 30 fault trials
#   hack/chaos.sh --crash 20 --fault 5 # fewer
#   hack/chaos.sh --seed 42            # replay a seed (printed by every run)
#   hack/chaos.sh --no-record          # leave RELIABILITY.md alone
#
# One JSON line per trial goes to target/chaos/results.jsonl; progress goes to stderr. The
# script fails when any trial found an orphan or a wrong prune, or did not converge.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CRASH=100
FAULT=30
SEED=""
RECORD=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --crash) CRASH=$2; shift 2 ;;
    --fault) FAULT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --no-record) RECORD=0; shift ;;
    -h | --help) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    *) printf 'chaos.sh: unknown argument: %s\n' "$1" >&2; exit 2 ;;
  esac
done
[[ $CRASH =~ ^[0-9]+$ && $FAULT =~ ^[0-9]+$ ]] || { echo "chaos.sh: --crash and --fault take counts" >&2; exit 2; }
[[ -z $SEED ]] && SEED=$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ^ $(date +%s) ))

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
RESULTS=$TARGET/chaos/results.jsonl
mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"

printf '==> chaos: %s crash and %s fault trials, seed %s (results: %s)\n' "$CRASH" "$FAULT" "$SEED" "$RESULTS" >&2
status=0
DRIFTLESS_CHAOS_CRASH_TRIALS=$CRASH DRIFTLESS_CHAOS_FAULT_TRIALS=$FAULT DRIFTLESS_CHAOS_SEED=$SEED \
  DRIFTLESS_CHAOS_RESULTS=$RESULTS \
  cargo test --test e2e chaos::killed_and_faulted -- --nocapture >&2 || status=$?

# The summary: one row per kind, then per scenario and per fault.
summary=$(jq -rs '
  def row(name): "| \(name) | \(length) | \(map(.orphans | length) | add // 0) | \(map(.wrongPrunes | length) | add // 0) | \(map(select(.converged)) | length) / \(length) | \(map(select(.midStep)) | length) |";
  "| trials | run | orphans | wrong prunes | converged | hit mid-step |",
  "| --- | ---: | ---: | ---: | ---: | ---: |",
  (group_by(.kind)[] | row(.[0].kind)),
  (map(select(.kind == "crash")) | group_by(.scenario)[] | row("crash: \(.[0].scenario)")),
  (map(select(.kind == "fault")) | group_by(.fault)[] | row("fault: \(.[0].fault) (\(map(.scenario) | unique | join(", ")))"))
' "$RESULTS")
printf '%s\n' "$summary"

if ((RECORD)); then
  commit=$(git rev-parse --short HEAD)
  ran=$(wc -l <"$RESULTS")
  section=$(printf '%s\n' \
    "<!-- chaos:begin (hack/chaos.sh rewrites this section) -->" \
    "Last run: \`hack/chaos.sh --crash $CRASH --fault $FAULT --seed $SEED\` at commit \`$commit\`," \
    "$ran trials recorded, on $(nproc) cores shared with other work." \
    "" \
    "$summary" \
    "<!-- chaos:end -->")
  SECTION=$section python3 - RELIABILITY.md <<'PY'
import os, re, sys
path = sys.argv[1]
text = open(path).read()
new = os.environ["SECTION"]
pattern = re.compile(r"<!-- chaos:begin.*?<!-- chaos:end -->", re.S)
if not pattern.search(text):
    sys.exit("RELIABILITY.md has no chaos:begin/chaos:end section")
open(path, "w").write(pattern.sub(lambda _: new, text))
PY
  printf '==> RELIABILITY.md updated\n' >&2
fi
exit "$status"
