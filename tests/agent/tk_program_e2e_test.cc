// A real tkinter program (tests/agent/tk_target.py, Debian's python3 and
// python3-tk) under xvfb-run through matrix-run, default thresholds (LAG 2 s,
// ANR 5 s). Tcl/Tk's main thread waits in pthread_cond_wait /
// pthread_cond_timedwait, never in poll: before the agent
// learned the loop's own waits, the idle window was one long dispatch (an
// ANR keyed Tcl_WaitForEvent) and a hang after idle time was reported early.
//
// The window idles 6.5 s (over the ANR threshold), a callback spins 6 s, one
// 500 ms later spins 2.5 s. Expected: nothing for the idle time; one ANR 5 s
// into the 6 s callback; one LAG of about 2.5 s for the second callback
// (reported at its end), whose timeline shows the 6 s callback's dispatch
// whole: about 6 s. Margins: 1 s on a loaded machine.

#include <unistd.h>

#include <algorithm>
#include <fstream>
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

// The 1-based line of `path` containing `marker`, 0 if none.
int LineOf(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find(marker) != std::string::npos) return number;
  }
  return 0;
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

// Python frames (python_frames.h) in the ANR and the LAG of Debian 12's
// CPython 3.11 (/usr/bin/python3.11): both name tk_target.py's spin() at its
// loop's line, called by the callback that hangs, and the key is spin on
// two runs. Short thresholds: ANR 1 s into a 1.5 s callback, LAG 0.8 s (the
// window idles 0.3 s first, under the LAG threshold).
TEST(TkProgramTest, AnrAndLagStacksNameThePythonFunctions) {
  constexpr char kPython311[] = "/usr/bin/python3.11";
  if (access(kPython311, X_OK) != 0) GTEST_SKIP() << kPython311 << " missing";
  const int spin_line = LineOf(TK_TARGET_PATH, "# SPIN_LINE");
  ASSERT_GT(spin_line, 0);
  std::vector<std::string> keys;
  for (int run_index = 0; run_index < 2; ++run_index) {
    const std::string dir = agent_test::NewReportDir("tk-python-" + std::to_string(run_index));
    const agent_test::RunResult run =
        agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "1000", "--lag", "500",
                         "--", kPython311, TK_TARGET_PATH, "300", "1500", "800"});
    if (run.exit_code() == 3) GTEST_SKIP() << "tkinter missing for " << kPython311;
    ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
    const int64_t busy_start = StartOf(run.out, "busy");
    ASSERT_GT(busy_start, 0) << run.out;
    std::vector<matrix::report::IssueRecord> anrs, lags;
    for (auto& record : agent_test::ReadIssues(dir)) {
      if (record.time_ms() < busy_start) continue;  // Tk's start under Xvfb may be slow.
      if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
      if (record.TagDetail() == "Trace_EvilMethod/LAG") lags.push_back(std::move(record));
    }
    ASSERT_EQ(anrs.size(), 1u) << run.err;
    ASSERT_EQ(lags.size(), 1u) << run.err;
    for (const auto* record : {&anrs[0], &lags[0]}) {
      const auto& stack = record->issue.anr().thread_stack();
      const std::string text = agent_test::StackText(*record);
      const char* caller = record == &anrs[0] ? "busy_callback" : "lag_callback";
      int spin = -1;
      for (int i = 0; i < stack.frames_size() && spin < 0; ++i) {
        if (stack.frames(i).function() == "spin") spin = i;
      }
      ASSERT_GE(spin, 0) << text;
      ASSERT_LT(spin + 2, stack.frames_size()) << text;
      EXPECT_EQ(stack.frames(spin).module(), "[python]");
      EXPECT_EQ(stack.frames(spin).file(), TK_TARGET_PATH);
      EXPECT_EQ(stack.frames(spin).line(), static_cast<uint32_t>(spin_line)) << text;
      EXPECT_EQ(stack.frames(spin + 1).function(), caller) << text;
      EXPECT_EQ(stack.frames(spin + 1).file(), TK_TARGET_PATH);
      EXPECT_EQ(stack.frames(spin + 2).function().rfind("_PyEval_EvalFrameDefault", 0), 0u)
          << text;
      EXPECT_TRUE(absl::StrContains(text, "Misc.mainloop\n<module>\n")) << text;
      EXPECT_EQ(record->issue.anr().stack_key(), "spin") << text;
    }
    keys.push_back(anrs[0].key);
  }
  EXPECT_EQ(keys[0], "spin");
  EXPECT_EQ(keys[0], keys[1]);
}

}  // namespace
