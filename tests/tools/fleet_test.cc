// matrix-report push/fleet against a real clickhouse-server on loopback
// (ClickHouseTestServer: temp data dir, free ports, stopped at the end).
// Label `fleet`. The kill-and-restart and --follow tests are in
// fleet_slow_test.cc.

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "clickhouse_test_server.h"
#include "fleet_test_data.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_identity.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using test_util::ClickHouseTestServer;
using test_util::RunOutput;
using test_util::ScratchDir;

const std::string kDemo = std::string(MATRIX_REPORT_TESTDATA) + "/demo/matrix-reports";

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

// The number of issues matrix-report reads in `inputs` (what push must store).
int64_t IssuesIn(const std::vector<std::string>& inputs) {
  int64_t n = 0;
  ForEachIssue(inputs, nullptr, {}, [&](IssueRecord&) { ++n; });
  return n;
}

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = std::make_unique<ClickHouseClient>(test_util::ClientOptions(server_.url()));
  }

  RunOutput Push(std::vector<std::string> args) {
    std::vector<std::string> all = {"push", "--clickhouse", server_.url(), "--retry-for=2"};
    all.insert(all.end(), args.begin(), args.end());
    return RunCli(all);
  }

  ClickHouseTestServer server_;
  std::unique_ptr<ClickHouseClient> client_;
};

TEST_F(FleetTest, DemoPushedTwiceStoresOneRowPerIssue) {
  ScratchDir scratch("demo");
  std::filesystem::copy(kDemo, scratch.path(), std::filesystem::copy_options::recursive);
  const std::vector<std::string> dirs = {scratch.path(), scratch.path() + "/blockcanary"};
  // The demo's block is both a JSON-lines issue and a BlockCanary file: one issue.
  const int64_t issues = IssuesIn(dirs);
  ASSERT_GT(issues, 10);

  RunOutput first = Push(dirs);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("pushed"));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), issues);

  // Again: the checkpoints send nothing.
  RunOutput second = Push(dirs);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("pushed 0 issues"));
  // Everything again (--all): the table still holds each issue once.
  RunOutput third = Push({"--all", dirs[0], dirs[1]});
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), issues);
  ASSERT_TRUE(client_->Query("OPTIMIZE TABLE matrix.issues FINAL").ok());
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues"), issues);
  // The block's row is its JSON-lines copy (quality 1), not the text file's.
  EXPECT_EQ(Scalar(*client_, "SELECT min(quality) FROM matrix.issues FINAL WHERE tag = "
                             "'BlockCanary'"),
            1);
  // Typed columns are filled.
  EXPECT_GT(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL WHERE tag = 'Trace_FPS' "
                             "AND fps > 0 AND frames > 0 AND drop_best > 0"),
            0);
  EXPECT_GT(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL WHERE detail = 'ANR' AND "
                             "cost_ms > 1000 AND key != '' AND host_id != ''"),
            0);
}

TEST_F(FleetTest, CheckpointSendsOnlyNewLines) {
  ScratchDir scratch("grow");
  std::vector<std::string> lines;
  for (int i = 0; i < 5; ++i) {
    lines.push_back(test_util::Line(
        test_util::AnrIssue("app::A()", proto::ANR, 5000 + i, test_util::kBaseTimeMs + i)));
  }
  const std::string file = scratch.Write("issues.jsonl", lines);
  RunOutput first = Push({scratch.path()});
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("pushed 5 issues"));
  {
    std::ofstream out(file, std::ios::app);
    for (int i = 5; i < 8; ++i) {
      out << test_util::Line(test_util::AnrIssue("app::A()", proto::ANR, 5000 + i,
                                                 test_util::kBaseTimeMs + i))
          << "\n";
    }
  }
  RunOutput second = Push({scratch.path()});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("pushed 3 issues"));
  // The sink rotates issues.jsonl to issues.1.jsonl: the checkpoint follows
  // the file (by inode), so nothing is sent again.
  std::filesystem::rename(file, scratch.path() + "/issues.1.jsonl");
  scratch.Write("issues.jsonl", {test_util::Line(test_util::AnrIssue(
                                    "app::A()", proto::ANR, 6000, test_util::kBaseTimeMs + 100))});
  RunOutput third = Push({scratch.path()});
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_THAT(third.out, HasSubstr("pushed 1 issue "));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), 9);
  // A file replaced by another one (rotation deleted it; the new one may get
  // its inode): the checkpoint does not match its first bytes, so it is read
  // from the start.
  const std::string current = scratch.path() + "/issues.jsonl";
  {
    std::fstream out(current, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(0);
    const std::string other = test_util::Line(
        test_util::AnrIssue("app::Z()", proto::ANR, 7000, test_util::kBaseTimeMs + 200));
    out << other << "\n";  // Rewritten in place: same inode, other contents.
  }
  RunOutput fourth = Push({scratch.path()});
  ASSERT_EQ(fourth.code, 0) << fourth.err;
  EXPECT_THAT(fourth.out, HasSubstr("pushed 1 issue "));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL WHERE key = 'app::Z()'"),
            1);
}

