// GroupIssues: one group per tag + detail + key with counts, first/last
// seen, worst and median, scenes; ordered by count, then worst.

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/issue_groups.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Parsed;
using ::testing::ElementsAre;

std::vector<const IssueRecord*> Pointers(const std::vector<IssueRecord>& records) {
  std::vector<const IssueRecord*> out;
  for (const IssueRecord& r : records) out.push_back(&r);
  return out;
}

TEST(MedianTest, OddEvenAndEmpty) {
  std::vector<double> odd = {5, 1, 3};
  EXPECT_DOUBLE_EQ(Median(odd), 3);
  std::vector<double> even = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Median(even), 2.5);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Median(one), 7);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(Median(none), 0);
}

TEST(GroupIssuesTest, CountsFirstLastSeenWorstMedianAndScenes) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::Decode()", proto::ANR, 5200, kBaseTimeMs + 5000, "Gallery")),
      Parsed(AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs + 1000, "Gallery")),
      Parsed(AnrIssue("app::Decode()", proto::ANR, 7000, kBaseTimeMs + 9000, "Home")),
      Parsed(AnrIssue("app::Decode()", proto::ANR, 6000, kBaseTimeMs + 3000, "Gallery")),
  };
  const std::vector<IssueGroup> groups = GroupIssues(Pointers(records));
  ASSERT_EQ(groups.size(), 1u);
  const IssueGroup& g = groups[0];
  EXPECT_EQ(g.tag, "Trace_EvilMethod");
  EXPECT_EQ(g.detail, "ANR");
  EXPECT_EQ(g.key, "app::Decode()");
  EXPECT_EQ(g.kind, "anr");
  EXPECT_EQ(g.TagDetail(), "Trace_EvilMethod/ANR");
  EXPECT_EQ(g.count, 4);
  EXPECT_EQ(g.first_seen_ms, kBaseTimeMs + 1000);
  EXPECT_EQ(g.last_seen_ms, kBaseTimeMs + 9000);
  EXPECT_EQ(g.metric.name, "cost_ms");
  EXPECT_EQ(g.metric_count, 4);
  EXPECT_DOUBLE_EQ(g.worst, 7000);
  EXPECT_DOUBLE_EQ(g.median, 5600);  // (5200 + 6000) / 2
  EXPECT_THAT(g.scenes, ElementsAre(NameCount{"Gallery", 3}, NameCount{"Home", 1}));
  EXPECT_THAT(g.processes, ElementsAre(NameCount{"gallery (pid 4242)", 4}));
  EXPECT_EQ(g.issues.size(), 4u);
}

TEST(GroupIssuesTest, TagDetailAndKeyEachSplitGroups) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(AnrIssue("app::A()", proto::LAG, 2000, kBaseTimeMs)),  // Other detail.
      Parsed(AnrIssue("app::B()", proto::ANR, 5000, kBaseTimeMs)),  // Other key.
      Parsed(EvilMethodIssue("app::A()", 800, kBaseTimeMs)),        // NORMAL.
      Parsed(FrameIssue("app::A()", 50, kBaseTimeMs)),              // Other tag.
  };
  EXPECT_EQ(GroupIssues(Pointers(records)).size(), 5u);
}

TEST(GroupIssuesTest, FpsWorstIsTheLowest) {
  const std::vector<IssueRecord> records = {
      Parsed(FrameIssue("Gallery", 55, kBaseTimeMs)),
      Parsed(FrameIssue("Gallery", 31.5, kBaseTimeMs + 1)),
      Parsed(FrameIssue("Gallery", 58, kBaseTimeMs + 2)),
  };
  const std::vector<IssueGroup> groups = GroupIssues(Pointers(records));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].metric.name, "fps");
  EXPECT_DOUBLE_EQ(groups[0].worst, 31.5);
  EXPECT_DOUBLE_EQ(groups[0].median, 55);
}

TEST(GroupIssuesTest, BlocksGroupByKeyWithTheirCost) {
  const std::vector<IssueRecord> records = {
      Parsed(test_util::BlockIssue("app::Decode()", 1500, kBaseTimeMs)),
      Parsed(test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs + 1)),
      Parsed(test_util::BlockIssue("app::Parse()", 900, kBaseTimeMs + 2)),
  };
  const std::vector<IssueGroup> groups = GroupIssues(Pointers(records));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].TagDetail(), "BlockCanary");
  EXPECT_EQ(groups[0].key, "app::Decode()");
  EXPECT_EQ(groups[0].count, 2);
  EXPECT_DOUBLE_EQ(groups[0].worst, 2603);
  EXPECT_DOUBLE_EQ(groups[0].median, 2051.5);
}

