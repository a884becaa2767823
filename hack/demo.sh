#!/usr/bin/env bash
# The whole agent on one machine: two local clusters (`local` and `staging`), a local Gitea with
# examples/repo pushed as a repository and its webhook set, and `driftless agent` configured for
# all of it.
#
#   hack/demo.sh up     [--name NAME]  # start (or reuse) demo NAME; prints the URLs and what to try
#   hack/demo.sh down   [--name NAME]  # stop everything it started; verifies no process remains
#   hack/demo.sh status [--name NAME]  # exit 0 and print the demo's env file if the agent runs
#
# NAME defaults to "demo": clusters NAME-local and NAME-staging (hack/cluster.sh), Gitea NAME
# (hack/gitea.sh), state in ${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/demo/NAME/ (the agent's
# driftless.yaml, pid, log, and `env` with every URL and path for scripts). The agent binary is
# $DRIFTLESS_BIN when set (e.g. an already built target/debug/driftless), else built here with
# `cargo build --release`. Progress goes to stderr; stdout carries the summary.
set -euo pipefail

STOP_TIMEOUT=20 # seconds before SIGKILL
DEPLOY_TIMEOUT=${DRIFTLESS_DEMO_DEPLOY_TIMEOUT:-600} # seconds for the first deploy
REPO=examples
DEMO_USER=demo
DEMO_PASSWORD=driftless-demo

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HACK_DIR/.." && pwd)
# shellcheck source=hack/lib.sh
. "$HACK_DIR/lib.sh"
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}

say() { printf '==> [demo %s] %s\n' "$NAME" "$*" >&2; }
die() { printf 'demo.sh [%s]: error: %s\n' "${NAME:-?}" "$*" >&2; exit 1; }

