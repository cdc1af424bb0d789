#!/usr/bin/env bash
# Per-call cost of method tracing, matrix-cpp against its peers, in one run
# (docs/performance.md, "Instrumented calls"; `make bench-peers`).
#
#   tools/bench-peers.sh [build-dir]        (default: build)
#
# Every line is "plain_ns traced_ns delta_ns ratio" for a tiny leaf function:
# plain = the leaf without instrumentation, traced = the same leaf with the
# mechanism, timed alternately in chunks of 32,768 calls in the same process
# (fastest chunk; mean_* over all chunks). Peers are optional and skipped
# with a message when not installed:
#
#   apt-get install -y uftrace liblttng-ust-dev lttng-tools
#
# LTTng-UST: the program's -finstrument-functions hooks are LTTng's
# liblttng-ust-cyg-profile{,-fast}.so (LD_PRELOAD), recording into a live
# session (lttng-sessiond is started if none runs; root or the tracing group).
# uftrace: `uftrace record` of the leaf built with -pg, with
# -finstrument-functions, and with -fpatchable-function-entry=5 (-P .).
set -u
BUILD=${1:-build}
CC=${CC:-gcc}
SRC=$(cd "$(dirname "$0")/../tests/bench/peers" && pwd)
OUT=$(mktemp -d /tmp/matrix-bench-peers.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
CHUNKS=${CHUNKS:-100}      # Programs that only time.
PEER_CHUNKS=${PEER_CHUNKS:-20}  # Programs that record every call (~1.3 M events).

build() {  # build <name> <leaf flags...>
  local name=$1; shift
  "$CC" -O2 -c "$SRC/peer_leaf.c" -DLEAF=plain_leaf -o "$OUT/plain.o" &&
  "$CC" -O2 "$@" -c "$SRC/peer_leaf.c" -DLEAF=traced_leaf -o "$OUT/$name.o" &&
  "$CC" -O2 "$SRC/peer_calls.c" "$OUT/plain.o" "$OUT/$name.o" -L"$OUT" -lempty_hooks \
    -Wl,-rpath,"$OUT" -o "$OUT/$name"
}
row() { printf '%-44s %s\n' "$1" "$2"; }

"$CC" -O2 -shared -fPIC "$SRC/empty_hooks.c" -o "$OUT/libempty_hooks.so" || exit 1
build cyg -finstrument-functions || exit 1
build pg -pg || exit 1
build patchable -fpatchable-function-entry=5 || exit 1

echo "== matrix-cpp (BM_TracedCall, same binary, same run) =="
if [ -x "$BUILD/tests/bench/matrix_bench" ]; then
  "$BUILD/tests/bench/matrix_bench" --benchmark_filter='BM_TracedCall/' \
      --benchmark_min_time=1 2>/dev/null | awk '/^BM_TracedCall/ {
    name = $1; line = "";
    for (i = 2; i <= NF; i++) if ($i ~ /^(plain_ns|traced_ns|delta_ns|ratio|vs_floor)=/) line = line " " $i;
    printf "%-44s%s\n", name, line }'
else
  echo "skipped: $BUILD/tests/bench/matrix_bench not built (cmake --build $BUILD --target matrix_bench)"
fi

echo "== reference =="
row "empty hooks in a shared library (PLT floor)" "$("$OUT/cyg" "$CHUNKS")"
row "patchable entries, not patched (5 nops)" "$("$OUT/patchable" "$CHUNKS")"

echo "== LTTng-UST cyg-profile =="
LTTNG_LIB=""
for dir in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
  [ -e "$dir/liblttng-ust-cyg-profile.so" ] && LTTNG_LIB=$dir && break
done
if [ -z "$LTTNG_LIB" ] || ! command -v lttng >/dev/null; then
  echo "skipped: LTTng-UST not installed (apt-get install -y liblttng-ust-dev lttng-tools)"
else
  SESSIOND_PID=""
  if ! lttng list >/dev/null 2>&1; then
    lttng-sessiond >/dev/null 2>&1 &
    SESSIOND_PID=$!
    for _ in $(seq 50); do lttng list >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  SESSION=matrix-bench-peers-$$
  if lttng create "$SESSION" --output="$OUT/lttng" >/dev/null 2>&1 &&
     lttng enable-event --userspace 'lttng_ust_cyg_profile*' >/dev/null 2>&1 &&
     lttng start >/dev/null 2>&1; then
    for variant in cyg-profile cyg-profile-fast; do
      row "lttng-ust $variant (session recording)" \
          "$(LD_PRELOAD="$LTTNG_LIB/liblttng-ust-$variant.so" "$OUT/cyg" "$PEER_CHUNKS")"
    done
    lttng stop >/dev/null 2>&1
    lttng destroy "$SESSION" >/dev/null 2>&1
  else
    echo "skipped: could not create an LTTng session (lttng-sessiond running? root or tracing group?)"
  fi
  if [ -n "$SESSIOND_PID" ]; then kill "$SESSIOND_PID" 2>/dev/null; wait "$SESSIOND_PID" 2>/dev/null; fi
fi

echo "== uftrace record =="
if ! command -v uftrace >/dev/null; then
  echo "skipped: uftrace not installed (apt-get install -y uftrace)"
else
  row "uftrace -pg (mcount)" "$(uftrace record -d "$OUT/uftrace-pg" "$OUT/pg" "$PEER_CHUNKS" 2>/dev/null)"
  row "uftrace -finstrument-functions" \
      "$(uftrace record -d "$OUT/uftrace-cyg" "$OUT/cyg" "$PEER_CHUNKS" 2>/dev/null)"
  row "uftrace -fpatchable-function-entry=5 (-P .)" \
      "$(uftrace record -P . -d "$OUT/uftrace-patch" "$OUT/patchable" "$PEER_CHUNKS" 2>/dev/null)"
fi