TEST_F(FleetTest, BadLinesAreSkippedCountedAndNeverSentHalf) {
  ScratchDir scratch("bad");
  const std::string good =
      test_util::Line(test_util::AnrIssue("app::A()", proto::ANR, 5000, test_util::kBaseTimeMs));
  const std::string good2 = test_util::Line(
      test_util::AnrIssue("app::B()", proto::ANR, 5100, test_util::kBaseTimeMs + 1));
  const std::string good3 = test_util::Line(
      test_util::AnrIssue("app::C()", proto::ANR, 5200, test_util::kBaseTimeMs + 2));
  const std::string file = scratch.Write(
      "issues.jsonl", {good, good.substr(0, good.size() / 2), "not json at all", good2});
  // A torn last line, without its newline: not sent, not passed.
  { std::ofstream(file, std::ios::app) << good3.substr(0, 40); }
  RunOutput run = Push({scratch.path()});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("pushed 2 issues"));
  EXPECT_THAT(run.out, HasSubstr("skipped 3 malformed"));
  EXPECT_THAT(run.err, HasSubstr("issues.jsonl: skipped a malformed line at line 2"));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), 2);
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues WHERE key = 'app::C()'"), 0);
  // The writer finishes the line: the next push sends it.
  { std::ofstream(file, std::ios::app) << good3.substr(40) << "\n"; }
  RunOutput again = Push({scratch.path()});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("pushed 1 issue "));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), 3);
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL WHERE key = 'app::C()'"),
            1);
}

TEST_F(FleetTest, WrongUrlIsAClearErrorAndMovesNoCheckpoint) {
  ScratchDir scratch("wrong");
  scratch.Write("issues.jsonl", {test_util::Line(test_util::AnrIssue(
                                    "app::A()", proto::ANR, 5000, test_util::kBaseTimeMs))});
  const std::string nobody = absl::StrCat("http://127.0.0.1:", test_util::FreePort());
  RunOutput run = RunCli({"push", "--clickhouse", nobody, "--retry-for=1", scratch.path()});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, HasSubstr(nobody));
  EXPECT_THAT(run.err, HasSubstr("gave up after"));
  EXPECT_THAT(run.err, HasSubstr("retrying"));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), nobody, "matrix")));
  // Not a URL of the HTTP interface: a usage error at once.
  RunOutput usage = RunCli({"push", "--clickhouse", "127.0.0.1:9000", scratch.path()});
  EXPECT_EQ(usage.code, 2);
  EXPECT_THAT(usage.err, HasSubstr("http://HOST:PORT"));
}

TEST_F(FleetTest, ServerErrorIsAClearErrorAndWritesNothing) {
  ScratchDir scratch("refused");
  scratch.Write("issues.jsonl",
                {test_util::Line(test_util::AnrIssue("app::A()", proto::ANR, 5000,
                                                     test_util::kBaseTimeMs)),
                 test_util::Line(test_util::AnrIssue("app::B()", proto::ANR, 5000,
                                                     test_util::kBaseTimeMs + 1))});
  // A table of the name that does not have the columns: the server refuses
  // every INSERT.
  ASSERT_TRUE(client_->Query("CREATE DATABASE matrix").ok());
  ASSERT_TRUE(client_->Query("CREATE TABLE matrix.issues (issue_id String, time_ms Int64) "
                             "ENGINE = MergeTree ORDER BY issue_id")
                  .ok());
  RunOutput run = Push({scratch.path()});
  EXPECT_EQ(run.code, 1);
  EXPECT_THAT(run.err, HasSubstr("push failed"));
  // The server's own message, after retries (a 5xx may be transient).
  EXPECT_THAT(run.err, HasSubstr("HTTP 500: Code: 16"));
  EXPECT_THAT(run.err, HasSubstr("No such column host_id"));
  EXPECT_THAT(run.err, HasSubstr("gave up after"));
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues"), 0);
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(scratch.path(), server_.url(), "matrix")));
  // The right schema: the same files go in whole.
  ASSERT_TRUE(client_->Query("DROP TABLE matrix.issues").ok());
  RunOutput fixed = Push({scratch.path()});
  ASSERT_EQ(fixed.code, 0) << fixed.err;
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), 2);
}

