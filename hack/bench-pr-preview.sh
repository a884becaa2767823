#!/usr/bin/env bash
# PR preview latency of `driftless agent` through the real Gitea (hack/gitea.sh) and a local
# cluster (hack/cluster.sh): from opening a pull request that changes one app of a repository of
# N generated apps (driftless-loadgen) to the agent's plan comment on it. Not a test: it prints
# figures for BENCHMARKS.md.
#
#   hack/bench-pr-preview.sh [N] [PRS]     # default 1,000 apps, 5 pull requests
#
# Setup (not measured): the N apps are pushed to a new Gitea repository and applied once under
# the agent's source identity (`driftless apply`, qps 1000), the agent starts (poll interval 1h,
# so only Gitea's signed webhooks wake it) and its first deploy of main finds them unchanged.
# Then, one after another, PRS pull requests each change one app (app 7, 14, ...: one line of
# its image) on a branch of their own. For each: the branch is pushed and recorded by Gitea, the
# pull request is opened through the API, and Gitea's comments are read every 50 ms until the
# agent's plan comment (the `driftless:plan` marker) naming the changed app is there. Two times
# per pull request: from the API call that opens it returning ("opened"), which includes Gitea's
# webhook delivery, and from the agent's log line for the webhook's arrival ("webhook"). The
# pull request is closed before the next one.
#
# Env: DRIFTLESS_BIN and LOADGEN_BIN (default: target/release, built with cargo), GITEA_NAME
# (default e2e, shared with the end-to-end tests), CLUSTER_NAME (default peers: a cluster of its
# own, stopped at the end unless KEEP_CLUSTER=1), DEADLINE (default 600 s), SOURCE (the agent's
# source identity, default a new one per run; with CLUSTER_NAME=scale and SOURCE=scale-all a
# cluster where hack/scale.sh applied the same N apps is reused, and the setup apply finds them
# unchanged instead of creating them). Needs jq.
set -euo pipefail

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
. "$HACK_DIR/lib.sh"
ROOT=$(cd "$HACK_DIR/.." && pwd)
N=${1:-1000}
PRS=${2:-5}
GITEA_NAME=${GITEA_NAME:-e2e}
CLUSTER_NAME=${CLUSTER_NAME:-peers}
NAMESPACES=10
WEBHOOK_SECRET=bench-webhook-secret
DEADLINE=${DEADLINE:-600} # seconds for the first deploy and for each comment

say() { printf '==> [pr-preview] %s\n' "$*" >&2; }
die() { printf 'bench-pr-preview.sh: error: %s\n' "$*" >&2; exit 1; }
require_tools jq curl git ss
[[ $N =~ ^[1-9][0-9]*$ ]] || die "N must be a positive number, not '$N'"
[[ $PRS =~ ^[1-9][0-9]*$ ]] || die "PRS must be a positive number, not '$PRS'"
((PRS * 7 <= N)) || die "PRS * 7 must not exceed N (the changed apps are 7, 14, ...)"

if [[ -z ${DRIFTLESS_BIN:-} || -z ${LOADGEN_BIN:-} ]]; then
  say "building the release binaries"
  (cd "$ROOT" && cargo build --release --quiet -p driftless -p loadgen --bin driftless --bin driftless-loadgen)
  DRIFTLESS_BIN=${DRIFTLESS_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/driftless}
  LOADGEN_BIN=${LOADGEN_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/driftless-loadgen}
fi
[[ -x $DRIFTLESS_BIN ]] || die "no driftless binary at $DRIFTLESS_BIN"
[[ -x $LOADGEN_BIN ]] || die "no driftless-loadgen binary at $LOADGEN_BIN"

