#!/usr/bin/env bash
# samples/runtimes/run.sh works: the Python sample's ANR is keyed parse_feed
# and the node sample's renderChart (each checked when its runtime is there).
#   runtimes_sample_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"; build="$2"
reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT
out="$("$src/samples/runtimes/run.sh" "$build" "$reports" 2>&1)"
echo "$out"
fail=0
if command -v /usr/bin/python3.11 > /dev/null || command -v python3.12 > /dev/null; then
  grep -Eq "^ +key +parse_feed$" <<< "$out" || { echo "FAIL: no ANR keyed parse_feed"; fail=1; }
fi
if command -v node > /dev/null; then
  grep -Eq "^ +key +renderChart$" <<< "$out" || { echo "FAIL: no ANR keyed renderChart"; fail=1; }
fi
exit "$fail"