// push's fast JSON path and the strict one store the same rows, skip the
// same lines and leave the same checkpoints, over the demo, the fleet data
// set, and lines only the strict path can decide (an unknown report kind, a
// cost as a string, NaN, an escaped NUL, surrogates) or none can (torn,
// glued, not JSON). Small batches: several are in flight one after another.
TEST_F(FleetTest, FastAndStrictPushesStoreTheSameRows) {
  ScratchDir scratch("paths");
  std::filesystem::copy(kDemo, scratch.path() + "/demo",
                        std::filesystem::copy_options::recursive);
  test_util::WriteFleetDataSet(scratch.path() + "/fleet");
  proto::Issue escaped = test_util::AnrIssue("ns::F<std::map<int, \"q\">>(\t\\)", proto::ANR, 5000,
                                             test_util::kBaseTimeMs);
  escaped.mutable_app()->set_version(
      "2.0 \xD0\xA1\xD1\x86\xD0\xB5\xD0\xBD\xD0\xB0 \xF0\x9F\x98\x80");
  const std::string good = test_util::Line(escaped);
  const std::string base = R"({"tag":"Trace_EvilMethod","time_ms":"1763719200000","pid":"7",)"
                           R"("app":{"host_id":"edge"},)";
  scratch.Write(
      "edges.jsonl",
      {good, base + R"("key":"n","newkind":{"cost_ms":5,"scene":"S"}})",
       base + R"("key":"s","anr":{"detail":"LAG","cost_ms":"5000"}})",
       base + R"("key":"nan","anr":{"cost_ms":"NaN"}})",
       base + R"("key":"nul\u0000","anr":{"cost_ms":1}})",
       base + R"("key":"\ud83d\ude00","anr":{"cost_ms":2}})", base + R"("key":"dup","key":"dup2"})",
       good.substr(0, good.size() / 2), good + good, "not json", base + R"("pid":3000000000})"});
  const std::vector<std::string> inputs = {scratch.path() + "/demo",
                                           scratch.path() + "/demo/blockcanary",
                                           scratch.path()};
  std::vector<std::string> fleet_dirs;
  for (int host = 0; host < test_util::kFleetHosts; ++host) {
    fleet_dirs.push_back(absl::StrFormat("%s/fleet/h%02d", scratch.path(), host));
  }
  std::vector<std::string> all = inputs;
  all.insert(all.end(), fleet_dirs.begin(), fleet_dirs.end());
  auto push = [&](const std::string& database, bool fast) {
    PushOptions options;
    options.fleet.database = database;
    options.fast_parse = fast;
    options.batch_rows = 5;
    options.fallback_host_id = "fallback";
    FleetPusher pusher(*client_, options);
    EXPECT_TRUE(pusher.EnsureSchema().ok());
    PushStats stats;
    const absl::Status status = pusher.Push(all, stats);
    EXPECT_TRUE(status.ok()) << status;
    return stats;
  };
  const PushStats fast = push("fast", true);
  const PushStats strict = push("strict", false);
  EXPECT_GT(fast.sent, 60);
  EXPECT_EQ(fast.sent, strict.sent);
  EXPECT_GT(fast.batches, 10);
  EXPECT_EQ(fast.malformed, strict.malformed);
  EXPECT_EQ(fast.malformed, 4);  // Torn, glued, not JSON, and 3e9 as a pid.
  ASSERT_EQ(fast.first_malformed.size(), strict.first_malformed.size());
  for (size_t i = 0; i < fast.first_malformed.size(); ++i) {
    EXPECT_EQ(fast.first_malformed[i].where.line, strict.first_malformed[i].where.line);
    EXPECT_EQ(fast.first_malformed[i].reason, strict.first_malformed[i].reason);
  }
  auto rows = [&](const std::string& database) {
    absl::StatusOr<std::string> body = client_->Query(
        absl::StrCat("SELECT ", kFleetColumns, " FROM ", database,
                     ".issues ORDER BY host_id, issue_id, quality FORMAT TabSeparated"));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : "";
  };
  EXPECT_EQ(rows("fast"), rows("strict"));
  // The strict path takes the other six edge lines (a duplicate key: the
  // last one).
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM fast.issues WHERE host_id = 'edge'"), 6);
  // Every batch acknowledged: the checkpoints send nothing more.
  EXPECT_EQ(push("fast", true).sent, 0);
}

