// Extreme times and costs in an issue file (a corrupt or hostile file, a
// clock far off): every command renders them without signed overflow (run
// under UndefinedBehaviorSanitizer by `make test-asan`) and without absurd
// text such as "(-153722837354654 min -20 s)".

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/cli.h"
#include "matrix/report/format_util.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::BlockIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Line;
using test_util::ScratchDir;
using test_util::StartupIssue;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// A timeline whose slices reach both ends of int64.
proto::Timeline ExtremeTimeline() {
  proto::Timeline t;
  t.set_start_ns(kMin);
  t.set_window_us(kMax);
  t.set_detected_at_us(kMax);
  for (auto [ts, dur] : {std::pair{kMax, kMax}, std::pair{kMin, kMax}, std::pair{kMin, kMin}}) {
    proto::TimelineSlice* d = t.add_dispatches();
    d->set_name("dispatch");
    d->set_ts_us(ts);
    d->set_dur_us(dur);
    proto::TimelineSlice* f = t.add_frames();
    f->set_name("frame");
    f->set_ts_us(ts);
    f->set_dur_us(dur);
    f->set_intended_vsync_us(kMin);
    f->set_input_us(kMax);
    f->set_animation_us(kMax);
    f->set_traversal_us(kMax);
    f->set_commit_us(kMax);
    proto::TimelineSlice* c = t.add_calls();
    c->set_name("call");
    c->set_ts_us(ts);
    c->set_dur_us(dur);
    proto::TimelineSlice* idle = t.add_idle();
    idle->set_ts_us(ts);
    idle->set_dur_us(dur);
  }
  return t;
}

std::vector<std::string> ExtremeLines() {
  std::vector<std::string> lines;
  for (int64_t time_ms : {kMin, kMax, int64_t{0}}) {
    for (double cost : {1e300, -1e300, -1e20, 9.3e18, -9.3e18}) {
      proto::Issue anr = AnrIssue("app::Hang()", proto::ANR, cost, time_ms);
      *anr.mutable_timeline() = ExtremeTimeline();
      lines.push_back(Line(anr));
      lines.push_back(Line(EvilMethodIssue("app::Slow()", cost, time_ms)));
    }
    proto::Issue block = BlockIssue("app::Block()", 1500, kBaseTimeMs);
    block.set_time_ms(time_ms);
    block.mutable_block()->set_cost_ms(time_ms);
    block.mutable_block()->set_time_start_ms(time_ms == kMax ? kMin : kMax);
    block.mutable_block()->set_time_end_ms(time_ms);
    for (proto::BlockCpuRate& rate : *block.mutable_block()->mutable_cpu_rate()) {
      rate.set_time_ms(time_ms == kMin ? kMax : kMin);
    }
    for (proto::BlockStackSample& sample : *block.mutable_block()->mutable_samples()) {
      sample.set_time_ms(0);
      sample.set_offset_ms(time_ms);
    }
    lines.push_back(Line(block));
    proto::Issue startup = StartupIssue(time_ms);
    startup.mutable_startup()->set_startup_duration_ms(-1e300);
    startup.mutable_startup()->set_application_create_ms(1e300);
    lines.push_back(Line(startup));
    proto::Issue frames = FrameIssue("Gallery", 1e300, time_ms);
    frames.mutable_frame()->set_window_ms(-1e300);
    lines.push_back(Line(frames));
  }
  return lines;
}

test_util::RunOutput RunReport(const std::vector<std::string>& args) {
  return test_util::RunReport(args, "",
                              {.now = absl::FromUnixMillis(kBaseTimeMs),
                               .local_zone = absl::UTCTimeZone()});
}

TEST(ExtremeValuesTest, EveryCommandRendersExtremeTimesAndCostsSanely) {
  ScratchDir dir("extreme");
  const std::string file = dir.Write("issues.jsonl", ExtremeLines());
  for (std::vector<std::string> args :
       {std::vector<std::string>{"summary"}, {"group"}, {"show"}, {"export", "--format=csv"},
        {"export", "--format=json"}, {"html"}, {"timeline"}}) {
    args.push_back(file);
    SCOPED_TRACE(args[0] + (args.size() > 2 ? " " + args[1] : ""));
    const test_util::RunOutput run = RunReport(args);
    EXPECT_EQ(run.code, 0) << run.err;
    EXPECT_FALSE(run.out.empty());
    // No negative minutes, hours or days from an overflowed conversion.
    EXPECT_THAT(run.out, Not(HasSubstr(" min -")));
    EXPECT_THAT(run.out, Not(::testing::ContainsRegex("-[0-9]+ (min|h|d) ")));
    // The time range of issues at both ends of int64 is not "-1.0 ms".
    EXPECT_THAT(run.out, Not(HasSubstr("(-1.0 ms")));
    // A cost of 1e300 is not printed as 301 digits.
    EXPECT_THAT(run.out, Not(::testing::ContainsRegex("[0-9]{25}")));
    if (std::getenv("MATRIX_EXTREME_PRINT") != nullptr) std::cout << run.out.substr(0, 3000);
  }
}

