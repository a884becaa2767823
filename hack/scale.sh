#!/usr/bin/env bash
# Scale benchmarks of the real release binary over generated repositories (issue #9): render,
# analyze, live plan (cold and warm), apply, and the agent's commit-to-status time, each with its
# wall time and peak RSS. Prints one table (markdown) on stdout; progress goes to stderr.
#
#   hack/scale.sh                      # everything: 1 / 1k / 10k apps, cluster "scale"
#   hack/scale.sh --max 1000           # iterate quickly: stop at 1,000 apps
#   hack/scale.sh --min 10000          # only the sizes from 10,000 on (live/agent: the 1,000-app
#                                      # runs share the 10k runs' source and would prune the rest)
#   hack/scale.sh --only render        # one group: render | analyze | live | agent | drift
#   hack/scale.sh --vela               # also the side-by-side with `vela dry-run` (hack/vela-compare.sh)
#
# Environment: CARGO_TARGET_DIR (default target), SCALE_BIN_DIR (use the binaries there and
# build nothing), SCALE_WORK (generated repos, default /tmp/driftless-scale), SCALE_QPS / SCALE_BURST (the client budget of plan/apply/agent, default
# 50 / 100), SCALE_SETUP_QPS / SCALE_SETUP_BURST (setup applies: 1000 / 2000), SCALE_CLUSTER
# (kwok cluster name, default "scale": not the e2e tests' cluster), SCALE_SKIP_SETUP=1 (drift
# group: the apps are already applied under its source; skip the setup apply),
# SCALE_SETUP_ONLY=1 (agent and drift groups: only the setup apply, e.g. started early in the
# background at 10k; a later run with SCALE_SKIP_SETUP=1 measures).
#
# The live groups start (or reuse) a local kwok cluster with hack/cluster.sh and leave it running;
# stop it with `hack/cluster.sh down --name scale`. Generated apps use replicas 0 (as KubeVela's
# load test does), so kwok runs no pods: the apiserver and etcd hold ~3.5 objects per app plus a
# ReplicaSet per Deployment and a tracker ConfigMap per app.
set -euo pipefail

# The plan pages' bearer token (server.apiToken of the agent configs below).
export DRIFTLESS_API_TOKEN=${DRIFTLESS_API_TOKEN:-local-plan-page-token-$$-$RANDOM}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

MAX=10000
MIN=1
ONLY=""
VELA=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --max) MAX=$2; shift 2 ;;
    --min) MIN=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --vela) VELA=1; shift ;;
    -h|--help) sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

WORK=${SCALE_WORK:-/tmp/driftless-scale}
QPS=${SCALE_QPS:-50}
BURST=${SCALE_BURST:-100}
SETUP_QPS=${SCALE_SETUP_QPS:-1000}
SETUP_BURST=${SCALE_SETUP_BURST:-2000}
CLUSTER=${SCALE_CLUSTER:-scale}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
NAMESPACES=10

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'scale.sh: error: %s\n' "$*" >&2; exit 1; }
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

if [[ -n ${SCALE_BIN_DIR:-} ]]; then
  TARGET=$(dirname "$SCALE_BIN_DIR") # binaries built elsewhere (e.g. from a clean worktree)
else
  say "building the release binaries (driftless, driftless-loadgen) into $TARGET"
  cargo build --release --quiet -p driftless -p loadgen --bin driftless --bin driftless-loadgen >&2
fi
DRIFTLESS=${SCALE_BIN_DIR:-$TARGET/release}/driftless
LOADGEN=${SCALE_BIN_DIR:-$TARGET/release}/driftless-loadgen
mkdir -p "$WORK"

# repo N: a generated repository of N apps (regenerated each run: generation is fast and it must
# not carry edits from an earlier run).
repo() {
  local n=$1 dir=$WORK/repo-$1
  rm -rf "$dir"
  "$LOADGEN" --apps "$n" --out "$dir" --namespaces "$NAMESPACES" >/dev/null 2>&1
  printf '%s\n' "$dir"
}

