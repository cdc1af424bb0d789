// The fleet's rollups (docs/fleet.md, "Rollups") against a real
// clickhouse-server on loopback: top, new and fps read from the rollups give
// exactly what the same questions give over FINAL (FleetOptions::rollups
// false), for every filter, after a double push, after a push that restarts
// without its checkpoints, after a push that follows a query, after a merge,
// after a server restart, on two shards, for a user who may not create
// tables, and when an older rollup is swapped in late. Label `fleet`.

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clickhouse_test_server.h"
#include "fleet_test_data.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::ClickHouseTestServer;
using test_util::RunOutput;
using test_util::ScratchDir;

RunOutput RunCli(const std::vector<std::string>& args) {
  return test_util::RunReport(args, "", {.now = absl::Now(), .local_zone = absl::UTCTimeZone()});
}

std::string Describe(const FleetKey& k) {
  return absl::StrCat(k.tag, "|", k.detail, "|", k.key, "|", k.hosts, "|", k.count, "|",
                      k.worst_ms, "|", k.median_ms, "|", k.version);
}

std::string Describe(const FleetFps& r) {
  std::string s = absl::StrCat(r.scene, "|", r.version, "|", r.reports, "|", r.hosts, "|",
                               r.fps_p50, "|", r.fps_p10, "|", r.dropped_percent_p50, "|",
                               r.dropped_percent_p90);
  for (int64_t level : r.drop_level) absl::StrAppend(&s, "|", level);
  return s;
}

template <typename T>
std::vector<std::string> Describe(const absl::StatusOr<std::vector<T>>& rows) {
  EXPECT_TRUE(rows.ok()) << rows.status();
  std::vector<std::string> out;
  if (!rows.ok()) return {absl::StrCat("error: ", rows.status().message())};
  for (const T& row : *rows) out.push_back(Describe(row));
  return out;
}

// Every question the commands can ask of the data set, each asked of the
// rollups (`fleet`) and of FINAL; returns how many were asked.
int ExpectSameAsFinal(FleetQueries& fleet, ClickHouseClient& client) {
  FleetQueries final(client, {.database = "matrix", .cluster = "", .rollups = false});
  const std::vector<std::string> versions = {"", "1.9", "2.9", "2.10", "3.0"};
  const std::vector<std::string> since = {"0", "1.9", "2.0", "2.9", "2.10", "2.11"};
  int asked = 0;
  for (const std::string& version : versions) {
    for (int limit : {1, 2, 3, 20}) {
      const FleetFilter filter{.version = version, .limit = limit};
      const std::string what = absl::StrCat("--version=", version, " --limit=", limit);
      EXPECT_EQ(Describe(fleet.Top(filter)), Describe(final.Top(filter))) << "top " << what;
      for (const std::string& s : since) {
        EXPECT_EQ(Describe(fleet.New(s, filter)), Describe(final.New(s, filter)))
            << "new --since=" << s << " " << what;
        ++asked;
      }
      EXPECT_EQ(Describe(fleet.Fps(filter)), Describe(final.Fps(filter))) << "fps " << what;
      asked += 2;
    }
  }
  EXPECT_EQ(final.stats().from_rollups, 0);
  return asked;
}

// The data set's hosts `from` to `to` (exclusive), as push arguments.
std::vector<std::string> Hosts(const std::string& root, int from, int to) {
  std::vector<std::string> dirs;
  for (int host = from; host < to; ++host) dirs.push_back(absl::StrFormat("%s/h%02d", root, host));
  return dirs;
}

class FleetRollupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = std::make_unique<ClickHouseClient>(test_util::ClientOptions(server_.url()));
    issues_ = test_util::WriteFleetDataSet(scratch_.path());
  }

  void Push(std::vector<std::string> args) {
    std::vector<std::string> all = {"push", "--clickhouse", server_.url(), "--retry-for=2",
                                    "--batch=7"};
    all.insert(all.end(), args.begin(), args.end());
    const RunOutput run = RunCli(all);
    ASSERT_EQ(run.code, 0) << run.err;
  }

  // app::Decode()'s row of top (once on each host pushed).
  std::string DecodeRow(FleetQueries& fleet) {
    absl::StatusOr<std::vector<FleetKey>> top = fleet.Top({.version = "", .limit = 20});
    if (!top.ok()) return top.status().ToString();
    for (const FleetKey& k : *top) {
      if (k.key == "app::Decode()") return absl::StrCat(k.key, " hosts=", k.hosts, " n=", k.count);
    }
    return "none";
  }

  ClickHouseTestServer server_;
  std::unique_ptr<ClickHouseClient> client_;
  ScratchDir scratch_{"rollup"};
  int issues_ = 0;
};

