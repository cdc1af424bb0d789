// pcmanfm (Debian's file manager, GTK; not built by us) under xvfb-run
// through matrix-run, opening a generated folder of 20,000 files, stopped
// with `timeout` after 15 s. Loading the folder keeps GLib's loop busy with
// idle callbacks (it polls with timeout 0 meanwhile): one dispatch per
// iteration, so the loop that kept answering gives no LAG or ANR, and a
// callback that really was slow is reported with its own stack and key.

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
    EXPECT_NE(record.kind, "anr") << record.TagDetail() << "\n" << run.err;
    if (record.kind != "evil_method" || record.detail != "NORMAL") continue;
    // A slow callback: its own stack and key, not the loop's joined work.
    const auto& slow = record.issue.evil_method();
    EXPECT_GT(slow.thread_stack().frames_size(), 0) << run.err;
    EXPECT_NE(slow.stack_key(), "dispatch") << run.err;
  }
}

}  // namespace
