#!/usr/bin/env bash
# Runs the quickstart on a fresh warehouse and compares its output with expected.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
warehouse=$(mktemp -d)
trap 'rm -rf "$warehouse"' EXIT
WAREHOUSE="$warehouse" "$here/run.sh" > "$warehouse/actual.txt"
diff -u "$here/expected.txt" "$warehouse/actual.txt"
echo "quickstart/embedded: output matches expected.txt"
