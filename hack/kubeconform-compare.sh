#!/usr/bin/env bash
# Side by side: `driftless analyze` (load, render, every rule, OpenAPI validation) over N loadgen
# apps versus kubeconform (hack/build-kubeconform.sh) validating the same rendered objects
# against the same Kubernetes 1.34 OpenAPI data, offline. Prints a markdown table for
# BENCHMARKS.md (peers).
#
#   hack/kubeconform-compare.sh [N]        # N apps, default 10000
#
# kubeconform reads one JSON schema per kind from a `-schema-location` template. Its default
# location is a GitHub URL; here the schemas are generated from the same upstream swagger.json
# that analyzer/schemas/k8s-v1.34.json comes from (k8s.io/kubernetes@v1.34.3 in the Go module
# cache, fetched by hack/gen-k8s-schema.sh's recipe when missing), the way openapi2jsonschema
# writes kubeconform's `-standalone-strict` sets: `$ref`s inlined, objects with properties closed
# (`additionalProperties: false`), int-or-string and Quantity as string-or-number. They are
# cached outside the repository ($DRIFTLESS_CACHE/kubeconform-schemas/k8s-v1.34.3/).
#
# Environment: DRIFTLESS_BIN, LOADGEN_BIN (reuse built binaries; otherwise a release build in
# target-kubeconform-compare), DRIFTLESS_CACHE (default $HOME/.cache/driftless), KEEP=1 keeps the
# work directory. Timing: wall and CPU (user+sys) from /usr/bin/time, best of RUNS (default 3),
# the two tools alternated.
set -euo pipefail

N=${1:-10000}
RUNS=${RUNS:-3}
K8S_VERSION=v1.34.3
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${DRIFTLESS_CACHE:-$HOME/.cache/driftless}
SCHEMAS=$CACHE/kubeconform-schemas/k8s-$K8S_VERSION

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'kubeconform-compare: error: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 is needed to generate kubeconform's schemas"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is needed (package: time)"

KUBECONFORM=$("$ROOT/hack/build-kubeconform.sh")

if [[ -z ${DRIFTLESS_BIN:-} || -z ${LOADGEN_BIN:-} ]]; then
  say "building driftless and driftless-loadgen (release)"
  TARGET=${CARGO_TARGET_DIR:-$ROOT/target-kubeconform-compare}
  (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET cargo build --release -q -p driftless -p loadgen) ||
    die "cargo build failed"
  DRIFTLESS_BIN=${DRIFTLESS_BIN:-$TARGET/release/driftless}
  LOADGEN_BIN=${LOADGEN_BIN:-$TARGET/release/driftless-loadgen}
fi

# ---- kubeconform's schemas from upstream swagger.json -------------------------------------------

if [[ ! -f $SCHEMAS/.complete ]]; then
  command -v go >/dev/null || die "Go is needed to fetch the k8s.io/kubernetes module"
  SPEC=$(go env GOMODCACHE)/k8s.io/kubernetes@$K8S_VERSION/api/openapi-spec/swagger.json
  if [[ ! -f $SPEC ]]; then
    (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes@$K8S_VERSION)
  fi
  [[ -f $SPEC ]] || die "$SPEC not found"
  say "generating kubeconform schemas from $SPEC"
  rm -rf "$SCHEMAS.tmp"
  mkdir -p "$SCHEMAS.tmp"
  python3 - "$SPEC" "$SCHEMAS.tmp" <<'PY'
import copy, json, sys

spec_path, out_dir = sys.argv[1], sys.argv[2]
definitions = json.load(open(spec_path))["definitions"]

# What openapi2jsonschema special-cases: both accept a number or a string in YAML.
SPECIAL = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
}

def expand(schema, stack):
    """Inlines every $ref (standalone), closes objects with properties (strict)."""
    if isinstance(schema, list):
        return [expand(item, stack) for item in schema]
    if not isinstance(schema, dict):
        return schema
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name in SPECIAL:
            return copy.deepcopy(SPECIAL[name])
        if name in stack:  # recursive types (JSONSchemaProps): accept anything below
            return {}
        return expand(definitions[name], stack + (name,))
    out = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {name: expand(child, stack) for name, child in value.items()}
        elif key in ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not"):
            out[key] = expand(value, stack)
        else:
            out[key] = value
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.get("format") == "int-or-string":
        return copy.deepcopy(SPECIAL["io.k8s.apimachinery.pkg.util.intstr.IntOrString"])
    return out

