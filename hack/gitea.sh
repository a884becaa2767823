#!/usr/bin/env bash
# A real Gitea forge on loopback for the agent's end-to-end tests, built by build-gitea.sh.
#
#   hack/gitea.sh up     [--name NAME]  # start (or reuse) Gitea NAME; stdout: base URL, token file
#   hack/gitea.sh down   [--name NAME]  # stop it; verifies no process or listening port remains
#   hack/gitea.sh status [--name NAME]  # exit 0 and print base URL and token file if it is ready
#
# NAME defaults to "dev". State lives in ${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/gitea/NAME/:
# app.ini, data/, repos/, logs/, the admin user's API token in `token` (mode 600) and `env`
# (GITEA_URL, GITEA_USER, GITEA_TOKEN_FILE) for scripts. The admin user is `driftless`.
# Progress and errors go to stderr; stdout carries only the two lines above.
#
# With DRIFTLESS_GITEA_SECURE=1 (when the instance is first started), Gitea serves HTTPS with a
# certificate from a throwaway CA made here (tls/ca.pem; 127.0.0.1 and localhost) instead of
# HTTP, and runs its built-in SSH server (no sshd) as user `git`; `env` then also holds
# GITEA_CA_FILE and GITEA_SSH_PORT.
set -euo pipefail

START_TIMEOUT=${DRIFTLESS_START_TIMEOUT:-120} # seconds
STOP_TIMEOUT=20
ADMIN_USER=driftless
ADMIN_EMAIL=driftless@example.invalid

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
. "$HACK_DIR/lib.sh"
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}

say() { printf '==> [gitea %s] %s\n' "$NAME" "$*" >&2; }
die() { printf 'gitea.sh [%s]: error: %s\n' "${NAME:-?}" "$*" >&2; exit 1; }

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# The recorded pid is alive and is still the process we started.
gitea_alive() { recorded_alive "$GDIR/gitea.pid" "$GDIR/gitea.start"; }

secure() { [[ -s $GDIR/tls/ca.pem ]]; }

base_url() {
  local scheme=http
  secure && scheme=https
  printf '%s://127.0.0.1:%s' "$scheme" "$(cat "$GDIR/port")"
}

# curl trusting the instance's CA when it has one.
gitea_curl() {
  if secure; then curl --cacert "$GDIR/tls/ca.pem" "$@"; else curl "$@"; fi
}

healthy() {
  [[ -f $GDIR/port && -s $GDIR/token ]] || return 1
  gitea_alive || return 1
  gitea_curl -sS --fail --max-time 5 -o /dev/null "$(base_url)/api/healthz"
}

# A throwaway CA and a server certificate for 127.0.0.1 and localhost, in $GDIR/tls.
make_tls() {
  local tls=$GDIR/tls
  mkdir -p "$tls"
  (
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=driftless e2e test CA" \
      -keyout "$tls/ca.key" -out "$tls/ca.pem.tmp" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$tls/server.key" -out "$tls/server.csr"
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
      "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >"$tls/server.ext"
    openssl x509 -req -days 30 -in "$tls/server.csr" -CA "$tls/ca.pem.tmp" -CAkey "$tls/ca.key" \
      -CAcreateserial -extfile "$tls/server.ext" -out "$tls/server.pem"
  ) >"$GDIR/logs/tls.log" 2>&1 || { tail -n 20 "$GDIR/logs/tls.log" >&2; die "making the test CA failed"; }
  # ca.pem last: its presence marks the instance as secure.
  mv "$tls/ca.pem.tmp" "$tls/ca.pem"
}

log_tail() {
  if [[ -s $GDIR/logs/gitea.log ]]; then
    printf -- '--- last lines of %s ---\n' "$GDIR/logs/gitea.log" >&2
    tail -n 30 "$GDIR/logs/gitea.log" >&2
  fi
}

stop_gitea() {
  local pid deadline
  pid=$(cat "$GDIR/gitea.pid" 2>/dev/null || true)
  [[ -n $pid ]] || return 0
  if gitea_alive; then
    signal_group TERM "$pid"
    deadline=$((SECONDS + STOP_TIMEOUT))
    while gitea_alive && ((SECONDS < deadline)); do sleep 0.2; done
    if gitea_alive; then
      say "still running after ${STOP_TIMEOUT}s, sending SIGKILL"
      signal_group KILL "$pid"
      sleep 1
    fi
  fi
  rm -f "$GDIR/gitea.pid" "$GDIR/gitea.start"
}

