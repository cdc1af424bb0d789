// Tests for Issue's JSON and Matrix-style string forms.

#include "matrix/core/issue.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace {

using ::matrix::Issue;
using ::testing::HasSubstr;
using ::testing::Not;

Issue AnrIssue() {
  Issue issue;
  matrix::proto::Issue& p = *issue.mutable_proto();
  p.set_tag(matrix::kTagEvilMethod);
  p.set_key("app::Decode(Image const&)");
  p.set_plugin("Trace");
  p.set_time_ms(1763712000123);
  p.set_process("gallery");
  p.set_pid(4242);
  p.mutable_device()->set_machine(matrix::proto::DeviceInfo::HIGH);
  matrix::proto::AnrReport& anr = *p.mutable_anr();
  anr.set_detail(matrix::proto::ANR);
  anr.set_cost_ms(5000.5);
  anr.set_scene("Gallery");
  anr.mutable_thread_stack()->add_frames()->set_function("app::Decode(Image const&)");
  anr.mutable_queue_costs()->set_traversal_ms(12.5);
  return issue;
}

TEST(IssueTest, ToJson_UsesProtoFieldNamesAndEnumNames) {
  const std::string json = AnrIssue().ToJson();
  EXPECT_THAT(json, HasSubstr("\"tag\":\"Trace_EvilMethod\""));
  EXPECT_THAT(json, HasSubstr("\"time_ms\":\"1763712000123\""));  // int64: a string.
  EXPECT_THAT(json, HasSubstr("\"detail\":\"ANR\""));
  EXPECT_THAT(json, HasSubstr("\"machine\":\"HIGH\""));
  EXPECT_THAT(json, HasSubstr("\"cost_ms\":5000.5"));
  EXPECT_THAT(json, HasSubstr("\"thread_stack\":{"));
  EXPECT_THAT(json, HasSubstr("\"traversal_ms\":12.5"));
  // Not the lowerCamelCase JSON names.
  EXPECT_THAT(json, Not(HasSubstr("timeMs")));
  EXPECT_THAT(json, Not(HasSubstr("costMs")));
  EXPECT_THAT(json, Not(HasSubstr("threadStack")));
  // One line.
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(IssueTest, ToJson_RoundTripsThroughProtobufsParser) {
  const Issue issue = AnrIssue();
  matrix::proto::Issue parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(issue.ToJson(), &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, issue.proto()))
      << parsed.DebugString();
}

TEST(IssueTest, ToJson_FrameReportUsesFieldNames) {
  Issue issue;
  issue.mutable_proto()->set_tag(matrix::kTagFps);
  matrix::proto::FrameReport& f = *issue.mutable_proto()->mutable_frame();
  f.set_scene("Feed");
  f.set_fps(58.5);
  f.mutable_drop_level()->set_frozen(2);
  const std::string json = issue.ToJson();
  EXPECT_THAT(json, HasSubstr("\"frame\":{"));
  EXPECT_THAT(json, HasSubstr("\"drop_level\":{"));
  EXPECT_THAT(json, HasSubstr("\"frozen\":\"2\""));
  EXPECT_THAT(json, HasSubstr("\"fps\":58.5"));
}

TEST(IssueTest, ToString_HasMatrixShape) {
  const Issue issue = AnrIssue();
  EXPECT_EQ(issue.ToString(), "tag[Trace_EvilMethod]type[0];key[app::Decode(Image const&)];content[" +
                                  issue.ToJson() + "]");

  Issue typed;
  typed.mutable_proto()->set_tag("BlockCanary");
  typed.mutable_proto()->set_type(3);
  EXPECT_THAT(typed.ToString(), testing::StartsWith("tag[BlockCanary]type[3];key[];content[{"));
}

TEST(IssueTest, Accessors_ReadTheProto) {
  Issue issue = AnrIssue();
  EXPECT_EQ(issue.tag(), "Trace_EvilMethod");
  EXPECT_EQ(issue.key(), "app::Decode(Image const&)");
  EXPECT_EQ(issue.type(), 0);
  EXPECT_EQ(issue.plugin(), nullptr);
}

}  // namespace