usage() {
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

agent_alive() { recorded_alive "$DDIR/agent.pid" "$DDIR/agent.start"; }

# gitea_api METHOD PATH [JSON]: a call to Gitea's API as its admin; prints the response body.
# The token (a header file) and the body (stdin) never appear on a command line.
gitea_api() {
  local method=$1 path=$2 body=${3:-}
  local args=(-sS --fail-with-body --max-time 30 -X "$method" -H "@$DDIR/gitea-auth")
  if [[ -n $body ]]; then
    curl "${args[@]}" -H 'Content-Type: application/json' --data-binary @- "$GITEA_URL/api/v1$path" <<<"$body"
  else
    curl "${args[@]}" "$GITEA_URL/api/v1$path"
  fi
}

stop_agent() {
  local pid deadline
  pid=$(cat "$DDIR/agent.pid" 2>/dev/null || true)
  [[ -n $pid ]] || return 0
  if agent_alive; then
    signal_group TERM "$pid"
    deadline=$((SECONDS + STOP_TIMEOUT))
    while agent_alive && ((SECONDS < deadline)); do sleep 0.2; done
    if agent_alive; then
      say "agent still running after ${STOP_TIMEOUT}s, sending SIGKILL"
      signal_group KILL "$pid"
      sleep 1
    fi
  fi
  rm -f "$DDIR/agent.pid" "$DDIR/agent.start"
}

driftless_binary() {
  if [[ -n ${DRIFTLESS_BIN:-} ]]; then
    [[ -x $DRIFTLESS_BIN ]] || die "DRIFTLESS_BIN=$DRIFTLESS_BIN is not an executable"
    printf '%s\n' "$DRIFTLESS_BIN"
    return
  fi
  require_tools cargo
  say "building driftless (cargo build --release; minutes the first time)"
  (cd "$ROOT" && cargo build --release --locked --bin driftless >&2) || die "cargo build failed"
  printf '%s\n' "$ROOT/target/release/driftless"
}

# Pushes examples/repo as the first commit of a fresh repository DEMO_USER/REPO.
push_example() {
  local work
  if gitea_api GET "/repos/$DEMO_USER/$REPO" >/dev/null 2>&1; then
    say "replacing repository $DEMO_USER/$REPO"
    gitea_api DELETE "/repos/$DEMO_USER/$REPO" >/dev/null
  fi
  gitea_api POST "/admin/users/$DEMO_USER/repos" \
    "{\"name\":\"$REPO\",\"default_branch\":\"main\",\"description\":\"Driftless demo: examples/repo\"}" >/dev/null
  work=$(mktemp -d)
  cp -R "$ROOT/examples/repo/." "$work/"
  (
    cd "$work"
    git init -q -b main
    git -c user.name=demo -c user.email=demo@example.invalid add -A
    git -c user.name=demo -c user.email=demo@example.invalid commit -q -m "The Driftless example repository"
    # The credentials go through the environment of a helper, never a command line.
    GIT_TERMINAL_PROMPT=0 git -c credential.helper='!f() { echo username=demo; echo "password=$DEMO_PASSWORD"; }; f' \
      push -q "$GITEA_URL/$DEMO_USER/$REPO.git" HEAD:refs/heads/main
    git rev-parse HEAD >"$DDIR/first-commit"
  ) >&2 || { rm -rf "$work"; die "pushing examples/repo to Gitea failed"; }
  rm -rf "$work"
}

write_config() {
  cat >"$DDIR/driftless.yaml" <<YAML
# Written by hack/demo.sh: the agent of the demo, for the example repository in the local Gitea.
sources:
  - name: examples
    url: $GITEA_URL/$DEMO_USER/$REPO.git
    branch: main
    pollInterval: 30s
    credentials: { token: { file: $GITEA_TOKEN_FILE } }
clusters:
  - name: local
    kubeconfig: $LOCAL_KUBECONFIG
  - name: staging
    kubeconfig: $STAGING_KUBECONFIG
forge:
  kind: gitea
  baseUrl: $GITEA_URL
  token: { file: $GITEA_TOKEN_FILE }
# Every minute, so drift shows quickly.
drift:
  schedule: "* * * * *"
  mode: report
server:
  listen: 127.0.0.1:$AGENT_PORT
  externalUrl: http://127.0.0.1:$AGENT_PORT
  webhookSecret: { file: $DDIR/webhook-secret }
  apiToken: { file: $DDIR/api-token }
cacheDir: $DDIR/cache
YAML
}

# Waits until the summary status (`driftless`) of the pushed commit is final; prints it.
wait_for_first_deploy() {
  local sha state deadline=$((SECONDS + DEPLOY_TIMEOUT))
  sha=$(cat "$DDIR/first-commit")
  while :; do
    state=$(gitea_api GET "/repos/$DEMO_USER/$REPO/commits/$sha/statuses?limit=50" |
      jq -r '[.[] | select(.context == "driftless")] | sort_by(.id) | last | .status // ""')
    case $state in
      success | failure | error) printf '%s\n' "$state"; return ;;
    esac
    agent_alive || { tail -n 30 "$DDIR/agent.log" >&2; die "the agent exited"; }
    ((SECONDS < deadline)) || die "no final deploy status on $sha after ${DEPLOY_TIMEOUT}s (log: $DDIR/agent.log)"
    sleep 2
  done
}

write_env() {
  cat >"$DDIR/env" <<ENV
DEMO_REPO_URL=$GITEA_URL/$DEMO_USER/$REPO
DEMO_REPO=$DEMO_USER/$REPO
DEMO_USER=$DEMO_USER
DEMO_PASSWORD=$DEMO_PASSWORD
GITEA_URL=$GITEA_URL
GITEA_TOKEN_FILE=$GITEA_TOKEN_FILE
AGENT_URL=http://127.0.0.1:$AGENT_PORT
AGENT_PID=$(cat "$DDIR/agent.pid")
AGENT_LOG=$DDIR/agent.log
AGENT_CONFIG=$DDIR/driftless.yaml
LOCAL_KUBECONFIG=$LOCAL_KUBECONFIG
STAGING_KUBECONFIG=$STAGING_KUBECONFIG
ENV
}

