#!/usr/bin/env bash
# The agent's memory over one run (issue #9): a git repository of N generated apps, already
# applied under the source "scale-all" in a running kwok cluster (e.g. `SCALE_CLUSTER=mem
# SCALE_SETUP_ONLY=1 hack/scale.sh --only agent --min 1000 --max 1000`); the agent starts with a
# drift check every 20 s, and we record its VmRSS / VmHWM at: first deploy, drift check #1 (from
# the watch cache), one commit changing app 7, drift check #2. Then SIGTERM.
#
#   hack/agent-heap.sh BIN LABEL [plain|heaptrack]
#
# BIN: a driftless binary (for heaptrack, one built with `--features system-alloc`: mimalloc
# never calls malloc). Environment: N (apps, default 1000), CLUSTER (default mem), LOADGEN (a
# driftless-loadgen binary, default next to BIN), OUT_ROOT (default /tmp/driftless-heap).
# Output: $OUT_ROOT/LABEL/{summary,agent.log,heap.zst}; peak stacks for grouping with
#   heaptrack_print -f heap.zst -F peak.folded --flamegraph-cost-type peak
set -euo pipefail

# The plan pages' bearer token (server.apiToken of the agent configs below).
export DRIFTLESS_API_TOKEN=${DRIFTLESS_API_TOKEN:-local-plan-page-token-$$-$RANDOM}
BIN=$1; LABEL=$2; MODE=${3:-plain}; N=${N:-1000}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOADGEN=${LOADGEN:-$(dirname "$BIN")/driftless-loadgen}
OUT=${OUT_ROOT:-/tmp/driftless-heap}/$LABEL
mkdir -p "$OUT"
KC=$("$ROOT/hack/cluster.sh" status --name "${CLUSTER:-mem}" | tail -n 1)
tree=$OUT/repo-$N
git_() { git -C "$tree" -c user.name=heap -c user.email=heap@example.invalid "$@"; }
rm -rf "$tree" "$OUT/cache"
"$LOADGEN" --apps "$N" --out "$tree" --namespaces 10 >/dev/null 2>&1
git init -q -b main "$tree"
git_ add -A
git_ commit -qm "$N apps"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$OUT/agent.yaml" <<YAML
sources:
  - name: scale-all
    url: file://$tree
    pollInterval: 1s
clusters:
  - name: local
    kubeconfig: $KC
drift: { schedule: '*/20 * * * * *', mode: report }
server:
  listen: 127.0.0.1:$PORT
  apiToken: { env: DRIFTLESS_API_TOKEN }
qps: 50
burst: 100
cacheDir: $OUT/cache
YAML
LOG=$OUT/agent.log
case $MODE in
  heaptrack) RUST_LOG=info,agent::agent_loop=debug heaptrack -o "$OUT/heap" "$BIN" agent --config "$OUT/agent.yaml" --log-format text >"$LOG" 2>&1 & ;;
  plain) RUST_LOG=info,agent::agent_loop=debug "$BIN" agent --config "$OUT/agent.yaml" --log-format text >"$LOG" 2>&1 & ;;
  *) echo "agent-heap.sh: unknown mode $MODE" >&2; exit 2 ;;
esac
WRAP=$!
# The driftless process itself (under heaptrack, a child of its script): the process named as
# BIN (a comm name is cut to 15 characters).
COMM=$(basename "$BIN" | cut -c1-15)
PID=""
for _ in $(seq 600); do
  for p in $(pgrep -f "agent --config $OUT/agent.yaml" || true); do
    [[ $(cat "/proc/$p/comm" 2>/dev/null) == "$COMM" ]] && PID=$p
  done
  [[ -n $PID ]] && break
  sleep 0.1
done
[[ -n $PID ]] || { echo "agent-heap.sh: the agent did not start (log: $LOG)" >&2; exit 1; }
: >"$OUT/summary"
mem() { awk '/^VmHWM:/ {h=int($2/1024)} /^VmRSS:/ {r=int($2/1024)} END {print "rss " r " MiB, hwm " h " MiB"}' "/proc/$PID/status"; }
wait_page() { # generous deadline: a loaded 2-core machine
  local deadline=$((SECONDS + 1800))
  until curl -sf -o /dev/null -H "Authorization: Bearer $DRIFTLESS_API_TOKEN" "http://127.0.0.1:$PORT/plans/$1"; do
    kill -0 "$PID" 2>/dev/null || { tail "$LOG" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "agent-heap.sh: no page for $1" >&2; exit 1; }
    sleep 0.1
  done
}
wait_drift() { # K: the K-th drift check's "live plan done" line
  local deadline=$((SECONDS + 1800))
  until (($(grep -c 'drift{.*live plan done' "$LOG") >= $1)); do
    ((SECONDS < deadline)) || { echo "agent-heap.sh: no drift check $1" >&2; exit 1; }
    sleep 0.2
  done
  sleep 1
  grep 'drift{.*live plan done' "$LOG" | sed -n "$1p" | grep -o 'wall_s=[^ ]*\|requests=[^ ]*\|from_cache=[^ ]*' | tr '\n' ' '
}
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }'; }
t0=$(date +%s.%N)
wait_page "$(git -C "$tree" rev-parse HEAD)"
echo "first deploy: $(since "$t0") s, $(mem)" | tee -a "$OUT/summary"
echo "drift check 1: $(wait_drift 1) $(mem)" | tee -a "$OUT/summary"
"$LOADGEN" --apps "$N" --out "$tree" --namespaces 10 --change 7 --generation 1 --only-changed 2>/dev/null
git_ commit -qam "app 7 generation 1"
t0=$(date +%s.%N)
wait_page "$(git -C "$tree" rev-parse HEAD)"
echo "commit -> page: $(since "$t0") s, $(mem)" | tee -a "$OUT/summary"
echo "drift check 2: $(wait_drift 2) $(mem)" | tee -a "$OUT/summary"
kill -TERM "$PID"
wait "$WRAP" || true
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)" | tee -a "$OUT/summary"
