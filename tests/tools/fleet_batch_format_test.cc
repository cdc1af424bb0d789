// push's batches sorted into the table's order, as RowBinary and as
// ClickHouse Native blocks (SortFleetRows, PushOptions::batch_format),
// against RowBinary rows as read, on a real clickhouse-server on loopback:
// the stored rows are byte for byte the same. Label `fleet`.

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clickhouse_test_server.h"
#include "fleet_test_data.h"
#include "gtest/gtest.h"
#include "internal/fleet_row_view.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::ClickHouseTestServer;
using test_util::ScratchDir;

const std::string kDemo = std::string(MATRIX_REPORT_TESTDATA) + "/demo/matrix-reports";

// Rows with what a column may hold at its edges: empty strings everywhere,
// every byte value, UTF-8, strings of 127, 128, 16,384 and 100,000 bytes
// (LEB128 lengths of one to three bytes), the extreme integers, doubles
// that are subnormal, negative zero, NaN and infinite (stored as 0), both
// qualities and 255; rows of every kind (slow method, ANR, block, frame,
// startup); and two rows of one issue of one quality, with a row that
// sorts before both between them: which of the two FINAL keeps depends on
// their order, which the sort keeps.
std::vector<FleetRow> EdgeRows() {
  std::vector<FleetRow> rows;
  rows.emplace_back();  // Every string empty, every number 0.
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte.push_back(static_cast<char>(c));
  const char* kinds[] = {"EvilMethod", "ANR", "Block", "Frame", "Startup"};
  for (int i = 0; i < 5; ++i) {
    FleetRow row;
    row.issue_id = absl::StrFormat("%032x", 0xfedcba - i);
    row.time_ms = i == 0   ? std::numeric_limits<int64_t>::min()
                  : i == 1 ? std::numeric_limits<int64_t>::max()
                           : test_util::kBaseTimeMs + i;
    row.host_id = i % 2 == 0 ? "z-host" : std::string("h\t\n\\\0'\"", 8);
    row.host_name = "\xD0\xA1\xD1\x86\xD0\xB5\xD0\xBD\xD0\xB0 \xF0\x9F\x98\x80";
    row.process = std::string(i == 1 ? 127 : i == 2 ? 128 : i == 3 ? 16384 : 0, 'p');
    row.pid = i == 0   ? std::numeric_limits<int32_t>::min()
              : i == 1 ? std::numeric_limits<int32_t>::max()
                       : i;
    row.build_id = every_byte;
    row.version = "2.10";
    row.tag = i == 3 ? "Trace_FPS" : "Trace_EvilMethod";
    row.detail = i == 1 ? "ANR" : "";
    row.kind = kinds[i];
    row.key = "ns::F<std::map<int, \"q\">>(\t\\)";
    row.scene = i == 3 ? "Gallery" : "";
    row.cost_ms = i == 0   ? 1.7e308
                  : i == 1 ? std::numeric_limits<double>::denorm_min()
                  : i == 2 ? -0.0
                  : i == 3 ? std::nan("")
                           : -std::numeric_limits<double>::infinity();
    row.fps = i == 3 ? 59.94 : 0;
    row.frames = i == 3 ? std::numeric_limits<int64_t>::max() : 0;
    row.dropped_frames = i == 3 ? std::numeric_limits<int64_t>::min() : 0;
    for (int level = 0; level < 5; ++level) row.drop_level[level] = (i - 2) * level * 1000000007LL;
    row.report = i == 4 ? std::string(100000, 'r') : "{\"k\":\"a\\\\b\\tc\"}";
    row.quality = static_cast<uint8_t>(i == 2 ? 0 : i == 4 ? 255 : 1);
    rows.push_back(row);
  }
  // One issue twice, quality 1 both times, and between them a row that
  // sorts before both.
  FleetRow first = rows[2];
  first.issue_id = "dup";
  first.quality = 1;
  first.report = "first";
  FleetRow later = first;
  later.report = "later";
  FleetRow before = first;
  before.issue_id = "a-dup";
  before.report = "before";
  rows.push_back(first);
  rows.push_back(before);
  rows.push_back(later);
  return rows;
}

class FleetBatchFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started;
    client_ = std::make_unique<ClickHouseClient>(test_util::ClientOptions(server_.url()));
  }

  void CreateDatabase(const std::string& database) {
    PushOptions options;
    options.fleet.database = database;
    ASSERT_TRUE(FleetPusher(*client_, options).EnsureSchema().ok());
  }

  // The stored rows of `database`, every column, as RowBinary.
  std::string Stored(const std::string& database, const std::string& final = "") {
    absl::StatusOr<std::string> body = client_->Query(
        absl::StrCat("SELECT ", kFleetColumns, ", time FROM ", database, ".issues ", final,
                     " ORDER BY host_id, issue_id, quality, report FORMAT RowBinary"));
    EXPECT_TRUE(body.ok()) << body.status();
    return body.ok() ? *body : "";
  }

  int64_t Scalar(const std::string& sql) {
    absl::StatusOr<std::string> body = client_->Query(sql);
    EXPECT_TRUE(body.ok()) << body.status();
    int64_t value = -1;
    if (body.ok()) {
      EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &value)) << *body;
    }
    return value;
  }

  ClickHouseTestServer server_;
  std::unique_ptr<ClickHouseClient> client_;
};

TEST_F(FleetBatchFormatTest, SortedBatchesStoreTheRowsRowBinaryDoes) {
  const std::vector<FleetRow> rows = EdgeRows();
  std::string binary;
  for (const FleetRow& row : rows) AppendFleetRowBinary(row, binary);
  const auto count = static_cast<int64_t>(rows.size());
  std::string sorted;
  std::string native = "the memory of a block before";
  ASSERT_TRUE(internal::SortFleetRows(binary, count, BatchFormat::kSortedRowBinary, sorted));
  ASSERT_TRUE(internal::SortFleetRows(binary, count, BatchFormat::kNative, native));
  EXPECT_EQ(sorted.size(), binary.size());
  EXPECT_NE(sorted, binary);  // The rows are not in the table's order.
  const std::string columns = absl::StrCat(" (", kFleetColumns, ") FORMAT ");
  for (const auto& [database, format, body] :
       {std::tuple("binary", "RowBinary", &binary), std::tuple("sorted", "RowBinary", &sorted),
        std::tuple("native", "Native", &native)}) {
    CreateDatabase(database);
    absl::StatusOr<InsertResult> inserted =
        client_->Insert(absl::StrCat("INSERT INTO ", database, ".issues", columns, format), *body);
    ASSERT_TRUE(inserted.ok()) << database << ": " << inserted.status();
  }
  const std::string from_binary = Stored("binary");
  EXPECT_EQ(Stored("sorted"), from_binary);
  EXPECT_EQ(Stored("native"), from_binary);
  EXPECT_GT(from_binary.size(), size_t{100000 + 16384});
  // What FINAL keeps of the two rows of "dup" (one of them, by their order
  // in the part): the same.
  const std::string final_binary = Stored("binary", "FINAL");
  EXPECT_EQ(Stored("sorted", "FINAL"), final_binary);
  EXPECT_EQ(Stored("native", "FINAL"), final_binary);
  EXPECT_NE(final_binary.find("first") == std::string::npos,
            final_binary.find("later") == std::string::npos);
  // The server found the sorted batches sorted (it sorted only the first).
  EXPECT_EQ(Scalar("SELECT value FROM system.events WHERE event = "
                   "'MergeTreeDataWriterBlocksAlreadySorted' FORMAT TabSeparated"),
            2);
}

TEST(FleetBatchFormatUnitTest, RefusesWhatIsNotWholeRows) {
  const std::vector<FleetRow> rows = EdgeRows();
  std::string binary;
  for (const FleetRow& row : rows) AppendFleetRowBinary(row, binary);
  const auto count = static_cast<int64_t>(rows.size());
  for (BatchFormat format : {BatchFormat::kSortedRowBinary, BatchFormat::kNative}) {
    std::string out;
    EXPECT_TRUE(internal::SortFleetRows(binary, count, format, out));
    EXPECT_FALSE(internal::SortFleetRows(binary, count + 1, format, out));
    EXPECT_TRUE(out.empty());
    EXPECT_FALSE(internal::SortFleetRows(binary, count - 1, format, out));
    EXPECT_FALSE(internal::SortFleetRows(binary, -1, format, out));
    EXPECT_FALSE(internal::SortFleetRows(binary.substr(0, binary.size() - 1), count, format, out));
    // A string's length past the end.
    std::string overlong = binary;
    overlong[0] = '\x7F';
    EXPECT_FALSE(internal::SortFleetRows(overlong, count, format, out));
    // No rows: nothing, or a block of the 24 columns and none of their
    // values.
    ASSERT_TRUE(internal::SortFleetRows("", 0, format, out));
    EXPECT_EQ(out.substr(0, 2),
              format == BatchFormat::kNative ? std::string("\x18\x00", 2) : std::string());
  }
}

