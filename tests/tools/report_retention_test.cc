// The retention rule end to end: issues written by JsonLinesIssueSink in a
// flood of Trace_FPS, read back by matrix-report's reader and summary. The
// hang written in the middle of the flood survives it, and the summary says
// how many FPS reports rotation dropped.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/text_render.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::ScratchDir;
using ::testing::HasSubstr;

struct Flood {
  ReadResult read;
  proto::SinkDrops dropped;
  int64_t written = 0;
};

// 10,000 FPS reports, one ANR, 10,000 more FPS reports, one LAG.
Flood WriteFlood(const JsonLinesIssueSink::Options& options) {
  Flood flood;
  auto sink = JsonLinesIssueSink::Create(options);
  EXPECT_TRUE(sink.ok()) << sink.status();
  if (!sink.ok()) return flood;
  int64_t t = kBaseTimeMs;
  auto fps = [&] {
    (*sink)->OnReportIssue(Issue(FrameIssue("Gallery", 58.5, t++)));
    ++flood.written;
  };
  for (int i = 0; i < 10'000; ++i) fps();
  (*sink)->OnReportIssue(Issue(AnrIssue("app::Decode(Image const&)", proto::ANR, 5012.4, t++)));
  for (int i = 0; i < 10'000; ++i) fps();
  (*sink)->OnReportIssue(Issue(AnrIssue("app::Save()", proto::LAG, 812.0, t++)));
  EXPECT_EQ((*sink)->failed_writes(), 0);
  flood.dropped = (*sink)->dropped();
  flood.read = ReadIssueInputs({options.directory}, nullptr);
  return flood;
}

int64_t Count(const ReadResult& read, const std::string& tag_detail) {
  int64_t n = 0;
  for (const IssueRecord& r : read.records) n += r.TagDetail() == tag_detail ? 1 : 0;
  return n;
}

TEST(RetentionTest, FpsFlood_KeepsTheAnrAndReportsWhatWasDropped) {
  ScratchDir dir("flood");
  JsonLinesIssueSink::Options options;
  options.directory = dir.path();
  // 5 files of 256 KiB per kind: the 20,000 FPS reports (~1 KB each) must
  // lose most of theirs.
  options.max_file_bytes = int64_t{256} << 10;
  Flood flood = WriteFlood(options);

  EXPECT_THAT(flood.read.malformed, ::testing::IsEmpty());
  EXPECT_EQ(Count(flood.read, "Trace_EvilMethod/ANR"), 1);
  EXPECT_EQ(Count(flood.read, "Trace_EvilMethod/LAG"), 1);
  const int64_t fps_kept = Count(flood.read, "Trace_FPS");
  EXPECT_GT(flood.dropped.fps(), 10'000);
  EXPECT_EQ(fps_kept + flood.dropped.fps(), flood.written);
  EXPECT_EQ(flood.dropped.hang(), 0);
  // The kept FPS reports are the newest.
  int64_t newest_fps = 0;
  for (const IssueRecord& r : flood.read.records) {
    if (r.tag() == kTagFps) newest_fps = std::max(newest_fps, r.time_ms());
  }
  EXPECT_EQ(newest_fps, kBaseTimeMs + 20'000);  // The ANR took one ms.

  // The first issue after each rotation that dropped some carries the
  // counts so far; the newest (after the last drop) carries them all, and
  // the summary shows that.
  int64_t carried = 0;
  int64_t carriers = 0;
  for (const IssueRecord& r : flood.read.records) {
    if (!r.issue.has_sink_dropped()) continue;
    ++carriers;
    carried = std::max(carried, r.issue.sink_dropped().fps());
    EXPECT_EQ(r.issue.sink_dropped().hang(), 0);
  }
  EXPECT_GE(carriers, 1);
  EXPECT_LT(carriers, fps_kept);  // Not every line: only those after a drop.
  EXPECT_EQ(carried, flood.dropped.fps());
  std::vector<const IssueRecord*> all;
  for (const IssueRecord& r : flood.read.records) all.push_back(&r);
  const std::string summary = RenderSummary(flood.read, all, false, RenderOptions());
  EXPECT_THAT(summary, HasSubstr(absl::StrCat(flood.dropped.fps(), " fps (oldest issues rotated")))
      << summary;
  std::printf("flood: %lld FPS written, %lld kept, %lld dropped; summary:\n%s",
              static_cast<long long>(flood.written), static_cast<long long>(fps_kept),
              static_cast<long long>(flood.dropped.fps()), summary.c_str());
}

TEST(RetentionTest, FpsFloodAtDefaultSettings_KeepsTheAnr) {
  ScratchDir dir("defaults");
  JsonLinesIssueSink::Options options;
  options.directory = dir.path();
  Flood flood = WriteFlood(options);
  EXPECT_EQ(Count(flood.read, "Trace_EvilMethod/ANR"), 1);
  EXPECT_EQ(Count(flood.read, "Trace_EvilMethod/LAG"), 1);
  EXPECT_EQ(Count(flood.read, "Trace_FPS") + flood.dropped.fps(), flood.written);
  std::printf("defaults: %lld FPS written, %lld dropped\n",
              static_cast<long long>(flood.written), static_cast<long long>(flood.dropped.fps()));
}

TEST(RetentionTest, Summary_WithoutDrops_HasNoDroppedLine) {
  ScratchDir dir("nodrops");
  auto sink = JsonLinesIssueSink::Create({.directory = dir.path()});
  ASSERT_TRUE(sink.ok()) << sink.status();
  (*sink)->OnReportIssue(Issue(FrameIssue("Gallery", 58.5, kBaseTimeMs)));
  ReadResult read = ReadIssueInputs({dir.path()}, nullptr);
  ASSERT_EQ(read.records.size(), 1u);
  std::vector<const IssueRecord*> all = {&read.records[0]};
  EXPECT_THAT(RenderSummary(read, all, false, RenderOptions()),
              ::testing::Not(HasSubstr("dropped")));
}

}  // namespace
}  // namespace matrix::report