// Sums of report numbers (the HTML page's frames per drop level, the
// summary's dropped issues) saturate at int64's largest instead of wrapping
// to a negative count.
TEST(ExtremeValuesTest, SumsOfReportNumbersSaturate) {
  ScratchDir dir("sums");
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) {
    proto::Issue frames = FrameIssue("Gallery", 30, kBaseTimeMs + i);
    proto::FrameReport* f = frames.mutable_frame();
    f->set_frames(kMax);
    for (proto::DropLevels* levels : {f->mutable_drop_level(), f->mutable_drop_sum()}) {
      levels->set_best(kMax);
      levels->set_normal(kMax);
      levels->set_middle(kMax);
      levels->set_high(kMax);
      levels->set_frozen(kMax);
    }
    // Three processes, each with its sink's largest count of dropped issues.
    frames.set_process(absl::StrCat("p", i));
    frames.mutable_sink_dropped()->set_fps(kMax);
    frames.mutable_sink_dropped()->set_hang(kMax);
    lines.push_back(Line(frames));
  }
  const std::string file = dir.Write("issues.jsonl", lines);
  const std::string max = absl::StrCat(kMax);
  const test_util::RunOutput html = RunReport({"html", file});
  ASSERT_EQ(html.code, 0) << html.err;
  const std::string five = absl::StrCat(max, ",", max, ",", max, ",", max, ",", max);
  EXPECT_THAT(html.out, HasSubstr(absl::StrCat("\"levels\":[", five, "],\"drops\":[", five, "]")));
  EXPECT_THAT(html.out, Not(HasSubstr("-922337203685477")));
  const test_util::RunOutput summary = RunReport({"summary", file});
  ASSERT_EQ(summary.code, 0) << summary.err;
  EXPECT_THAT(summary.out, HasSubstr(absl::StrCat("dropped      ", max, " fps, ", max, " hang")));
  EXPECT_THAT(summary.out, Not(HasSubstr("-922337203685477")));
}

TEST(ExtremeValuesTest, FormatDurationMsHasOneSignAndSurvivesHugeValues) {
  EXPECT_EQ(FormatDurationMs(-80'000), "-1 min 20 s");
  EXPECT_EQ(FormatDurationMs(-2'500), "-2.50 s");
  EXPECT_EQ(FormatDurationMs(-12.5), "-12.5 ms");
  EXPECT_EQ(FormatDurationMs(DifferenceMs(kMax, kMin)), "1.84467e+19 ms");
  EXPECT_EQ(FormatDurationMs(-1e300), "-1e+300 ms");
  EXPECT_EQ(FormatDurationMs(90'061'000), "1 d 1 h");
  EXPECT_EQ(SaturatingAdd(kMax, 1), kMax);
  EXPECT_EQ(SaturatingAdd(kMin, -1), kMin);
  EXPECT_EQ(SaturatingSub(kMin, 1), kMin);
  EXPECT_EQ(SaturatingSub(kMax, -1), kMax);
  EXPECT_EQ(SaturatingSub(5, 7), -2);
  EXPECT_EQ(SaturatingInt64(1e300), kMax);
  EXPECT_EQ(SaturatingInt64(9223372036854775808.0), kMax);
  EXPECT_EQ(SaturatingInt64(-1e300), kMin);
  EXPECT_EQ(SaturatingInt64(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(SaturatingInt64(-2.9), -2);
  EXPECT_EQ(FormatFixed(812.25, 1), "812.2");
  EXPECT_EQ(FormatFixed(999999999999999.0, 1), "999999999999999.0");
  EXPECT_EQ(FormatFixed(1.7e308, 1), "1.7e+308");
  EXPECT_EQ(FormatFixed(-1e300, 1), "-1e+300");
  EXPECT_EQ(FormatNumber(1e300, 3), "1e+300");
  EXPECT_EQ(FormatNumber(52.44, 1), "52.4");
}

}  // namespace
}  // namespace matrix::report