# measure LABEL CMD...: runs CMD with stdout discarded, records wall time and peak RSS (GNU time)
# and prints one table row. Exit codes 0 and 2 (plan: changes) count as success.
ROWS=()
measure() {
  local label=$1; shift
  local out=$WORK/time.out status=0
  /usr/bin/time -f '%e %M' -o "$out" "$@" >/dev/null 2>"$WORK/last.err" || status=$?
  if [[ $status -ne 0 && $status -ne 2 ]]; then
    tail -n 20 "$WORK/last.err" >&2
    die "$label: exit status $status (command: $*)"
  fi
  local wall rss
  read -r wall rss < <(tail -n 1 "$out")
  local row
  row=$(printf '| %s | %s s | %s MiB |' "$label" "$wall" "$((rss / 1024))")
  ROWS+=("$row")
  # Each row's stderr is kept (with -v: requests and the memory of each phase).
  cp "$WORK/last.err" "$WORK/row-${#ROWS[@]}.err"
  say "$row"
}

table() {
  printf '\n| what | wall | peak RSS |\n|---|---|---|\n'
  printf '%s\n' "${ROWS[@]}"
  printf '\nmachine: %s cores, load average at the end: %s; %s\n' "$(nproc)" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
}
trap 'table' EXIT

sizes=()
for n in 1 100 1000 10000; do ((n >= MIN && n <= MAX)) && sizes+=("$n"); done

if want render; then
  for n in "${sizes[@]}"; do
    [[ $n == 100 ]] && continue
    dir=$(repo "$n")
    measure "render $n apps (\`driftless render -o json\`)" "$DRIFTLESS" render "$dir" -o json
  done
fi

if want analyze; then
  n=${sizes[-1]}
  dir=$(repo "$n")
  measure "analyze $n apps (\`driftless analyze -o json\`)" "$DRIFTLESS" analyze "$dir" -o json
fi

# ---- live: plan and apply against the kwok cluster ---------------------------------------------

KUBECONFIG_FILE=""
cluster_up() {
  [[ -n $KUBECONFIG_FILE ]] && return 0
  say "starting (or reusing) kwok cluster $CLUSTER"
  KUBECONFIG_FILE=$(hack/cluster.sh up --name "$CLUSTER" | tail -n 1)
  local ns server
  server=$(sed -n 's/^ *server: //p' "$KUBECONFIG_FILE" | head -n 1)
  local pki
  pki=$(dirname "$KUBECONFIG_FILE")/pki
  # The apps' namespaces and the tracker namespace: apply does not create namespaces it does not
  # render. 409 (already there) is fine.
  for ns in $("$LOADGEN" --apps "$MAX" --out /dev/null --namespaces "$NAMESPACES" --print-namespaces) driftless-system; do
    curl -sS -o /dev/null --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      -H 'Content-Type: application/json' -X POST "$server/api/v1/namespaces" \
      -d "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
  done
}

live_args() { # SOURCE [QPS BURST]
  printf '%s\n' -v --kubeconfig "$KUBECONFIG_FILE" --qps "${2:-$QPS}" --burst "${3:-$BURST}" --source "scale-$1" --timeout-seconds 120
}

# note_requests: adds to the last row the apiserver requests its command made (plan and apply
# log them with -v), so a row shows whether it was within the QPS budget (requests / qps).
note_requests() {
  local n
  n=$(grep -o 'requests=[0-9]*' "$WORK/last.err" | tail -n 1 | cut -d= -f2)
  [[ -n $n ]] || return 0
  ROWS[-1]=$(sed "s/^| \([^|]*\) |/| \1, $n requests |/" <<<"${ROWS[-1]}")
  say "${ROWS[-1]}"
}

if want live; then
  cluster_up
  for n in 1000 10000; do
    ((n >= MIN && n <= MAX)) || continue
    dir=$(repo "$n")
    # One source identity per size, so the 10k apply does not prune what the 1k one applied
    # (it re-applies apps 0-999 unchanged and creates the other 9,000). The 10k setup runs at
    # SETUP_QPS: at qps 50 its ~50,000 requests alone are ~17 minutes of budget; the 1k apply
    # is the row that shows the budget holds.
    if [[ $n == 1000 ]]; then
      mapfile -t args < <(live_args all)
      label="apply 1000 apps (new: 1000, qps $QPS burst $BURST)"
    else
      mapfile -t args < <(live_args all "$SETUP_QPS" "$SETUP_BURST")
      label="apply $n apps (new: $((n - 1000)), setup at qps $SETUP_QPS)"
    fi
    measure "$label" "$DRIFTLESS" apply "$dir" --yes "${args[@]}"
    note_requests
    mapfile -t args < <(live_args all)
    measure "plan $n unchanged apps, cold (1st run after the apply, qps $QPS)" "$DRIFTLESS" plan "$dir" -o json "${args[@]}"
    note_requests
    measure "plan $n unchanged apps, warm (2nd run)" "$DRIFTLESS" plan "$dir" -o json "${args[@]}"
    note_requests
    "$LOADGEN" --apps "$n" --out "$dir" --namespaces "$NAMESPACES" --change 7 --generation 1 --only-changed 2>/dev/null
    measure "plan $n apps, 1 changed" "$DRIFTLESS" plan "$dir" -o json "${args[@]}"
    note_requests
  done