TEST_F(FleetRollupTest, EveryFilterGivesTheFinalAnswerFromOneBuild) {
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  FleetQueries fleet(*client_, {});
  const int asked = ExpectSameAsFinal(fleet, *client_);
  EXPECT_EQ(fleet.stats().from_rollups, asked);
  EXPECT_EQ(fleet.stats().from_final, 0);
  EXPECT_EQ(fleet.stats().rebuilds, 1);
  absl::StatusOr<bool> rebuilt = fleet.RefreshRollups();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_FALSE(*rebuilt);
}

TEST_F(FleetRollupTest, DoublePushesAndARestartedPushStayExact) {
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  FleetQueries fleet(*client_, {});
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  // The same files again, ignoring the checkpoints.
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  std::vector<std::string> again = Hosts(scratch_.path(), 0, test_util::kFleetHosts);
  again.push_back("--all");
  Push(again);
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  // A push that died after its INSERT, before its checkpoint: the next one
  // sends the rows again.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(scratch_.path())) {
    if (entry.path().filename().string().rfind(".matrix-push-", 0) == 0) {
      std::filesystem::remove(entry.path());
    }
  }
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  EXPECT_EQ(fleet.stats().rebuilds, 3);  // Each push made new parts.
  ExpectSameAsFinal(fleet, *client_);
  EXPECT_EQ(fleet.stats().from_final, 0);
}

