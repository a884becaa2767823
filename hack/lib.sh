# shellcheck shell=bash
# Helpers shared by the hack/ scripts (cluster.sh, gitea.sh, build-cue.sh, build-kubeconform.sh);
# sourced, never run. The caller runs under
# `set -euo pipefail` and defines `say` and `die`.
#
# - process identity: a recorded pid counts as ours only while its start time matches, so a
#   reused pid is never mistaken for (or killed as) our server;
# - launching a server in its own session and process group (pgid = pid), so stopping it stops
#   its children too;
# - loopback ports: listening checks and random free ports below the ephemeral range;
# - the `CMD [--name NAME]` command line cluster.sh and gitea.sh take;
# - `go install` of a pinned tool into the version-keyed binary cache.

# alive PID: the process exists and is not a zombie.
alive() {
  local state
  [[ -r /proc/$1/stat ]] || return 1
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [[ -n $state && $state != Z && $state != X ]]
}

# start_time PID: the process's start time in clock ticks since boot (/proc/PID/stat field 22).
start_time() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# recorded_alive PIDFILE STARTFILE: the recorded pid is alive and is still the process we
# started (same start time).
recorded_alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  [[ -n $pid ]] && alive "$pid" || return 1
  [[ $(start_time "$pid") == "$(cat "$2" 2>/dev/null)" ]]
}

# launch LOG PIDFILE STARTFILE CMD...: runs CMD in the background in its own session, output in
# LOG, and records its pid and start time. fd 9 (the caller's lock) must not leak into a
# long-running server, or the lock would outlive the script.
launch() {
  local log=$1 pidfile=$2 startfile=$3 pid
  shift 3
  setsid "$@" </dev/null >"$log" 2>&1 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$pidfile"
  start_time "$pid" >"$startfile"
}

# signal_group SIGNAL PID: signals the process group PID leads (or the process alone).
signal_group() { kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null || true; }

# port_listening PORT: something listens on TCP PORT.
port_listening() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }

# pick_port RESERVED: sets PICKED_PORT to a random port that is not listening and not in the
# space-separated RESERVED list. It stays below the kernel's ephemeral range, whose ports
# outgoing connections may hold. (A variable, not stdout: $(...) subshells could repeat RANDOM.)
pick_port() {
  local reserved=" $1 " lo=20000 hi p
  hi=$(($(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768) - 1))
  ((hi - lo >= 1000)) || { lo=10000; hi=19999; }
  while :; do
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
    [[ $reserved == *" $p "* ]] && continue
    port_listening "$p" && continue
    break
  done
  # shellcheck disable=SC2034 # read by the caller
  PICKED_PORT=$p
}

# parse_cli PROG ARGS...: sets CMD and NAME (default "dev") from `CMD [--name NAME]`; calls
# `usage` (defined by the caller) on anything else.
parse_cli() {
  local prog=$1
  shift
  (($# >= 1)) || usage
  # shellcheck disable=SC2034 # read by the caller
  CMD=$1
  shift
  NAME=dev
  while (($#)); do
    case $1 in
      --name) (($# >= 2)) || usage; NAME=$2; shift 2 ;;
      --name=*) NAME=${1#--name=}; shift ;;
      -h | --help) usage ;;
      *) printf '%s: unknown argument: %s\n' "$prog" "$1" >&2; usage ;;
    esac
  done
  [[ $NAME =~ ^[a-z0-9][a-z0-9-]{0,40}$ ]] || die "invalid --name '$NAME' (use lowercase letters, digits and '-')"
}

# require_tools TOOL...: each tool is on PATH.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required (run hack/install-prereqs.sh)"
  done
}

# go_install_into BIN_DIR MODULE_PATH@VERSION BINARY: `go install` (local toolchain, no cgo,
# through the module proxy) into a staging directory renamed to BIN_DIR, so the cache holds a
# complete binary or nothing, even when a build is interrupted or two builds race.
go_install_into() {
  local bin_dir=$1 target=$2 binary=$3 staging
  command -v go >/dev/null || die "go is not installed (hack/install-prereqs.sh installs it)"
  mkdir -p "$(dirname "$bin_dir")"
  staging=$(mktemp -d "$(dirname "$bin_dir")/.$(basename "$bin_dir").XXXXXX")
  if ! GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN=$staging go install -trimpath "$target" >&2; then
    rm -rf "$staging"
    die "go install $target failed"
  fi
  if [[ ! -x $staging/$binary ]]; then
    rm -rf "$staging"
    die "go install $target left no $binary binary"
  fi
  rm -rf "$bin_dir"
  mv "$staging" "$bin_dir"
}
