// A real tkinter program (tests/agent/tk_target.py, Debian's python3 and
// python3-tk) under xvfb-run through matrix-run, default thresholds (LAG 2 s,
// ANR 5 s). Tcl/Tk's main thread waits in pthread_cond_wait /
// pthread_cond_timedwait, never in poll (issue 17, item 1): before the agent
// learned the loop's own waits, the idle window was one long dispatch (an
// ANR keyed Tcl_WaitForEvent) and a hang after idle time was reported early.
//
// The window idles 6.5 s (over the ANR threshold), a callback spins 6 s, one
// 500 ms later spins 2.5 s. Expected: nothing for the idle time; one ANR 5 s
// into the 6 s callback; one LAG of about 2.5 s for the second callback
// (reported at its end), whose timeline shows the 6 s callback's dispatch
// whole: about 6 s. Margins: 1 s on a loaded machine.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

// "start NAME EPOCH_MS" lines of tk_target.py's output.
int64_t StartOf(const std::string& out, const std::string& name) {
  const size_t at = out.find("start " + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(out.c_str() + at + 7 + name.size());
}

TEST(TkProgramTest, IdleWindowIsNotAHangAndABusyCallbackIsOneAnr) {
  const std::string dir = agent_test::NewReportDir("tk");
  const agent_test::RunResult run =
      agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--timeline-window", "10000", "--",
                       PROGRAM_PATH, TK_TARGET_PATH,
                       "6500", "6000", "2500"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  const int64_t idle_start = StartOf(run.out, "idle");
  const int64_t busy_start = StartOf(run.out, "busy");
  ASSERT_GT(StartOf(run.out, "lag"), 0) << run.out << run.err;
  std::vector<matrix::report::IssueRecord> anrs, lags;
  for (auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind == "startup") continue;
    if (record.TagDetail() == "Trace_EvilMethod/ANR") {
      anrs.push_back(std::move(record));
    } else if (record.TagDetail() == "Trace_EvilMethod/LAG") {
      lags.push_back(std::move(record));
    } else {
      // Only Tk's start (building the window under Xvfb) may be slow.
      EXPECT_LT(record.time_ms(), idle_start) << record.TagDetail() << "\n" << run.err;
    }
  }
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  const auto& anr = anrs[0].issue.anr();
  // Python's code, not a wait in Tcl_WaitForEvent.
  EXPECT_FALSE(absl::StrContains(agent_test::StackText(anrs[0]), "Tcl_WaitForEvent"))
      << agent_test::StackText(anrs[0]);
  EXPECT_GE(anr.cost_ms(), 5000);
  EXPECT_LT(anr.cost_ms(), 6000);
  EXPECT_GE(anrs[0].time_ms() - busy_start, 5000);  // Not early: 5 s into the callback.
  EXPECT_LT(anrs[0].time_ms() - busy_start, 6000);

  ASSERT_EQ(lags.size(), 1u) << run.err;
  const auto& lag = lags[0].issue.anr();
  EXPECT_GE(lag.cost_ms(), 2500);
  EXPECT_LT(lag.cost_ms(), 3500);
  // The 6 s callback's whole dispatch, in the LAG's timeline (its span and
  // --timeline-window 10 s before).
  int64_t longest_us = 0;
  for (const auto& slice : lags[0].issue.timeline().dispatches()) {
    longest_us = std::max(longest_us, slice.dur_us());
  }
  EXPECT_GE(longest_us, 6'000'000) << run.err;
  EXPECT_LT(longest_us, 7'000'000) << run.err;
}

}  // namespace
