// Real-thread test for JsonLinesIssueSink: concurrent reporters never
// interleave or lose lines, also across rotations.

#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/plugins/issue_sinks.h"

namespace {

using ::matrix::Issue;
using ::matrix::JsonLinesIssueSink;

TEST(JsonLinesIssueSinkRealTest, ConcurrentReporters_WriteWholeLinesAndLoseNone) {
  std::string base = ::testing::TempDir() + "/matrix_sink_real_XXXXXX";
  ASSERT_NE(mkdtemp(base.data()), nullptr);
  JsonLinesIssueSink::Options options;
  options.directory = base + "/reports";
  options.max_file_bytes = 64 * 1024;
  options.max_files = 50;  // Keep everything: 4 x 250 issues of ~200 bytes.
  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Issue issue;
        issue.mutable_proto()->set_tag(matrix::kTagFps);
        issue.mutable_proto()->set_pid(t * kPerThread + i);
        issue.mutable_proto()->mutable_frame()->set_scene(std::string(100, static_cast<char>('a' + t)));
        (*sink)->OnReportIssue(issue);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ((*sink)->failed_writes(), 0);

  std::set<int> seen;
  for (int index = 0; index < options.max_files; ++index) {
    const std::string path =
        index == 0 ? options.directory + "/issues.jsonl"
                   : absl::StrCat(options.directory, "/issues.", index, ".jsonl");
    std::ifstream in(path);
    if (!in) continue;
    std::stringstream content;
    content << in.rdbuf();
    for (absl::string_view line : absl::StrSplit(content.str(), '\n', absl::SkipEmpty())) {
      matrix::proto::Issue parsed;
      ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(std::string(line), &parsed).ok())
          << line;
      EXPECT_TRUE(seen.insert(parsed.pid()).second) << "duplicate " << parsed.pid();
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kThreads * kPerThread));
  std::system(("rm -rf '" + base + "'").c_str());
}

}  // namespace
