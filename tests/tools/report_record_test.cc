// ParseIssueLine on lines made by matrix::Issue::ToJson() for every report
// kind, lines from a newer build with an unknown report kind, and malformed
// lines; RecordToJson round trips.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_record.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Line;
using test_util::StartupIssue;
using ::testing::HasSubstr;

TEST(ParseIssueLineTest, AnrLineKeepsEveryFieldAndDerivesTheCommonOnes) {
  const proto::Issue issue = AnrIssue("app::Decode(Image const&)", proto::ANR, 5012.5, kBaseTimeMs);
  absl::StatusOr<IssueRecord> record = ParseIssueLine(Line(issue), {"a.jsonl", 7});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->issue.SerializeAsString(), issue.SerializeAsString());
  EXPECT_EQ(record->kind, "anr");
  EXPECT_FALSE(record->kind_unknown_to_build);
  EXPECT_FALSE(record->has_unknown_fields);
  EXPECT_EQ(record->tag(), "Trace_EvilMethod");
  EXPECT_EQ(record->detail, "ANR");
  EXPECT_EQ(record->TagDetail(), "Trace_EvilMethod/ANR");
  EXPECT_EQ(record->KindDetail(), "ANR");
  EXPECT_EQ(record->key, "app::Decode(Image const&)");
  EXPECT_EQ(record->scene, "Gallery");
  EXPECT_EQ(record->time_ms(), kBaseTimeMs);
  EXPECT_EQ(record->ProcessLabel(), "gallery (pid 4242)");
  EXPECT_EQ(record->metric.name, "cost_ms");
  EXPECT_EQ(record->metric.unit, "ms");
  EXPECT_DOUBLE_EQ(record->metric.value, 5012.5);
  EXPECT_TRUE(record->metric.higher_is_worse);
  EXPECT_EQ(record->source.file, "a.jsonl");
  EXPECT_EQ(record->source.line, 7);
  ASSERT_NE(record->report(), nullptr);
  EXPECT_EQ(record->report()->GetDescriptor()->name(), "AnrReport");
}

TEST(ParseIssueLineTest, EvilMethodLine) {
  absl::StatusOr<IssueRecord> record =
      ParseIssueLine(Line(EvilMethodIssue("app::DecodeImage()", 812.25, kBaseTimeMs, "Home")), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->kind, "evil_method");
  EXPECT_EQ(record->detail, "NORMAL");
  EXPECT_EQ(record->key, "app::DecodeImage()");
  EXPECT_EQ(record->scene, "Home");
  EXPECT_EQ(record->metric.name, "cost_ms");
  EXPECT_DOUBLE_EQ(record->metric.value, 812.25);
  EXPECT_EQ(record->issue.evil_method().stack_size(), 4);
}

TEST(ParseIssueLineTest, FrameLineIsKeyedBySceneAndMeasuredInFpsWhereLowerIsWorse) {
  absl::StatusOr<IssueRecord> record =
      ParseIssueLine(Line(FrameIssue("Gallery", 52.4, kBaseTimeMs)), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->kind, "frame");
  EXPECT_EQ(record->tag(), "Trace_FPS");
  EXPECT_EQ(record->detail, "");
  EXPECT_EQ(record->TagDetail(), "Trace_FPS");
  EXPECT_EQ(record->key, "Gallery");
  EXPECT_EQ(record->scene, "Gallery");
  EXPECT_EQ(record->metric.name, "fps");
  EXPECT_EQ(record->metric.unit, "fps");
  EXPECT_DOUBLE_EQ(record->metric.value, 52.4);
  EXPECT_FALSE(record->metric.higher_is_worse);
  EXPECT_TRUE(record->metric.Worse(30, 50));
  // 64-bit counters travel as JSON strings and come back as numbers.
  EXPECT_EQ(record->issue.frame().frames(), 2620);
  EXPECT_EQ(record->issue.frame().drop_level().normal(), 14);
}

