// Built without instrumentation.

#include "matrix/core/tick_clock.h"
#include "workload.h"

namespace matrix_test_workload {

MATRIX_BENCH_ALIGNED int PlainLeaf(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

namespace {
MATRIX_BENCH_ALIGNED void EmptyHook(void* fn, void* site) {
  asm volatile("" : : "r"(fn), "r"(site) : "memory");
}
}  // namespace

MATRIX_BENCH_ALIGNED int LeafWithEmptyHooks(int x) {
  EmptyHook(reinterpret_cast<void*>(&LeafWithEmptyHooks), __builtin_return_address(0));
  asm volatile("" : "+r"(x));
  EmptyHook(reinterpret_cast<void*>(&LeafWithEmptyHooks), __builtin_return_address(0));
  return x * 3 + 1;
}

void BurnFor(absl::Duration cost) {
  const matrix::TimeTicks deadline = matrix::MonotonicNow() + cost;
  while (matrix::MonotonicNow() < deadline) {
  }
}

}  // namespace matrix_test_workload
