// glxgears (Debian mesa-utils, not built by us) under xvfb-run through
// matrix-run for ~11 s: the FPS reports' frames (from the interposed
// glXSwapBuffers) match the frame rate glxgears prints itself
// ("N frames in 5.0 seconds = R FPS").
//
// Tolerance: the agent's rate is its reports' frames over the wall time
// between the first and the last report (each report's time_ms is when it was
// written, a few ms after its last frame); glxgears' rate is its own count over
// its own 5 s windows. They cover slightly different spans of the same run, so
// they agree within 20% (measured: a few %).

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

TEST(GlxgearsTest, FpsReportsMatchTheProgramsOwnCount) {
  const std::string dir = agent_test::NewReportDir("glxgears");
  const agent_test::RunResult run =
      agent_test::Run({"/usr/bin/timeout", "-s", "TERM", "11", MATRIX_RUN_PATH, "--report-dir",
                       dir, "--fps-slice", "1000", "--", GLXGEARS_PATH});
  // timeout's status when it had to stop the program: 124.
  ASSERT_EQ(run.exit_code(), 124) << run.out << run.err;

  // glxgears: "1234 frames in 5.0 seconds = 246.800 FPS".
  std::vector<double> program_fps;
  for (absl::string_view line : absl::StrSplit(run.out, '\n')) {
    const size_t eq = line.find("= ");
    if (line.find("frames in") == line.npos || eq == line.npos) continue;
    double fps = 0;
    std::vector<std::string> words = absl::StrSplit(line.substr(eq + 2), ' ');
    if (absl::SimpleAtod(words[0], &fps)) program_fps.push_back(fps);
  }
  ASSERT_GE(program_fps.size(), 1u) << run.out << run.err;
  double program_rate = 0;
  for (double fps : program_fps) program_rate += fps;
  program_rate /= static_cast<double>(program_fps.size());

  int startups = 0;
  const auto records = agent_test::ReadIssues(dir);
  for (const auto& record : records) {
    if (record.kind != "startup") continue;
    // A program that swaps: its cold start ends at its first frame (a few
    // hundred ms under Xvfb here).
    ++startups;
    EXPECT_EQ(record.issue.startup().first_scene(), "glxgears");
    EXPECT_GT(record.issue.startup().startup_duration_ms(), 0);
    EXPECT_LT(record.issue.startup().startup_duration_ms(), 5000);
  }
  const agent_test::ReportedFrameRate reported = agent_test::FrameRateOf(records);
  ASSERT_GE(reported.reports, 4) << run.err;
  EXPECT_EQ(startups, 1) << run.err;
  ASSERT_GT(reported.last_ms, reported.first_ms);
  const double agent_rate = reported.per_second();
  std::printf("glxgears: %.1f FPS by its own count, %.1f FPS from %d matrix reports\n",
              program_rate, agent_rate, reported.reports);
  EXPECT_NEAR(agent_rate, program_rate, 0.2 * program_rate) << run.out << run.err;
}

}  // namespace
