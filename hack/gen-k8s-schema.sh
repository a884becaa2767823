#!/usr/bin/env bash
# Regenerate analyzer/schemas/k8s-v1.34.json from upstream Kubernetes' OpenAPI spec
# (api/openapi-spec/swagger.json in the k8s.io/kubernetes Go module), with the Rust generator
# in analyzer/src/schema/generate.rs. The test analyzer/tests/check_schema.rs checks that the
# checked-in file equals a fresh generation whenever the module is in the Go module cache.
#
#   hack/gen-k8s-schema.sh
set -euo pipefail

K8S_VERSION=v1.34.3
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

command -v go >/dev/null 2>&1 || { echo "gen-k8s-schema: Go is needed to fetch the k8s.io/kubernetes module" >&2; exit 1; }
MODCACHE=$(go env GOMODCACHE)
SPEC=$MODCACHE/k8s.io/kubernetes@$K8S_VERSION/api/openapi-spec/swagger.json
if [[ ! -f $SPEC ]]; then
  # Outside a module `go mod download` fetches exactly this version into the cache (the
  # module is large; its go.mod replaces staging modules, which download ignores).
  (cd "$(mktemp -d)" && GOFLAGS=-mod=mod go mod download k8s.io/kubernetes@$K8S_VERSION)
fi
[[ -f $SPEC ]] || { echo "gen-k8s-schema: $SPEC not found" >&2; exit 1; }

cd "$ROOT"
UPDATE_K8S_SCHEMA=1 K8S_SWAGGER_JSON=$SPEC \
  cargo test -p analyzer --test check_schema -- --exact regenerating_the_kubernetes_schema_gives_the_same_bytes
wc -c analyzer/schemas/k8s-v1.34.json >&2
