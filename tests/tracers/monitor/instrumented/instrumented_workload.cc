// Built with matrix_trace_methods(): every function here calls the
// __cyg_profile_func_enter/exit hooks.

#include <stdexcept>

#include "workload.h"

namespace matrix_test_workload {

__attribute__((noinline)) void Warmup(absl::Duration cost) { BurnFor(cost); }

__attribute__((noinline)) void C(absl::Duration cost) { BurnFor(cost); }

__attribute__((noinline)) void B(absl::Duration cost) { C(cost); }

__attribute__((noinline)) void A(absl::Duration cost) { B(cost); }

void RunSlowDispatch(absl::Duration warmup, absl::Duration slow) {
  Warmup(warmup);
  A(slow);
}

__attribute__((noinline)) void Thrower() {
  throw std::runtime_error("thrown through traced frames");
}

__attribute__((noinline)) void Middle() { Thrower(); }

bool Catcher() {
  try {
    Middle();
  } catch (const std::runtime_error&) {
    return true;
  }
  return false;
}

MATRIX_BENCH_ALIGNED int InstrumentedLeaf(int x) {
  asm volatile("" : "+r"(x));
  return x * 3 + 1;
}

}  // namespace matrix_test_workload
