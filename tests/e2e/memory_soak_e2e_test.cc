// Bounded memory: tests/e2e/memory_soak_child.cc runs 10 M
// short messages and 20 dispatches of 1.1 s with every tracer, BlockCanary,
// method tracing and the JSON-lines sink at their defaults. Its peak RSS
// (VmHWM, measured by the child after Matrix shut down) stays under 64 MB,
// and every one of the 20 slow-method reports is still there, readable by
// matrix-report. Before the timeline budget and the fixed buffers, this run
// peaked at 184 MB and kept 2 of its 20 slow-method reports.
#include <stdio.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_reader.h"

namespace {

// The value after `name ` on a line of `out`, or -1.
int64_t ValueOf(const std::string& out, const std::string& name) {
  const size_t at = out.find(name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(out.c_str() + at + name.size() + 1);
}

TEST(MemorySoakE2ETest, BusyProgramWithSlowDispatches_StaysUnder64MbAndKeepsEveryReport) {
  const char* tmp = getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
                                    absl::StrCat("matrix-soak-", getpid());
  std::filesystem::remove_all(dir);
  const std::string command = absl::StrCat(MATRIX_SOAK_CHILD, " ", dir.string(), " 2>&1");
  FILE* child = popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, child)) > 0) out.append(buffer, n);
  const int status = pclose(child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  std::printf("%s", out.c_str());

  EXPECT_EQ(ValueOf(out, "messages"), 10'000'000) << out;
  EXPECT_EQ(ValueOf(out, "failed_writes"), 0) << out;
  const int64_t peak_kb = ValueOf(out, "peak_rss_kb");
  ASSERT_GT(peak_kb, 0) << out;
  EXPECT_LE(peak_kb, 64 * 1024) << "peak RSS " << peak_kb << " kB";

  // Every slow dispatch is still reported, and readable.
  const matrix::report::ReadResult read = matrix::report::ReadIssueInputs({dir.string()}, nullptr);
  EXPECT_TRUE(read.malformed.empty());
  std::map<std::string, int> kinds;
  for (const auto& record : read.records) ++kinds[record.TagDetail()];
  std::string text;
  for (const auto& [kind, count] : kinds) text += absl::StrCat(kind, " ", count, "\n");
  std::printf("issues:\n%s", text.c_str());
  EXPECT_EQ(kinds["Trace_EvilMethod/NORMAL"], 20) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
