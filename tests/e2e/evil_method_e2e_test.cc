// A slow method in a real, method-traced program: the EvilMethod report
// names C as the culprit, shows A > B > C with their real costs, and shows
// an earlier 300 ms function with its own cost (which stack sampling after
// the fact would have missed).

#include <string>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/matrix.h"
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

// The last slow dispatch before Matrix::Shutdown() is reported: Shutdown
// drains the analysis (which, until the stop detector's next poll, would
// have waited 50 ms more). `GetParam()`: ms between the dispatch's end and
// Shutdown.
class LastSlowDispatchTest : public testing::TestWithParam<int> {};

TEST_P(LastSlowDispatchTest, EndingJustBeforeShutdown_IsReported) {
  auto config = matrix::TraceConfig::Builder().EnableEvilMethodTrace(true).Build();
  ASSERT_TRUE(config.ok());
  e2e::TracedProgram program(*config);
  matrix::Handler handler(program.looper());
  handler.Post([] { C(); });  // 800 ms.
  ASSERT_EQ(program.looper()->PollOnce(absl::ZeroDuration()),
            matrix::Looper::PollResult::kDispatched);
  absl::SleepFor(absl::Milliseconds(GetParam()));

  matrix::Matrix::Shutdown();

  // Delivered by the time Shutdown returned: no waiting here.
  std::vector<matrix::Issue> issues = program.listener().issues();
  ASSERT_EQ(issues.size(), 1u) << "gap " << GetParam() << " ms";
  EXPECT_EQ(issues[0].tag(), "Trace_EvilMethod");
  EXPECT_TRUE(absl::StrContains(issues[0].key(), "C()")) << issues[0].key();
  EXPECT_NEAR(issues[0].proto().evil_method().cost_ms(), 800, 200);
}

INSTANTIATE_TEST_SUITE_P(GapsBeforeShutdown, LastSlowDispatchTest, testing::Values(0, 10, 25),
                         [](const auto& info) { return absl::StrCat(info.param, "ms"); });

// A listener that blocks the worker on the first issue until released (or
// 5 s), and remembers what the TracePlugin dropped at its destruction.
class BlockingListener : public e2e::CollectingListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    CollectingListener::OnReportIssue(issue);
    if (!entered_.HasBeenNotified()) {
      entered_.Notify();
      release_.WaitForNotificationWithTimeout(absl::Seconds(5));
    }
  }
  void OnDestroy(matrix::Plugin& plugin) override {
    if (auto* trace = dynamic_cast<matrix::TracePlugin*>(&plugin)) {
      dropped_ = trace->dropped_at_shutdown();
    }
  }
  absl::Notification entered_;
  absl::Notification release_;
  int64_t dropped_ = -1;
};

TEST(ShutdownDrainTest, WhatCannotBeDrainedInTime_IsDroppedAndCounted) {
  auto config = matrix::TraceConfig::Builder().EnableEvilMethodTrace(true).Build();
  ASSERT_TRUE(config.ok());
  matrix::Looper* looper = matrix::Looper::PrepareMainLooper();
  auto listener = std::make_shared<BlockingListener>();
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  absl::Status status = matrix::Matrix::Init(matrix::Matrix::Builder()
                                                 .AddPlugin(std::move(trace))
                                                 .SetPluginListener(listener)
                                                 .SetShutdownDrainTimeout(absl::Milliseconds(200))
                                                 .Build());
  if (status.ok()) status = plugin->Start();
  ASSERT_TRUE(status.ok()) << status;
  matrix::Handler handler(looper);
  handler.Post([] { C(); });
  ASSERT_EQ(looper->PollOnce(absl::ZeroDuration()), matrix::Looper::PollResult::kDispatched);
  // The first report holds the worker; the second slow dispatch's analysis
  // queues behind it.
  ASSERT_TRUE(listener->entered_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  handler.Post([] { C(); });
  ASSERT_EQ(looper->PollOnce(absl::ZeroDuration()), matrix::Looper::PollResult::kDispatched);
  // Released after the drain timed out (200 ms) but long before the
  // listener's own 5 s.
  std::thread release([&] {
    absl::SleepFor(absl::Seconds(1));
    listener->release_.Notify();
  });

  matrix::Matrix::Shutdown();
  release.join();

  EXPECT_EQ(listener->issues().size(), 1u);
  EXPECT_EQ(listener->dropped_, 1);
  matrix::Choreographer::ReleaseForTesting();
  matrix::Looper::ReleaseForTesting();
}

}  // namespace