fi

# ---- agent: commit to status for one changed app ---------------------------------------------
#
# The agent's poll path against a local git repository (file://, polled every second; no forge,
# so "status" is the deploy's result page /plans/<commit>, stored when the per-app statuses are
# sent). Before each size the same apps are applied by `driftless apply` under the agent's source
# identity at a high client budget (SCALE_SETUP_QPS / SCALE_SETUP_BURST, default 1000 / 2000: that
# setup is not a figure), so the agent's first deploy finds them unchanged. Then app 7 changes,
# one commit at a time, and we time commit → result page, and read from /metrics how many apps
# that commit rendered and planned. Sizes: 100, 1,000 and 10,000 (up to --max): the cost must
# not grow with the apps that did not change.

# shellcheck source=hack/lib.sh
. "$ROOT/hack/lib.sh"

SETUP_QPS=${SCALE_SETUP_QPS:-1000}
SETUP_BURST=${SCALE_SETUP_BURST:-2000}
AGENT_PID=""
stop_agent() {
  if [[ -n $AGENT_PID ]]; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
    AGENT_PID=""
  fi
}

# wait_page PORT COMMIT: polls the agent's result page of COMMIT (generous deadline: a loaded
# 2-core machine rendering 10,000 apps).
wait_page() {
  local deadline=$((SECONDS + 1800))
  until curl -sf -o /dev/null -H "Authorization: Bearer $DRIFTLESS_API_TOKEN" "http://127.0.0.1:$1/plans/$2"; do
    alive "$AGENT_PID" || { tail -n 20 "$AGENT_LOG" >&2; die "the agent exited"; }
    ((SECONDS < deadline)) || die "no result page for $2 within 1800 s (log: $AGENT_LOG)"
    sleep 0.05
  done
}

ms_since() { awk -v s="$1" -v e="$(date +%s%N)" 'BEGIN { printf "%.2f", (e - s) / 1e9 }'; }

# counter PORT NAME: the value of an agent counter (one source).
counter() { curl -sf "http://127.0.0.1:$1/metrics" | awk -v n="$2{" 'index($0, n) == 1 { print $NF }'; }

# A git work tree of N generated apps at TREE (made anew), committed on main.
agent_repo() { # N TREE
  local n=$1 tree=$2
  rm -rf "$tree"
  "$LOADGEN" --apps "$n" --out "$tree" --namespaces "$NAMESPACES" >/dev/null 2>&1
  git init -q -b main "$tree"
  git -C "$tree" -c user.name=scale -c user.email=scale@example.invalid add -A
  git -C "$tree" -c user.name=scale -c user.email=scale@example.invalid commit -qm "$n apps"
}

# Applies the N apps of TREE under SOURCE before a measurement (exit 2 = applied with findings).
setup_apply() { # N TREE SOURCE
  local n=$1 tree=$2 source=$3
  say "setup: applying the $n apps under source $source (qps $SETUP_QPS, not measured)"
  "$DRIFTLESS" apply "$tree" --yes --kubeconfig "$KUBECONFIG_FILE" --qps "$SETUP_QPS" \
    --burst "$SETUP_BURST" --source "$source" --timeout-seconds 600 >/dev/null 2>"$WORK/setup.err" ||
    [[ $? == 2 ]] || { tail -n 20 "$WORK/setup.err" >&2; die "setup apply of $n apps failed"; }
}

