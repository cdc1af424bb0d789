// Startup ends when the program's first window is on screen: Debian programs
// under xvfb-run through matrix-run, each run by map_watcher, which notes
// when the X server mapped the first top-level window.
// - glmark2 (glmark2-x11) loads libGL after its first poll: its startup ends
//   at its first presented frame, after the map.
// - pcmanfm (GTK 2) presents nothing: its startup ends with its first paint,
//   after the map, and its paints are frames (an FPS report).
// - A tkinter program maps its window with Xlib and draws without a swap: its
//   startup ends with the map.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

struct StartupRun {
  agent_test::RunResult run;
  double mapped_ms = -1;  // From just before matrix-run started.
  int64_t startup_ms = -1;
  int startups = 0;
  std::vector<matrix::report::IssueRecord> records;
};

// Runs `command` through matrix-run under map_watcher; with `timeout_s`,
// for at most that long (then SIGTERM: exit code 124). Programs that end on
// their own run without `timeout`: one exec fewer between map_watcher's
// clock and the program's start.
StartupRun RunWatched(const std::string& name, const std::vector<std::string>& command,
                      int timeout_s = 0) {
  StartupRun r;
  const std::string dir = agent_test::NewReportDir(name);
  const std::string map_file = dir + "-map.txt";
  std::vector<std::string> args = {MAP_WATCHER_PATH, map_file, "--"};
  if (timeout_s > 0) {
    args.insert(args.end(), {"/usr/bin/timeout", "-s", "TERM", std::to_string(timeout_s)});
  }
  args.insert(args.end(), {MATRIX_RUN_PATH, "--report-dir", dir, "--"});
  args.insert(args.end(), command.begin(), command.end());
  r.run = agent_test::Run(args);
  r.mapped_ms = std::atof(agent_test::ReadFile(map_file).c_str());
  r.records = agent_test::ReadIssues(dir);
  for (const auto& record : r.records) {
    if (record.kind != "startup") continue;
    ++r.startups;
    r.startup_ms = record.issue.startup().startup_duration_ms();
  }
  std::printf("%s: first top-level map %.1f ms, startup %lld ms\n", name.c_str(), r.mapped_ms,
              static_cast<long long>(r.startup_ms));
  return r;
}

// The startup is counted from the program's start, which /proc gives in
// 10 ms ticks and which comes after map_watcher's clock starts (matrix-run
// starts it: up to 20 ms later beside two busy loops): 30 ms of slack, where
// the startup used to end 50-80 ms before the map on a quiet machine.
constexpr double kSlackMs = 30;

TEST(StartupWindowTest, Glmark2_EndsAtItsFirstFrameAfterTheMap) {
  const StartupRun r =
      RunWatched("glmark2", {GLMARK2_PATH, "-s", "320x240", "-b", "build:duration=2"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.out << r.run.err;
  ASSERT_GT(r.mapped_ms, 0) << r.run.err;
  ASSERT_EQ(r.startups, 1) << r.run.err;
  EXPECT_GE(r.startup_ms + kSlackMs, r.mapped_ms) << r.run.err;
  // It drew: an FPS report.
  EXPECT_GT(agent_test::FrameRateOf(r.records).reports, 0) << r.run.err;
}

TEST(StartupWindowTest, Gtk2Pcmanfm_EndsAtItsFirstPaintAfterTheMap_AndPaintsAreFrames) {
  const StartupRun r = RunWatched("pcmanfm2", {PCMANFM_PATH, "/usr/share"}, 6);
  ASSERT_EQ(r.run.exit_code(), 124) << r.run.out << r.run.err;  // Stopped by timeout.
  ASSERT_GT(r.mapped_ms, 0) << r.run.err;
  ASSERT_EQ(r.startups, 1) << r.run.err;
  EXPECT_GE(r.startup_ms + kSlackMs, r.mapped_ms) << r.run.err;
  int frames = 0;
  for (const auto& record : r.records) {
    if (record.kind != "frame") continue;
    frames += record.issue.frame().frames();
    // Paints within 3/4 of a refresh interval are one frame: at 60 Hz,
    // never over 80 fps (each X Expose event counted read 420).
    EXPECT_LE(record.issue.frame().fps(), 80.5) << r.run.err;
  }
  EXPECT_GT(frames, 0) << r.run.err;
}

TEST(StartupWindowTest, XlibProgramThatNeverSwaps_EndsAtTheMap) {
  const StartupRun r = RunWatched("tk", {PROGRAM_PATH, TK_TARGET_PATH, "1500", "0", "0"});
  ASSERT_EQ(r.run.exit_code(), 0) << r.run.out << r.run.err;
  ASSERT_GT(r.mapped_ms, 0) << r.run.err;
  ASSERT_EQ(r.startups, 1) << r.run.err;
  EXPECT_GE(r.startup_ms + kSlackMs, r.mapped_ms) << r.run.err;
  // And not long after it: the dispatch that mapped the window ends it.
  EXPECT_LT(r.startup_ms, r.mapped_ms + 1000) << r.run.err;
}

}  // namespace
