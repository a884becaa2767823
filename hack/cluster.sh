#!/usr/bin/env bash
# A real local Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler and kwok (3 fake nodes), built from the upstream Go modules by build-cluster.sh.
#
#   hack/cluster.sh up   [--name NAME]   # start (or reuse) cluster NAME; last stdout line = kubeconfig
#   hack/cluster.sh down [--name NAME]   # stop it; verifies no process or listening port remains
#   hack/cluster.sh status [--name NAME] # exit 0 and print the kubeconfig if it is running and ready
#   hack/cluster.sh restart-apiserver [--name NAME] # stop kube-apiserver, start it again, wait /readyz
#
# NAME defaults to "dev". State lives in ${DRIFTLESS_CACHE:-$HOME/.cache/driftless}/clusters/NAME/.
# Progress and errors go to stderr; stdout carries only the kubeconfig path.
set -euo pipefail

NODE_COUNT=3
START_TIMEOUT=${DRIFTLESS_START_TIMEOUT:-120} # seconds, per readiness wait
STOP_TIMEOUT=20                               # seconds before SIGKILL
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib.sh
. "$HACK_DIR/lib.sh"
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
USER_AGENT=driftless-cluster-sh # not curl/*: the apiserver then answers with compact JSON

say() { printf '==> [%s] %s\n' "$NAME" "$*" >&2; }
die() { printf 'cluster.sh [%s]: error: %s\n' "${NAME:-?}" "$*" >&2; exit 1; }

