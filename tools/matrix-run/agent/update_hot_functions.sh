#!/usr/bin/env bash
# Writes tools/matrix-run/agent/hot_functions.ld: the functions that
# libmatrix-agent.so runs in glxgears (its start, the
# looper's dispatches and frames, the reports, in both --symbolize modes),
# measured under callgrind. The agent's link places them together
# ahead of the rest of its code, so a program maps the few 64 KiB windows of
# code the agent uses rather than all of it (docs/performance.md, "matrix-run
# agent"). Run it again after changes that add or rename the agent's
# everyday functions; a function missing from the list still works, in the
# cold part of the code.
#
#   tools/matrix-run/agent/update_hot_functions.sh BUILD_DIR [SECONDS]
#
# Needs valgrind, xvfb-run and glxgears (the Makefile's PACKAGES).
set -euo pipefail
build="$(realpath "$1")"
seconds="${2:-30}"
here="$(cd "$(dirname "$0")" && pwd)"
# Profiled: the agent linked without the list (valgrind names the functions
# of .text only); the list names their sections, the same in both links.
cmake --build "$build" --target matrix_agent_unordered > /dev/null
agent="$build/tools/matrix-run/libmatrix-agent-unordered.so"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Under valgrind glxgears runs about 100 times slower: its first frames are
# slow dispatches and hangs, so the code that reports them is in the list
# too (at the default thresholds, as the everyday code that watches for them).
for symbolize in 0 1; do
  # Stopped as a user would stop it: SIGINT to glxgears alone (with job
  # control on, so that it is not ignored).
  MATRIX_SYMBOLIZE="$symbolize" MATRIX_REPORT_DIR="$work" MATRIX_REPORT_NAME="run$symbolize" \
    xvfb-run -a bash -c "set -m; LD_PRELOAD='$agent' valgrind --tool=callgrind \
      --callgrind-out-file='$work/callgrind.$symbolize' /usr/bin/glxgears & sleep $seconds;
      kill -INT \$!; wait \$!" > "$work/log.$symbolize" 2>&1 || true
  if grep -q "^matrix-agent: .*not monitoring" "$work/log.$symbolize"; then
    cat "$work/log.$symbolize" >&2
    exit 1
  fi
done
nm --defined-only "$agent" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u > "$work/mangled"
c++filt < "$work/mangled" > "$work/demangled"
python3 - "$work" "$here/hot_functions.ld" <<'EOF'
import re, sys
work, out = sys.argv[1], sys.argv[2]
# callgrind names its objects and functions once, then by number: "ob=(3) path".
ran = set()
for n in ("0", "1"):
    names = {"ob": {}, "fn": {}}
    ob = fn = None
    for line in open(f"{work}/callgrind.{n}", errors="replace"):
        # A name is given at its first use, which may be a call's (cob=, cfn=).
        m = re.match(r"^(c?)(ob|fn)=(?:\((\d+)\))? ?(.*)$", line.rstrip("\n"))
        if m:
            call, kind, idx, name = m.groups()
            if idx and name:
                names[kind][idx] = name
            value = names[kind].get(idx, name) if idx else name
            if call:
                continue
            if kind == "ob":
                ob = value
            else:
                fn = value
                if ob and re.search(r"/libmatrix-agent[^/]*\.so$", ob):
                    ran.add(fn)
mangled = open(f"{work}/mangled").read().split("\n")
demangled = open(f"{work}/demangled").read().split("\n")
sections = set()
for m, d in zip(mangled, demangled):
    if d in ran and m:
        sections.add(m)
if len(sections) < 300:
    sys.exit(f"only {len(sections)} of the agent's functions ran: not writing {out}")
with open(out, "w") as f:
    f.write("/* Written by update_hot_functions.sh: the functions libmatrix-agent.so runs\n"
            "   in glxgears (both --symbolize modes), placed together ahead of the rest of its\n"
            "   code (an output section of their own, before .text). */\n"
            "SECTIONS\n{\n  .text.matrix_hot :\n  {\n")
    for s in sorted(sections):
        f.write(f"    *(.text.{s})\n")
    # glibc's pthread_atfork, which the agent calls at its start, comes from
    # a static archive built without a section per function.
    f.write("    *libc_nonshared.a:*(.text .text.*)\n")
    f.write("  }\n}\nINSERT BEFORE .text;\n")
print(f"{len(sections)} functions in {out}")
EOF