reserve_port() {
  local reserved
  exec 8>"$CACHE/gitea/.ports.lock"
  flock 8
  # Ports of other Gitea instances and clusters under this cache (some globs may match nothing).
  reserved=$({ cat "$CACHE"/gitea/*/port "$CACHE"/gitea/*/ssh_port "$CACHE"/clusters/*/ports 2>/dev/null || true; } | sed 's/^[A-Z_]*=//' | tr '\n' ' ')
  pick_port "$reserved"
  printf '%s\n' "$PICKED_PORT" >"$GDIR/port"
  if [[ ${DRIFTLESS_GITEA_SECURE:-} == 1 ]]; then
    pick_port "$reserved $PICKED_PORT"
    printf '%s\n' "$PICKED_PORT" >"$GDIR/ssh_port"
  fi
  exec 8>&-
}

write_ini() {
  local port=$1 static_root=$2 secret internal_token
  secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
  internal_token=$("$BIN/gitea" generate secret INTERNAL_TOKEN)
  cat >"$GDIR/app.ini" <<INI
APP_NAME = driftless-test-forge
RUN_USER = $(id -un)
RUN_MODE = prod
WORK_PATH = $GDIR/work
I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true

[server]
HTTP_ADDR = 127.0.0.1
HTTP_PORT = $port
DOMAIN = 127.0.0.1
ROOT_URL = $(base_url)/
$(server_transport_ini)
OFFLINE_MODE = true
LFS_START_SERVER = false
APP_DATA_PATH = $GDIR/data
STATIC_ROOT_PATH = $static_root

[database]
DB_TYPE = sqlite3
PATH = $GDIR/data/gitea.db

[repository]
ROOT = $GDIR/repos
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = $secret
INTERNAL_TOKEN = $internal_token
PASSWORD_COMPLEXITY = off

[service]
DISABLE_REGISTRATION = true

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 5
SKIP_TLS_VERIFY = true

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[cron]
ENABLED = false

[actions]
ENABLED = false

[mailer]
ENABLED = false

[migrations]
ALLOW_LOCALNETWORKS = true

[log]
MODE = console
LEVEL = Warn
INI
}

# The [server] lines that differ between plain and secure instances.
server_transport_ini() {
  if secure; then
    printf '%s\n' "PROTOCOL = https" "CERT_FILE = $GDIR/tls/server.pem" "KEY_FILE = $GDIR/tls/server.key" \
      "DISABLE_SSH = false" "START_SSH_SERVER = true" "BUILTIN_SSH_SERVER_USER = git" \
      "SSH_DOMAIN = 127.0.0.1" "SSH_LISTEN_HOST = 127.0.0.1" \
      "SSH_PORT = $(cat "$GDIR/ssh_port")" "SSH_LISTEN_PORT = $(cat "$GDIR/ssh_port")"
  else
    printf '%s\n' "PROTOCOL = http" "DISABLE_SSH = true" "START_SSH_SERVER = false"
  fi
}

cmd_up() {
  mkdir -p "$CACHE/gitea"
  exec 9>"$CACHE/gitea/$NAME.lock"
  flock -w 900 9 || die "another 'gitea.sh up/down --name $NAME' holds $CACHE/gitea/$NAME.lock"

  if healthy; then
    say "already running at $(base_url)"
    printf '%s\n%s\n' "$(base_url)" "$GDIR/token"
    return 0
  fi
  if [[ -d $GDIR ]]; then
    say "removing stale state in $GDIR"
    stop_gitea
    rm -rf "$GDIR"
  fi

  BIN=$("$HACK_DIR/build-gitea.sh" | tail -n 1) || die "building Gitea failed (see above)"
  [[ -x $BIN/gitea && -s $BIN/static-root ]] || die "build-gitea.sh did not produce $BIN/gitea"
  local static_root t0=$SECONDS port
  static_root=$(cat "$BIN/static-root")
  [[ -d $static_root/options ]] ||
    die "Gitea's module directory $static_root is missing (run: cd hack/gitea && go mod download)"

  mkdir -p "$GDIR/work" "$GDIR/data" "$GDIR/repos" "$GDIR/logs"
  trap 'rc=$?; if ((rc != 0)); then say "start-up failed; stopping"; stop_gitea; fi' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  reserve_port
  port=$(cat "$GDIR/port")
  if [[ ${DRIFTLESS_GITEA_SECURE:-} == 1 ]]; then
    require_tools openssl
    make_tls
  fi
  write_ini "$port" "$static_root"
  local c=(--config "$GDIR/app.ini" --work-path "$GDIR/work")

  "$BIN/gitea" "${c[@]}" migrate >"$GDIR/logs/migrate.log" 2>&1 ||
    { tail -n 30 "$GDIR/logs/migrate.log" >&2; die "gitea migrate failed"; }
  "$BIN/gitea" "${c[@]}" admin user create --username "$ADMIN_USER" \
    --password "$(head -c 18 /dev/urandom | base64 | tr -d '/+=')Aa1!" \
    --email "$ADMIN_EMAIL" --admin --must-change-password=false >"$GDIR/logs/user.log" 2>&1 ||
    { tail -n 30 "$GDIR/logs/user.log" >&2; die "creating the admin user failed"; }
  (
    umask 077
    "$BIN/gitea" "${c[@]}" admin user generate-access-token --username "$ADMIN_USER" \
      --token-name driftless-e2e --scopes all --raw >"$GDIR/token.out" 2>"$GDIR/logs/token.log"
    # Gitea also prints its running-as-root warning on stdout; keep only the token line.
    grep -E '^[0-9a-f]{40}$' "$GDIR/token.out" | tail -n 1 >"$GDIR/token"
    rm -f "$GDIR/token.out"
  ) || { tail -n 30 "$GDIR/logs/token.log" >&2; die "creating the API token failed"; }
  [[ -s $GDIR/token ]] || die "gitea printed an empty token"

  if port_listening "$port"; then
    die "port 127.0.0.1:$port is already in use"
  fi
  say "starting gitea on 127.0.0.1:$port (log: $GDIR/logs/gitea.log)"
  launch "$GDIR/logs/gitea.log" "$GDIR/gitea.pid" "$GDIR/gitea.start" "$BIN/gitea" "${c[@]}" web

  local deadline=$((SECONDS + START_TIMEOUT))
  until gitea_curl -sS --fail --max-time 5 -o /dev/null "$(base_url)/api/healthz" 2>/dev/null; do
    gitea_alive || { log_tail; die "gitea exited during start-up"; }
    ((SECONDS < deadline)) || { log_tail; die "timed out after ${START_TIMEOUT}s waiting for /api/healthz"; }
    sleep 0.25
  done
  printf 'GITEA_URL=%s\nGITEA_USER=%s\nGITEA_TOKEN_FILE=%s\n' "$(base_url)" "$ADMIN_USER" "$GDIR/token" >"$GDIR/env"
  if secure; then
    printf 'GITEA_CA_FILE=%s\nGITEA_SSH_PORT=%s\n' "$GDIR/tls/ca.pem" "$(cat "$GDIR/ssh_port")" >>"$GDIR/env"
  fi
  trap - EXIT INT TERM
  say "ready in $((SECONDS - t0))s at $(base_url) (user $ADMIN_USER, token in $GDIR/token)"
  say "stop with: hack/gitea.sh down --name $NAME"
  printf '%s\n%s\n' "$(base_url)" "$GDIR/token"
}

cmd_down() {
  mkdir -p "$CACHE/gitea"
  exec 9>"$CACHE/gitea/$NAME.lock"
  flock -w 600 9 || die "another 'gitea.sh up/down --name $NAME' holds $CACHE/gitea/$NAME.lock"
  if [[ ! -d $GDIR ]]; then
    say "not running (no $GDIR)"
    return 0
  fi
  say "stopping"
  stop_gitea
  if [[ -f $GDIR/port ]]; then
    local port deadline=$((SECONDS + 10))
    port=$(cat "$GDIR/port")
    while port_listening "$port" && ((SECONDS < deadline)); do sleep 0.2; done
    port_listening "$port" && die "port $port still listening after stop"
  fi
  # Keep the logs for post-mortems; everything else is recreated by the next `up`.
  rm -rf "$GDIR/work" "$GDIR/data" "$GDIR/repos" "$GDIR/token" "$GDIR/env" "$GDIR/port" "$GDIR/app.ini" \
    "$GDIR/ssh_port" "$GDIR/tls"
  say "stopped; no process or listening port remains"
}

cmd_status() {
  if healthy; then
    printf '%s\n%s\n' "$(base_url)" "$GDIR/token"
  else
    say "not running"
    return 1
  fi
}

parse_cli gitea.sh "$@"
GDIR=$CACHE/gitea/$NAME
require_tools curl ss setsid flock od

case $CMD in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) usage ;;
esac
