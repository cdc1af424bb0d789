// MATRIX_TRACE_SCOPES_DISABLED (CMake -DMATRIX_TRACE_SCOPES=OFF) compiles
// MATRIX_TRACE_SCOPE to nothing.

#define MATRIX_TRACE_SCOPES_DISABLED 1

#include <memory>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {
namespace {

int Work(int x) {
  MATRIX_TRACE_SCOPE("Work");
  return x + 1;
}

TEST(MethodTraceScopeDisabledTest, ScopeWritesNoRecords) {
  MethodTracer::Options options;
  options.tick_period = absl::ZeroDuration();
  auto tracer = MethodTracer::Start(options);
  const uint64_t mark = tracer->Mark();
  EXPECT_EQ(Work(1), 2);
  EXPECT_EQ(tracer->Mark(), mark);
  // The same scope type still records when used directly.
  static constexpr TraceSite kSite{"Direct", __FILE__, __LINE__};
  { ScopedTraceSite scope(&kSite); }
  EXPECT_EQ(tracer->Mark(), mark + 2);
}

}  // namespace
}  // namespace matrix