// Lines parsed on several threads (parse_threads) are taken in file order:
// the rows, batches, skipped lines, first skipped line and checkpoints are
// those of one thread. 1,500 lines (several parts per run of lines read
// ahead), a malformed line every 97, blank lines, batches of 37 rows (cut
// inside a part), and a torn malformed last line that neither passes.
TEST_F(FleetTest, ParseThreadsGiveTheRowsOfOneThread) {
  ScratchDir scratch("threads");
  std::string text;
  for (int i = 0; i < 1500; ++i) {
    if (i % 97 == 13) {
      text += "{\"tag\":\"Trace_EvilMethod\",\"pid\":\"x\"\n";
    } else if (i % 50 == 7) {
      text += "  \n";
    } else {
      text += test_util::Line(test_util::AnrIssue(absl::StrCat("ns::F", i), proto::ANR, 1000 + i,
                                                  test_util::kBaseTimeMs + i)) +
              "\n";
    }
  }
  const std::string last =
      test_util::Line(test_util::AnrIssue("ns::Last", proto::ANR, 900, test_util::kBaseTimeMs));
  std::ofstream(scratch.path() + "/issues.jsonl") << text << last.substr(0, 40);
  auto push = [&](const std::string& database, int threads) {
    PushOptions options;
    options.fleet.database = database;
    options.batch_rows = 37;
    options.parse_threads = threads;
    FleetPusher pusher(*client_, options);
    EXPECT_TRUE(pusher.EnsureSchema().ok());
    PushStats stats;
    const absl::Status status = pusher.Push({scratch.path()}, stats);
    EXPECT_TRUE(status.ok()) << status;
    return stats;
  };
  const PushStats one = push("one", 1);
  const PushStats four = push("four", 4);
  EXPECT_EQ(one.sent, 1500 - 16 - 29);  // 16 malformed, 29 blank.
  EXPECT_EQ(four.sent, one.sent);
  EXPECT_EQ(four.batches, one.batches);
  EXPECT_EQ(four.malformed, 16 + 1);  // And the torn last line, not passed.
  EXPECT_EQ(four.malformed, one.malformed);
  ASSERT_EQ(four.first_malformed.size(), 1u);
  ASSERT_EQ(one.first_malformed.size(), 1u);
  EXPECT_EQ(four.first_malformed[0].where.line, 14);
  EXPECT_EQ(four.first_malformed[0].reason, one.first_malformed[0].reason);
  auto rows = [&](const std::string& database) {
    absl::StatusOr<std::string> body = client_->Query(absl::StrCat(
        "SELECT ", kFleetColumns, " FROM ", database, ".issues ORDER BY issue_id FORMAT TSV"));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : "";
  };
  EXPECT_EQ(rows("four"), rows("one"));
  // Both checkpoints stop before the torn line: finished, it alone is sent.
  std::ofstream(scratch.path() + "/issues.jsonl", std::ios::app) << last.substr(40) << "\n";
  EXPECT_EQ(push("one", 1).sent, 1);
  EXPECT_EQ(push("four", 4).sent, 1);
  EXPECT_EQ(rows("four"), rows("one"));
}

