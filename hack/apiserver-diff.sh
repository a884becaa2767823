#!/usr/bin/env bash
# The analyzer against the real kube-apiserver on the whole generated corpus (CI runs every 8th
# object): each object is created with dryRun=All in a test namespace of the shared e2e cluster
# and the API server's verdict compared with the analyzer's. Writes the report (figures, false
# errors, misses) to the file given, default target/apiserver-diff.md.
#
#   hack/apiserver-diff.sh [REPORT]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPORT=${1:-$ROOT/target/apiserver-diff.md}

cd "$ROOT"
mkdir -p "$(dirname "$REPORT")"
DRIFTLESS_APISERVER_DIFF=full DRIFTLESS_APISERVER_DIFF_REPORT=$REPORT \
  cargo test --test e2e apiserver_diff -- --nocapture
echo "report: $REPORT" >&2