print_summary() {
  # shellcheck disable=SC1091 # written by write_env
  . "$DDIR/env"
  local kubectl_edit
  if command -v kubectl >/dev/null 2>&1; then
    kubectl_edit="KUBECONFIG=$LOCAL_KUBECONFIG kubectl -n team-a edit deployment storefront-web   # change spec.replicas"
  else
    local server pki
    server=$(sed -n 's/^ *server: //p' "$LOCAL_KUBECONFIG" | head -n 1)
    pki=$(dirname "$LOCAL_KUBECONFIG")/pki
    kubectl_edit="curl --cacert $pki/ca.crt --cert $pki/admin.crt --key $pki/admin.key -X PATCH \\
          -H 'Content-Type: application/merge-patch+json' -d '{\"spec\":{\"replicas\":1}}' \\
          $server/apis/apps/v1/namespaces/team-a/deployments/storefront-web
       (kubectl is not installed; this is \`kubectl -n team-a edit deployment storefront-web\`)"
  fi
  cat <<TEXT

Driftless demo "$NAME" is up; the first deploy of main ended: $FIRST_DEPLOY.

  Gitea repository  $DEMO_REPO_URL   (log in as $DEMO_USER / $DEMO_PASSWORD)
  Agent             $AGENT_URL/healthz, $AGENT_URL/metrics, plan pages at $AGENT_URL/plans/<commit>
                    (they need the token: curl -H "Authorization: Bearer \$(cat $DDIR/api-token)" ...)
  Agent log         $AGENT_LOG
  Clusters          local:   $LOCAL_KUBECONFIG
                    staging: $STAGING_KUBECONFIG

Three things to try:

  1. Open a pull request that changes a replica count, and watch the plan comment appear on it:
       in Gitea, edit apps/team-a/storefront.yaml ($DEMO_REPO_URL/_edit/main/apps/team-a/storefront.yaml),
       change \`replicas: 3\` to \`replicas: 5\`, choose "Create a new branch ... and start a pull request".

  2. Merge it, and watch the statuses: each app's \`driftless/team-a/storefront\` ... and the summary
     \`driftless\` on the merge commit ($DEMO_REPO_URL/commits/branch/main), the plan behind them at
     $AGENT_URL/plans/<commit>.

  3. Change a Deployment behind the agent's back, and watch drift being reported within a minute
     (status \`driftless/drift\` on the deployed commit, \`driftless_app_drifted\` in $AGENT_URL/metrics):
       $kubectl_edit

Stop everything with: hack/demo.sh down --name $NAME
TEXT
}

cmd_up() {
  mkdir -p "$CACHE/demo"
  exec 9>"$CACHE/demo/$NAME.lock"
  flock -w 900 9 || die "another 'demo.sh up/down --name $NAME' holds $CACHE/demo/$NAME.lock"
  if agent_alive && [[ -s $DDIR/env ]]; then
    say "already running"
    FIRST_DEPLOY="earlier"
    print_summary
    return 0
  fi
  stop_agent
  mkdir -p "$DDIR"
  local bin t0=$SECONDS
  bin=$(driftless_binary)

  # 9>&-: the scripts' servers must not inherit this script's lock.
  LOCAL_KUBECONFIG=$("$HACK_DIR/cluster.sh" up --name "$NAME-local" 9>&- | tail -n 1) ||
    die "starting cluster $NAME-local failed (see above)"
  STAGING_KUBECONFIG=$("$HACK_DIR/cluster.sh" up --name "$NAME-staging" 9>&- | tail -n 1) ||
    die "starting cluster $NAME-staging failed (see above)"
  local gitea_out
  gitea_out=$("$HACK_DIR/gitea.sh" up --name "$NAME" 9>&-) || die "starting Gitea failed (see above)"
  GITEA_URL=$(sed -n 1p <<<"$gitea_out")
  GITEA_TOKEN_FILE=$(sed -n 2p <<<"$gitea_out")
  (umask 077 && printf 'Authorization: token %s\n' "$(cat "$GITEA_TOKEN_FILE")" >"$DDIR/gitea-auth")

  # A user of its own with a known password, to log in to Gitea's web UI.
  if ! gitea_api GET "/users/$DEMO_USER" >/dev/null 2>&1; then
    gitea_api POST /admin/users "{\"username\":\"$DEMO_USER\",\"email\":\"demo@example.invalid\",\"password\":\"$DEMO_PASSWORD\",\"must_change_password\":false}" >/dev/null
  fi
  export DEMO_PASSWORD
  push_example

  (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DDIR/webhook-secret")
  (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DDIR/api-token")
  pick_port "$({ cat "$CACHE"/gitea/*/port "$CACHE"/clusters/*/ports 2>/dev/null || true; } | sed 's/^[A-Z_]*=//' | tr '\n' ' ')"
  AGENT_PORT=$PICKED_PORT
  write_config
  trap 'rc=$?; if ((rc != 0)); then say "start-up failed; stopping the agent (clusters and Gitea stay up: hack/demo.sh down)"; stop_agent; fi' EXIT
  say "starting the agent on 127.0.0.1:$AGENT_PORT (log: $DDIR/agent.log)"
  launch "$DDIR/agent.log" "$DDIR/agent.pid" "$DDIR/agent.start" \
    "$bin" agent --config "$DDIR/driftless.yaml" --log-format text
  local deadline=$((SECONDS + 60))
  until curl -sS --fail --max-time 5 -o /dev/null "http://127.0.0.1:$AGENT_PORT/healthz" 2>/dev/null; do
    agent_alive || { tail -n 30 "$DDIR/agent.log" >&2; die "the agent exited during start-up"; }
    ((SECONDS < deadline)) || { tail -n 30 "$DDIR/agent.log" >&2; die "the agent did not answer /healthz in 60s"; }
    sleep 0.25
  done
  gitea_api POST "/repos/$DEMO_USER/$REPO/hooks" "{\"type\":\"gitea\",\"active\":true,\"events\":[\"push\",\"pull_request\"],\"config\":{\"url\":\"http://127.0.0.1:$AGENT_PORT/webhooks/gitea\",\"content_type\":\"json\",\"secret\":\"$(cat "$DDIR/webhook-secret")\"}}" >/dev/null
  write_env
  say "waiting for the first deploy of main"
  FIRST_DEPLOY=$(wait_for_first_deploy)
  trap - EXIT
  say "up in $((SECONDS - t0))s"
  print_summary
}

cmd_down() {
  mkdir -p "$CACHE/demo"
  exec 9>"$CACHE/demo/$NAME.lock"
  flock -w 600 9 || die "another 'demo.sh up/down --name $NAME' holds $CACHE/demo/$NAME.lock"
  say "stopping the agent"
  stop_agent
  "$HACK_DIR/gitea.sh" down --name "$NAME" 9>&-
  "$HACK_DIR/cluster.sh" down --name "$NAME-staging" 9>&-
  "$HACK_DIR/cluster.sh" down --name "$NAME-local" 9>&-
  # Keep the agent's log for post-mortems.
  rm -rf "$DDIR/cache" "$DDIR/env" "$DDIR/driftless.yaml" "$DDIR/webhook-secret" "$DDIR/api-token" "$DDIR/gitea-auth"
  say "stopped; no process of the demo remains"
}

cmd_status() {
  if agent_alive && [[ -s $DDIR/env ]]; then
    cat "$DDIR/env"
  else
    say "not running"
    return 1
  fi
}

parse_cli demo.sh "$@"
DDIR=$CACHE/demo/$NAME
require_tools curl git jq ss setsid flock od

case $CMD in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) usage ;;
esac