// push sends RowBinary: rows with every byte a string may hold (tab,
// newline, backslash, NUL, quotes, UTF-8, 300 bytes for a two-byte length)
// and the extreme numbers come back as the TabSeparated rows of the same
// issues do.
TEST_F(FleetTest, RowBinaryAndTabSeparatedStoreTheSameRows) {
  std::vector<FleetRow> rows;
  for (int i = 0; i < 3; ++i) {
    FleetRow row;
    row.issue_id = absl::StrCat("id", i);
    row.time_ms = i == 0 ? std::numeric_limits<int64_t>::min() : test_util::kBaseTimeMs + i;
    row.host_id = std::string("h\t\n\\\0'\"", 8) + std::to_string(i);
    row.host_name = "\xD0\xA1\xD1\x86\xD0\xB5\xD0\xBD\xD0\xB0 \xF0\x9F\x98\x80";
    row.process = std::string(300 * i, 'p');
    row.pid = i == 1 ? std::numeric_limits<int32_t>::min() : -7;
    row.version = "2.9'\\";
    row.tag = "Trace_EvilMethod";
    row.key = "ns::F<int>(\t)";
    row.cost_ms = i == 0 ? 1.7e308 : i == 1 ? std::nan("") : -0.25;
    row.fps = i == 2 ? std::numeric_limits<double>::infinity() : 59.94;
    row.frames = std::numeric_limits<int64_t>::max();
    row.dropped_frames = -1;
    for (int level = 0; level < 5; ++level) row.drop_level[level] = level * 1000000007LL;
    row.report = "{\"k\":\"a\\\\b\\tc\"}";
    row.quality = static_cast<uint8_t>(i % 2);
    rows.push_back(row);
  }
  std::string tsv;
  std::string binary;
  for (const FleetRow& row : rows) {
    AppendFleetRowTsv(row, tsv);
    AppendFleetRowBinary(row, binary);
  }
  for (const char* database : {"tsv", "binary"}) {
    PushOptions options;
    options.fleet.database = database;
    ASSERT_TRUE(FleetPusher(*client_, options).EnsureSchema().ok());
  }
  const std::string columns = absl::StrCat(" (", kFleetColumns, ") FORMAT ");
  ASSERT_TRUE(
      client_->Insert(absl::StrCat("INSERT INTO tsv.issues", columns, "TabSeparated"), tsv).ok());
  ASSERT_TRUE(
      client_->Insert(absl::StrCat("INSERT INTO binary.issues", columns, "RowBinary"), binary)
          .ok());
  // Every column but cost_ms, as text.
  const std::string all_but_cost = absl::StrReplaceAll(kFleetColumns, {{" cost_ms,", ""}});
  auto stored = [&](const std::string& database, const std::string& what) {
    absl::StatusOr<std::string> body = client_->Query(absl::StrCat(
        "SELECT ", what, " FROM ", database, ".issues ORDER BY issue_id FORMAT TabSeparated"));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : "";
  };
  const std::string what = absl::StrCat(all_but_cost, ", time, length(host_id), length(process)");
  const std::string from_tsv = stored("tsv", what);
  EXPECT_EQ(stored("binary", what), from_tsv);
  EXPECT_THAT(from_tsv, HasSubstr("\t9\t600\n"));  // host_id with its NUL; 600 bytes of process.
  // The costs: NaN as 0; 1.7e308 exactly as sent (ClickHouse 18.16 reads
  // it from text one unit in the last place off, 1.6999999999999997e308).
  EXPECT_EQ(stored("binary", "cost_ms"), "1.7e308\n0\n-0.25\n");
  EXPECT_THAT(stored("tsv", "cost_ms"), HasSubstr("\n0\n-0.25\n"));
}