TEST(ParseIssueLineTest, StartupLineUsesFirstSceneAndDuration) {
  absl::StatusOr<IssueRecord> record = ParseIssueLine(Line(StartupIssue(kBaseTimeMs)), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->kind, "startup");
  EXPECT_EQ(record->tag(), "Trace_StartUp");
  EXPECT_EQ(record->detail, "");
  EXPECT_EQ(record->key, "cold:Splash");
  EXPECT_EQ(record->scene, "Splash");
  EXPECT_EQ(record->metric.name, "startup_duration_ms");
  EXPECT_DOUBLE_EQ(record->metric.value, 2988.1);
}

TEST(ParseIssueLineTest, BlockCanaryLineIsMeasuredByItsInt64Cost) {
  absl::StatusOr<IssueRecord> record =
      ParseIssueLine(Line(test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs)), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->kind, "block");
  EXPECT_EQ(record->tag(), "BlockCanary");
  EXPECT_EQ(record->TagDetail(), "BlockCanary");
  EXPECT_EQ(record->key, "app::Decode()");
  EXPECT_EQ(record->scene, "Gallery");
  EXPECT_EQ(record->metric.name, "cost_ms");
  EXPECT_DOUBLE_EQ(record->metric.value, 2603);
}

TEST(ParseIssueLineTest, FrameReportOverNoFramesHasNoFps) {
  proto::Issue issue = FrameIssue("default", 0, kBaseTimeMs);
  issue.mutable_frame()->set_frames(0);
  EXPECT_FALSE(test_util::Parsed(issue).metric.present());
}

TEST(ParseIssueLineTest, EmptyKeyFallsBackToStackKeyThenScene) {
  proto::Issue hang = AnrIssue("app::Spin()", proto::LAG, 2100, kBaseTimeMs);
  hang.clear_key();
  EXPECT_EQ(test_util::Parsed(hang).key, "app::Spin()");
  proto::Issue frame = FrameIssue("Settings", 55, kBaseTimeMs);
  frame.clear_key();
  EXPECT_EQ(test_util::Parsed(frame).key, "Settings");
}