usage() {
  sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- process helpers --------------------------------------------------------------------------

pid_of() { cat "$CDIR/pids/$1.pid" 2>/dev/null || true; }

# component_alive NAME: its recorded pid is alive and is still the process we started.
component_alive() { recorded_alive "$CDIR/pids/$1.pid" "$CDIR/pids/$1.start"; }

log_tail() {
  local log=$CDIR/logs/$1.log
  if [[ -s $log ]]; then
    printf -- '--- last lines of %s ---\n' "$log" >&2
    tail -n 30 "$log" >&2
    printf -- '---\n' >&2
  else
    printf '(log %s is empty)\n' "$log" >&2
  fi
}

fail_component() { # NAME MESSAGE
  printf 'cluster.sh [%s]: error: %s: %s\n' "$NAME" "$1" "$2" >&2
  log_tail "$1"
  exit 1
}

# Stop every recorded process group of this cluster; SIGTERM, then SIGKILL after STOP_TIMEOUT.
stop_all() {
  local c pid deadline pending
  [[ -d $CDIR/pids ]] || return 0
  for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid=$(pid_of "$c")
    [[ -n $pid ]] || continue
    if component_alive "$c"; then
      signal_group TERM "$pid"
    fi
  done
  deadline=$((SECONDS + STOP_TIMEOUT))
  while :; do
    pending=()
    for c in "${COMPONENTS[@]}"; do
      component_alive "$c" && pending+=("$c")
    done
    ((${#pending[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      say "still running after ${STOP_TIMEOUT}s, sending SIGKILL: ${pending[*]}"
      for c in "${pending[@]}"; do
        signal_group KILL "$(pid_of "$c")"
      done
      sleep 1
      deadline=$((SECONDS + STOP_TIMEOUT))
      continue
    fi
    sleep 0.2
  done
  rm -f "$CDIR"/pids/*.pid "$CDIR"/pids/*.start
}

# ---- ports ------------------------------------------------------------------------------------

# Ports recorded by any cluster under this cache (running or starting), so concurrent `up`s of
# different clusters never pick the same port.
reserved_ports() { cat "$CACHE"/clusters/*/ports 2>/dev/null | sed -n 's/^[A-Z_]*=//p' || true; }

pick_ports() {
  local reserved var
  exec 8>"$CACHE/clusters/.ports.lock"
  flock 8
  reserved=$(reserved_ports | tr '\n' ' ')
  for var in ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT KWOK_PORT; do
    pick_port "$reserved"
    reserved+=" $PICKED_PORT"
    printf '%s=%s\n' "$var" "$PICKED_PORT"
  done >"$CDIR/ports.tmp"
  mv "$CDIR/ports.tmp" "$CDIR/ports"
  exec 8>&-
}

load_ports() {
  local k v
  while IFS='=' read -r k v; do
    case $k in
      ETCD_PORT | ETCD_PEER_PORT | APISERVER_PORT | KCM_PORT | SCHEDULER_PORT | KWOK_PORT)
        printf -v "$k" '%s' "$v" ;;
    esac
  done <"$CDIR/ports"
}

# ---- API access with the admin client certificate ---------------------------------------------

api() { # METHOD PATH [curl args...]; prints the body, fails on HTTP errors
  local method=$1 path=$2
  shift 2
  curl -sS --fail --max-time 10 -A "$USER_AGENT" \
    --cacert "$CDIR/pki/ca.crt" --cert "$CDIR/pki/admin.crt" --key "$CDIR/pki/admin.key" \
    -X "$method" "https://127.0.0.1:$APISERVER_PORT$path" "$@"
}

healthy() {
  [[ -f $CDIR/ports && -f $CDIR/kubeconfig ]] || return 1
  local c
  for c in "${COMPONENTS[@]}"; do
    component_alive "$c" || return 1
  done
  load_ports
  api GET /readyz >/dev/null 2>&1
}

# ---- start-up ---------------------------------------------------------------------------------

# start NAME PORT... -- CMD...: check its ports are free, launch CMD in its own session and process
# group (pgid = pid), with its output in logs/NAME.log, and record its pid.
start() {
  local name=$1
  shift
  while [[ $1 != -- ]]; do
    if port_listening "$1"; then
      printf 'cluster.sh [%s]: error: %s: port 127.0.0.1:%s is already in use:\n' "$NAME" "$name" "$1" >&2
      ss -Hltnp "sport = :$1" >&2 || true
      exit 1
    fi
    shift
  done
  shift
  say "starting $name (log: $CDIR/logs/$name.log)"
  launch "$CDIR/logs/$name.log" "$CDIR/pids/$name.pid" "$CDIR/pids/$name.start" "$@"
}

# wait_for NAME WHAT CHECK...: poll CHECK until it succeeds; fail (with NAME's log) if NAME exits or
# START_TIMEOUT passes.
wait_for() {
  local name=$1 what=$2 deadline=$((SECONDS + START_TIMEOUT))
  shift 2
  until "$@" >/dev/null 2>&1; do
    component_alive "$name" || fail_component "$name" "exited during start-up (waiting for $what)"
    ((SECONDS < deadline)) || fail_component "$name" "timed out after ${START_TIMEOUT}s waiting for $what"
    sleep 0.25
  done
}

http_ok() { curl -sS --fail --max-time 5 -o /dev/null "$@"; }

make_pki() {
  local P=$CDIR/pki
  mkdir -p "$P"
  (
    cd "$P"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout ca.key -out ca.crt \
      -subj "/CN=driftless-$NAME-ca"
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver"
    printf '%s\n' \
      'basicConstraints=CA:FALSE' \
      'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' \
      'keyUsage=digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' >srv.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -out apiserver.crt -extfile srv.ext
    openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin"
    printf '%s\n' 'basicConstraints=CA:FALSE' 'keyUsage=digitalSignature,keyEncipherment' \
      'extendedKeyUsage=clientAuth' >cli.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -out admin.crt -extfile cli.ext
    openssl genrsa -out sa.key 2048
    openssl rsa -in sa.key -pubout -out sa.pub
    rm -f ./*.csr ./*.ext
    chmod 600 ./*.key
  ) >"$CDIR/logs/pki.log" 2>&1 || fail_component pki "openssl failed"
}

write_kubeconfig() {
  cat >"$CDIR/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: driftless-$NAME
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $CDIR/pki/ca.crt
users:
- name: driftless-$NAME-admin
  user:
    client-certificate: $CDIR/pki/admin.crt
    client-key: $CDIR/pki/admin.key
contexts:
- name: driftless-$NAME
  context:
    cluster: driftless-$NAME
    user: driftless-$NAME-admin
    namespace: default
current-context: driftless-$NAME
EOF
  mv "$CDIR/kubeconfig.tmp" "$CDIR/kubeconfig"
}

node_json() {
  cat <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$1",
 "annotations":{"kwok.x-k8s.io/node":"fake","node.alpha.kubernetes.io/ttl":"0"},
 "labels":{"kubernetes.io/hostname":"$1","kubernetes.io/os":"linux","kubernetes.io/arch":"amd64","type":"kwok"}}}
EOF
}

node_ready() { api GET "/api/v1/nodes/$1" | grep -q '"type":"Ready","status":"True"'; }

cmd_up() {
  local bin t0=$SECONDS
  # Build (or find) the binaries first: the build has its own lock and may take many minutes.
  bin=$("$HACK_DIR/build-cluster.sh" | tail -n 1) || die "building the control plane failed (see above)"
  [[ -x $bin/kube-apiserver ]] || die "build-cluster.sh did not produce binaries in '$bin'"

  mkdir -p "$CACHE/clusters"
  exec 9>"$CACHE/clusters/$NAME.lock"
  flock -w 300 9 || die "timed out: another 'cluster.sh up/down --name $NAME' holds $CACHE/clusters/$NAME.lock"

  if healthy && [[ $(cat "$CDIR/bin" 2>/dev/null) == "$bin" ]]; then
    say "already running (apiserver https://127.0.0.1:$APISERVER_PORT)"
    printf '%s\n' "$CDIR/kubeconfig"
    return 0
  fi
  if [[ -d $CDIR ]]; then
    if [[ -n $(ls -A "$CDIR/pids" 2>/dev/null) ]]; then
      say "stopping leftover processes of a previous run (stale, or built from other binaries)"
      stop_all
    fi
    rm -rf "$CDIR"
  fi

  mkdir -p "$CDIR/pids" "$CDIR/logs" "$CDIR/etcd" "$CDIR/apiserver-certs" "$CDIR/kwok-home"
  printf '%s\n' "$bin" >"$CDIR/bin"
  # From here on, any failure stops whatever was started.
  trap 'rc=$?; if ((rc != 0)); then say "start-up failed; stopping started processes"; stop_all; fi' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  pick_ports
  load_ports
  make_pki
  write_kubeconfig
  local kc=$CDIR/kubeconfig P=$CDIR/pki

  start etcd "$ETCD_PORT" "$ETCD_PEER_PORT" -- "$bin/etcd" --name=node0 --data-dir="$CDIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="node0=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level=warn
  wait_for etcd "http://127.0.0.1:$ETCD_PORT/health" http_ok "http://127.0.0.1:$ETCD_PORT/health"

  start kube-apiserver "$APISERVER_PORT" -- "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
    --client-ca-file="$P/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --endpoint-reconciler-type=none \
    --cert-dir="$CDIR/apiserver-certs" --profiling=false --v=1
  wait_for kube-apiserver "/readyz" api GET /readyz

  start kube-controller-manager "$KCM_PORT" -- "$bin/kube-controller-manager" --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --leader-elect=false \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --profiling=false --v=1
  start kube-scheduler "$SCHEDULER_PORT" -- "$bin/kube-scheduler" --kubeconfig="$kc" \
    --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
    --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" --leader-elect=false \
    --profiling=false --v=1
  # HOME is redirected so a user's ~/.kwok/kwok.yaml cannot change the fixture.
  start kwok "$KWOK_PORT" -- env HOME="$CDIR/kwok-home" "$bin/kwok" --kubeconfig="$kc" \
    --server-address="127.0.0.1:$KWOK_PORT" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --manage-nodes-with-label-selector= --manage-single-node= \
    --cidr=10.244.0.0/16 --node-ip=10.0.0.1 \
    --node-lease-duration-seconds=40
  wait_for kube-controller-manager "/healthz" http_ok -k "https://127.0.0.1:$KCM_PORT/healthz"
  wait_for kube-scheduler "/healthz" http_ok -k "https://127.0.0.1:$SCHEDULER_PORT/healthz"
  wait_for kwok "/healthz" http_ok "http://127.0.0.1:$KWOK_PORT/healthz"

  local i node
  for ((i = 0; i < NODE_COUNT; i++)); do
    node=kwok-node-$i
    api POST /api/v1/nodes -H 'Content-Type: application/json' -d "$(node_json "$node")" >/dev/null ||
      fail_component kube-apiserver "creating Node $node failed"
  done
  for ((i = 0; i < NODE_COUNT; i++)); do
    wait_for kwok "Node kwok-node-$i to be Ready" node_ready "kwok-node-$i"
  done
  wait_for kube-controller-manager "ServiceAccount default/default" \
    api GET /api/v1/namespaces/default/serviceaccounts/default

  trap - EXIT INT TERM
  say "ready in $((SECONDS - t0))s: apiserver https://127.0.0.1:$APISERVER_PORT, $NODE_COUNT kwok nodes"
  say "stop with: hack/cluster.sh down --name $NAME"
  printf '%s\n' "$kc"
}

cmd_down() {
  mkdir -p "$CACHE/clusters"
  exec 9>"$CACHE/clusters/$NAME.lock"
  flock -w 300 9 || die "timed out: another 'cluster.sh up/down --name $NAME' holds $CACHE/clusters/$NAME.lock"
  if [[ ! -d $CDIR ]]; then
    say "not running (no $CDIR)"
    return 0
  fi
  say "stopping"
  stop_all
  local p left=() deadline=$((SECONDS + 10))
  if [[ -f $CDIR/ports ]]; then
    load_ports
    for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT" "$KWOK_PORT"; do
      while port_listening "$p" && ((SECONDS < deadline)); do sleep 0.2; done
      port_listening "$p" && left+=("$p")
    done
  fi
  ((${#left[@]} == 0)) || die "ports still listening after stop: ${left[*]}"
  # Keep the logs for post-mortems; everything else is recreated by the next `up`.
  rm -rf "${CDIR:?}/etcd" "$CDIR/pki" "$CDIR/apiserver-certs" "$CDIR/kwok-home" "$CDIR/pids" \
    "$CDIR/ports" "$CDIR/kubeconfig" "${CDIR:?}/bin"
  say "stopped; no processes or listening ports remain"
}

# An apiserver restart as an upgrade or a crash-looping apiserver makes it (for fault tests): the
# same command line, ports, certificates and etcd data, a new process.
cmd_restart_apiserver() {
  exec 9>"$CACHE/clusters/$NAME.lock"
  flock -w 300 9 || die "timed out: another 'cluster.sh' command holds $CACHE/clusters/$NAME.lock"
  healthy || die "not running; start it with: hack/cluster.sh up --name $NAME"
  local pid deadline args=()
  pid=$(pid_of kube-apiserver)
  mapfile -d '' -t args <"/proc/$pid/cmdline"
  ((${#args[@]} > 0)) || die "cannot read the command line of kube-apiserver (pid $pid)"
  say "restarting kube-apiserver (pid $pid)"
  signal_group TERM "$pid"
  deadline=$((SECONDS + STOP_TIMEOUT))
  while component_alive kube-apiserver; do
    ((SECONDS < deadline)) || { signal_group KILL "$pid"; sleep 1; }
    sleep 0.2
  done
  while port_listening "$APISERVER_PORT"; do sleep 0.2; done
  start kube-apiserver "$APISERVER_PORT" -- "${args[@]}"
  wait_for kube-apiserver "/readyz" api GET /readyz
  say "kube-apiserver restarted (pid $(pid_of kube-apiserver))"
}

cmd_status() {
  if healthy; then
    printf '%s\n' "$CDIR/kubeconfig"
  else
    say "not running"
    return 1
  fi
}

# ---- main -------------------------------------------------------------------------------------

parse_cli cluster.sh "$@"
CDIR=$CACHE/clusters/$NAME
require_tools curl openssl ss setsid flock

case $CMD in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  restart-apiserver) cmd_restart_apiserver ;;
  *) usage ;;
esac
