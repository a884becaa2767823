#!/usr/bin/env bash
# Push-to-status latency of `driftless agent`, on the webhook path and on the poll path, against
# the real Gitea (hack/gitea.sh) and the local cluster (hack/cluster.sh). Not a test: it prints
# figures for BENCHMARKS.md.
#
#   hack/bench-agent-latency.sh [PUSHES]   # default 5 pushes per path
#
# For each path it creates a Gitea repository holding one ConfigMap app (namespace `default`,
# name `bench-<run>-settings`), starts the agent, waits for the first deploy, then pushes PUSHES
# commits one after another. The latency of a push is from `git push` returning to Gitea
# reporting the summary status `driftless` as success on that commit, read by polling Gitea's
# API every 50 ms (so figures are up to ~50 ms high). Webhook path: poll interval 1h, Gitea
# delivers signed push webhooks. Poll path: no webhook, poll interval POLL_INTERVAL (default 10s),
# so about half an interval is expected on top of the work.
#
# Env: DRIFTLESS_BIN (default: build the debug binary with cargo), POLL_INTERVAL, GITEA_NAME and
# CLUSTER_NAME (default e2e, shared with the end-to-end tests). Needs jq.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
. "$HACK_DIR/lib.sh"
ROOT=$(cd "$HACK_DIR/.." && pwd)
PUSHES=${1:-5}
POLL_INTERVAL=${POLL_INTERVAL:-10s}
GITEA_NAME=${GITEA_NAME:-e2e}
CLUSTER_NAME=${CLUSTER_NAME:-e2e}
WEBHOOK_SECRET=bench-webhook-secret
STATUS_TIMEOUT=120 # seconds per push

say() { printf '==> [bench] %s\n' "$*" >&2; }
die() { printf 'bench-agent-latency.sh: error: %s\n' "$*" >&2; exit 1; }
require_tools jq curl git ss
[[ $PUSHES =~ ^[1-9][0-9]*$ ]] || die "PUSHES must be a positive number, not '$PUSHES'"

if [[ -z ${DRIFTLESS_BIN:-} ]]; then
  say "building driftless (debug)"
  (cd "$ROOT" && cargo build -q --bin driftless)
  DRIFTLESS_BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/driftless
fi
[[ -x $DRIFTLESS_BIN ]] || die "no driftless binary at $DRIFTLESS_BIN"

