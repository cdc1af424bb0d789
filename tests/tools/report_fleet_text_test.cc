// The fleet's text, without a server: ClickHouse's Array(String) text as it
// comes in a TabSeparated field. fleet_test.cc runs the same through a real
// clickhouse-server.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

namespace matrix::report {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

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

}  // namespace
}  // namespace matrix::report
