#!/usr/bin/env bash
# What libmatrix-agent.so brings into a program besides itself
# (docs/performance.md, "matrix-run agent"): spdlog and fmt are compiled into
# it (tools/matrix-run/agent/logging_impl.cc), so neither libspdlog.so nor
# libfmt.so is a needed library, and none of their functions is exported
# (they would take the place of a program's own spdlog or fmt).
#   agent_libraries_test.sh LIBMATRIX_AGENT_SO
set -euo pipefail
agent="$1"
needed="$(readelf -d "$agent" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
echo "needed: $(tr '\n' ' ' <<< "$needed")"
[ -n "$needed" ] || { echo "FAIL: no needed libraries read from $agent"; exit 1; }
fail=0
for lib in libspdlog libfmt; do
  if grep -q "^$lib\." <<< "$needed"; then echo "FAIL: $lib is a needed library"; fail=1; fi
done
exported="$(nm -D --defined-only "$agent" | c++filt)"
echo "exported: $(wc -l <<< "$exported") symbols"
if grep -E "spdlog|fmt::" <<< "$exported"; then echo "FAIL: spdlog or fmt exported"; fail=1; fi
exit "$fail"
