#!/usr/bin/env bash
# Runs the sample programs of other runtimes under matrix-run and prints
# matrix-report's groups for each: a Python (CPython 3.11/3.12) asyncio
# program that hangs in parse_feed, and a node program that hangs in
# renderChart (JavaScript names through --perf-map). A runtime that is not
# installed is skipped.
#
#   samples/runtimes/run.sh [BUILD_DIR] [REPORT_DIR]      (`make demo-runtimes`)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
reports="${2:-$(mktemp -d)}"
run="$build/tools/matrix-run/matrix-run"
report="$build/tools/matrix-report/matrix-report"
[[ -x "$run" && -x "$report" ]] || { echo "build matrix-run and matrix-report first (make build)" >&2; exit 2; }

python=""
for p in /usr/bin/python3.11 /usr/bin/python3.12 python3.12 python3.11; do
  if command -v "$p" > /dev/null; then python="$p"; break; fi
done
if [[ -n "$python" ]]; then
  echo "== $python feed_reader.py under matrix-run (ANR at 1 s)"
  "$run" --anr 1000 --report-dir "$reports/python" -- "$python" "$here/feed_reader.py"
  "$report" group "$reports/python"
else
  echo "== no CPython 3.11 or 3.12: skipped the Python sample"
fi

if command -v node > /dev/null; then
  echo "== node chart_server.js under matrix-run --perf-map (ANR at 1 s)"
  "$run" --anr 1000 --perf-map --report-dir "$reports/node" -- node "$here/chart_server.js"
  "$report" group "$reports/node"
else
  echo "== no node: skipped the JavaScript sample"
fi