# start_agent NAME N TREE SOURCE EXTRA: runs the agent over TREE (one source, the local
# cluster, a fresh cache dir; EXTRA: more top-level YAML, e.g. a drift schedule) on a free port.
# Sets AGENT_PID, AGENT_PORT and AGENT_LOG ($WORK/NAME-N.log).
AGENT_LOG=$WORK/agent.log
start_agent() { # NAME N TREE SOURCE EXTRA
  local name=$1 n=$2 tree=$3 source=$4 extra=$5
  pick_port ""
  AGENT_PORT=$PICKED_PORT
  AGENT_LOG=$WORK/$name-$n.log
  cat >"$WORK/$name-$n.yaml" <<YAML
sources:
  - name: $source
    url: file://$tree
    pollInterval: 1s
clusters:
  - name: local
    kubeconfig: $KUBECONFIG_FILE
$extra
server:
  listen: 127.0.0.1:$AGENT_PORT
  apiToken: { env: DRIFTLESS_API_TOKEN }
qps: $QPS
burst: $BURST
cacheDir: $WORK/$name-cache-$n
YAML
  rm -rf "$WORK/$name-cache-$n"
  # agent_loop's debug lines: the resident memory after each phase (memory_by_phase).
  RUST_LOG=info,agent::agent_loop=debug "$DRIFTLESS" agent --config "$WORK/$name-$n.yaml" --log-format text >"$AGENT_LOG" 2>&1 &
  AGENT_PID=$!
}

# memory_by_phase SPAN: the agent's peak resident memory (VmHWM) at the end of each phase of its
# first SPAN (deploy or drift) as "phase peak, ...": the phase where it grows sets the peak.
memory_by_phase() {
  grep "$1{" "$AGENT_LOG" | grep ' memory ' | awk '
    { phase = $0; sub(/.*phase="/, "", phase); sub(/".*/, "", phase)
      peak = $0; sub(/.*peak_mib=/, "", peak); sub(/ .*/, "", peak)
      if (seen[phase]++) exit
      out = out (out == "" ? "" : ", ") phase " " peak }
    END { print out }'
}

# The repository of N generated apps in TREE, applied under SOURCE first unless
# SCALE_SKIP_SETUP=1 says a previous run did it.
prepare_run() { # N TREE SOURCE
  agent_repo "$1" "$2"
  if [[ ${SCALE_SKIP_SETUP:-0} == 1 ]]; then
    say "setup skipped (SCALE_SKIP_SETUP=1): the $1 apps must already be applied under $3"
  else
    setup_apply "$1" "$2" "$3"
  fi
}

# True (and says so) when SCALE_SETUP_ONLY=1 asked for the setup apply alone.
setup_only() { # N SOURCE
  [[ ${SCALE_SETUP_ONLY:-0} == 1 ]] || return 1
  say "SCALE_SETUP_ONLY=1: the $1 apps are applied under $2; no agent started"
}

agent_run() { # N SOURCE
  local n=$1 source=$2 tree=$WORK/agent-repo-$1 port t0 sha first gen rendered planned
  prepare_run "$n" "$tree" "$source"
  if setup_only "$n" "$source"; then return 0; fi
  start_agent agent "$n" "$tree" "$source" ""
  port=$AGENT_PORT
  t0=$(date +%s%N)
  wait_page "$port" "$(git -C "$tree" rev-parse HEAD)"
  first=$(ms_since "$t0")
  ROWS+=("| agent, $n apps: start to first deploy (all unchanged, all planned) | $first s | $(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$AGENT_PID/status") MiB |")
  say "${ROWS[-1]}"
  ROWS+=("| agent, $n apps: first deploy, peak after each phase (MiB) | | $(memory_by_phase deploy) |")
  say "${ROWS[-1]}"
  for gen in 1 2 3; do
    rendered=$(counter "$port" driftless_apps_rendered_total)
    planned=$(counter "$port" driftless_apps_planned_total)
    "$LOADGEN" --apps "$n" --out "$tree" --namespaces "$NAMESPACES" --change 7 --generation "$gen" --only-changed 2>/dev/null
    git -C "$tree" -c user.name=scale -c user.email=scale@example.invalid commit -qam "app 7 generation $gen"
    sha=$(git -C "$tree" rev-parse HEAD)
    t0=$(date +%s%N)
    wait_page "$port" "$sha"
    local wall
    wall=$(ms_since "$t0")
    rendered=$(($(counter "$port" driftless_apps_rendered_total) - rendered))
    planned=$(($(counter "$port" driftless_apps_planned_total) - planned))
    ROWS+=("| agent, $n apps: commit → result page, 1 app changed (#$gen; poll interval 1 s; rendered $rendered, planned $planned) | $wall s | $(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$AGENT_PID/status") MiB (agent peak so far) |")
    say "${ROWS[-1]}"
  done
  stop_agent
}

