// pcmanfm (Debian's file manager, GTK; not built by us) under xvfb-run
// through matrix-run, opening a generated folder of 20,000 files, stopped
// with `timeout` after 15 s. Loading the folder keeps GLib's loop busy with
// idle callbacks (it polls with timeout 0 meanwhile): one dispatch per
// iteration, so the loop that kept answering gives no LAG or ANR (unless the
// machine is so busy that one callback really held it, which the report says),
// and a callback that really was slow is reported with its own stack and key.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

TEST(PcmanfmTest, LoadingABigFolderIsNoHang) {
  const std::string dir = agent_test::NewReportDir("pcmanfm");
  const std::filesystem::path folder = std::filesystem::path(dir + "-files");
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  for (int i = 0; i < 20000; ++i) {
    std::ofstream(folder / ("file-" + std::to_string(i) + ".txt"));
  }
  const agent_test::RunResult run =
      agent_test::Run({"/usr/bin/timeout", "-s", "TERM", "15", MATRIX_RUN_PATH, "--report-dir",
                       dir, "--", PCMANFM_PATH, folder.string()});
  std::filesystem::remove_all(folder);
  ASSERT_EQ(run.exit_code(), 124) << run.out << run.err;  // Stopped by timeout.
  // The loop ran ("N dispatches" in the agent's last line: 650-2,700 here,
  // 354 beside two busy loops).
  const size_t at = run.err.find(" dispatches, ");
  ASSERT_NE(at, std::string::npos) << run.err;
  const size_t start = run.err.rfind(' ', at - 1) + 1;
  EXPECT_GE(std::atoi(run.err.c_str() + start), 100) << run.err;
  for (const auto& record : agent_test::ReadIssues(dir)) {
    if (record.kind == "anr") {
      // The loading's work is callbacks of under a second each. On a loaded
      // machine one of them (a layout of the 20,000 names) can really hold
      // the loop over 2 s (4.2 s, 1,984 ms of it waiting to run, beside two
      // busy loops and three builds): that LAG must say so, a quarter of its
      // cost or more waited for a CPU, and name its own callback. Idle work
      // joined into one dispatch would give a LAG on an idle machine.
      const auto& hang = record.issue.anr();
      EXPECT_GE(hang.throttled_ms(), hang.cost_ms() / 4)
          << record.TagDetail() << " cost " << hang.cost_ms() << " ms\n"
          << run.err;
      EXPECT_GT(hang.thread_stack().frames_size(), 0) << run.err;
      EXPECT_NE(record.issue.key(), "dispatch") << run.err;
      continue;
    }
    if (record.kind != "evil_method" || record.detail != "NORMAL") continue;
    // A slow callback: its own stack and key, not the loop's joined work.
    const auto& slow = record.issue.evil_method();
    EXPECT_GT(slow.thread_stack().frames_size(), 0) << run.err;
    EXPECT_NE(slow.stack_key(), "dispatch") << run.err;
  }
}

}  // namespace
