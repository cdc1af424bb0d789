// CSV and JSON exports: columns, escaping, and JSON that parses back.

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "matrix/report/export.h"
#include "matrix/report/format_util.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Parsed;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<const IssueRecord*> Pointers(const std::vector<IssueRecord>& records) {
  std::vector<const IssueRecord*> out;
  for (const IssueRecord& r : records) out.push_back(&r);
  return out;
}

// Splits CSV text into rows of fields (RFC 4180: quoted fields may hold
// commas, doubled quotes and line breaks).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
    } else {
      field += c;
    }
  }
  return rows;
}

TEST(CsvFieldTest, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("app::Draw(int, int)"), "\"app::Draw(int, int)\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(CsvField("cr\rhere"), "\"cr\rhere\"");
  EXPECT_EQ(CsvField(" padded"), "\" padded\"");
}

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControls) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(JsonQuote("Gallery \xc3\xa9"), "\"Gallery \xc3\xa9\"");
}

TEST(ExportCsvTest, OneRowPerIssueWithCommonColumnsAndTheMainMetric) {
  proto::Issue tricky =
      AnrIssue("app::Draw(int, \"fast\")", proto::ANR, 5012.345678, kBaseTimeMs + 5);
  tricky.mutable_anr()->set_scene("Scene,\nwith break");
  const std::vector<IssueRecord> records = {
      Parsed(tricky, "dir/issues.jsonl", 3),
      Parsed(FrameIssue("Gallery", 52.4, kBaseTimeMs + 10), "dir/issues.jsonl", 4),
      Parsed(test_util::Envelope("Custom", "k", kBaseTimeMs + 20), "dir/issues.jsonl", 5),
  };
  const std::string csv = ExportCsv(Pointers(records), absl::UTCTimeZone());
  const std::vector<std::vector<std::string>> rows = ParseCsv(csv);
  ASSERT_EQ(rows.size(), 4u) << csv;
  EXPECT_THAT(rows[0], ElementsAre("time", "time_ms", "tag", "detail", "key", "scene", "process",
                                   "pid", "kind", "metric", "value", "unit", "file", "line"));
  EXPECT_THAT(rows[1],
              ElementsAre("2025-11-21T10:00:00.005+00:00", "1763719200005", "Trace_EvilMethod",
                          "ANR", "app::Draw(int, \"fast\")", "Scene,\nwith break", "gallery",
                          "4242", "anr", "cost_ms", "5012.346", "ms", "dir/issues.jsonl", "3"));
  EXPECT_THAT(rows[2], ElementsAre("2025-11-21T10:00:00.010+00:00", "1763719200010", "Trace_FPS",
                                   "", "Gallery", "Gallery", "gallery", "4242", "frame", "fps",
                                   "52.4", "fps", "dir/issues.jsonl", "4"));
  EXPECT_THAT(rows[3],
              ElementsAre("2025-11-21T10:00:00.020+00:00", "1763719200020", "Custom", "", "k", "",
                          "gallery", "4242", "", "", "", "", "dir/issues.jsonl", "5"));
}

TEST(ExportCsvTest, TimesFollowTheZone) {
  const std::vector<IssueRecord> records = {Parsed(FrameIssue("G", 50, kBaseTimeMs))};
  EXPECT_THAT(ExportCsv(Pointers(records), absl::FixedTimeZone(8 * 3600)),
              HasSubstr("2025-11-21T18:00:00.000+08:00,1763719200000,"));
}

TEST(ExportGroupsCsvTest, OneRowPerGroup) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs, "Gallery")),
      Parsed(AnrIssue("app::A()", proto::ANR, 7000, kBaseTimeMs + 1000, "Home")),
  };
  const std::vector<std::vector<std::string>> rows =
      ParseCsv(ExportGroupsCsv(GroupIssues(Pointers(records)), absl::UTCTimeZone()));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[0], ElementsAre("tag", "detail", "key", "kind", "count", "first_seen",
                                   "last_seen", "first_seen_ms", "last_seen_ms", "metric", "unit",
                                   "worst", "median", "scenes", "processes"));
  EXPECT_THAT(rows[1], ElementsAre("Trace_EvilMethod", "ANR", "app::A()", "anr", "2",
                                   "2025-11-21T10:00:00.000+00:00", "2025-11-21T10:00:01.000+00:00",
                                   "1763719200000", "1763719201000", "cost_ms", "ms", "7000",
                                   "6000", "Gallery 1; Home 1", "gallery (pid 4242) 2"));
}

TEST(ExportJsonTest, ArrayOfIssuesAsTheSinkWritesThem) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(FrameIssue("Gallery", 52.4, kBaseTimeMs + 1)),
  };
  const std::string json = ExportJson(Pointers(records));
  google::protobuf::ListValue list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &list).ok()) << json;
  ASSERT_EQ(list.values_size(), 2);
  EXPECT_EQ(list.values(0).struct_value().fields().at("tag").string_value(), "Trace_EvilMethod");
  EXPECT_EQ(list.values(1)
                .struct_value()
                .fields()
                .at("frame")
                .struct_value()
                .fields()
                .at("fps")
                .number_value(),
            52.4);
  EXPECT_EQ(ExportJson({}), "[]\n");
}

TEST(ExportJsonLinesTest, LinesReadBackAsTheSameIssues) {
  const proto::Issue issue = AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs);
  const std::vector<IssueRecord> records = {Parsed(issue)};
  const std::string text = ExportJsonLines(Pointers(records));
  EXPECT_EQ(text, test_util::Line(issue) + "\n");
}

TEST(ExportGroupsJsonTest, GroupsWithMetricScenesAndSources) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::\"A\"()", proto::ANR, 5000, kBaseTimeMs, "Gallery"), "f.jsonl", 1),
      Parsed(AnrIssue("app::\"A\"()", proto::ANR, 7000, kBaseTimeMs + 1000, "Home"), "f.jsonl", 2),
      Parsed(test_util::Envelope("Custom", "k", kBaseTimeMs), "f.jsonl", 3),
  };
  const std::string json = ExportGroupsJson(GroupIssues(Pointers(records)), absl::UTCTimeZone());
  google::protobuf::ListValue list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &list).ok()) << json;
  ASSERT_EQ(list.values_size(), 2);
  const auto& g = list.values(0).struct_value().fields();
  EXPECT_EQ(g.at("key").string_value(), "app::\"A\"()");
  EXPECT_EQ(g.at("count").number_value(), 2);
  EXPECT_EQ(g.at("first_seen_ms").number_value(), static_cast<double>(kBaseTimeMs));
  EXPECT_EQ(g.at("last_seen").string_value(), "2025-11-21T10:00:01.000+00:00");
  const auto& metric = g.at("metric").struct_value().fields();
  EXPECT_EQ(metric.at("name").string_value(), "cost_ms");
  EXPECT_EQ(metric.at("worst").number_value(), 7000);
  EXPECT_EQ(metric.at("median").number_value(), 6000);
  EXPECT_TRUE(metric.at("higher_is_worse").bool_value());
  EXPECT_EQ(g.at("scenes").list_value().values_size(), 2);
  ASSERT_EQ(g.at("sources").list_value().values_size(), 2);
  EXPECT_EQ(g.at("sources").list_value().values(1).string_value(), "f.jsonl:2");
  EXPECT_EQ(list.values(1).struct_value().fields().at("metric").kind_case(),
            google::protobuf::Value::kNullValue);
}

}  // namespace
}  // namespace matrix::report
