#!/bin/sh
# Re-captures tests/tools/testdata/demo/matrix-reports from a real matrix-demo
# run (TZ=UTC, in a temporary directory, ~15 s) and regenerates the example
# blocks of docs/matrix-report.md from it with the built matrix-report.
#
#   tools/matrix-report/update_demo_fixture.sh [BUILD_DIR]     (default: build)
#
# The demo binary's path in the stacks is replaced by
# /opt/matrix-cpp/bin/matrix-demo, and source files of this checkout (the
# file:line of frames) are made relative to it, so the fixture does not
# depend on the checkout. To regenerate only the doc (a change to the tool, not the demo):
#   MATRIX_REPORT_UPDATE_DOC=1 BUILD_DIR/tests/tools/tools_matrix_report_doc_test
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
cmake --build "$build" --target matrix-demo matrix-report tools_matrix_report_doc_test
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && TZ=UTC "$build/samples/demo/matrix-demo" > demo.out 2>&1) ||
  { cat "$tmp/demo.out" >&2; exit 1; }
fixture="$root/tests/tools/testdata/demo/matrix-reports"
rm -rf "$fixture"
mkdir -p "$fixture"
cp -R "$tmp/matrix-reports/." "$fixture/"
find "$fixture" -type f -exec chmod 644 {} + -exec \
  sed -i -e "s#$build/samples/demo/matrix-demo#/opt/matrix-cpp/bin/matrix-demo#g" \
         -e "s#$root/##g" {} +
TZ=UTC MATRIX_REPORT_UPDATE_DOC=1 "$build/tests/tools/tools_matrix_report_doc_test"
echo "fixture: $fixture; doc: $root/docs/matrix-report.md (review and commit both)"