mapfile -t gitea < <("$HACK_DIR/gitea.sh" up --name "$GITEA_NAME")
GITEA_URL=${gitea[0]}
TOKEN=$(cat "${gitea[1]}")
KUBECONFIG_PATH=$("$HACK_DIR/cluster.sh" up --name "$CLUSTER_NAME" | tail -n 1)
USER_NAME=driftless
WORK=$(mktemp -d)
AGENT_PID=
cleanup() {
  if [[ -n $AGENT_PID ]]; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

api() { # METHOD PATH [JSON]
  local args=(-sS --fail -X "$1" -H "authorization: token $TOKEN" -H 'content-type: application/json')
  [[ $# -ge 3 ]] && args+=(-d "$3")
  curl "${args[@]}" "$GITEA_URL/api/v1$2"
}

app_yaml() { # NAME COLOR
  cat <<YAML
apiVersion: core.oam.dev/v1beta1
kind: Application
metadata:
  name: $1
  namespace: default
spec:
  components:
    - name: settings
      type: k8s-objects
      properties:
        objects:
          - apiVersion: v1
            kind: ConfigMap
            metadata:
              name: $1-settings
            data:
              color: "$2"
YAML
}

# summary_success REPO SHA: Gitea reports the `driftless` context as success on SHA.
summary_success() {
  api GET "/repos/$USER_NAME/$1/commits/$2/statuses?limit=50" 2>/dev/null |
    jq -e '[.[] | select(.context == "driftless")] | max_by(.id) | .status == "success"' >/dev/null
}

wait_success() { # REPO SHA
  local deadline=$((SECONDS + STATUS_TIMEOUT))
  until summary_success "$1" "$2"; do
    ((SECONDS < deadline)) || die "no success status on $2 within ${STATUS_TIMEOUT}s (agent log: $WORK/agent.log)"
    sleep 0.05
  done
}

run_path() { # webhook|poll; prints one latency in seconds per line
  local path=$1 run repo source port push_url tree interval secret_line i sha t0 t1
  run=$(date +%s%N | tail -c 9)
  repo=bench-$path-$run
  source=bench-$path-$run
  api POST /user/repos "{\"name\":\"$repo\",\"default_branch\":\"main\"}" >/dev/null
  push_url="http://$USER_NAME:$TOKEN@${GITEA_URL#http://}/$USER_NAME/$repo.git"
  tree=$WORK/$repo
  git init -q -b main "$tree"
  git -C "$tree" config user.name bench
  git -C "$tree" config user.email bench@example.invalid
  mkdir -p "$tree/apps"
  app_yaml "bench-$run" c0 >"$tree/apps/app.yaml"
  git -C "$tree" add -A
  git -C "$tree" commit -qm first
  git -C "$tree" push -q "$push_url" HEAD:refs/heads/main 2>/dev/null
  pick_port ""
  port=$PICKED_PORT
  interval=1h
  secret_line="  webhookSecret: { env: BENCH_WEBHOOK_SECRET }"
  if [[ $path == poll ]]; then
    interval=$POLL_INTERVAL
    secret_line=
  fi
  cat >"$WORK/$path.yaml" <<YAML
sources:
  - name: $source
    url: $GITEA_URL/$USER_NAME/$repo.git
    pollInterval: $interval
clusters:
  - name: local
    kubeconfig: $KUBECONFIG_PATH
forge: { kind: gitea, baseUrl: '$GITEA_URL', token: { env: BENCH_FORGE_TOKEN } }
server:
  listen: 127.0.0.1:$port
$secret_line
cacheDir: $WORK/cache-$path
YAML
  BENCH_FORGE_TOKEN=$TOKEN BENCH_WEBHOOK_SECRET=$WEBHOOK_SECRET RUST_LOG=info \
    "$DRIFTLESS_BIN" agent --config "$WORK/$path.yaml" --log-format text >>"$WORK/agent.log" 2>&1 &
  AGENT_PID=$!
  if [[ $path == webhook ]]; then
    api POST "/repos/$USER_NAME/$repo/hooks" "{\"type\":\"gitea\",\"active\":true,\"events\":[\"push\"],\"config\":{\"url\":\"http://127.0.0.1:$port/webhooks/gitea\",\"content_type\":\"json\",\"secret\":\"$WEBHOOK_SECRET\"}}" >/dev/null
  fi
  wait_success "$repo" "$(git -C "$tree" rev-parse HEAD)"
  say "$path: first deploy done; timing $PUSHES pushes"
  for ((i = 1; i <= PUSHES; i++)); do
    app_yaml "bench-$run" "c$i" >"$tree/apps/app.yaml"
    git -C "$tree" commit -qam "push $i"
    sha=$(git -C "$tree" rev-parse HEAD)
    git -C "$tree" push -q "$push_url" HEAD:refs/heads/main 2>/dev/null
    t0=$(date +%s%N)
    wait_success "$repo" "$sha"
    t1=$(date +%s%N)
    awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
  done
  kill -TERM "$AGENT_PID"
  wait "$AGENT_PID" || true
  AGENT_PID=
}

summary() { # NAME < latencies
  sort -n | awk -v name="$1" '{ v[NR] = $1; s += $1 }
    END { printf "%-8s n=%d  min %.2fs  median %.2fs  mean %.2fs  max %.2fs\n", name, NR, v[1], v[int((NR + 1) / 2)], s / NR, v[NR] }'
}

webhook=$(run_path webhook)
poll=$(run_path poll)
printf 'push-to-status latency (%s pushes per path; poll interval %s on the poll path)\n' "$PUSHES" "$POLL_INTERVAL"
summary webhook <<<"$webhook"
summary poll <<<"$poll"
