// This whole file is built with matrix_trace_methods(), like a user's program.
// It uses std::atomic<int64_t>::load and std::atomic<uint64_t>::store, which
// matrix's hooks use too. In an unoptimized clang build (no exclude list,
// nothing inlined) this file emits instrumented out-of-line copies of those
// members, and the linker may pick them for the hooks as well: a hook that
// called them would re-enter itself until the stack overflowed (the demo died
// so in the clang ASan build). The hooks now use compiler builtins only.
// "real": a real MethodTracer on a real thread.

#include <atomic>
#include <cstdint>
#include <thread>

#include "gtest/gtest.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {
namespace {

std::atomic<int64_t> g_counter{0};
std::atomic<uint64_t> g_published{0};

__attribute__((noinline)) int64_t LoadAndPublish(int64_t i) {
  const int64_t v = g_counter.load(std::memory_order_relaxed) + i;
  g_counter.store(v, std::memory_order_relaxed);
  g_published.store(static_cast<uint64_t>(v), std::memory_order_release);
  return v;
}

TEST(MethodTraceSelfRecursionRealTest, HooksDoNotReenterThroughTheProgramsAtomicCopies) {
  uint64_t recorded = 0;
  std::thread traced([&] {
    auto tracer = MethodTracer::Start();
    const uint64_t before = tracer->Mark();
    for (int i = 0; i < 1000; ++i) LoadAndPublish(i);
    recorded = tracer->Mark() - before;
  });
  traced.join();
  // Each call records an enter and an exit (plus the atomics' own calls in an
  // unoptimized build): at least two records per call, and no crash.
  EXPECT_GE(recorded, 2000u);
  EXPECT_EQ(g_counter.load(), 999 * 1000 / 2);
}

}  // namespace
}  // namespace matrix
