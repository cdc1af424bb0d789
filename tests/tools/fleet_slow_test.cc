// matrix-report push against a real clickhouse-server that is killed in the
// middle of a push and restarted, and push --follow on growing files.
// Labels `fleet` and `slow` (a few seconds each).

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "clickhouse_test_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::testing::HasSubstr;
using test_util::ClickHouseTestServer;
using test_util::RunOutput;
using test_util::ScratchDir;

RunOutput RunCli(const std::vector<std::string>& args) {
  return test_util::RunReport(args, "", {.now = absl::Now(), .local_zone = absl::UTCTimeZone()});
}

int64_t Count(const std::string& url, const std::string& sql) {
  ClickHouseClient client(test_util::ClientOptions(url, absl::ZeroDuration()));
  absl::StatusOr<std::string> body = client.Query(sql);
  int64_t value = -1;
  if (body.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &value)) return value;
  return -1;
}

// `n` small slow-method issues, one line each.
std::vector<std::string> Lines(int n, int first = 0) {
  std::vector<std::string> lines;
  for (int i = first; i < first + n; ++i) {
    proto::Issue issue;
    issue.set_tag("Trace_EvilMethod");
    issue.set_key(absl::StrCat("app::Method", i % 50, "()"));
    issue.set_time_ms(test_util::kBaseTimeMs + i);
    issue.set_process("gallery");
    issue.set_pid(4242);
    issue.mutable_app()->set_host_id(absl::StrCat("host-", i % 7));
    issue.mutable_app()->set_version("1.0");
    issue.mutable_evil_method()->set_detail(proto::NORMAL);
    issue.mutable_evil_method()->set_cost_ms(700 + i % 300);
    lines.push_back(test_util::Line(issue));
  }
  return lines;
}

TEST(FleetKillTest, ServerKilledMidPushLosesNothingAndDuplicatesNothing) {
  ClickHouseTestServer server;
  ASSERT_TRUE(server.Start().ok());
  ScratchDir scratch("kill");
  constexpr int kIssues = 8000;
  scratch.Write("issues.jsonl", Lines(kIssues));

  RunOutput run;
  std::atomic<bool> done{false};
  // Small batches so the push is mid-way when the server dies.
  std::thread push([&] {
    run = RunCli({"push", "--clickhouse", server.url(), "--batch=100", "--retry-for=60",
               scratch.path()});
    done = true;
  });
  // Wait for the first acknowledged batches, then kill the server.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up && Count(server.url(), "SELECT count() FROM matrix.issues") < 500) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const bool mid_push = !done;
  server.Kill();
  const int64_t checkpointed_before_restart = [&] {
    std::ifstream in(CheckpointPath(scratch.path(), server.url(), "matrix"));
    int64_t dev = 0, ino = 0, offset = 0, line = 0;
    in >> dev >> ino >> offset >> line;
    return line;
  }();
  absl::SleepFor(absl::Seconds(1));  // Down for a while: the push retries.
  ASSERT_TRUE(server.Restart().ok());
  push.join();
  ASSERT_TRUE(mid_push) << "the push ended before the server was killed";
  EXPECT_GT(checkpointed_before_restart, 0);
  EXPECT_LT(checkpointed_before_restart, kIssues);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("retrying"));
  EXPECT_EQ(Count(server.url(), "SELECT count() FROM matrix.issues FINAL"), kIssues);
  EXPECT_EQ(Count(server.url(), "SELECT uniqExact(issue_id) FROM matrix.issues"), kIssues);
  // Everything is checkpointed: pushing again sends nothing.
  RunOutput again = RunCli({"push", "--clickhouse", server.url(), scratch.path()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("pushed 0 issues"));
  EXPECT_EQ(Count(server.url(), "SELECT count() FROM matrix.issues FINAL"), kIssues);
}

TEST(FleetFollowTest, FollowShipsLinesAsTheFilesGrow) {
  ClickHouseTestServer server;
  ASSERT_TRUE(server.Start().ok());
  ScratchDir scratch("follow");
  const std::string file = scratch.Write("issues.jsonl", Lines(10));
  RunOutput run;
  std::thread push([&] {
    run = RunCli({"push", "--clickhouse", server.url(), "--follow", "--poll-ms=100",
               "--follow-for=6", scratch.path()});
  });
  auto wait_for = [&](int64_t n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    while (absl::Now() < give_up &&
           Count(server.url(), "SELECT count() FROM matrix.issues FINAL") != n) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    return Count(server.url(), "SELECT count() FROM matrix.issues FINAL");
  };
  EXPECT_EQ(wait_for(10), 10);
  const std::vector<std::string> more = Lines(5, 10);
  {
    std::ofstream out(file, std::ios::app);
    for (const std::string& line : more) out << line << "\n";
    // Half a line: the writer is in the middle of it; not sent yet.
    out << Lines(1, 15)[0].substr(0, 10);
  }
  EXPECT_EQ(wait_for(15), 15);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Count(server.url(), "SELECT count() FROM matrix.issues FINAL"), 15);
  {
    std::ofstream out(file, std::ios::app);
    out << Lines(1, 15)[0].substr(10) << "\n";  // The writer finishes it.
    for (const std::string& line : Lines(2, 16)) out << line << "\n";
  }
  EXPECT_EQ(wait_for(18), 18);
  push.join();
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(Count(server.url(), "SELECT count() FROM matrix.issues FINAL"), 18);
  EXPECT_EQ(Count(server.url(), "SELECT count() FROM matrix.issues"), 18);
}

}  // namespace
}  // namespace matrix::report
