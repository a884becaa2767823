#!/usr/bin/env bash
# Checks Driftless's built-in definitions in definitions/ with the real `cue` CLI:
#  1. every definition file compiles (header and template body, as KubeVela assembles them);
#  2. every component/trait with an example Application renders to the same JSON as
#     KubeVela's own definition of the same name, for the same parameter and context.
# Usage: hack/check-definitions.sh [-v] [name-filter]
# Env: CUE (cue v0.14.1 binary), KUBEVELA (checkout with vela-templates/ and _extracted/).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export CUE="${CUE:-$HOME/.cache/driftless/bin/cue-v0.14.1/cue}"
export KUBEVELA="${KUBEVELA:-$ROOT/../shared/kubevela}"
export DEFS="$ROOT/definitions"
if [[ ! -x "$CUE" ]]; then
	echo "cue binary not found at $CUE (build it with hack/build-cue.sh)" >&2
	exit 1
fi
exec python3 "$ROOT/hack/check-definitions.py" "$@"