# ---- drift: the agent's plan of every app from its watch cache ---------------------------------
#
# The agent as above (same setup apply), with a drift check every 20 s (mode report): each one
# plans every app against the cluster. Its first deploy starts the watches (and LISTs, as
# without a cache); the checks that follow read the live objects and trackers from the watch
# cache. Rows: each of the first three checks, from the agent's "live plan done" log line
# (requests, objects taken from the cache, wall and CPU of the live plan), the whole plan's
# wall (driftless_plan_duration_seconds), and the agent's resident memory then and at its peak.
drift_run() { # N SOURCE
  local n=$1 source=$2 tree=$WORK/drift-repo-$1 port t0 first k line count deadline
  prepare_run "$n" "$tree" "$source"
  if setup_only "$n" "$source"; then return 0; fi
  start_agent drift "$n" "$tree" "$source" "drift: { schedule: '*/20 * * * * *', mode: report }"
  port=$AGENT_PORT
  t0=$(date +%s%N)
  wait_page "$port" "$(git -C "$tree" rev-parse HEAD)"
  first=$(ms_since "$t0")
  ROWS+=("| agent with watch cache, $n apps: start to first deploy (watches started, LISTs) | $first s | $(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$AGENT_PID/status") MiB |")
  say "${ROWS[-1]}"
  ROWS+=("| agent with watch cache, $n apps: first deploy, peak after each phase (MiB) | | $(memory_by_phase deploy) |")
  say "${ROWS[-1]}"
  local sum0 count0
  sum0=$(counter "$port" driftless_plan_duration_seconds_sum)
  count0=$(counter "$port" driftless_plan_duration_seconds_count)
  deadline=$((SECONDS + 900))
  for k in 1 2 3; do
    until count=$(grep -c 'drift{.*live plan done' "$AGENT_LOG"); ((count >= k)); do
      alive "$AGENT_PID" || { tail -n 20 "$AGENT_LOG" >&2; die "the agent exited"; }
      ((SECONDS < deadline)) || die "no drift check $k within 900 s (log: $WORK/drift-$n.log)"
      sleep 0.2
    done
    line=$(grep 'drift{.*live plan done' "$AGENT_LOG" | sed -n "${k}p")
    field() { grep -o "$1=[^ ]*" <<<"$line" | head -n 1 | cut -d= -f2; }
    seconds() { field "$1" | tr -d 'Some()' | awk '{ printf "%.2f", $1 }'; }
    ROWS+=("| agent with watch cache, $n apps: drift check #$k, live plan (requests $(field requests), from cache $(field from_cache) objects, CPU $(seconds cpu_s) s) | $(seconds wall_s) s | $(awk '/^VmRSS:/ { print int($2 / 1024) }' "/proc/$AGENT_PID/status") MiB resident, $(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$AGENT_PID/status") MiB peak |")
    say "${ROWS[-1]}"
  done
  ROWS+=("| agent with watch cache, $n apps: drift check #1, peak after each phase (MiB) | | $(memory_by_phase drift) |")
  say "${ROWS[-1]}"
  local sum1 count1
  sum1=$(counter "$port" driftless_plan_duration_seconds_sum)
  count1=$(counter "$port" driftless_plan_duration_seconds_count)
  ROWS+=("| agent with watch cache, $n apps: whole drift-check plan, mean of $((count1 - count0)) (driftless_plan_duration_seconds) | $(awk -v a="$sum0" -v b="$sum1" -v c="$((count1 - count0))" 'BEGIN { printf "%.2f", (b - a) / c }') s | |")
  say "${ROWS[-1]}"
  stop_agent
}

if want drift; then
  cluster_up
  trap 'stop_agent; table' EXIT
  for n in 1000 10000; do
    ((n >= MIN && n <= MAX)) || continue
    drift_run "$n" scale-all
  done
fi

if want agent; then
  cluster_up
  trap 'stop_agent; table' EXIT
  # 100 apps under their own source identity; the larger sizes under "scale-all", smallest
  # first: each setup apply prunes what that source applied beyond its size, as it should.
  for n in 100 1000 10000; do
    ((n >= MIN && n <= MAX)) || continue
    if [[ $n == 100 ]]; then agent_run 100 scale-100; else agent_run "$n" scale-all; fi
  done
fi

if ((VELA)); then
  hack/vela-compare.sh >&2
fi
