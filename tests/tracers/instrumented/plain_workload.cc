// Built without instrumentation.

#include "matrix/core/tick_clock.h"
#include "workload.h"

namespace matrix_test_workload {

__attribute__((noinline)) int PlainLeaf(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

void BurnFor(absl::Duration cost) {
  const matrix::TimeTicks deadline = matrix::MonotonicNow() + cost;
  while (matrix::MonotonicNow() < deadline) {
  }
}

}  // namespace matrix_test_workload