TEST(GroupIssuesTest, OrderedByCountThenWorstThenName) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("once-mild", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(AnrIssue("twice", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(AnrIssue("once-bad", proto::ANR, 9000, kBaseTimeMs)),
      Parsed(AnrIssue("twice", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(AnrIssue("once-mild-too", proto::ANR, 5000, kBaseTimeMs)),
      Parsed(FrameIssue("smooth", 59, kBaseTimeMs)),
      Parsed(FrameIssue("janky", 31, kBaseTimeMs)),
  };
  std::vector<std::string> keys;
  for (const IssueGroup& g : GroupIssues(Pointers(records))) keys.push_back(g.key);
  // Counts first; among single issues, costs (ms) before FPS, each worst
  // first; equal worst by name.
  EXPECT_THAT(keys,
              ElementsAre("twice", "once-bad", "once-mild", "once-mild-too", "janky", "smooth"));
}

TEST(GroupIssuesTest, IssuesWithoutMetricGroupAfterThoseWithOne) {
  std::vector<IssueRecord> records = {
      Parsed(test_util::Envelope("Custom", "no-metric", kBaseTimeMs)),
      Parsed(AnrIssue("metric", proto::ANR, 5000, kBaseTimeMs)),
  };
  const std::vector<IssueGroup> groups = GroupIssues(Pointers(records));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].key, "metric");
  EXPECT_EQ(groups[1].key, "no-metric");
  EXPECT_EQ(groups[1].metric_count, 0);
  EXPECT_FALSE(groups[1].metric.present());
}

TEST(MetricStatsTest, MedianAndWorstFromCountsAsMedianGivesThem) {
  for (const std::vector<double>& values :
       std::vector<std::vector<double>>{{5, 1, 3}, {4, 1, 3, 2}, {7}, {2, 2, 9, 9}, {1, 2, 2, 3}}) {
    MetricStats stats;
    Metric metric{.name = "cost_ms", .unit = "ms", .value = 0, .higher_is_worse = true};
    for (size_t i = 0; i < values.size(); ++i) {
      metric.value = values[i];
      stats.Add(metric, {0, static_cast<int64_t>(i)});
    }
    std::vector<double> copy = values;
    EXPECT_DOUBLE_EQ(stats.median(), Median(copy));
    EXPECT_DOUBLE_EQ(stats.worst(), *std::max_element(values.begin(), values.end()));
    EXPECT_EQ(stats.count(), static_cast<int64_t>(values.size()));
  }
  EXPECT_FALSE(MetricStats().metric().present());
}

TEST(IssueGrouperTest, AddedInAnyOrderGivesTheGroupsOfTheOrderedIssues) {
  // A group mixing report kinds takes the earliest issue's kind and metric.
  std::vector<IssueRecord> records = {
      Parsed(EvilMethodIssue("app::A()", 700, kBaseTimeMs + 2000)),
      Parsed(AnrIssue("app::B()", proto::ANR, 5000, kBaseTimeMs + 1000)),
      Parsed(EvilMethodIssue("app::A()", 900, kBaseTimeMs)),
      Parsed(FrameIssue("Gallery", 50, kBaseTimeMs + 500)),
      Parsed(FrameIssue("Gallery", 40, kBaseTimeMs + 3000)),
  };
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].sequence = static_cast<int64_t>(i);
    records[i].source.line = static_cast<int64_t>(i) + 1;
  }
  std::vector<const IssueRecord*> ordered = Pointers(records);
  std::stable_sort(ordered.begin(), ordered.end(), [](const IssueRecord* a, const IssueRecord* b) {
    return a->time_ms() < b->time_ms();
  });
  const std::vector<IssueGroup> expected = GroupIssues(ordered);

  IssueGrouper grouper(/*keep_sources=*/true);
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    grouper.Add(*it, {it->time_ms(), it->sequence});
  }
  const std::vector<IssueGroup> groups = std::move(grouper).Finish();
  ASSERT_EQ(groups.size(), expected.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    SCOPED_TRACE(groups[i].key);
    EXPECT_EQ(groups[i].key, expected[i].key);
    EXPECT_EQ(groups[i].kind, expected[i].kind);
    EXPECT_EQ(groups[i].count, expected[i].count);
    EXPECT_EQ(groups[i].first_seen_ms, expected[i].first_seen_ms);
    EXPECT_EQ(groups[i].last_seen_ms, expected[i].last_seen_ms);
    EXPECT_EQ(groups[i].metric.name, expected[i].metric.name);
    EXPECT_DOUBLE_EQ(groups[i].worst, expected[i].worst);
    EXPECT_DOUBLE_EQ(groups[i].median, expected[i].median);
    EXPECT_EQ(groups[i].scenes, expected[i].scenes);
    ASSERT_EQ(groups[i].sources.size(), expected[i].sources.size());
    for (size_t j = 0; j < groups[i].sources.size(); ++j) {
      EXPECT_EQ(groups[i].sources[j].line, expected[i].sources[j].line);
    }
    EXPECT_TRUE(groups[i].issues.empty());  // Only GroupIssues keeps them.
  }
}

}  // namespace
}  // namespace matrix::report
