// glxgears (Debian mesa-utils, not built by us) under xvfb-run through
// matrix-run for 15 s at the default FPS slice (10 s of wall time). glxgears
// does not wait for the vsync under Xvfb: it draws well over a thousand
// frames a second. matrix-run must write one Trace_FPS per slice (one, or two
// when the program's exit flushes the rest), each with `fps` the rate
// glxgears drew at, as it counts itself ("N frames in 5.0 seconds = R FPS"),
// not the 60 Hz refresh rate (one report every 0.3 s, each saying 60, would
// be wrong).
//
// Tolerance: the report covers the first 10 s of drawing; glxgears' lines
// cover 5 s windows of the same run. They agree within 10 %.

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

TEST(GlxgearsTest, OneFpsReportPerSliceWithTheRateTheProgramCountsItself) {
  const std::string dir = agent_test::NewReportDir("glxgears");
  const agent_test::RunResult run = agent_test::Run(
      {"/usr/bin/timeout", "-s", "TERM", "15", MATRIX_RUN_PATH, "--report-dir", dir, "--",
       GLXGEARS_PATH});
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
  ASSERT_GE(program_fps.size(), 2u) << run.out << run.err;
  // The first two windows (0-5 s, 5-10 s): the span of the first report.
  const double program_rate = (program_fps[0] + program_fps[1]) / 2;

  int startups = 0;
  std::vector<matrix::proto::FrameReport> reports;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind == "frame") reports.push_back(record.issue.frame());
    if (record.kind != "startup") continue;
    // A program that swaps: its cold start ends at its first frame (a few
    // hundred ms under Xvfb here).
    ++startups;
    EXPECT_EQ(record.issue.startup().first_scene(), "glxgears");
    EXPECT_GT(record.issue.startup().startup_duration_ms(), 0);
    EXPECT_LT(record.issue.startup().startup_duration_ms(), 5000);
  }
  EXPECT_EQ(startups, 1) << run.err;
  ASSERT_GE(reports.size(), 1u) << run.err;
  ASSERT_LE(reports.size(), 2u) << run.err;

  const matrix::proto::FrameReport& first = reports[0];
  std::printf(
      "glxgears: %.1f FPS by its own count (%s); matrix: %zu Trace_FPS, the first %.1f fps "
      "(%lld frames over %.0f ms of drawing, refresh %.0f Hz)",
      program_rate, absl::StrJoin(program_fps, ", ").c_str(), reports.size(), first.fps(),
      static_cast<long long>(first.frames()), first.window_ms(), first.refresh_rate());
  if (reports.size() == 2) {
    std::printf(", the second %.1f fps (%lld frames)", reports[1].fps(),
                static_cast<long long>(reports[1].frames()));
  }
  std::printf("\n");
  EXPECT_NEAR(first.fps(), program_rate, 0.1 * program_rate) << run.out << run.err;
  // The slice is 10 s of wall time, glxgears drew all through it.
  EXPECT_NEAR(first.window_ms(), 10'000, 1'000);
  EXPECT_GT(first.refresh_rate(), 0);
  for (const auto& report : reports) {
    // Each report's fps is its own frames over its own drawing time.
    EXPECT_NEAR(report.fps(), report.frames() * 1000.0 / report.window_ms(), 1e-6 * report.fps());
  }
}

}  // namespace
