// A slow method in a real, method-traced program: the EvilMethod report
// names C as the culprit, shows A > B > C with their real costs, and shows
// an earlier 300 ms function with its own cost (which stack sampling after
// the fact would have missed).

#include <string>

#include "absl/strings/match.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/tick_clock.h"
#include "uninstrumented.h"

namespace {

__attribute__((noinline)) void PrepareInput() { e2e::SpinFor(absl::Milliseconds(300)); }
__attribute__((noinline)) void C() { e2e::SpinFor(absl::Milliseconds(800)); }
__attribute__((noinline)) void B() { C(); }
__attribute__((noinline)) void A() { B(); }

// The "message": first the 300 ms function, then A > B > C.
__attribute__((noinline)) void OnClick() {
  PrepareInput();
  A();
}

const matrix::proto::MethodCall* FindCall(const matrix::proto::EvilMethodReport& report,
                                          const std::string& name) {
  for (const auto& call : report.stack()) {
    if (absl::StrContains(call.name(), name)) return &call;
  }
  return nullptr;
}

TEST(EvilMethodE2ETest, SlowMethod_KeyIsC_TreeShowsCallersAndEarlierWork) {
  auto config = matrix::TraceConfig::Builder().EnableEvilMethodTrace(true).Build();
  ASSERT_TRUE(config.ok());
  e2e::TracedProgram program(*config);
  matrix::Handler handler(program.looper());
  // The dispatch's own thread-CPU share, to compare with the report's.
  double measured_cpu_percent = 0;
  handler.Post([&] {
    const absl::Duration cpu0 = matrix::CurrentThreadCpuTime();
    const matrix::TimeTicks t0 = matrix::MonotonicNow();
    OnClick();
    measured_cpu_percent = 100.0 * absl::FDivDuration(matrix::CurrentThreadCpuTime() - cpu0,
                                                      matrix::MonotonicNow() - t0);
  });
  program.RunFor(absl::Milliseconds(1300));

  ASSERT_TRUE(program.listener().WaitFor(
      [](const auto& issues) { return !issues.empty(); }, absl::Seconds(10)));
  std::vector<matrix::Issue> issues = program.listener().issues();
  ASSERT_EQ(issues.size(), 1u);
  const matrix::Issue& issue = issues[0];
  EXPECT_EQ(issue.tag(), "Trace_EvilMethod");
  ASSERT_TRUE(issue.proto().has_evil_method());
  const matrix::proto::EvilMethodReport& report = issue.proto().evil_method();
  EXPECT_EQ(report.detail(), matrix::proto::NORMAL);

  // The key names C, in the report and as the issue's de-duplication key.
  EXPECT_TRUE(absl::StrContains(report.stack_key(), "C()"))
      << report.stack_key() << "\n"
      << report.stack_text();
  EXPECT_EQ(issue.key(), report.stack_key());

  // A > B > C with costs within 10% of the truth (800 ms).
  const auto* a = FindCall(report, "::A()");
  const auto* b = FindCall(report, "::B()");
  const auto* c = FindCall(report, "::C()");
  ASSERT_TRUE(a && b && c) << report.stack_text();
  EXPECT_EQ(b->depth(), a->depth() + 1);
  EXPECT_EQ(c->depth(), b->depth() + 1);
  for (const auto* call : {a, b, c}) {
    EXPECT_NEAR(call->cost_ms(), 800, 80) << call->name();
  }
  // The earlier 300 ms function, with its own cost, beside A.
  const auto* prepare = FindCall(report, "PrepareInput()");
  ASSERT_TRUE(prepare) << report.stack_text();
  EXPECT_EQ(prepare->depth(), a->depth());
  EXPECT_NEAR(prepare->cost_ms(), 300, 30);
  // The whole dispatch.
  EXPECT_NEAR(report.cost_ms(), 1100, 110);
  // The sampled CPU usage matches the dispatch's own (how much CPU the
  // machine gave this thread depends on its load, so compare, not assume).
  EXPECT_GT(report.cpu_usage(), 0);
  EXPECT_NEAR(report.cpu_usage(), measured_cpu_percent, 20) << measured_cpu_percent;
}

}  // namespace