mapfile -t gitea < <("$HACK_DIR/gitea.sh" up --name "$GITEA_NAME")
GITEA_URL=${gitea[0]}
TOKEN=$(cat "${gitea[1]}")
say "starting cluster $CLUSTER_NAME"
KUBECONFIG_PATH=$("$HACK_DIR/cluster.sh" up --name "$CLUSTER_NAME" | tail -n 1)
USER_NAME=driftless
WORK=$(mktemp -d)
AGENT_PID=
cleanup() {
  if [[ -n $AGENT_PID ]]; then
    kill -TERM "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
  fi
  if [[ ${KEEP_CLUSTER:-0} != 1 ]]; then
    "$HACK_DIR/cluster.sh" down --name "$CLUSTER_NAME" >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

api() { # METHOD PATH [JSON]
  local args=(-sS --fail -X "$1" -H "authorization: token $TOKEN" -H 'content-type: application/json')
  [[ $# -ge 3 ]] && args+=(-d "$3")
  curl "${args[@]}" "$GITEA_URL/api/v1$2"
}

wait_until() { # WHAT COMMAND...: runs COMMAND every 50 ms until it succeeds
  local what=$1 deadline=$((SECONDS + DEADLINE))
  shift
  until "$@"; do
    alive "$AGENT_PID" || { tail -n 20 "$WORK/agent.log" >&2; die "the agent exited"; }
    ((SECONDS < deadline)) || die "no $what within ${DEADLINE}s (agent log: $WORK/agent.log)"
    sleep 0.05
  done
}

run=$(date +%s%N | tail -c 9)
repo=preview-$N-$run
source=${SOURCE:-preview-$N-$run}
tree=$WORK/repo
push_url="http://$USER_NAME:$TOKEN@${GITEA_URL#http://}/$USER_NAME/$repo.git"

say "pushing $N generated apps to $USER_NAME/$repo"
api POST /user/repos "{\"name\":\"$repo\",\"default_branch\":\"main\"}" >/dev/null
"$LOADGEN_BIN" --apps "$N" --out "$tree" --namespaces "$NAMESPACES" >/dev/null 2>&1
git init -q -b main "$tree"
git -C "$tree" config user.name bench
git -C "$tree" config user.email bench@example.invalid
git -C "$tree" add -A
git -C "$tree" commit -qm "$N apps"
git -C "$tree" push -q "$push_url" HEAD:refs/heads/main 2>/dev/null

say "setup: applying the $N apps under source $source (qps 1000, not measured)"
"$DRIFTLESS_BIN" apply "$tree" --yes --kubeconfig "$KUBECONFIG_PATH" --qps 1000 --burst 2000 \
  --source "$source" --timeout-seconds 600 >/dev/null 2>"$WORK/setup.err" ||
  [[ $? == 2 ]] || { tail -n 20 "$WORK/setup.err" >&2; die "setup apply of $N apps failed"; }

pick_port ""
port=$PICKED_PORT
cat >"$WORK/agent.yaml" <<YAML
sources:
  - name: $source
    url: $GITEA_URL/$USER_NAME/$repo.git
    pollInterval: 1h
clusters:
  - name: local
    kubeconfig: $KUBECONFIG_PATH
forge: { kind: gitea, baseUrl: '$GITEA_URL', token: { env: BENCH_FORGE_TOKEN } }
server:
  listen: 127.0.0.1:$port
  webhookSecret: { env: BENCH_WEBHOOK_SECRET }
cacheDir: $WORK/cache
YAML
BENCH_FORGE_TOKEN=$TOKEN BENCH_WEBHOOK_SECRET=$WEBHOOK_SECRET RUST_LOG=info \
  "$DRIFTLESS_BIN" agent --config "$WORK/agent.yaml" --log-format json >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
api POST "/repos/$USER_NAME/$repo/hooks" "{\"type\":\"gitea\",\"active\":true,\"events\":[\"push\",\"pull_request\"],\"config\":{\"url\":\"http://127.0.0.1:$port/webhooks/gitea\",\"content_type\":\"json\",\"secret\":\"$WEBHOOK_SECRET\"}}" >/dev/null

# summary_done SHA: Gitea shows the `driftless` summary status on SHA as final.
summary_done() {
  api GET "/repos/$USER_NAME/$repo/commits/$1/statuses?limit=50" 2>/dev/null |
    jq -e '[.[] | select(.context == "driftless")] | max_by(.id) | . != null and .status != "pending"' >/dev/null
}
say "waiting for the agent's first deploy of the $N apps"
t0=$(date +%s%N)
wait_until "first deploy" summary_done "$(git -C "$tree" rev-parse HEAD)"
say "first deploy: $(awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.1f", ns / 1e9 }') s"

branch_recorded() { api GET "/repos/$USER_NAME/$repo/branches/$1" >/dev/null 2>&1; }
# plan_comment PR APP: the agent's plan comment on PR names APP.
plan_comment() {
  api GET "/repos/$USER_NAME/$repo/issues/$1/comments" 2>/dev/null |
    jq -e --arg marker "<!-- driftless:plan source=$source -->" --arg app "$2" \
      'any(.[]; (.body | startswith($marker)) and (.body | contains($app)))' >/dev/null
}
# pr_webhooks: the times (ns since the epoch) of the agent's "webhook: polling now" log lines for
# pull_request events so far, one a line.
pr_webhooks() {
  { grep 'webhook: polling now' "$WORK/agent.log" || true; } |
    jq -r 'select(.fields.event == "pull_request") | .timestamp' |
    while read -r stamp; do date -d "$stamp" +%s%N; done
}

opened=()
arrived=()
for ((i = 1; i <= PRS; i++)); do
  app=$((i * 7))
  branch=change-$app
  git -C "$tree" checkout -q -b "$branch" main
  "$LOADGEN_BIN" --apps "$N" --out "$tree" --namespaces "$NAMESPACES" --change "$app" \
    --generation "$i" --only-changed >/dev/null 2>&1
  git -C "$tree" commit -qam "change app $app"
  git -C "$tree" push -q "$push_url" "HEAD:refs/heads/$branch" 2>/dev/null
  wait_until "branch $branch in Gitea" branch_recorded "$branch"
  # The push of the branch wakes the agent too: let that poll finish before timing the PR.
  sleep 3
  changed=$(git -C "$tree" diff --name-only main "$branch" | head -n 1)
  app_name=$(basename "$changed" .yaml)
  before=$(pr_webhooks | wc -l)
  pr=$(api POST "/repos/$USER_NAME/$repo/pulls" \
    "{\"head\":\"$branch\",\"base\":\"main\",\"title\":\"change app $app\"}" | jq -r .number)
  t_open=$(date +%s%N)
  wait_until "plan comment on PR #$pr" plan_comment "$pr" "$app_name"
  t_comment=$(date +%s%N)
  t_hook=$(pr_webhooks | sed -n "$((before + 1))p")
  [[ -n $t_hook ]] || die "no pull_request webhook logged by the agent for PR #$pr"
  opened+=("$(awk -v ns=$((t_comment - t_open)) 'BEGIN { printf "%.3f", ns / 1e9 }')")
  arrived+=("$(awk -v ns=$((t_comment - t_hook)) 'BEGIN { printf "%.3f", ns / 1e9 }')")
  say "PR #$pr ($app_name): opened → comment ${opened[-1]} s, webhook → comment ${arrived[-1]} s"
  api PATCH "/repos/$USER_NAME/$repo/pulls/$pr" '{"state":"closed"}' >/dev/null
  git -C "$tree" checkout -q main
done

latency_summary() { # NAME < seconds, one a line
  sort -n | awk -v name="$1" '{ v[NR] = $1 }
    END { printf "%s: n=%d  min %.2f s  median %.2f s  max %.2f s\n", name, NR, v[1], v[int((NR + 1) / 2)], v[NR] }'
}
printf 'PR preview latency, one changed app among %s (%s pull requests; agent %s)\n' "$N" "$PRS" "$DRIFTLESS_BIN"
printf '%s\n' "${opened[@]}" | latency_summary "PR opened → plan comment"
printf '%s\n' "${arrived[@]}" | latency_summary "webhook at the agent → plan comment"
printf 'machine: %s cores, load average %s; %s\n' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(date -u +%Y-%m-%dT%H:%MZ)"
