#!/usr/bin/env bash
# Regenerates the expected outputs of the evaluator's golden cases with the real `cue` CLI
# (v0.14.1, built by hack/build-cue.sh): every cue/tests/cases/**/<name>.cue that is not a
# failing case (`fail_*.cue`) gets <name>.json from `cue export --out json`.
# Failing cases keep our own rendered errors in <name>.err (regenerate with
# `UPDATE_EXPECT=1 cargo test -p cue --test cases`).
set -euo pipefail
cd "$(dirname "$0")/.."
CUE="${CUE:-$HOME/.cache/driftless/bin/cue-v0.14.1/cue}"
if [[ ! -x "$CUE" ]]; then
  echo "cue CLI not found at $CUE (run hack/build-cue.sh)" >&2
  exit 1
fi
status=0
while IFS= read -r file; do
  base="$(basename "$file" .cue)"
  [[ "$base" == fail_* ]] && continue
  out="${file%.cue}.json"
  if ! "$CUE" export --out json "$file" > "$out.tmp" 2> "$out.stderr"; then
    echo "cue export failed for $file:" >&2
    cat "$out.stderr" >&2
    rm -f "$out.tmp"
    status=1
  else
    mv "$out.tmp" "$out"
  fi
  rm -f "$out.stderr"
done < <(find cue/tests/cases -name '*.cue' | sort)

# KubeVela templates: cue/tests/kubevela/<kind>__<def>.<variant>.input.json holds the injected
# `parameter` and `context`; the expected export of the template body (imports + the `template:` struct's
# declarations, as KubeVela assembles it), evaluated by the real CLI with both appended, goes to <...>.json (or <...>.err with cue's message on failure).
defs=../shared/kubevela/vela-templates/definitions/internal
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for input in cue/tests/kubevela/*.input.json; do
  stem="${input%.input.json}"
  name="$(basename "$stem")"
  kind="${name%%__*}"
  rest="${name#*__}"
  def="${rest%%.*}"
  {
    python3 "$(dirname "$0")/cue-template-body.py" "$defs/$kind/$def.cue"
    printf '\nparameter: '
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["parameter"]))' "$input"
    printf '\ncontext: '
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["context"]))' "$input"
  } > "$tmp/prog.cue"
  rm -f "$stem.json" "$stem.err"
  if ! (cd "$tmp" && "$CUE" export --out json prog.cue) > "$stem.json" 2> "$stem.err"; then
    rm -f "$stem.json"
  else
    rm -f "$stem.err"
  fi
done
exit $status