TEST(ParseIssueLineTest, AFrameReportTooShortForARateHasNoMetric) {
  // Three frames read "60.0 fps" before the collector marked such slices:
  // old and new reports alike stay out of worst and median.
  proto::Issue old_report = FrameIssue("Menu", 60.0, kBaseTimeMs);
  old_report.mutable_frame()->set_frames(3);
  old_report.mutable_frame()->set_window_ms(50);
  absl::StatusOr<IssueRecord> record = ParseIssueLine(Line(old_report), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->kind, "frame");
  EXPECT_FALSE(record->metric.present());
  proto::Issue new_report = FrameIssue("Menu", 0, kBaseTimeMs);
  new_report.mutable_frame()->set_too_short_for_rate(true);
  record = ParseIssueLine(Line(new_report), {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_FALSE(record->metric.present());
}

TEST(ParseIssueLineTest, IssueWithoutReportHasNoKindAndNoMetric) {
  proto::Issue issue = test_util::Envelope("Custom", "k", kBaseTimeMs);
  IssueRecord record = test_util::Parsed(issue);
  EXPECT_EQ(record.kind, "");
  EXPECT_EQ(record.report(), nullptr);
  EXPECT_FALSE(record.metric.present());
  EXPECT_EQ(record.key, "k");
}

// A line from a newer matrix-cpp: a report kind (here "future_kind") this
// build has never heard of. It parses, the kind and its common fields come
// from the raw JSON, and the data is kept for show and export.
TEST(ParseIssueLineTest, UnknownReportKindIsKeptAndItsCommonFieldsAreRead) {
  const std::string line =
      R"json({"tag":"FutureCanary","key":"app::Parse()","plugin":"Future",)json"
      R"json("time_ms":"1763719200123",)json"
      R"json("process":"gallery","pid":4242,"future_kind":{"detail":"STALL","cost_ms":"1503",)json"
      R"json("scene":"Home","samples":[{"offset_ms":"42","frames":[{"function":"app::Parse()",)json"
      R"json("module":"/usr/bin/gallery","pc":"0x1"}]}]}})json";
  absl::StatusOr<IssueRecord> record = ParseIssueLine(line, {"new.jsonl", 3});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->tag(), "FutureCanary");
  EXPECT_EQ(record->time_ms(), 1763719200123);
  EXPECT_TRUE(record->has_unknown_fields);
  EXPECT_TRUE(record->kind_unknown_to_build);
  EXPECT_EQ(record->kind, "future_kind");
  EXPECT_EQ(record->detail, "STALL");
  EXPECT_EQ(record->scene, "Home");
  EXPECT_EQ(record->key, "app::Parse()");
  EXPECT_EQ(record->metric.name, "cost_ms");
  EXPECT_DOUBLE_EQ(record->metric.value, 1503);  // An int64 sent as a string.
  ASSERT_EQ(record->unknown_fields.size(), 1u);
  ASSERT_NE(record->unknown_report(), nullptr);
  EXPECT_EQ(record->report(), nullptr);
}

TEST(ParseIssueLineTest, UnknownNestedFieldIsIgnoredButNoted) {
  std::string line = Line(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs));
  const std::string anchor = R"("anr":{)";
  const size_t at = line.find(anchor);
  ASSERT_NE(at, std::string::npos);
  line.insert(at + anchor.size(), R"("added_later":7,)");
  absl::StatusOr<IssueRecord> record = ParseIssueLine(line, {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_TRUE(record->has_unknown_fields);
  EXPECT_FALSE(record->kind_unknown_to_build);
  EXPECT_EQ(record->kind, "anr");
  EXPECT_TRUE(record->unknown_fields.empty());
  EXPECT_DOUBLE_EQ(record->metric.value, 5000);
}

TEST(ParseIssueLineTest, MalformedLinesAreErrorsThatSayWhy) {
  const std::string good = Line(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs));
  for (const std::string& bad : {
           good.substr(0, good.size() / 2),                         // Cut short.
           std::string("not json at all"),                          // Not JSON.
           std::string("[1, 2, 3]"),                                // Not an object.
           std::string("{}"),                                       // No tag.
           std::string(R"({"key":"x","time_ms":"1"})"),             // No tag either.
           std::string(R"({"tag":"Trace_FPS","time_ms":"soon"})"),  // A field of the wrong type.
           std::string(R"({"tag":"Trace_FPS","frame":{"fps":"fast"}})"),
       }) {
    absl::StatusOr<IssueRecord> record = ParseIssueLine(bad, {"x.jsonl", 9});
    EXPECT_FALSE(record.ok()) << bad;
    EXPECT_FALSE(record.status().message().empty()) << bad;
    // One line, whatever the parser's message looked like.
    EXPECT_EQ(record.status().message().find('\n'), absl::string_view::npos)
        << record.status().message();
  }
  EXPECT_THAT(std::string(ParseIssueLine("{}", {}).status().message()), HasSubstr("tag"));
}

TEST(ParseIssueLineTest, NonFiniteMetricIsAbsent) {
  absl::StatusOr<IssueRecord> record =
      ParseIssueLine(R"({"tag":"Trace_EvilMethod","anr":{"detail":"ANR","cost_ms":"NaN"}})", {});
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_FALSE(record->metric.present());
}

TEST(RecordToJsonTest, RoundTripsKnownAndUnknownKinds) {
  const proto::Issue issue = FrameIssue("Gallery", 52.4, kBaseTimeMs);
  IssueRecord record = test_util::Parsed(issue);
  EXPECT_EQ(RecordToJson(record), Line(issue));

  const std::string line =
      R"({"tag":"FutureCanary","key":"k","time_ms":"5","future_kind":{"cost_ms":3,"note":"a\"b"}})";
  absl::StatusOr<IssueRecord> future = ParseIssueLine(line, {});
  ASSERT_TRUE(future.ok()) << future.status();
  const std::string json = RecordToJson(*future);
  EXPECT_THAT(json, HasSubstr(R"("future_kind":{)"));
  EXPECT_THAT(json, HasSubstr(R"(a\"b)"));
  absl::StatusOr<IssueRecord> again = ParseIssueLine(json, {});
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(again->kind, "future_kind");
  EXPECT_DOUBLE_EQ(again->metric.value, 3);
  EXPECT_EQ(again->key, "k");
}

}  // namespace
}  // namespace matrix::report
