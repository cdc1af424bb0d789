// A GTK 3 program from Debian (gtk3-widget-factory, gtk-3-examples; not built
// by us) under xvfb-run through matrix-run, stopped with `timeout` after 8 s:
// GLib's main loop waits in poll(), so the agent sees its dispatches, and the
// factory's first dispatches (building and laying out ~100 widgets, 100-300 ms
// on this machine) are reported as slow dispatches over 50 ms. Its window's
// GdkFrameClock (hooked by the agent through dlsym once the window is mapped)
// draws frames for the spinner: FPS reports every 1 s of frame time.

#include <string>

#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

TEST(GtkProgramTest, GivesDispatchAndFpsReports) {
  const std::string dir = agent_test::NewReportDir("gtk");
  const agent_test::RunResult run =
      agent_test::Run({"/usr/bin/timeout", "-s", "TERM", "8", MATRIX_RUN_PATH, "--report-dir",
                       dir, "--evil", "50", "--fps-slice", "1000", "--", GTK_PROGRAM_PATH});
  ASSERT_EQ(run.exit_code(), 124) << run.out << run.err;  // Stopped by timeout.
  int slow = 0;
  int fps_reports = 0;
  int64_t frames = 0;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    ASSERT_EQ(record.pid(), record.issue.pid());
    if (record.TagDetail() == "Trace_EvilMethod/NORMAL") {
      ++slow;
      EXPECT_GE(record.issue.evil_method().cost_ms(), 50) << run.err;
    }
    if (record.kind == "frame") {
      ++fps_reports;
      frames += record.issue.frame().frames();
    }
  }
  EXPECT_GE(slow, 1) << run.err;
  EXPECT_GE(fps_reports, 2) << run.err;
  EXPECT_GT(frames, 0);
  // The launcher's summary counted them.
  EXPECT_NE(run.err.find("Trace_EvilMethod/NORMAL"), std::string::npos) << run.err;
}

}  // namespace
