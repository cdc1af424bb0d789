// Test and benchmark workload for method tracing. Functions in
// instrumented_workload.cc are built with matrix_trace_methods(); those in
// plain_workload.cc are not.

#ifndef MATRIX_TESTS_TRACERS_INSTRUMENTED_WORKLOAD_H_
#define MATRIX_TESTS_TRACERS_INSTRUMENTED_WORKLOAD_H_

#include "absl/time/time.h"

// The benchmarks' leaves and loops each start a 64-byte line, so that their
// figures do not move with the link's layout (a leaf or loop straddling a
// line costs a fetch more per call).
#define MATRIX_BENCH_ALIGNED __attribute__((noinline, aligned(64)))

namespace matrix_test_workload {

// Instrumented. One dispatch's worth of work: Warmup() burns `warmup`, then
// A() -> B() -> C(), where C() burns `slow`.
void RunSlowDispatch(absl::Duration warmup, absl::Duration slow);
void Warmup(absl::Duration cost);
void A(absl::Duration cost);
void B(absl::Duration cost);
void C(absl::Duration cost);

// Instrumented. Catcher() -> Middle() -> Thrower(), which throws; Catcher()
// catches. Returns true if the exception was caught.
bool Catcher();
void Middle();
void Thrower();

// Instrumented leaf for the benchmarks (noinline, trivial body).
int InstrumentedLeaf(int x);

// The same leaf built with patchable entries (patchable_workload.cc).
int PatchableLeaf(int x);

// Not instrumented: the same leaf, and a busy-wait on the monotonic clock.
int PlainLeaf(int x);
// Not instrumented, but shaped like an instrumented leaf: calls two empty,
// out-of-line "hooks" with (function, call site). The floor any
// -finstrument-functions hook pays, whatever it does.
int LeafWithEmptyHooks(int x);
void BurnFor(absl::Duration cost);

}  // namespace matrix_test_workload

#endif  // MATRIX_TESTS_TRACERS_INSTRUMENTED_WORKLOAD_H_