// The fleet questions on the known data set (fleet_test_data.h), through
// `fleet` (the library and the command line).
void ExpectFleetAnswers(ClickHouseClient& client, const std::string& url,
                        const std::vector<std::string>& extra_args) {
  FleetQueries fleet(client, {});
  absl::StatusOr<int64_t> count = fleet.Count();
  ASSERT_TRUE(count.ok()) << count.status();

  absl::StatusOr<std::vector<FleetKey>> top = fleet.Top({.version = "", .limit = 20});
  ASSERT_TRUE(top.ok()) << top.status();
  std::vector<std::string> got;
  for (const FleetKey& k : *top) {
    got.push_back(absl::StrCat(k.key, " ", k.detail, " hosts=", k.hosts, " n=", k.count,
                               " worst=", k.worst_ms, " median=", k.median_ms));
  }
  EXPECT_THAT(got, ElementsAre("app::Decode() ANR hosts=12 n=12 worst=6100 median=5600",
                               "app::Parse() NORMAL hosts=6 n=12 worst=950 median=900",
                               "app::Flush()  hosts=3 n=3 worst=2200 median=2100",
                               "app::NewThing() ANR hosts=3 n=3 worst=7010 median=7009",
                               "app::Regress() LAG hosts=2 n=2 worst=3100 median=3100"));

  absl::StatusOr<std::vector<FleetKey>> fresh = fleet.New("2.9", {.version = "", .limit = 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  got.clear();
  for (const FleetKey& k : *fresh) {
    got.push_back(absl::StrCat(k.key, " first=", k.version, " hosts=", k.hosts));
  }
  EXPECT_THAT(got, ElementsAre("app::NewThing() first=2.10 hosts=3",
                               "app::Regress() first=2.9 hosts=2"));
  // 2.10 comes after 2.9.
  fresh = fleet.New("2.10", {.version = "", .limit = 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->size(), 1u);
  EXPECT_EQ((*fresh)[0].key, "app::NewThing()");

  absl::StatusOr<std::vector<FleetFps>> fps = fleet.Fps({.version = "", .limit = 20});
  ASSERT_TRUE(fps.ok()) << fps.status();
  got.clear();
  for (const FleetFps& r : *fps) {
    got.push_back(absl::StrCat(r.scene, " ", r.version, " n=", r.reports, " hosts=", r.hosts,
                               " p50=", r.fps_p50, " p10=", r.fps_p10, " drop50=",
                               r.dropped_percent_p50, " drop90=", r.dropped_percent_p90,
                               " best=", r.drop_level[0]));
  }
  // Gallery per version: 4 hosts at 40 + host FPS with host % dropped.
  EXPECT_THAT(got, ElementsAre("Gallery 1.9 n=4 hosts=4 p50=42 p10=40 drop50=2 drop90=3 best=10400",
                               "Gallery 2.9 n=4 hosts=4 p50=46 p10=44 drop50=6 drop90=7 best=10400",
                               "Gallery 2.10 n=4 hosts=4 p50=50 p10=48 drop50=10 drop90=11 best=10400",
                               "Settings 1.9 n=4 hosts=4 p50=58 p10=58 drop50=0 drop90=0 best=10400",
                               "Settings 2.9 n=4 hosts=4 p50=58 p10=58 drop50=0 drop90=0 best=10400",
                               "Settings 2.10 n=4 hosts=4 p50=58 p10=58 drop50=0 drop90=0 best=10400"));

  absl::StatusOr<FleetShow> show = fleet.Show("app::Decode()", {.version = "", .limit = 20});
  ASSERT_TRUE(show.ok()) << show.status();
  EXPECT_EQ(show->count, 12);
  EXPECT_EQ(show->hosts, 12);
  EXPECT_THAT(show->versions, ElementsAre("1.9", "2.9", "2.10"));
  EXPECT_EQ(show->worst.issue.app().host_id(), "fleet-host-11");
  EXPECT_DOUBLE_EQ(show->worst.metric.value, 6100);
  EXPECT_EQ(fleet.Show("app::Nothing()", {.version = "", .limit = 20}).status().code(),
            absl::StatusCode::kNotFound);

  // The command line prints the same.
  std::vector<std::string> args = {"fleet", "--clickhouse", url};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = args;
    all.insert(all.end(), more.begin(), more.end());
    return RunCli(all);
  };
  RunOutput cli_top = with({"top", "--limit=1"});
  ASSERT_EQ(cli_top.code, 0) << cli_top.err;
  EXPECT_THAT(cli_top.out, HasSubstr("12     12      6100.0     5600.0"));
  EXPECT_THAT(cli_top.out, Not(HasSubstr("app::Parse()")));
  RunOutput cli_new = with({"new", "--since=2.10"});
  ASSERT_EQ(cli_new.code, 0) << cli_new.err;
  EXPECT_THAT(cli_new.out, HasSubstr("app::NewThing()"));
  EXPECT_THAT(cli_new.out, Not(HasSubstr("app::Regress()")));
  RunOutput cli_fps = with({"fps", "--version=2.10"});
  ASSERT_EQ(cli_fps.code, 0) << cli_fps.err;
  EXPECT_THAT(cli_fps.out, HasSubstr("Gallery"));
  EXPECT_THAT(cli_fps.out, Not(HasSubstr("1.9")));
  RunOutput cli_show = with({"show", "app::Decode()"});
  ASSERT_EQ(cli_show.code, 0) << cli_show.err;
  EXPECT_THAT(cli_show.out, HasSubstr("12 issues on 12 hosts, versions 1.9, 2.9, 2.10"));
  EXPECT_THAT(cli_show.out, HasSubstr("6100.0 ms"));
  EXPECT_THAT(cli_show.out, HasSubstr("process      gallery (pid 1011)"));
  RunOutput missing = with({"show", "app::Nothing()"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("no issue has the key"));
}

TEST_F(FleetTest, FleetQueriesAnswerOnAMultiHostMultiVersionDataSet) {
  ScratchDir scratch("fleet");
  const int issues = test_util::WriteFleetDataSet(scratch.path());
  std::vector<std::string> args = {"--batch=7"};  // Several INSERTs.
  for (int host = 0; host < test_util::kFleetHosts; ++host) {
    args.push_back(absl::StrFormat("%s/h%02d", scratch.path(), host));
  }
  RunOutput run = Push(args);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(Scalar(*client_, "SELECT count() FROM matrix.issues FINAL"), issues);
  ExpectFleetAnswers(*client_, server_.url(), {});

  // html --clickhouse: the page with the fleet tables.
  RunOutput html = RunCli({"html", "--clickhouse", server_.url()});
  ASSERT_EQ(html.code, 0) << html.err;
  EXPECT_THAT(html.out, HasSubstr("<section id=\"fleet\">"));
  EXPECT_THAT(html.out, HasSubstr("New in 2.10"));
  EXPECT_THAT(html.out, HasSubstr("app::NewThing()"));
  EXPECT_THAT(html.out, HasSubstr("<section id=\"groups\">"));
}

// Strings and numbers of hostile or corrupt reports through ClickHouse and
// back: versions with quotes, backslashes, tabs, commas and brackets (the
// text of an Array(String) in a TabSeparated field), a cost of 1.7e308,
// drop levels whose sums pass int64.
TEST_F(FleetTest, HostileVersionsAndExtremeNumbersComeBackIntact) {
  ScratchDir scratch("hostile");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::string> versions = {"2.9'\\", "2.10\tx", "3.0','x]"};
  std::vector<std::string> lines;
  for (size_t host = 0; host < versions.size(); ++host) {
    proto::Issue hang = test_util::AnrIssue("app::Quoted()", proto::ANR,
                                            host == 0 ? 1.7e308 : 100.0 * (host + 1),
                                            test_util::kBaseTimeMs + static_cast<int64_t>(host));
    hang.mutable_app()->set_host_id(absl::StrCat("hostile-", host));
    hang.mutable_app()->set_version(versions[host]);
    lines.push_back(test_util::Line(hang));
    proto::Issue frames = test_util::FrameIssue("Huge", 30, test_util::kBaseTimeMs);
    frames.mutable_app()->set_host_id(absl::StrCat("hostile-", host));
    frames.mutable_app()->set_version("1.0");
    frames.mutable_frame()->mutable_drop_level()->set_best(kMax);
    lines.push_back(test_util::Line(frames));
  }
  scratch.Write("issues.jsonl", lines);
  RunOutput run = Push({scratch.path()});
  ASSERT_EQ(run.code, 0) << run.err;

  FleetQueries fleet(*client_, {});
  absl::StatusOr<FleetShow> show = fleet.Show("app::Quoted()", {.version = "", .limit = 20});
  ASSERT_TRUE(show.ok()) << show.status();
  EXPECT_THAT(show->versions, ElementsAre("2.9'\\", "2.10\tx", "3.0','x]"));
  absl::StatusOr<std::vector<FleetKey>> fresh = fleet.New("0", {.version = "", .limit = 20});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_EQ(fresh->size(), 1u);
  EXPECT_EQ((*fresh)[0].version, "2.9'\\");
  EXPECT_GT((*fresh)[0].worst_ms, 1.69e308);  // As ClickHouse prints it back.
  absl::StatusOr<std::vector<FleetFps>> fps = fleet.Fps({.version = "", .limit = 20});
  ASSERT_TRUE(fps.ok()) << fps.status();
  ASSERT_EQ(fps->size(), 1u);
  // Three times int64's largest: saturated, not wrapped around.
  EXPECT_EQ((*fps)[0].drop_level[0], kMax);

  const std::vector<std::string> cli = {"fleet", "--clickhouse", server_.url()};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> all = cli;
    all.insert(all.end(), more.begin(), more.end());
    return RunCli(all);
  };
  RunOutput cli_show = with({"show", "app::Quoted()"});
  ASSERT_EQ(cli_show.code, 0) << cli_show.err;
  EXPECT_THAT(cli_show.out, HasSubstr("versions 2.9'\\\\, 2.10\\tx, 3.0','x]\n"));
  RunOutput cli_top = with({"top"});
  ASSERT_EQ(cli_top.code, 0) << cli_top.err;
  for (const RunOutput* out : {&cli_show, &cli_top}) {
    EXPECT_THAT(out->out, HasSubstr("1.7e+308"));
    EXPECT_THAT(out->out, Not(::testing::ContainsRegex("[0-9]{25}")));
  }
  RunOutput cli_fps = with({"fps"});
  ASSERT_EQ(cli_fps.code, 0) << cli_fps.err;
  EXPECT_THAT(cli_fps.out, HasSubstr(absl::StrCat(kMax, "/")));
}

TEST(FleetShardsTest, TwoShardsGiveTheSameAnswers) {
  ClickHouseTestServer a;
  ClickHouseTestServer b;
  const std::string cluster = test_util::TwoShardCluster("fleet", a.tcp_port(), b.tcp_port());
  ASSERT_TRUE(a.Start(cluster).ok());
  ASSERT_TRUE(b.Start(cluster).ok());
  ScratchDir scratch("shards");
  const int issues = test_util::WriteFleetDataSet(scratch.path());
  std::vector<std::string> args = {"push",      "--clickhouse", a.url(),   "--clickhouse",
                                   b.url(),     "--cluster",    "fleet",   "--batch=7",
                                   "--retry-for=2"};
  for (int host = 0; host < test_util::kFleetHosts; ++host) {
    args.push_back(absl::StrFormat("%s/h%02d", scratch.path(), host));
  }
  RunOutput run = RunCli(args);
  ASSERT_EQ(run.code, 0) << run.err;
  // Again: nothing twice.
  args.push_back("--all");
  run = RunCli(args);
  ASSERT_EQ(run.code, 0) << run.err;
  ClickHouseClient client_a(test_util::ClientOptions(a.url()));
  ClickHouseClient client_b(test_util::ClientOptions(b.url()));
  const int64_t on_a = Scalar(client_a, "SELECT count() FROM matrix.issues_local FINAL");
  const int64_t on_b = Scalar(client_b, "SELECT count() FROM matrix.issues_local FINAL");
  EXPECT_GT(on_a, 0);
  EXPECT_GT(on_b, 0);
  EXPECT_EQ(on_a + on_b, issues);
  EXPECT_EQ(Scalar(client_a, "SELECT count() FROM matrix.issues FINAL"), issues);
  ExpectFleetAnswers(client_a, a.url(), {});
}

TEST(FleetUnitTest, VersionsOrderNaturally) {
  EXPECT_TRUE(VersionLess("2.9", "2.10"));
  EXPECT_FALSE(VersionLess("2.10", "2.9"));
  EXPECT_TRUE(VersionLess("2.3", "2.3.1"));
  EXPECT_TRUE(VersionLess("", "1.0"));
  EXPECT_FALSE(VersionLess("1.0", "1.0"));
  EXPECT_TRUE(VersionLess("1.0-beta", "1.0-rc"));
}

TEST(FleetUnitTest, RowsRoundTripThroughTabSeparated) {
  IssueRecord record = test_util::Parsed(
      test_util::AnrIssue("ns::F(\tweird\\ name\n)", proto::ANR, 5000, test_util::kBaseTimeMs));
  const FleetRow row = MakeFleetRow(record, "", "fallback-host");
  EXPECT_EQ(row.host_id, "fallback-host");
  EXPECT_EQ(row.issue_id.size(), 32u);
  EXPECT_EQ(MakeFleetRow(record, "", "fallback-host").issue_id, row.issue_id);
  EXPECT_NE(MakeFleetRow(record, "", "other-host").issue_id, row.issue_id);
  std::string tsv;
  AppendFleetRowTsv(row, tsv);
  const std::vector<std::vector<std::string>> parsed = ParseTsv(tsv);
  ASSERT_EQ(parsed.size(), 1u);
  const std::vector<std::string> columns = absl::StrSplit(kFleetColumns, ", ");
  ASSERT_EQ(parsed[0].size(), columns.size());
  EXPECT_EQ(parsed[0][11], "ns::F(\tweird\\ name\n)");  // key
  EXPECT_EQ(parsed[0][22], row.report);
}

TEST(FleetUnitTest, ReportsCarryTheAppIdentity) {
  SetAppVersion("9.1.2");
  const proto::AppIdentity identity = CurrentAppIdentity();
  EXPECT_EQ(identity.version(), "9.1.2");
  EXPECT_FALSE(identity.build_id().empty());  // Debian's gcc links with --build-id.
  if (std::filesystem::exists("/etc/machine-id")) {
    EXPECT_EQ(identity.host_id().size(), 16u);
  }
  EXPECT_EQ(internal::HostIdFromMachineId("abc"), internal::HostIdFromMachineId("abc"));
  EXPECT_NE(internal::HostIdFromMachineId("abc"), internal::HostIdFromMachineId("abd"));
  EXPECT_EQ(internal::HostIdFromMachineId(""), "");
}

}  // namespace
}  // namespace matrix::report
