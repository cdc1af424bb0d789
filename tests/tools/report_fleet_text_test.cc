// The fleet's text, without a server: ClickHouse's Array(String) text as it
// comes in a TabSeparated field, and the fleet tables with numbers a corrupt
// or hostile report can hold. fleet_test.cc runs the same through a real
// clickhouse-server.

#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

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

}  // namespace
}  // namespace matrix::report
