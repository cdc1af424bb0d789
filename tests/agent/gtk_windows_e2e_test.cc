// A GTK 3 program of ours (agent_gtk_target.c, not linked to matrix-cpp)
// under xvfb-run through matrix-run: it sleeps 700 ms before gtk_init, opens
// window "First" (redrawn every frame), after 1.5 s opens "Second" and
// destroys "First", 1.5 s later re-realizes "Second" as "Third" (hide,
// unrealize, retitle, show: a new GdkWindow and frame clock), and quits 1.5 s
// later.
//
// - Every toplevel's frame clock is followed: the FPS reports of the second
//   window (a window mapped later, with its own frame clock) count its frames,
//   under the scene named from its title; so do those of the re-realized
//   window's new clock, under its new title.
// - Startup of a program that draws ends at its first frame: at least the
//   700 ms sleep, at most 700 ms + 2.5 s (GTK's start and first frame under
//   Xvfb take 100-400 ms on this machine), with the first window's title as
//   its scene.
// - The FPS reports' refresh rate is the monitor's (GDK) when known, else
//   60 Hz (Xvfb reports none).

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

// "name N" from the program's output (-1 when missing).
int64_t Printed(const std::string& out, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::ConsumePrefix(&line, name) && absl::ConsumePrefix(&line, " ")) {
      return std::atoll(std::string(line).c_str());
    }
  }
  return -1;
}

TEST(GtkWindowsTest, FollowsEveryWindowAndReportsStartup) {
  const std::string dir = agent_test::NewReportDir("gtk-windows");
  const agent_test::RunResult run =
      agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--fps-slice", "500", "--",
                       GTK_TARGET_PATH, "1500", "700"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  const int64_t second_frames = Printed(run.out, "frames_second");
  const int64_t third_frames = Printed(run.out, "frames_third");
  const int64_t refresh_mhz = Printed(run.out, "refresh_mhz");
  ASSERT_GT(second_frames, 20) << run.out;
  ASSERT_GT(third_frames, 20) << run.out;
  ASSERT_GE(refresh_mhz, 0) << run.out;
  const double expected_hz = refresh_mhz > 0 ? refresh_mhz / 1000.0 : 60.0;

  int64_t first = 0, second = 0, third = 0;
  int startups = 0;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind == "frame") {
      const auto& frame = record.issue.frame();
      if (frame.scene() == "First") first += frame.frames();
      if (frame.scene() == "Second") second += frame.frames();
      if (frame.scene() == "Third") third += frame.frames();
      EXPECT_NEAR(frame.refresh_rate(), expected_hz, 0.01);
    }
    if (record.kind == "startup") {
      ++startups;
      const auto& startup = record.issue.startup();
      EXPECT_FALSE(startup.is_warm_start_up());
      EXPECT_EQ(startup.first_scene(), "First");
      EXPECT_GE(startup.startup_duration_ms(), 690);
      EXPECT_LE(startup.startup_duration_ms(), 700 + 2500);
    }
  }
  EXPECT_GT(first, 0) << run.err;
  // The second window's frames, under its title: at least half of those it
  // drew (the last FPS report in progress is flushed at exit).
  EXPECT_GE(second, second_frames / 2) << run.out << run.err;
  EXPECT_GE(third, third_frames / 2) << run.out << run.err;
  EXPECT_EQ(startups, 1) << run.err;
}

}  // namespace