TEST_F(FleetRollupTest, APushAfterAQueryIsInTheNextAnswer) {
  Push(Hosts(scratch_.path(), 0, 6));
  FleetQueries fleet(*client_, {});
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=6 n=6");
  absl::StatusOr<std::vector<FleetKey>> fresh = fleet.New("2.10", {.version = "", .limit = 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(fresh->empty());  // app::NewThing() is on hosts 8-10.
  EXPECT_EQ(fleet.stats().rebuilds, 1);
  Push(Hosts(scratch_.path(), 6, test_util::kFleetHosts));
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  fresh = fleet.New("2.10", {.version = "", .limit = 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->size(), 1u);
  EXPECT_EQ((*fresh)[0].key, "app::NewThing()");
  EXPECT_EQ(fleet.stats().rebuilds, 2);
  // Another process's query sees the same, from the same rollups.
  FleetQueries other(*client_, {});
  EXPECT_EQ(DecodeRow(other), "app::Decode() hosts=12 n=12");
  EXPECT_EQ(other.stats().rebuilds, 0);
  EXPECT_EQ(other.stats().from_rollups, 1);
}

// Another process's build of an older table, swapped in after a newer one
// (two builds racing): its sentinel names the older table, so it is never
// read as the answer.
TEST_F(FleetRollupTest, AnOlderRollupSwappedInLateIsNeverRead) {
  Push(Hosts(scratch_.path(), 0, 6));
  FleetQueries fleet(*client_, {});
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=6 n=6");
  for (const char* table : {"fleet_keys", "fleet_fps"}) {
    ASSERT_TRUE(client_->Query(absl::StrCat("CREATE TABLE matrix.", table, "_older AS matrix.",
                                            table)).ok());
    ASSERT_TRUE(client_->Query(absl::StrCat("INSERT INTO matrix.", table,
                                            "_older SELECT * FROM matrix.", table)).ok());
  }
  Push(Hosts(scratch_.path(), 6, test_util::kFleetHosts));
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  ASSERT_TRUE(client_->Query("DROP TABLE matrix.fleet_keys").ok());
  ASSERT_TRUE(client_->Query("DROP TABLE matrix.fleet_fps").ok());
  ASSERT_TRUE(client_->Query("RENAME TABLE matrix.fleet_keys_older TO matrix.fleet_keys, "
                             "matrix.fleet_fps_older TO matrix.fleet_fps").ok());
  FleetQueries other(*client_, {});
  EXPECT_EQ(DecodeRow(other), "app::Decode() hosts=12 n=12");
  EXPECT_EQ(other.stats().rebuilds, 1);
  ExpectSameAsFinal(other, *client_);
}

TEST_F(FleetRollupTest, MergesKeepAndARestartKeepsTheRollups) {
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  Push({Hosts(scratch_.path(), 0, test_util::kFleetHosts)[0], "--all"});
  {
    FleetQueries fleet(*client_, {});
    EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
    EXPECT_EQ(fleet.stats().rebuilds, 1);
    // A merge changes the parts, not the rows FINAL gives: no rebuild.
    ASSERT_TRUE(client_->Query("OPTIMIZE TABLE matrix.issues FINAL").ok());
    EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
    EXPECT_EQ(fleet.stats().rebuilds, 1);
  }
  server_.Stop();
  ASSERT_TRUE(server_.Restart().ok()) << server_.ErrorLog();
  ClickHouseClient client(test_util::ClientOptions(server_.url()));
  FleetQueries fleet(client, {});
  const int asked = ExpectSameAsFinal(fleet, client);
  EXPECT_EQ(fleet.stats().rebuilds, 0);  // Still the table's rollups.
  EXPECT_EQ(fleet.stats().from_rollups, asked);
  // And a push after the restart is seen.
  ScratchDir more("rollup-more");
  proto::Issue hang = test_util::OnHost(
      test_util::AnrIssue("app::Decode()", proto::ANR, 100, test_util::kBaseTimeMs), 0);
  hang.mutable_app()->set_host_id("fleet-host-99");
  more.Write("issues.jsonl", {test_util::Line(hang)});
  const RunOutput run = RunCli({"push", "--clickhouse", server_.url(), more.path()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=13 n=13");
  EXPECT_EQ(fleet.stats().rebuilds, 1);
}

TEST_F(FleetRollupTest, AUserWhoCannotCreateTablesGetsTheFinalAnswers) {
  Push(Hosts(scratch_.path(), 0, test_util::kFleetHosts));
  ClickHouseOptions options = test_util::ClientOptions(server_.url());
  options.settings = "readonly=1";
  ClickHouseClient reader(options);
  FleetQueries fleet(reader, {});
  EXPECT_EQ(DecodeRow(fleet), "app::Decode() hosts=12 n=12");
  EXPECT_EQ(fleet.stats().from_rollups, 0);
  EXPECT_EQ(fleet.stats().from_final, 1);
  EXPECT_EQ(fleet.stats().rebuilds, 0);
}

TEST(FleetRollupShardsTest, TwoShardsFollowEachShardsPushes) {
  ClickHouseTestServer a;
  ClickHouseTestServer b;
  const std::string cluster = test_util::TwoShardCluster("fleet", a.tcp_port(), b.tcp_port());
  ASSERT_TRUE(a.Start(cluster).ok());
  ASSERT_TRUE(b.Start(cluster).ok());
  ScratchDir scratch("rollup-shards");
  test_util::WriteFleetDataSet(scratch.path());
  auto push = [&](int from, int to) {
    std::vector<std::string> args = {"push",  "--clickhouse", a.url(),   "--clickhouse",
                                     b.url(), "--cluster",    "fleet",   "--retry-for=2"};
    for (const std::string& dir : Hosts(scratch.path(), from, to)) args.push_back(dir);
    const RunOutput run = RunCli(args);
    ASSERT_EQ(run.code, 0) << run.err;
  };
  push(0, 6);
  ClickHouseClient client_b(test_util::ClientOptions(b.url()));
  FleetQueries fleet(client_b, {});  // Queries go to either server.
  ExpectSameAsFinal(fleet, client_b);
  EXPECT_EQ(fleet.stats().rebuilds, 1);
  // Hosts 6-11 go to the shards by their hash; each shard's new parts are seen.
  push(6, test_util::kFleetHosts);
  ExpectSameAsFinal(fleet, client_b);
  EXPECT_EQ(fleet.stats().rebuilds, 2);
  EXPECT_EQ(fleet.stats().from_final, 0);
  absl::StatusOr<std::vector<FleetKey>> top = fleet.Top({.version = "", .limit = 1});
  ASSERT_TRUE(top.ok()) << top.status();
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ((*top)[0].hosts, 12);
}

}  // namespace
}  // namespace matrix::report
