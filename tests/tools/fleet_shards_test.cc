// push straight to each shard of a cluster (FleetPusher::UseShards, push
// with one --clickhouse URL per shard) against two real clickhouse-servers
// on loopback: internal::CityHash64 is the server's cityHash64 byte for
// byte; rows land on the shard the Distributed table puts them on (weights
// 1 and 2:1), so a push again through the Distributed table, or straight
// again, stores nothing twice; a shard that is down fails the batch and
// advances no checkpoint; URLs that are not the cluster's shards in its
// order are refused. Labels `fleet` and `e2e`.

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clickhouse_test_server.h"
#include "fleet_test_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/city_hash.h"
#include "internal/fleet_row_view.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::ClickHouseTestServer;
using test_util::RunOutput;
using test_util::ScratchDir;
using ::testing::HasSubstr;

RunOutput RunCli(const std::vector<std::string>& args) {
  return test_util::RunReport(args, "", {.now = absl::Now(), .local_zone = absl::UTCTimeZone()});
}

int64_t Scalar(ClickHouseClient& client, const std::string& sql) {
  absl::StatusOr<std::string> body = client.Query(sql);
  EXPECT_TRUE(body.ok()) << body.status();
  int64_t value = -1;
  if (body.ok()) {
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &value)) << *body;
  }
  return value;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string HostDir(const std::string& root, int host) {
  return absl::StrFormat("%s/h%02d", root, host);
}

std::vector<std::string> HostDirs(const std::string& root, int from, int to) {
  std::vector<std::string> dirs;
  for (int host = from; host < to; ++host) dirs.push_back(HostDir(root, host));
  return dirs;
}

TEST(FleetCityHashTest, IsTheServersCityHash64) {
  ClickHouseTestServer server;
  ASSERT_TRUE(server.Start().ok());
  ClickHouseClient client(test_util::ClientOptions(server.url()));
  // Every length 0..130 (each of CityHash's paths and the 64-byte loop's
  // ends), of random bytes and of text, and host ids as reports carry them.
  std::mt19937_64 rng(20261129);
  std::vector<std::string> texts;
  for (int length = 0; length <= 130; ++length) {
    std::string bytes;
    std::string text;
    for (int i = 0; i < length; ++i) {
      bytes.push_back(static_cast<char>(rng() & 0xFF));
      text.push_back(static_cast<char>('a' + (i * 7 + length) % 26));
    }
    texts.push_back(bytes);
    texts.push_back(text);
  }
  for (int i = 0; i < 100; ++i) {
    std::string bytes(131 + rng() % 900, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xFF);
    texts.push_back(bytes);
  }
  for (int host = 0; host < 100; ++host) {
    texts.push_back(absl::StrFormat("host-%04d", host));
    texts.push_back(test_util::FleetHostId(host));
  }
  // The server's hashes, a few kB of query (its URL) at a time.
  std::map<std::string, std::string> server_hash;
  std::vector<std::string> literals;
  size_t literal_bytes = 0;
  const auto ask = [&] {
    absl::StatusOr<std::string> body =
        client.Query(absl::StrCat("SELECT lower(hex(s)), cityHash64(s) FROM (SELECT arrayJoin([",
                                  absl::StrJoin(literals, ","), "]) AS s) FORMAT TabSeparated"));
    ASSERT_TRUE(body.ok()) << body.status();
    for (const std::vector<std::string>& row : ParseTsv(*body)) {
      ASSERT_EQ(row.size(), 2u);
      server_hash[row[0]] = row[1];
    }
    literals.clear();
    literal_bytes = 0;
  };
  for (const std::string& text : texts) {
    literals.push_back(absl::StrCat("unhex('", absl::BytesToHexString(text), "')"));
    literal_bytes += literals.back().size();
    if (literal_bytes > 6000) ask();
  }
  if (!literals.empty()) ask();
  int compared = 0;
  for (const std::string& text : texts) {
    const std::string hex = absl::BytesToHexString(text);
    ASSERT_EQ(server_hash.count(hex), 1u) << hex;
    EXPECT_EQ(absl::StrCat(internal::CityHash64(text)), server_hash[hex])
        << "length " << text.size() << ": " << hex;
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(texts.size()));
}

