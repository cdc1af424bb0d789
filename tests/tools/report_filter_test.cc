// IssueFilter (every criterion), SelectIssues ordering, ParseTimeSpec.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_filter.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Parsed;
using ::testing::ElementsAre;

class IssueFilterTest : public ::testing::Test {
 protected:
  IssueFilterTest() {
    proto::Issue other_process =
        AnrIssue("app::Decode()", proto::LAG, 2500, kBaseTimeMs + 2000, "Home");
    other_process.set_process("camera");
    other_process.set_pid(77);
    records_ = {
        Parsed(AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs + 1000, "Gallery"), "f", 1),
        Parsed(other_process, "f", 2),
        Parsed(FrameIssue("Gallery", 50, kBaseTimeMs), "f", 3),
        Parsed(test_util::EvilMethodIssue("app::Parse()", 800, kBaseTimeMs + 3000, "Home"), "f", 4),
    };
    for (size_t i = 0; i < records_.size(); ++i) records_[i].sequence = static_cast<int64_t>(i);
  }

  // The source lines of the selected records, in selection order.
  std::vector<int64_t> Select(const IssueFilter& filter) const {
    std::vector<int64_t> lines;
    for (const IssueRecord* r : SelectIssues(records_, filter)) lines.push_back(r->source.line);
    return lines;
  }

  std::vector<IssueRecord> records_;
};

TEST_F(IssueFilterTest, NoCriteriaSelectsAllOrderedByTime) {
  IssueFilter filter;
  EXPECT_TRUE(filter.empty());
  EXPECT_THAT(Select(filter), ElementsAre(3, 1, 2, 4));
}

TEST_F(IssueFilterTest, TagIsCaseInsensitiveAndRepeatsMeanAnyOf) {
  IssueFilter filter;
  filter.tags = {"trace_fps"};
  EXPECT_FALSE(filter.empty());
  EXPECT_THAT(Select(filter), ElementsAre(3));
  filter.tags = {"Trace_FPS", "TRACE_EVILMETHOD"};
  EXPECT_THAT(Select(filter), ElementsAre(3, 1, 2, 4));
}

TEST_F(IssueFilterTest, DetailAndNone) {
  IssueFilter filter;
  filter.details = {"anr"};
  EXPECT_THAT(Select(filter), ElementsAre(1));
  filter.details = {"none"};
  EXPECT_THAT(Select(filter), ElementsAre(3));
  filter.details = {"LAG", "NORMAL"};
  EXPECT_THAT(Select(filter), ElementsAre(2, 4));
}

TEST_F(IssueFilterTest, KeyIsASubstring) {
  IssueFilter filter;
  filter.keys = {"Decode"};
  EXPECT_THAT(Select(filter), ElementsAre(1, 2));
  filter.keys = {"decode"};  // Case-sensitive.
  EXPECT_THAT(Select(filter), ElementsAre());
}

TEST_F(IssueFilterTest, SceneIsExact) {
  IssueFilter filter;
  filter.scenes = {"Home"};
  EXPECT_THAT(Select(filter), ElementsAre(2, 4));
  filter.scenes = {"Hom"};
  EXPECT_THAT(Select(filter), ElementsAre());
}

TEST_F(IssueFilterTest, ProcessByNameOrPid) {
  IssueFilter filter;
  filter.processes = {"camera"};
  EXPECT_THAT(Select(filter), ElementsAre(2));
  filter.processes = {"4242"};
  EXPECT_THAT(Select(filter), ElementsAre(3, 1, 4));
}

TEST_F(IssueFilterTest, SinceIsInclusiveUntilExclusive) {
  IssueFilter filter;
  filter.since_ms = kBaseTimeMs + 1000;
  filter.until_ms = kBaseTimeMs + 3000;
  EXPECT_THAT(Select(filter), ElementsAre(1, 2));
}

TEST_F(IssueFilterTest, CriteriaCombineWithAnd) {
  IssueFilter filter;
  filter.tags = {"Trace_EvilMethod"};
  filter.scenes = {"Home"};
  filter.keys = {"Decode"};
  EXPECT_THAT(Select(filter), ElementsAre(2));
}

TEST(ParseTimeSpecTest, AbsoluteRelativeAndEpochForms) {
  const absl::Time now = absl::FromUnixMillis(kBaseTimeMs);  // 2025-11-21 10:00:00 UTC.
  const absl::TimeZone utc = absl::UTCTimeZone();
  absl::TimeZone shanghai = absl::FixedTimeZone(8 * 3600);
  struct Case {
    std::string spec;
    absl::TimeZone tz;
    int64_t want;
  };
  const std::vector<Case> cases = {
      {"2025-11-21T10:00:00Z", shanghai, kBaseTimeMs},
      {"2025-11-21T18:00:00+08:00", utc, kBaseTimeMs},
      {"2025-11-21T10:00:00.250Z", utc, kBaseTimeMs + 250},
      {"2025-11-21 10:00:00", utc, kBaseTimeMs},
      {"2025-11-21 18:00:00", shanghai, kBaseTimeMs},
      {"2025-11-21 10:00", utc, kBaseTimeMs},
      {"2025-11-21T10:00", utc, kBaseTimeMs},
      {"2025-11-21 10:00:01.5", utc, kBaseTimeMs + 1500},
      {"2025-11-21", utc, kBaseTimeMs - 10 * 3600 * 1000},
      {"1763719200123", utc, kBaseTimeMs + 123},
      {"now", utc, kBaseTimeMs},
      {"90s", utc, kBaseTimeMs - 90 * 1000},
      {"30m", utc, kBaseTimeMs - 30 * 60 * 1000},
      {"1h30m", utc, kBaseTimeMs - 90 * 60 * 1000},
      {"3d", utc, kBaseTimeMs - 3 * 24 * 3600 * 1000},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> ms = ParseTimeSpec(c.spec, now, c.tz);
    ASSERT_TRUE(ms.ok()) << c.spec << ": " << ms.status();
    EXPECT_EQ(*ms, c.want) << c.spec;
  }
}

TEST(ParseTimeSpecTest, RejectsWhatItCannotRead) {
  const absl::Time now = absl::FromUnixMillis(kBaseTimeMs);
  for (const char* spec :
       {"", "yesterday", "2025-13-40", "-5m", "10 minutes", "99999999999999999999"}) {
    absl::StatusOr<int64_t> ms = ParseTimeSpec(spec, now, absl::UTCTimeZone());
    EXPECT_FALSE(ms.ok()) << spec << " -> " << (ms.ok() ? *ms : 0);
  }
}

}  // namespace
}  // namespace matrix::report
