// Real-thread and real-process tests for JsonLinesIssueSink: concurrent
// reporters never interleave or lose lines, also across rotations; a writer
// SIGKILLed in the middle of a 1 MB line costs that line only.

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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
        issue.mutable_proto()->set_tag(matrix::kTagEvilMethod);  // A hang: <name>.jsonl.
        issue.mutable_proto()->set_pid(t * kPerThread + i);
        issue.mutable_proto()->mutable_anr()->set_scene(std::string(100, static_cast<char>('a' + t)));
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

int64_t SizeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

Issue BigIssue(int pid) {
  Issue issue;
  issue.mutable_proto()->set_tag(matrix::kTagEvilMethod);  // A hang: <name>.jsonl.
  issue.mutable_proto()->set_pid(pid);
  issue.mutable_proto()->mutable_anr()->set_scene(std::string(1 << 20, 'x'));  // 1 MiB.
  return issue;
}

TEST(JsonLinesIssueSinkRealTest, WriterKilledMidLine_NextWriterStartsOnAFreshLine) {
  std::string base = ::testing::TempDir() + "/matrix_sink_kill_XXXXXX";
  ASSERT_NE(mkdtemp(base.data()), nullptr);
  JsonLinesIssueSink::Options options;
  options.directory = base + "/reports";
  options.max_file_bytes = int64_t{1} << 30;  // No rotation: one file.
  const std::string path = options.directory + "/issues.jsonl";
  // Every child line has the same length, so a size that is not a multiple
  // of it means a write is in progress.
  const int64_t line_size = static_cast<int64_t>(BigIssue(100000).ToJson().size() + 1);

  // Up to 5 rounds, until one child dies mid-line (usually the first).
  bool torn = false;
  for (int round = 0; round < 5 && !torn; ++round) {
    const int64_t start_size = std::max<int64_t>(SizeOf(path), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto sink = JsonLinesIssueSink::Create(options);
      if (!sink.ok()) _exit(2);
      const Issue issue = BigIssue(100000);
      for (;;) {
        if (!(*sink)->Append(issue).ok()) _exit(3);
      }
    }
    // Wait until the child has written some lines, then kill it as soon as
    // the file ends mid-line (or after 20 s of trying).
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (SizeOf(path) < start_size + 2 * line_size && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (absl::Now() < give_up) {
      const int64_t size = SizeOf(path);
      if (size > start_size && (size - start_size) % line_size != 0) break;
    }
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int wstatus = 0;
    ASSERT_EQ(waitpid(child, &wstatus, 0), child);
    ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
        << "the child ended on its own, status " << wstatus;
    std::ifstream in(path, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    torn = !content.str().empty() && content.str().back() != '\n';
  }
  std::cout << "a child was killed mid-line: " << (torn ? "yes" : "no") << "\n";

  auto sink = JsonLinesIssueSink::Create(options);
  ASSERT_TRUE(sink.ok()) << sink.status();
  for (int i = 1; i <= 3; ++i) {
    Issue issue;
    issue.mutable_proto()->set_tag(matrix::kTagEvilMethod);
    issue.mutable_proto()->mutable_anr();  // A hang: <name>.jsonl.
    issue.mutable_proto()->set_pid(i);
    ASSERT_TRUE((*sink)->Append(issue).ok());
  }

  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  ASSERT_FALSE(content.str().empty());
  ASSERT_EQ(content.str().back(), '\n');
  std::vector<int> parent_pids;
  int child_lines = 0;
  int torn_lines = 0;
  for (absl::string_view line : absl::StrSplit(content.str(), '\n', absl::SkipEmpty())) {
    matrix::proto::Issue parsed;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &parsed).ok()) {
      // Only a killed child's last line may be cut, and only before a whole line.
      EXPECT_TRUE(absl::StartsWith(line, "{")) << line.substr(0, 80);
      EXPECT_LT(static_cast<int64_t>(line.size()), line_size);
      ++torn_lines;
      continue;
    }
    if (parsed.pid() == 100000) {
      ++child_lines;
    } else {
      parent_pids.push_back(parsed.pid());
    }
  }
  EXPECT_GE(child_lines, 2);
  EXPECT_LE(torn_lines, 5);
  if (torn) {
    EXPECT_GE(torn_lines, 1);
  }
  EXPECT_EQ(parent_pids, (std::vector<int>{1, 2, 3}));
  std::system(("rm -rf '" + base + "'").c_str());
}

}  // namespace
