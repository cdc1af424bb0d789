// A GLib loop under matrix-run: a dispatch is one iteration's work. Idle
// callbacks that keep the loop busy (GLib polls with timeout 0 while they
// are pending) give no LAG and no slow dispatch, while one slow callback is
// still reported on its own, with its stack and its own key.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using agent_test::ReadIssues;
using agent_test::RunResult;
using ::testing::HasSubstr;

TEST(GlibProgramTest, IdleWorkIsManyIterations_ASlowCallbackIsOneSlowDispatch) {
  const std::string dir = agent_test::NewReportDir("glib-idle");
  // 3 s of idle work in 2 ms calls, then a 1.2 s callback. Joined into one
  // dispatch, the idle work would be a LAG (2 s).
  const RunResult run =
      agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "5000", "--lag", "2000",
                       "--evil", "500", "--", GLIB_TARGET_PATH, "3000", "1200"});
  ASSERT_EQ(run.exit_code(), 0) << run.err;
  // The loop kept answering: the 50 ms heartbeat never waited long.
  const size_t at = run.out.find("heartbeat_max_gap_ms ");
  ASSERT_NE(at, std::string::npos) << run.out;
  EXPECT_LT(std::atoi(run.out.c_str() + at + 21), 300) << run.out;
  std::vector<std::string> kinds;
  const matrix::report::IssueRecord* slow = nullptr;
  const auto records = ReadIssues(dir);
  for (const auto& record : records) {
    if (record.kind == "startup") continue;
    kinds.push_back(record.TagDetail());
    if (record.kind == "evil_method") slow = &record;
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("Trace_EvilMethod/NORMAL")) << run.err;
  ASSERT_NE(slow, nullptr) << run.err;
  const auto& report = slow->issue.evil_method();
  EXPECT_GE(report.cost_ms(), 1190);
  EXPECT_LT(report.cost_ms(), 2000);
  EXPECT_EQ(report.stack_key(), "SlowCallback") << report.stack_text();
  std::string frames;
  for (const auto& frame : report.thread_stack().frames()) frames += frame.function() + "\n";
  EXPECT_THAT(frames, HasSubstr("g_main_context_dispatch")) << frames;
}

}  // namespace
