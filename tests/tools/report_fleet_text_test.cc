// The fleet's text, without a server: ClickHouse's Array(String) text as it
// comes in a TabSeparated field, the fleet tables with numbers a corrupt
// or hostile report can hold, and the fleet commands' usage errors.
// fleet_test.cc runs the same through a real clickhouse-server.

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// As clickhouse-server 18.16 writes groupUniqArray(version) in a
// TabSeparated field: each string quoted, with \' \\ \t \n \0 ... escapes,
// the field itself not escaped again.
TEST(FleetTextTest, StringArraysUnescapeAsClickHouseWritesThem) {
  EXPECT_THAT(ParseStringArray("['1.0','2.0']"), ElementsAre("1.0", "2.0"));
  EXPECT_THAT(ParseStringArray("[]"), IsEmpty());
  EXPECT_THAT(ParseStringArray(R"(['2.9\'\\'])"), ElementsAre("2.9'\\"));
  EXPECT_THAT(ParseStringArray(R"(['3.0\',\'x]','4'])"), ElementsAre("3.0','x]", "4"));
  EXPECT_THAT(ParseStringArray(R"(['a\tb','c\nd','e\\nf','\0'])"),
              ElementsAre("a\tb", "c\nd", "e\\nf", std::string(1, '\0')));
  EXPECT_THAT(ParseStringArray("['\x1b[31m','']"), ElementsAre("\x1b[31m", ""));
}

TEST(FleetTextTest, HugeCostsAndFpsPrintWithAnExponent) {
  const FleetKey key{.tag = "Trace_EvilMethod",
                     .detail = "ANR",
                     .key = "app::Decode()",
                     .hosts = 1,
                     .count = 2,
                     .worst_ms = 1.7e308,
                     .median_ms = 9.3e18,
                     .version = "2.9"};
  const std::string keys = RenderFleetKeys({key}, false);
  EXPECT_THAT(keys, HasSubstr("1.7e+308"));
  EXPECT_THAT(keys, HasSubstr("9.3e+18"));
  EXPECT_THAT(keys, Not(::testing::ContainsRegex("[0-9]{25}")));
  FleetFps fps;
  fps.scene = "Gallery";
  fps.fps_p50 = 1e300;
  fps.fps_p10 = -1e300;
  fps.drop_level[0] = std::numeric_limits<int64_t>::max();
  const std::string table = RenderFleetFps({fps});
  EXPECT_THAT(table, HasSubstr("1e+300"));
  EXPECT_THAT(table, HasSubstr("-1e+300"));
  EXPECT_THAT(table, HasSubstr("9223372036854775807/0/0/0/0"));
  EXPECT_THAT(table, Not(::testing::ContainsRegex("[0-9]{25}")));
  // Ordinary numbers as before.
  const FleetKey plain{.tag = "T",
                       .detail = "",
                       .key = "k",
                       .hosts = 1,
                       .count = 1,
                       .worst_ms = 812.25,
                       .median_ms = 700,
                       .version = "1"};
  EXPECT_THAT(RenderFleetKeys({plain}, false), HasSubstr("1      1       812.2      700.0      1"));
}

// Each option of the fleet commands' table, given wrong: a usage error (exit
// 2) that names it, before any server is asked.
TEST(FleetTextTest, BadFleetOptionsAreUsageErrors) {
  const std::string url = "http://127.0.0.1:1";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"push", "--clickhouse", "127.0.0.1:8123"}, "http://HOST:PORT"},
      {{"push", "--clickhouse"}, "--clickhouse needs a value"},
      {{"push", "--clickhouse="}, "--clickhouse needs a non-empty value"},
      {{"push", "--clickhouse", url, "--follow=yes"}, "--follow takes no value"},
      {{"push", "--clickhouse", url, "--follow-for=0"}, "--follow-for needs a positive number"},
      {{"push", "--clickhouse", url, "--poll-ms", "x"}, "--poll-ms needs a positive number"},
      {{"push", "--clickhouse", url, "--retry-for=-1"}, "--retry-for needs seconds"},
      {{"push", "--clickhouse", url, "--timeout=0"}, "--timeout needs a positive number"},
      {{"push", "--clickhouse", url, "--batch=0"}, "--batch needs a positive number"},
      {{"push", "--clickhouse", url, "--bogus"}, "unknown option --bogus for push"},
      {{"push", "--clickhouse", url, "--database=a-b"}, "--database: letters, digits and _"},
      {{"push", "--clickhouse", url, "--cluster=a;b"}, "--cluster: letters, digits and _"},
      {{"push", "--clickhouse", url, "--clickhouse", url}, "once per shard with --cluster"},
      {{"push", "dir"}, "push needs --clickhouse URL"},
      {{"fleet", "--clickhouse", url}, "fleet needs a query"},
      {{"fleet", "--clickhouse", url, "worst"}, "not \"worst\""},
      {{"fleet", "--clickhouse", url, "new"}, "fleet new needs --since=VERSION"},
      {{"fleet", "--clickhouse", url, "show"}, "fleet show needs one KEY"},
      {{"fleet", "--clickhouse", url, "top", "x"}, "fleet top takes no arguments"},
      {{"fleet", "--clickhouse", url, "top", "--limit=-3"}, "--limit needs a positive number"},
      {{"html", "--clickhouse", url, "dir"}, "html --clickhouse reads the server"},
  };
  for (const auto& [args, message] : cases) {
    const test_util::RunOutput run = test_util::RunReport(args, "", {});
    EXPECT_EQ(run.code, 2) << args[1] << " " << run.err;
    EXPECT_THAT(run.err, HasSubstr(message));
  }
}

}  // namespace
}  // namespace matrix::report
