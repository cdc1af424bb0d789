// Built with matrix_trace_methods(PATCHABLE): five nops at every entry, which
// PatchableEntries::Patch() turns into jumps.

#include "workload.h"

namespace matrix_test_workload {

MATRIX_BENCH_ALIGNED int PatchableLeaf(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

}  // namespace matrix_test_workload