count = 0
for name, definition in definitions.items():
    for gvk in definition.get("x-kubernetes-group-version-kind", []):
        kind, group, version = gvk["kind"], gvk["group"], gvk["version"]
        # kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}: kind, first label of the group,
        # version, lower case.
        suffix = "-" + (group.split(".")[0] + "-" if group else "") + version
        schema = expand(definition, (name,))
        schema["$schema"] = "http://json-schema.org/schema#"
        with open(f"{out_dir}/{kind.lower()}{suffix.lower()}.json", "w") as f:
            json.dump(schema, f)
        count += 1
print(f"{count} schemas", file=sys.stderr)
PY
  touch "$SCHEMAS.tmp/.complete"
  rm -rf "$SCHEMAS"
  mv "$SCHEMAS.tmp" "$SCHEMAS"
fi

# ---- the same objects for both ------------------------------------------------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kubeconform-compare.XXXXXX")
[[ ${KEEP:-} == 1 ]] || trap 'rm -rf "$WORK"' EXIT
say "generating $N apps in $WORK/repo"
"$LOADGEN_BIN" --apps "$N" --out "$WORK/repo" >/dev/null
say "rendering them to $WORK/objects.yaml"
"$DRIFTLESS_BIN" render "$WORK/repo" -o yaml >"$WORK/objects.yaml" 2>"$WORK/render.err" ||
  die "driftless render failed: $(tail -n 5 "$WORK/render.err")"
OBJECTS=$(grep -c '^kind: ' "$WORK/objects.yaml" || true)
((OBJECTS > 0)) || die "no objects rendered"

# timed LABEL CMD...: runs CMD once; prints "wall cpu" (seconds).
timed() {
  local label=$1
  shift
  /usr/bin/time -f '%e %U %S' -o "$WORK/time" "$@" >"$WORK/out" 2>"$WORK/err" || {
    # Both tools exit 1 when they find problems; the generated apps must have none.
    tail -n 5 "$WORK/out" "$WORK/err" >&2
    die "$label failed"
  }
  tail -n 1 "$WORK/time" | awk '{printf "%.2f %.2f", $1, $2 + $3}'
}
faster() { # A B: the "wall cpu" pair of the two with the lower wall time ("" counts as slowest)
  if [[ -z $2 ]] || awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); exit !(x[1] < y[1]) }'; then
    printf '%s\n' "$1"
  else
    printf '%s\n' "$2"
  fi
}

# The two alternate RUNS times, so that other load on the machine weighs on both alike; each keeps
# its fastest run. kubeconform reads the rendered objects and validates them (strict: unknown
# fields are errors, as in driftless' schema-violation; -n 2: the machine's cores). driftless
# reads the repository and does everything: load, render, every rule, OpenAPI validation (the
# JSON diagnostics are the output).
KC="" DL=""
for ((i = 1; i <= RUNS; i++)); do
  line=$(timed kubeconform "$KUBECONFORM" -strict -summary -n 2 \
    -schema-location "$SCHEMAS/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$WORK/objects.yaml")
  grep -q 'Invalid: 0, Errors: 0' "$WORK/out" || die "kubeconform found problems: $(tail -n 3 "$WORK/out")"
  say "kubeconform run $i: wall/cpu $line s"
  KC=$(faster "$line" "$KC")
  line=$(timed "driftless analyze" "$DRIFTLESS_BIN" analyze "$WORK/repo" -o json)
  say "driftless analyze run $i: wall/cpu $line s"
  DL=$(faster "$line" "$DL")
done

row() { # NAME WALL CPU
  awk -v name="$1" -v wall="$2" -v cpu="$3" -v n="$OBJECTS" -v apps="$N" 'BEGIN {
    printf "| %s | %.2f s | %.2f s | %.0f | %.0f | %.2f ms |\n", name, wall, cpu, n / wall, n / cpu, cpu * 1000 / apps }'
}
echo
echo "| tool | wall | CPU (user+sys) | objects/s (wall) | objects/s per core (CPU) | CPU per app |"
echo "|---|---|---|---|---|---|"
row "kubeconform $("$KUBECONFORM" -v) \`-strict -n 2\` on the rendered objects (parse + validate)" $KC
row "\`driftless analyze -o json\` on the repository (load + render + all rules + validation)" $DL
echo
echo "$N apps, $OBJECTS objects; best of $RUNS alternated runs; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%dT%H:%MZ)"
