#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ one after another, each for a number of executions, and
# prints one markdown row per target for FUZZING.md (executions, time, rate, coverage, crashes).
#
#   hack/fuzz.sh                          # every target, 10,000,000 executions each
#   hack/fuzz.sh --runs 100000 eval_cue   # one target, fewer executions
#   hack/fuzz.sh --jobs 2 eval_cue        # two processes on one corpus, --runs each
#
# Needs nightly and cargo-fuzz (`cargo install cargo-fuzz`). Builds once without a sanitizer
# (`-s none`: the targets are safe Rust, and the build runs ~2x faster), then runs the built
# binaries directly at the lowest priority. Each target's corpus starts from its seeds in
# fuzz/seeds/ and grows in fuzz/corpus/ (git-ignored); a crash leaves its input in
# fuzz/artifacts/<target>/ and makes the script exit non-zero after the remaining targets.
#
# Environment: FUZZ_BIN_DIR (use the binaries there, build nothing), FUZZ_MAX_LEN (libFuzzer's
# -max_len, default: libFuzzer's own choice from the corpus), FUZZ_FLAGS (more libFuzzer flags,
# e.g. -entropic_scale_per_exec_time=1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ="$ROOT/fuzz"
runs=10000000
jobs=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  # Fastest first, so a short session finishes the most targets.
  targets=(tracker_record webhook_payload yaml_fast_path parse_cue driftless_yaml analyze_yaml eval_cue)
fi

bin=${FUZZ_BIN_DIR:-}
if [ -z "$bin" ]; then
  command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2; exit 1; }
  echo "==> building the fuzz targets (release, no sanitizer; a cold build takes 15-60 min)" >&2
  (cd "$FUZZ" && nice -n 10 cargo +nightly fuzz build -s none >&2)
  bin="$FUZZ/target/x86_64-unknown-linux-gnu/release"
fi

commit=$(git -C "$ROOT" rev-parse --short HEAD)
# 1234567 -> 1,234,567
thousands() { echo "$1" | sed -e ':a' -e 's/\B[0-9]\{3\}\>/,&/' -e 'ta'; }
failed=0
echo "| date (UTC) | commit | target | executions | time | per second | coverage | crashes | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for target in "${targets[@]}"; do
  corpus="$FUZZ/corpus/$target"
  artifacts="$FUZZ/artifacts/$target"
  log="$FUZZ/artifacts/$target.log"
  mkdir -p "$corpus" "$artifacts"
  if [ -z "$(ls -A "$corpus")" ]; then cp "$FUZZ/seeds/$target/"* "$corpus/"; fi
  before=$(find "$artifacts" -type f | wc -l)
  echo "==> $target: $jobs x $runs executions (log: $log)" >&2
  started=$(date +%s)
  status=0
  # Each job is one process on the shared corpus (libFuzzer reloads what the others add).
  pids=()
  for job in $(seq "$jobs"); do
    job_log=$log; [ "$job" -eq 1 ] || job_log="${log%.log}-$job.log"
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    nice -n 19 "$bin/$target" "$corpus" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
      ${FUZZ_MAX_LEN:+-max_len=$FUZZ_MAX_LEN} ${FUZZ_FLAGS:-} -artifact_prefix="$artifacts/" \
      -print_final_stats=1 -print_pcs=0 -close_fd_mask=1 >"$job_log" 2>&1 &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  seconds=$(( $(date +%s) - started ))
  logs=("$log"); for job in $(seq 2 "$jobs"); do logs+=("${log%.log}-$job.log"); done
  stat() { grep -h "^stat::$1:" "${logs[@]}" | awk '{print $2}'; }
  done_runs=$(stat number_of_executed_units | awk '{n += $1} END {print n + 0}')
  rss=$(stat peak_rss_mb | sort -n | tail -1)
  coverage=$(grep -hoE 'cov: [0-9]+ ft: [0-9]+' "${logs[@]}" | sort -t' ' -k2,2n | tail -1 || true)
  crashes=$(( $(find "$artifacts" -type f | wc -l) - before ))
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    failed=1
    echo "==> $target failed (exit $status, $crashes new artifacts): see $log and $artifacts" >&2
  fi
  rate=$(( done_runs / (seconds > 0 ? seconds : 1) ))
  echo "| $(date -u +%F) | $commit | \`$target\` | $(thousands "$done_runs") | $(thousands "$seconds") s | $(thousands "$rate") | ${coverage:-?} | $crashes | ${rss:-?} MB |"
done
exit "$failed"