// The same push (the demo, the fleet data set, and lines of every edge,
// malformed ones among them, in batches of 5 rows) with each BatchFormat:
// the same stats, the same rows byte for byte, and checkpoints that send
// nothing more.
TEST_F(FleetBatchFormatTest, EveryBatchFormatStoresTheSameRows) {
  ScratchDir scratch("native");
  std::filesystem::copy(kDemo, scratch.path() + "/demo", std::filesystem::copy_options::recursive);
  test_util::WriteFleetDataSet(scratch.path() + "/fleet");
  proto::Issue escaped = test_util::AnrIssue("ns::F<std::map<int, \"q\">>(\t\\)", proto::ANR, 5000,
                                             test_util::kBaseTimeMs);
  escaped.mutable_app()->set_version(
      "2.0 \xD0\xA1\xD1\x86\xD0\xB5\xD0\xBD\xD0\xB0 \xF0\x9F\x98\x80");
  escaped.set_pid(std::numeric_limits<int32_t>::min());
  const std::string good = test_util::Line(escaped);
  const std::string base = R"({"tag":"Trace_EvilMethod","time_ms":"-9223372036854775808",)"
                           R"("pid":"2147483647","app":{"host_id":"edge"},)";
  scratch.Write(
      "edges.jsonl",
      {good, base + R"("key":"","anr":{"cost_ms":5}})",
       base + R"("key":"nul\u0000","anr":{"cost_ms":"NaN"}})",
       base + R"("key":"\ud83d\ude00","anr":{"cost_ms":2}})",
       base + absl::StrCat(R"("key":")", std::string(70000, 'k'), R"(","anr":{"cost_ms":1}})"),
       good.substr(0, good.size() / 2), "not json", base + R"("pid":3000000000})"});
  std::vector<std::string> inputs = {scratch.path() + "/demo", scratch.path() + "/demo/blockcanary",
                                     scratch.path()};
  for (int host = 0; host < test_util::kFleetHosts; ++host) {
    inputs.push_back(absl::StrFormat("%s/fleet/h%02d", scratch.path(), host));
  }
  auto push = [&](const std::string& database, BatchFormat format) {
    PushOptions options;
    options.fleet.database = database;
    options.batch_format = format;
    options.batch_rows = 5;
    options.fallback_host_id = "fallback";
    FleetPusher pusher(*client_, options);
    EXPECT_TRUE(pusher.EnsureSchema().ok());
    PushStats stats;
    const absl::Status status = pusher.Push(inputs, stats);
    EXPECT_TRUE(status.ok()) << status;
    return stats;
  };
  const PushStats binary = push("binary", BatchFormat::kRowBinary);
  EXPECT_GT(binary.sent, 60);
  EXPECT_EQ(binary.malformed, 3);  // Torn, not JSON, and 3e9 as a pid.
  const std::string from_binary = Stored("binary");
  const std::string final_binary = Stored("binary", "FINAL");
  EXPECT_NE(from_binary.find(std::string(70000, 'k')), std::string::npos);
  for (const auto& [database, format] : {std::pair("sorted", BatchFormat::kSortedRowBinary),
                                         std::pair("native", BatchFormat::kNative)}) {
    SCOPED_TRACE(database);
    const PushStats stats = push(database, format);
    EXPECT_EQ(stats.sent, binary.sent);
    EXPECT_EQ(stats.batches, binary.batches);
    EXPECT_EQ(stats.bytes, binary.bytes);
    EXPECT_EQ(stats.malformed, binary.malformed);
    EXPECT_EQ(Stored(database), from_binary);
    EXPECT_EQ(Stored(database, "FINAL"), final_binary);
    // Every batch acknowledged: the checkpoints send nothing more.
    EXPECT_EQ(push(database, format).sent, 0);
  }
}

}  // namespace
}  // namespace matrix::report
