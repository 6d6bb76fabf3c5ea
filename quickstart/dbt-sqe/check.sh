#!/usr/bin/env bash
# Runs the dbt-sqe quickstart and compares its output with expected.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$here/run.sh" > "$out" || { cat "$out"; exit 1; }
diff -u "$here/expected.txt" "$out"
echo "quickstart/dbt-sqe: output matches expected.txt"
