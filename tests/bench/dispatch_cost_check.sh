#!/bin/sh
# Runs matrix_dispatch_cost under callgrind with monitoring off and on (same
# binary) and fails when the instructions every tracer and the flight recorder
# add per dispatched message or per vsync frame exceed a ceiling
# (docs/performance.md, "Per message and per frame"). Instruction counts are
# exact, so the test does not depend on the machine's load.
#
#   dispatch_cost_check.sh BINARY MESSAGE_CEILING FRAME_CEILING [MEASURED_BUILD]
#
# Exits 77 (ctest SKIP_RETURN_CODE) when valgrind is not installed, or when
# MEASURED_BUILD is 0 (the ceilings hold for gcc RelWithDebInfo builds only).
set -eu
binary=$1
message_ceiling=$2
frame_ceiling=$3
measured_build=${4:-1}
messages=20000
frames=4000

if [ "$measured_build" = 0 ]; then
  echo "SKIPPED: the ceilings are instruction counts of a gcc RelWithDebInfo build without sanitizers"
  exit 77
fi

if ! command -v valgrind >/dev/null 2>&1; then
  echo "SKIPPED: valgrind is not installed (apt-get install valgrind, or make deps)"
  exit 77
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# Instructions collected inside RunMeasured.
collected() {
  valgrind --tool=callgrind '--toggle-collect=*RunMeasured*' \
      --callgrind-out-file="$dir/out" "$binary" "$@" >"$dir/log" 2>&1 ||
    { cat "$dir/log"; echo "FAILED: $binary $*"; exit 1; }
  sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$dir/out"
}

msg_off=$(collected --messages=$messages)
msg_on=$(collected --monitored --messages=$messages)
frm_off=$(collected --messages=0 --frames=$frames)
frm_on=$(collected --monitored --messages=0 --frames=$frames)

per_msg_off=$((msg_off / messages))
per_msg_on=$((msg_on / messages))
per_frm_off=$((frm_off / frames))
per_frm_on=$((frm_on / frames))
added_msg=$(((msg_on - msg_off) / messages))
added_frm=$(((frm_on - frm_off) / frames))

echo "per message: $per_msg_off -> $per_msg_on Ir, added $added_msg (ceiling $message_ceiling)"
echo "per frame:   $per_frm_off -> $per_frm_on Ir, added $added_frm (ceiling $frame_ceiling)"
status=0
if [ "$added_msg" -gt "$message_ceiling" ]; then
  echo "FAILED: per message +$added_msg Ir is over the ceiling of +$message_ceiling"
  status=1
fi
if [ "$added_frm" -gt "$frame_ceiling" ]; then
  echo "FAILED: per frame +$added_frm Ir is over the ceiling of +$frame_ceiling"
  status=1
fi
exit $status