TEST(FleetCityHashTest, SplitFollowsTheSlots) {
  std::string rows;
  std::vector<std::string> hosts;
  for (int i = 0; i < 40; ++i) {
    FleetRow row;
    row.host_id = test_util::FleetHostId(i / 3);  // Runs of three rows per host.
    row.issue_id = absl::StrFormat("%032d", i);
    row.report = std::string(static_cast<size_t>(i) * 50, 'r');
    AppendFleetRowBinary(row, rows);
    hosts.push_back(row.host_id);
  }
  const std::vector<uint32_t> slots = {0, 1, 1};  // Weights 1 and 2.
  internal::ShardRows a;
  internal::ShardRows b;
  std::vector<internal::ShardRows*> out = {&a, &b};
  a.rows = "left over";
  ASSERT_TRUE(internal::SplitFleetRowsByShard(rows, 40, slots, out));
  std::string expected[2];
  int64_t count[2] = {0, 0};
  size_t at = 0;
  for (int i = 0; i < 40; ++i) {
    FleetRow row;
    row.host_id = hosts[static_cast<size_t>(i)];
    row.issue_id = absl::StrFormat("%032d", i);
    row.report = std::string(static_cast<size_t>(i) * 50, 'r');
    std::string one;
    AppendFleetRowBinary(row, one);
    const uint32_t shard = slots[internal::CityHash64(row.host_id) % 3];
    expected[shard] += one;
    ++count[shard];
    at += one.size();
  }
  EXPECT_EQ(at, rows.size());
  EXPECT_EQ(a.rows, expected[0]);
  EXPECT_EQ(b.rows, expected[1]);
  EXPECT_EQ(a.count, count[0]);
  EXPECT_EQ(b.count, count[1]);
  EXPECT_GT(a.count, 0);
  EXPECT_GT(b.count, 0);
  // Not whole rows, or a slot past the shards: refused.
  EXPECT_FALSE(internal::SplitFleetRowsByShard(absl::string_view(rows).substr(0, rows.size() - 1),
                                               40, slots, out));
  EXPECT_FALSE(internal::SplitFleetRowsByShard(rows, 41, slots, out));
  const std::vector<uint32_t> too_far = {0, 2};
  EXPECT_FALSE(internal::SplitFleetRowsByShard(rows, 40, too_far, out));
}

// Two servers as the shards of cluster "fleet", with the fleet data set.
class FleetPushToShardsTest : public ::testing::Test {
 protected:
  void StartShards(int weight_a, int weight_b) {
    const std::string cluster =
        test_util::TwoShardCluster("fleet", a_.tcp_port(), b_.tcp_port(), weight_a, weight_b);
    absl::Status started = a_.Start(cluster);
    ASSERT_TRUE(started.ok()) << started;
    started = b_.Start(cluster);
    ASSERT_TRUE(started.ok()) << started;
    client_a_ = std::make_unique<ClickHouseClient>(test_util::ClientOptions(a_.url()));
    client_b_ = std::make_unique<ClickHouseClient>(test_util::ClientOptions(b_.url()));
    issues_ = test_util::WriteFleetDataSet(scratch_.path());
    for (int w = 0; w < weight_a; ++w) slots_.push_back(0);
    for (int w = 0; w < weight_b; ++w) slots_.push_back(1);
  }

  // push of the hosts [from, to) to `urls` (both: straight to the shards;
  // the first only: through the Distributed table).
  RunOutput Push(const std::vector<std::string>& urls, int from, int to,
                 std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"push", "--cluster", "fleet", "--retry-for=2"};
    for (const std::string& url : urls) {
      args.push_back("--clickhouse");
      args.push_back(url);
    }
    args.insert(args.end(), more.begin(), more.end());
    for (const std::string& dir : HostDirs(scratch_.path(), from, to)) args.push_back(dir);
    return RunCli(args);
  }

  // The shard the Distributed table puts `host` on.
  uint32_t ShardOf(int host) const {
    return slots_[internal::CityHash64(test_util::FleetHostId(host)) % slots_.size()];
  }

  // Issues on shard `shard` (FINAL), and the rows there whose host is not
  // of that shard by the Distributed table's rule (must be none).
  int64_t OnShard(int shard) {
    ClickHouseClient& client = shard == 0 ? *client_a_ : *client_b_;
    std::vector<std::string> slots;
    for (size_t slot = 0; slot < slots_.size(); ++slot) {
      if (slots_[slot] == static_cast<uint32_t>(shard)) slots.push_back(absl::StrCat(slot));
    }
    EXPECT_EQ(
        Scalar(client, absl::StrCat("SELECT count() FROM matrix.issues_local WHERE "
                                    "cityHash64(host_id) % ",
                                    slots_.size(), " NOT IN (", absl::StrJoin(slots, ", "), ")")),
        0)
        << "rows on shard " << shard + 1 << " that the Distributed table puts elsewhere";
    return Scalar(client, "SELECT count() FROM matrix.issues_local FINAL");
  }

  ClickHouseTestServer a_;
  ClickHouseTestServer b_;
  std::unique_ptr<ClickHouseClient> client_a_;
  std::unique_ptr<ClickHouseClient> client_b_;
  ScratchDir scratch_{"shards"};
  int issues_ = 0;
  std::vector<uint32_t> slots_;
};

TEST_F(FleetPushToShardsTest, RowsLandWhereTheDistributedTablePutsThem) {
  StartShards(1, 1);
  RunOutput run = Push({a_.url(), b_.url()}, 0, test_util::kFleetHosts, {"--batch=7"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("pushed ", issues_, " issues")));
  EXPECT_THAT(run.out, HasSubstr("the 2 shards of fleet"));
  const int64_t on_a = OnShard(0);
  const int64_t on_b = OnShard(1);
  EXPECT_GT(on_a, 0);
  EXPECT_GT(on_b, 0);
  EXPECT_EQ(on_a + on_b, issues_);
  // The same rows as the Distributed table would hold: each host on the
  // shard of cityHash64(host_id) % 2, the whole fleet through `issues`.
  for (int host = 0; host < test_util::kFleetHosts; ++host) {
    ClickHouseClient& there = ShardOf(host) == 0 ? *client_a_ : *client_b_;
    ClickHouseClient& not_there = ShardOf(host) == 0 ? *client_b_ : *client_a_;
    const std::string where = absl::StrCat(" WHERE host_id = '", test_util::FleetHostId(host), "'");
    EXPECT_GT(Scalar(there, "SELECT count() FROM matrix.issues_local" + where), 0) << host;
    EXPECT_EQ(Scalar(not_there, "SELECT count() FROM matrix.issues_local" + where), 0) << host;
  }
  EXPECT_EQ(Scalar(*client_a_, "SELECT count() FROM matrix.issues FINAL"), issues_);
  // Checkpointed: nothing again.
  run = Push({a_.url(), b_.url()}, 0, test_util::kFleetHosts);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 0 issues"));
  // Everything again through the Distributed table of the first server:
  // each row replaces itself on its shard, nothing twice.
  run = Push({a_.url()}, 0, test_util::kFleetHosts, {"--all"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("pushed ", issues_, " issues")));
  EXPECT_EQ(OnShard(0), on_a);
  EXPECT_EQ(OnShard(1), on_b);
  // And straight again: still nothing twice.
  run = Push({a_.url(), b_.url()}, 0, test_util::kFleetHosts, {"--all"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(OnShard(0), on_a);
  EXPECT_EQ(OnShard(1), on_b);
  EXPECT_EQ(Scalar(*client_b_, "SELECT count() FROM matrix.issues FINAL"), issues_);
}

TEST_F(FleetPushToShardsTest, WeightedShardsTakeTheirSlots) {
  StartShards(1, 2);
  RunOutput run = Push({a_.url(), b_.url()}, 0, test_util::kFleetHosts);
  ASSERT_EQ(run.code, 0) << run.err;
  const int64_t on_a = OnShard(0);  // cityHash64(host_id) % 3 = 0
  const int64_t on_b = OnShard(1);  // 1 or 2
  EXPECT_GT(on_a, 0);
  EXPECT_GT(on_b, 0);
  EXPECT_EQ(on_a + on_b, issues_);
  run = Push({a_.url()}, 0, test_util::kFleetHosts, {"--all"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(OnShard(0), on_a);
  EXPECT_EQ(OnShard(1), on_b);
}

TEST_F(FleetPushToShardsTest, AShardDownFailsTheBatchAndAdvancesNoCheckpoint) {
  StartShards(1, 1);
  // Hosts 6-11 have rows for both shards.
  int for_b = 0;
  for (int host = 6; host < test_util::kFleetHosts; ++host) for_b += ShardOf(host) == 1 ? 1 : 0;
  ASSERT_GT(for_b, 0);
  ASSERT_LT(for_b, 6);
  ClickHouseClient a(test_util::ClientOptions(a_.url(), absl::Seconds(1)));
  ClickHouseClient b(test_util::ClientOptions(b_.url(), absl::Seconds(1)));
  PushOptions options;
  options.fleet = {.database = "matrix", .cluster = "fleet"};
  FleetPusher pusher(a, options);
  for (ClickHouseClient* shard : {&b, &a}) {
    FleetPusher schema(*shard, options);
    ASSERT_TRUE(schema.EnsureSchema().ok());
  }
  ASSERT_TRUE(pusher.UseShards({&a, &b}).ok());
  PushStats first;
  ASSERT_TRUE(pusher.Push(HostDirs(scratch_.path(), 0, 6), first).ok());
  const std::string checkpoint_0 =
      ReadFile(CheckpointPath(HostDir(scratch_.path(), 0), a_.url(), "matrix"));
  ASSERT_FALSE(checkpoint_0.empty());

  b_.Kill();
  PushStats down;
  const absl::Status failed = pusher.Push(HostDirs(scratch_.path(), 0, 12), down);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.message()), HasSubstr("shard 2 of 2"));
  EXPECT_EQ(down.sent, 0);
  EXPECT_EQ(down.batches, 0);
  for (int host = 6; host < test_util::kFleetHosts; ++host) {
    EXPECT_FALSE(
        std::filesystem::exists(CheckpointPath(HostDir(scratch_.path(), host), a_.url(), "matrix")))
        << host;
  }
  EXPECT_EQ(ReadFile(CheckpointPath(HostDir(scratch_.path(), 0), a_.url(), "matrix")),
            checkpoint_0);

  // Back up: the rest goes, and what shard 1 already took is not doubled.
  ASSERT_TRUE(b_.Restart().ok());
  PushStats again;
  const absl::Status pushed = pusher.Push(HostDirs(scratch_.path(), 0, 12), again);
  ASSERT_TRUE(pushed.ok()) << pushed;
  EXPECT_EQ(first.sent + again.sent, issues_);
  EXPECT_EQ(OnShard(0) + OnShard(1), issues_);
}

TEST_F(FleetPushToShardsTest, AShardDownStopsThePushAtTheLastBatchBothAcknowledged) {
  StartShards(1, 1);
  ClickHouseClient a(test_util::ClientOptions(a_.url(), absl::Seconds(1)));
  ClickHouseClient b(test_util::ClientOptions(b_.url(), absl::Seconds(1)));
  PushOptions options;
  options.fleet = {.database = "matrix", .cluster = "fleet"};
  options.batch_rows = 3;  // Batches of one shard's rows and of both.
  FleetPusher pusher(a, options);
  for (ClickHouseClient* shard : {&b, &a}) {
    FleetPusher schema(*shard, options);
    ASSERT_TRUE(schema.EnsureSchema().ok());
  }
  ASSERT_TRUE(pusher.UseShards({&a, &b}).ok());
  PushStats first;
  ASSERT_TRUE(pusher.Push(HostDirs(scratch_.path(), 0, 4), first).ok());
  b_.Kill();
  PushStats down;
  EXPECT_FALSE(pusher.Push(HostDirs(scratch_.path(), 0, 12), down).ok());
  ASSERT_TRUE(b_.Restart().ok());
  PushStats again;
  const absl::Status pushed = pusher.Push(HostDirs(scratch_.path(), 0, 12), again);
  ASSERT_TRUE(pushed.ok()) << pushed;
  // The checkpoints stopped exactly at what both shards acknowledged: what
  // was acknowledged is not sent again, everything else is.
  EXPECT_EQ(first.sent + down.sent + again.sent, issues_);
  EXPECT_GT(again.sent, 0);
  EXPECT_EQ(OnShard(0) + OnShard(1), issues_);
}

TEST_F(FleetPushToShardsTest, URLsThatAreNotTheShardsInOrderAreRefused) {
  StartShards(1, 1);
  RunOutput run = Push({b_.url(), a_.url()}, 0, 1);
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.err, HasSubstr("shard 2"));
  EXPECT_THAT(run.err, HasSubstr("in the cluster's shard order"));
  run = Push({a_.url(), b_.url(), a_.url()}, 0, 1);
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.err, HasSubstr("cluster fleet has 2 shards"));
  EXPECT_EQ(Scalar(*client_a_, "SELECT count() FROM matrix.issues"), 0);
  // A server outside the cluster.
  ClickHouseTestServer outside;
  ASSERT_TRUE(
      outside.Start(test_util::TwoShardCluster("fleet", a_.tcp_port(), b_.tcp_port())).ok());
  run = Push({a_.url(), outside.url()}, 0, 1);
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.err, HasSubstr("is no shard of cluster fleet"));
  // A Distributed table of another sharding key.
  ASSERT_TRUE(client_a_->Query("DROP TABLE matrix.issues").ok());
  ASSERT_TRUE(client_a_
                  ->Query("CREATE TABLE matrix.issues AS matrix.issues_local ENGINE = "
                          "Distributed(fleet, matrix, issues_local, rand())")
                  .ok());
  run = Push({a_.url(), b_.url()}, 0, 1);
  EXPECT_NE(run.code, 0);
  EXPECT_THAT(run.err, HasSubstr("push cannot place rows as it does"));
}

}  // namespace
}  // namespace matrix::report
