// Tests for the frame arithmetic: CountDroppedFrames at 60/90/120/144 Hz,
// the drop levels and their scaling with the refresh rate, and
// FrameStatsCollector's per-scene Trace_FPS statistics.

#include "matrix/trace/frame_stats.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/trace/dropped_frames.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

using ::matrix::ClassifyDroppedFrames;
using ::matrix::CountDroppedFrames;
using ::matrix::DropLevel;
using ::matrix::DropThresholds;
using ::matrix::FrameData;
using ::matrix::FrameStatsCollector;
using ::matrix::HasFrameRate;
using ::matrix::RefreshRate;
using ::matrix::SceneId;
using ::matrix::TimeTicks;
using ::matrix::proto::FrameReport;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const TimeTicks kBase = TimeTicks::FromNanoseconds(1'000'000'000);

// --- CountDroppedFrames -------------------------------------------------------

struct DropCase {
  double hz;
  int64_t end_after_vsync_ns;
  int64_t dropped;
};

class CountDroppedFramesTest : public ::testing::TestWithParam<DropCase> {};

TEST_P(CountDroppedFramesTest, FrameEndingAfterItsVsync_DropsWholeIntervals) {
  const DropCase& c = GetParam();
  const RefreshRate rate = RefreshRate::FromHz(c.hz);
  EXPECT_EQ(CountDroppedFrames(kBase, kBase + absl::Nanoseconds(c.end_after_vsync_ns), TimeTicks(),
                               rate),
            c.dropped)
      << c.hz << " Hz, frame ending " << c.end_after_vsync_ns << " ns after its vsync";
}

INSTANTIATE_TEST_SUITE_P(
    Rates, CountDroppedFramesTest,
    ::testing::Values(
        // 60 Hz: 16.666667 ms intervals. Dropped = ceil(d / interval) - 1.
        DropCase{60, 0, 0}, DropCase{60, 16'666'666, 0}, DropCase{60, 16'666'667, 1},
        DropCase{60, 33'400'000, 2}, DropCase{60, 49'999'999, 2}, DropCase{60, 50'000'000, 2},
        DropCase{60, 50'000'001, 3}, DropCase{60, 700'000'000, 41},
        DropCase{60, 700'000'001, 42},
        // 90 Hz: 11.111111 ms.
        DropCase{90, 11'111'111, 0}, DropCase{90, 11'111'112, 1}, DropCase{90, 33'333'333, 2},
        DropCase{90, 33'333'334, 3}, DropCase{90, 33'400'000, 3},
        // 120 Hz: 8.333333 ms.
        DropCase{120, 8'333'333, 0}, DropCase{120, 8'333'334, 1}, DropCase{120, 16'700'000, 2},
        DropCase{120, 24'999'999, 2}, DropCase{120, 25'000'000, 2}, DropCase{120, 25'000'001, 3},
        // 144 Hz: 6.944444 ms.
        DropCase{144, 6'944'444, 0}, DropCase{144, 6'944'445, 1}, DropCase{144, 20'833'333, 2},
        DropCase{144, 20'833'334, 3}, DropCase{144, 33'400'000, 4}),
    [](const auto& info) {
      return std::to_string(static_cast<int>(info.param.hz)) + "Hz_" +
             std::to_string(info.param.end_after_vsync_ns) + "ns";
    });

// The scripted check: frames of exactly k intervals, as vsync-timed swaps and
// fake clocks produce them (ticks from one base, rounded down to a
// nanosecond), drop k - 1 at 60, 90, 120 and 144 Hz; a nanosecond more drops k.
TEST(CountDroppedFramesRuleTest, FrameOfExactlyKIntervals_DropsKMinusOne) {
  int checked = 0;
  for (double hz : {60.0, 90.0, 120.0, 144.0}) {
    const RefreshRate rate = RefreshRate::FromHz(hz);
    for (int64_t k = 1; k <= 9; ++k) {
      const TimeTicks end = rate.TickAfter(kBase, k);
      EXPECT_EQ(CountDroppedFrames(kBase, end, TimeTicks(), rate), k - 1) << hz << " Hz, k=" << k;
      EXPECT_EQ(CountDroppedFrames(kBase, end + absl::Nanoseconds(1), TimeTicks(), rate), k)
          << hz << " Hz, k=" << k << " + 1 ns";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
}

// The inline count (the looper thread's, per frame) is the general one: for
// frames that could start at their vsync and frames whose vsync came while
// the previous frame ran, on and around tick boundaries, at several rates,
// and for times whose products overflow 64 bits (the general path then).
TEST(CountDroppedFramesRuleTest, InlineCount_AgreesWithTheGeneralCount) {
  int checked = 0;
  for (int64_t mhz : {60'000, 59'940, 90'000, 120'000, 143'856, 1'000}) {
    const RefreshRate rate = RefreshRate::FromMillihertz(mhz);
    for (int64_t previous_k = -2; previous_k <= 5; ++previous_k) {
      for (int64_t jitter_ns : {-1, 0, 1, 777'777}) {
        const TimeTicks previous_end =
            rate.TickAfter(kBase, previous_k) + absl::Nanoseconds(jitter_ns);
        for (int64_t end_k = 0; end_k <= 9; ++end_k) {
          for (int64_t end_jitter_ns : {-1, 0, 1, 333'333}) {
            const TimeTicks end = rate.TickAfter(kBase, end_k) + absl::Nanoseconds(end_jitter_ns);
            EXPECT_EQ(CountDroppedFrames(kBase, end, previous_end, rate),
                      matrix::CountDroppedFramesSlow(kBase, end, previous_end, rate))
                << mhz << " mHz, previous " << previous_k << "+" << jitter_ns << " ns, end "
                << end_k << "+" << end_jitter_ns << " ns";
            ++checked;
          }
        }
      }
    }
  }
  // Far apart: the general path's 128-bit arithmetic.
  const TimeTicks far = kBase + absl::Hours(24 * 365);
  EXPECT_EQ(CountDroppedFrames(kBase, far, kBase - absl::Hours(24 * 365), RefreshRate()),
            matrix::CountDroppedFramesSlow(kBase, far, kBase - absl::Hours(24 * 365),
                                           RefreshRate()));
  EXPECT_EQ(checked, 6 * 8 * 4 * 10 * 4);
}

TEST(CountDroppedFramesRuleTest, EndBeforeVsync_DropsNothing) {
  EXPECT_EQ(CountDroppedFrames(kBase, kBase - absl::Milliseconds(1), TimeTicks(), RefreshRate()),
            0);
}

TEST(CountDroppedFramesRuleTest, FrameQueuedBehindJankyOne_IsNotChargedForTheSameVsyncs) {
  const RefreshRate rate = RefreshRate::FromHz(60);
  // Frame 1: vsync at 0, ends at 40 ms: it dropped 2 vsyncs (16.7 and 33.3).
  const TimeTicks v0 = kBase;
  const TimeTicks end1 = v0 + absl::Milliseconds(40);
  EXPECT_EQ(CountDroppedFrames(v0, end1, TimeTicks(), rate), 2);

  // Frame 2 was due at the 16.7 ms vsync but could only start when frame 1
  // ended, during the 33.3 ms vsync. Ending at 45 ms it missed nothing more.
  const TimeTicks v1 = rate.TickAfter(v0, 1);
  EXPECT_EQ(CountDroppedFrames(v1, v0 + absl::Milliseconds(45), end1, rate), 0);
  // Ending at 55 ms it missed the 50 ms vsync: one more, not three.
  EXPECT_EQ(CountDroppedFrames(v1, v0 + absl::Milliseconds(55), end1, rate), 1);
  // Matrix would charge it (55 - 16.7) / 16.7 = 2 again.
  EXPECT_EQ(CountDroppedFrames(v1, v0 + absl::Milliseconds(55), TimeTicks(), rate), 2);
}

TEST(CountDroppedFramesRuleTest, PreviousFrameEndedBeforeThisVsync_HasNoEffect) {
  const RefreshRate rate = RefreshRate::FromHz(120);
  const TimeTicks vsync = kBase + absl::Milliseconds(100);
  // 25 ms at 120 Hz is exactly 3 intervals: shown on the third vsync, 2 dropped.
  EXPECT_EQ(CountDroppedFrames(vsync, vsync + absl::Milliseconds(25),
                               vsync - absl::Milliseconds(1), rate),
            2);
  EXPECT_EQ(CountDroppedFrames(vsync, vsync + absl::Milliseconds(26),
                               vsync - absl::Milliseconds(1), rate),
            3);
}

// --- Drop levels -------------------------------------------------------------

struct LevelCase {
  double hz;
  int64_t dropped;
  DropLevel level;
};

class ClassifyDroppedFramesTest : public ::testing::TestWithParam<LevelCase> {};

TEST_P(ClassifyDroppedFramesTest, Thresholds_AreGivenAt60HzAndScaledToTheRate) {
  const LevelCase& c = GetParam();
  EXPECT_EQ(ClassifyDroppedFrames(c.dropped, RefreshRate::FromHz(c.hz), DropThresholds()), c.level)
      << c.dropped << " dropped at " << c.hz << " Hz";
}

INSTANTIATE_TEST_SUITE_P(
    Levels, ClassifyDroppedFramesTest,
    ::testing::Values(
        // 60 Hz: BEST [0,3) NORMAL [3,9) MIDDLE [9,24) HIGH [24,42) FROZEN [42,inf).
        LevelCase{60, 0, DropLevel::kBest}, LevelCase{60, 2, DropLevel::kBest},
        LevelCase{60, 3, DropLevel::kNormal}, LevelCase{60, 8, DropLevel::kNormal},
        LevelCase{60, 9, DropLevel::kMiddle}, LevelCase{60, 23, DropLevel::kMiddle},
        LevelCase{60, 24, DropLevel::kHigh}, LevelCase{60, 41, DropLevel::kHigh},
        LevelCase{60, 42, DropLevel::kFrozen}, LevelCase{60, 1000, DropLevel::kFrozen},
        // 120 Hz: twice as many frames for the same time.
        LevelCase{120, 5, DropLevel::kBest}, LevelCase{120, 6, DropLevel::kNormal},
        LevelCase{120, 17, DropLevel::kNormal}, LevelCase{120, 18, DropLevel::kMiddle},
        LevelCase{120, 47, DropLevel::kMiddle}, LevelCase{120, 48, DropLevel::kHigh},
        LevelCase{120, 83, DropLevel::kHigh}, LevelCase{120, 84, DropLevel::kFrozen},
        // 90 Hz (x1.5): 4.5 / 13.5 / 36 / 63.
        LevelCase{90, 4, DropLevel::kBest}, LevelCase{90, 5, DropLevel::kNormal},
        LevelCase{90, 13, DropLevel::kNormal}, LevelCase{90, 14, DropLevel::kMiddle},
        LevelCase{90, 35, DropLevel::kMiddle}, LevelCase{90, 36, DropLevel::kHigh},
        LevelCase{90, 62, DropLevel::kHigh}, LevelCase{90, 63, DropLevel::kFrozen},
        // 144 Hz (x2.4): 7.2 / 21.6 / 57.6 / 100.8.
        LevelCase{144, 7, DropLevel::kBest}, LevelCase{144, 8, DropLevel::kNormal},
        LevelCase{144, 21, DropLevel::kNormal}, LevelCase{144, 22, DropLevel::kMiddle},
        LevelCase{144, 57, DropLevel::kMiddle}, LevelCase{144, 58, DropLevel::kHigh},
        LevelCase{144, 100, DropLevel::kHigh}, LevelCase{144, 101, DropLevel::kFrozen}),
    [](const auto& info) {
      return std::to_string(static_cast<int>(info.param.hz)) + "Hz_" +
             std::to_string(info.param.dropped);
    });

TEST(ClassifyDroppedFramesCustomTest, CustomThresholds_AreUsed) {
  const DropThresholds t{1, 2, 3, 4};
  const RefreshRate r60 = RefreshRate::FromHz(60);
  EXPECT_EQ(ClassifyDroppedFrames(0, r60, t), DropLevel::kBest);
  EXPECT_EQ(ClassifyDroppedFrames(1, r60, t), DropLevel::kNormal);
  EXPECT_EQ(ClassifyDroppedFrames(2, r60, t), DropLevel::kMiddle);
  EXPECT_EQ(ClassifyDroppedFrames(3, r60, t), DropLevel::kHigh);
  EXPECT_EQ(ClassifyDroppedFrames(4, r60, t), DropLevel::kFrozen);
}

// --- FrameStatsCollector -------------------------------------------------------

// Builds vsync frames on a refresh grid, the way FrameTracer hands them over.
class FrameMaker {
 public:
  explicit FrameMaker(RefreshRate rate = RefreshRate(), SceneId scene = 1)
      : rate_(rate), scene_(scene) {}

  // The next frame: its vsync is the next free tick; it drops `dropped`.
  FrameData Next(int64_t dropped = 0) {
    FrameData f;
    f.scene = scene_;
    f.is_vsync_frame = true;
    f.refresh_rate = rate_;
    f.intended_frame_time = rate_.TickAfter(base_, tick_);
    f.start = f.intended_frame_time;
    f.end = f.intended_frame_time + rate_.Intervals(dropped) + absl::Microseconds(100);
    f.dropped_frames = dropped;
    f.frame_number = ++frame_number_;
    tick_ += dropped + 1;
    return f;
  }
  void set_scene(SceneId scene) { scene_ = scene; }
  // The next frame's vsync is the next free tick of the old rate.
  void set_rate(RefreshRate rate) {
    base_ = rate_.TickAfter(base_, tick_);
    tick_ = 0;
    rate_ = rate;
  }
  // Nothing drawn for `ticks` vsyncs.
  void Skip(int64_t ticks) { tick_ += ticks; }
  TimeTicks next_vsync() const { return rate_.TickAfter(base_, tick_); }

 private:
  RefreshRate rate_;
  SceneId scene_;
  TimeTicks base_ = kBase;
  int64_t tick_ = 0;
  int64_t frame_number_ = 0;
};

FrameStatsCollector::Options SliceOf(absl::Duration slice) {
  FrameStatsCollector::Options options;
  options.time_slice = slice;
  return options;
}

TEST(FrameStatsCollectorTest, NonVsyncFrames_AreIgnored) {
  FrameStatsCollector collector(SliceOf(absl::Milliseconds(1)));
  FrameData message;
  message.is_vsync_frame = false;
  message.end = kBase + absl::Seconds(5);
  message.intended_frame_time = kBase;
  EXPECT_FALSE(collector.Add(message, "Home").has_value());
  EXPECT_THAT(collector.Flush(), IsEmpty());
}

TEST(FrameStatsCollectorTest, TimeSliceOfPerfectFrames_IsReportedWhenTheNextSliceBegins) {
  // 600 frames at 60 Hz fill the 10 s slice that began at the first vsync;
  // the 601st frame's vsync is 10 s later: it reports them and begins the
  // next slice.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int i = 1; i <= 600; ++i) {
    ASSERT_FALSE(collector.Add(maker.Next(), "Home").has_value()) << "frame " << i;
  }
  std::optional<FrameReport> report = collector.Add(maker.Next(), "Home");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->scene(), "Home");
  EXPECT_EQ(report->frames(), 600);
  EXPECT_EQ(report->dropped_frames(), 0);
  EXPECT_DOUBLE_EQ(report->fps(), 60.0);
  EXPECT_DOUBLE_EQ(report->window_ms(), 10000.0);
  EXPECT_DOUBLE_EQ(report->refresh_rate(), 60.0);
  EXPECT_EQ(report->drop_level().best(), 600);

  // The 601st frame began the next slice: 599 more do not end it.
  for (int i = 1; i < 600; ++i) ASSERT_FALSE(collector.Add(maker.Next(), "Home").has_value());
  report = collector.Add(maker.Next(), "Home");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 600);
}

TEST(FrameStatsCollectorTest, TimeSliceAt144Hz_HoldsTheSlicesFrames) {
  // 1440 frames at 144 Hz are exactly 10 s.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(144));
  for (int i = 1; i <= 1440; ++i) {
    ASSERT_FALSE(collector.Add(maker.Next(), "Game").has_value()) << "frame " << i;
  }
  std::optional<FrameReport> report = collector.Add(maker.Next(), "Game");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 1440);
  EXPECT_DOUBLE_EQ(report->fps(), 144.0);
  EXPECT_DOUBLE_EQ(report->refresh_rate(), 144.0);
}

TEST(FrameStatsCollectorTest, DroppedFrames_CountAsIntervalsOfFrameTime) {
  // Five times 5 frames on time and one that dropped 2: 30 frames over 40
  // intervals.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int round = 0; round < 5; ++round) {
    for (int64_t d : {0, 0, 0, 0, 0, 2}) {
      ASSERT_FALSE(collector.Add(maker.Next(d), "Home").has_value());
    }
  }
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  const FrameReport& r = reports[0];
  EXPECT_EQ(r.frames(), 30);
  EXPECT_EQ(r.dropped_frames(), 10);
  EXPECT_NEAR(r.fps(), 30.0 / (40.0 / 60.0), 1e-6);  // 45 fps.
  EXPECT_NEAR(r.window_ms(), 40000.0 / 60.0, 1e-6);
}

TEST(FrameStatsCollectorTest, DropLevels_CountFramesAndSumDropsPerLevel) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(100)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int64_t d : {0, 2, 3, 8, 9, 23, 24, 41, 42, 50}) collector.Add(maker.Next(d), "Home");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  const FrameReport& r = reports[0];
  EXPECT_EQ(r.drop_level().best(), 2);
  EXPECT_EQ(r.drop_level().normal(), 2);
  EXPECT_EQ(r.drop_level().middle(), 2);
  EXPECT_EQ(r.drop_level().high(), 2);
  EXPECT_EQ(r.drop_level().frozen(), 2);
  EXPECT_EQ(r.drop_sum().best(), 2);
  EXPECT_EQ(r.drop_sum().normal(), 11);
  EXPECT_EQ(r.drop_sum().middle(), 32);
  EXPECT_EQ(r.drop_sum().high(), 65);
  EXPECT_EQ(r.drop_sum().frozen(), 92);
  EXPECT_EQ(r.dropped_frames(), 202);
}

TEST(FrameStatsCollectorTest, DropLevelsAt120Hz_UseScaledThresholds) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(100)));
  FrameMaker maker(RefreshRate::FromHz(120));
  // At 60 Hz these would be NORMAL, MIDDLE, HIGH, FROZEN; at 120 Hz each is
  // one level lower.
  for (int64_t d : {5, 17, 47, 83}) collector.Add(maker.Next(d), "Game");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_EQ(reports[0].drop_level().best(), 1);
  EXPECT_EQ(reports[0].drop_level().normal(), 1);
  EXPECT_EQ(reports[0].drop_level().middle(), 1);
  EXPECT_EQ(reports[0].drop_level().high(), 1);
  EXPECT_EQ(reports[0].drop_level().frozen(), 0);
}

TEST(FrameStatsCollectorTest, InterleavedScenes_AreCountedSeparately) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  // Interleave A, B, A, B, ...: 18 frames each; one of A's drops 3.
  for (int i = 0; i < 36; ++i) {
    maker.set_scene(i % 2 == 0 ? 1 : 2);
    ASSERT_FALSE(collector.Add(maker.Next(i == 4 ? 3 : 0), i % 2 == 0 ? "A" : "B").has_value());
  }
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(2));
  const FrameReport& a = reports[0].scene() == "A" ? reports[0] : reports[1];
  const FrameReport& b = reports[0].scene() == "A" ? reports[1] : reports[0];
  EXPECT_EQ(a.scene(), "A");
  EXPECT_EQ(b.scene(), "B");
  EXPECT_EQ(a.frames(), 18);
  EXPECT_EQ(a.dropped_frames(), 3);
  EXPECT_EQ(a.drop_level().normal(), 1);
  EXPECT_EQ(b.frames(), 18);
  EXPECT_EQ(b.dropped_frames(), 0);
  EXPECT_EQ(b.drop_level().normal(), 0);
  EXPECT_DOUBLE_EQ(b.fps(), 60.0);
  EXPECT_NEAR(a.fps(), 18.0 / (21.0 / 60.0), 1e-6);  // 51.4 fps.
}

TEST(FrameStatsCollectorTest, TimeSlice_IsCountedPerScene) {
  // 100 ms = 6 intervals at 60 Hz. A's slice begins at tick 0, B's at tick 1.
  FrameStatsCollector collector(SliceOf(absl::Milliseconds(100)));
  FrameMaker maker(RefreshRate::FromHz(60));
  std::vector<std::string> reported;
  for (int i = 0; i < 4; ++i) {
    maker.set_scene(1);
    if (auto r = collector.Add(maker.Next(i == 1 ? 3 : 0), "A")) reported.push_back(r->scene());
    maker.set_scene(2);
    if (auto r = collector.Add(maker.Next(), "B")) reported.push_back(r->scene());
  }
  // A: ticks 0, 2 (drops 3), 7, 9; its frame at tick 7 is past its slice
  // [0, 6). B: ticks 1, 6, 8, 10; its frame at tick 8 is past [1, 7).
  EXPECT_EQ(reported, std::vector<std::string>({"A", "B"}));
  std::vector<FrameReport> rest = collector.Flush();
  ASSERT_THAT(rest, SizeIs(2));
  for (const FrameReport& r : rest) EXPECT_EQ(r.frames(), 2) << r.scene();
}

// --- Wall-time slices and the drawn rate ----------------------------------------

// Frames as a render loop that does not wait for the vsync draws them (and
// as matrix-run sees them): each frame's "vsync" is when its dispatch began,
// right where the previous one ended.
class UncappedRenderer {
 public:
  UncappedRenderer(absl::Duration frame_cost, RefreshRate rate = RefreshRate::FromHz(60))
      : cost_(frame_cost), rate_(rate) {}
  FrameData Next() {
    FrameData f;
    f.scene = 1;
    f.is_vsync_frame = true;
    f.refresh_rate = rate_;
    f.start = now_;
    f.intended_frame_time = now_;
    f.end = now_ + cost_;
    f.dropped_frames = CountDroppedFrames(f.intended_frame_time, f.end, previous_end_, rate_);
    previous_end_ = f.end;
    now_ = f.end;
    return f;
  }
  void Idle(absl::Duration d) { now_ += d; }
  TimeTicks now() const { return now_; }

 private:
  absl::Duration cost_;
  RefreshRate rate_;
  TimeTicks now_ = kBase;
  TimeTicks previous_end_;
};

TEST(FrameStatsCollectorTest, UncappedRenderer_ReportsTheRateItDrawsAtOncePerSlice) {
  // 1,800 frames a second on a 60 Hz screen for 25 s: two reports of 10 s
  // (18,000 frames each), each saying ~1,800 fps, then the rest on flush.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  UncappedRenderer renderer(absl::Seconds(1) / 1800);
  std::vector<FrameReport> reports;
  while (renderer.now() < kBase + absl::Seconds(25)) {
    if (auto r = collector.Add(renderer.Next(), "Gears")) reports.push_back(*r);
  }
  ASSERT_THAT(reports, SizeIs(2));
  for (const FrameReport& r : reports) {
    EXPECT_NEAR(r.frames(), 18'000, 1);
    EXPECT_NEAR(r.fps(), 1800.0, 1800.0 * 0.005);
    EXPECT_NEAR(r.window_ms(), 10'000.0, 50.0);
    EXPECT_DOUBLE_EQ(r.refresh_rate(), 60.0);
    EXPECT_EQ(r.dropped_frames(), 0);  // Matrix's fields keep their meaning.
    EXPECT_EQ(r.drop_level().best(), r.frames());
  }
  std::vector<FrameReport> rest = collector.Flush();
  ASSERT_THAT(rest, SizeIs(1));
  EXPECT_NEAR(rest[0].frames(), 9'000, 1);
  EXPECT_NEAR(rest[0].fps(), 1800.0, 1800.0 * 0.01);
}

TEST(FrameStatsCollectorTest, UncappedSlowRenderer_ReportsItsRateBelowTheRefreshRate) {
  // 25 ms a frame (40 fps), not paced by the vsync: each drops 1 (shown on
  // the second vsync after it began), yet the rate drawn is 40.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  UncappedRenderer renderer(absl::Milliseconds(25));
  for (int i = 0; i < 200; ++i) ASSERT_FALSE(collector.Add(renderer.Next(), "Map").has_value());
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_NEAR(reports[0].fps(), 40.0, 0.2);
  EXPECT_EQ(reports[0].dropped_frames(), 200);
}

TEST(FrameStatsCollectorTest, VsyncedLoopWithVaryingWork_ReportsTheRefreshRateExactly) {
  // Frames end 1 to 15 ms after their vsync (each within its interval): the
  // rate drawn is 60, whatever the jitter of the frame ends.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  std::optional<FrameReport> report;
  for (int i = 0; i <= 600 && !report; ++i) {
    FrameData f = maker.Next();
    f.end = f.intended_frame_time + absl::Milliseconds(1 + (i * 7) % 15);
    report = collector.Add(f, "Feed");
  }
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 600);
  EXPECT_DOUBLE_EQ(report->fps(), 60.0);
  EXPECT_DOUBLE_EQ(report->window_ms(), 10'000.0);
}

TEST(FrameStatsCollectorTest, FrozenFrame_CountsItsFullLength) {
  // 59 frames on time and one shown 61 vsyncs after its own (dropped 60):
  // 60 frames in 120 intervals (2 s) of drawing, 30 fps.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int i = 0; i < 59; ++i) collector.Add(maker.Next(), "Home");
  collector.Add(maker.Next(60), "Home");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_EQ(reports[0].frames(), 60);
  EXPECT_EQ(reports[0].drop_level().frozen(), 1);
  EXPECT_DOUBLE_EQ(reports[0].fps(), 30.0);
  EXPECT_DOUBLE_EQ(reports[0].window_ms(), 2000.0);
}

TEST(FrameStatsCollectorTest, VsyncedBurstsWithIdleGaps_ReportTheRateWhileDrawing) {
  // Bursts of 30 frames at 60 Hz, 2 s apart: 5 bursts in the 10 s slice.
  // The idle time is nobody's: fps is 60, window_ms the drawing time.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int burst = 0; burst < 4; ++burst) {
    for (int i = 0; i < 30; ++i) {
      ASSERT_FALSE(collector.Add(maker.Next(), "Chat").has_value());
    }
    maker.Skip(120 - 30);
  }
  for (int i = 0; i < 30; ++i) {  // The fifth burst, at 8 s.
    ASSERT_FALSE(collector.Add(maker.Next(), "Chat").has_value());
  }
  maker.Skip(120 - 30);
  // The sixth burst's first frame, at 10 s, begins the next slice.
  std::optional<FrameReport> report = collector.Add(maker.Next(), "Chat");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 150);
  EXPECT_DOUBLE_EQ(report->fps(), 60.0);
  EXPECT_DOUBLE_EQ(report->window_ms(), 2500.0);
  EXPECT_EQ(report->dropped_frames(), 0);
}

TEST(FrameStatsCollectorTest, AProgramPacingItselfTo30Fps_Reads30) {
  // A game capped at 30 fps (or a 30 fps video) at 60 Hz: a frame every
  // other vsync, the program sleeping in between. The sleep is drawing time
  // (kPacingGap): 30 fps, not 60, and nothing dropped.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int i = 0; i < 300; ++i) {
    ASSERT_FALSE(collector.Add(maker.Next(), "Game").has_value());
    maker.Skip(1);
  }
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_EQ(reports[0].frames(), 300);
  EXPECT_NEAR(reports[0].fps(), 30.0, 0.1);  // 300 frames over 299 gaps and one interval.
  EXPECT_EQ(reports[0].dropped_frames(), 0);
}

TEST(FrameStatsCollectorTest, ASliceTooShortForARate_SaysSoAndGivesNoFps) {
  // Each frame stands for at least a vsync interval, so a slice of a few
  // frames would read as the refresh rate whatever the program did.
  auto slice_of = [](int frames) {
    FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
    FrameMaker maker(RefreshRate::FromHz(60));
    for (int i = 0; i < frames; ++i) EXPECT_FALSE(collector.Add(maker.Next(), "Menu").has_value());
    std::vector<FrameReport> reports = collector.Flush();
    EXPECT_THAT(reports, SizeIs(1));
    return reports.empty() ? FrameReport() : reports[0];
  };
  const FrameReport three = slice_of(3);
  EXPECT_EQ(three.frames(), 3);
  EXPECT_TRUE(three.too_short_for_rate());
  EXPECT_EQ(three.fps(), 0);
  EXPECT_FALSE(HasFrameRate(three));
  // 12 frames: enough frames, but 200 ms of frame time is under 250 ms.
  EXPECT_TRUE(slice_of(12).too_short_for_rate());
  // 15 frames over 250 ms: a rate.
  const FrameReport fifteen = slice_of(15);
  EXPECT_FALSE(fifteen.too_short_for_rate());
  EXPECT_NEAR(fifteen.fps(), 60.0, 1e-6);
  EXPECT_TRUE(HasFrameRate(fifteen));
}

TEST(HasFrameRateTest, ReportsWrittenBeforeTheFlagAreJudgedByTheirFramesAndTime) {
  FrameReport r;
  r.set_fps(60);
  r.set_frames(2);
  r.set_window_ms(33.3);
  EXPECT_FALSE(HasFrameRate(r));
  r.set_frames(600);
  r.set_window_ms(10000);
  EXPECT_TRUE(HasFrameRate(r));
  r.set_too_short_for_rate(true);
  EXPECT_FALSE(HasFrameRate(r));
}

TEST(FrameStatsCollectorTest, AGapLongerThanPacing_IsIdleNotDrawing) {
  // Frames 8 vsyncs apart: a 117 ms wait after each frame's vsync, over
  // kPacingGap: idle, not drawing.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(collector.Add(maker.Next(), "Editor").has_value());
    maker.Skip(7);
  }
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_NEAR(reports[0].fps(), 60.0, 1e-6);
}

TEST(FrameStatsCollectorTest, APacedProgramLateOnABusyMachine_StillDraws) {
  // A game capped at 30 fps at 60 Hz; three times its thread waits for a
  // CPU before it wakes for its next frame: a 217 ms gap after the vsync its
  // frame was shown on, 180 ms of it waiting to run (as StoppedTime places
  // the looper thread's run-queue wait at each watchdog poll). The
  // gap is drawing time, not idle: 30 fps over the slice. With nothing to
  // say so, the same gaps are idle, and the rate reads higher.
  std::vector<std::pair<TimeTicks, TimeTicks>> waits;  // The starved spans.
  FrameStatsCollector::Options options = SliceOf(absl::Seconds(100));
  options.waited_to_run = [&waits](TimeTicks from, TimeTicks to) {
    absl::Duration total;
    for (const auto& [b, e] : waits) {
      if (b >= from && e <= to) total += e - b;
    }
    return total;
  };
  auto run = [&waits](FrameStatsCollector& collector) {
    FrameMaker maker(RefreshRate::FromHz(60));
    waits.clear();
    for (int i = 0; i < 90; ++i) {
      const FrameData frame = maker.Next();
      collector.Add(frame, "Game");
      if (i % 30 == 10) {
        // 14 vsyncs instead of 2 to the next frame.
        waits.emplace_back(frame.end + absl::Milliseconds(20), frame.end + absl::Milliseconds(200));
        maker.Skip(13);
      } else {
        maker.Skip(1);
      }
    }
    std::vector<FrameReport> reports = collector.Flush();
    EXPECT_THAT(reports, SizeIs(1));
    return reports.empty() ? FrameReport() : reports[0];
  };
  FrameStatsCollector starved(options);
  const FrameReport with_waits = run(starved);
  EXPECT_EQ(with_waits.frames(), 90);
  // 87 gaps of 2 vsyncs, 3 of 14 (one interval is the last frame's own).
  EXPECT_NEAR(with_waits.window_ms(), (87 * 2 + 3 * 14 - 1) * 1000.0 / 60, 0.1);
  EXPECT_NEAR(with_waits.fps(), 90 / ((87 * 2 + 3 * 14 - 1) / 60.0), 0.01);

  FrameStatsCollector unknown(SliceOf(absl::Seconds(100)));
  const FrameReport without = run(unknown);
  EXPECT_GT(without.fps(), with_waits.fps() * 1.1);
}

TEST(FrameStatsCollectorTest, UncappedBurstsWithIdleGaps_ReportTheRateWhileDrawing) {
  // One second of drawing at 1,800 fps, then one second idle, five times:
  // ~1,800 fps (each burst's first frame stands for one whole interval, the
  // rest for the time since the frame before: 1.6 % less), not ~900.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  UncappedRenderer renderer(absl::Seconds(1) / 1800);
  for (int burst = 0; burst < 5; ++burst) {
    for (int i = 0; i < 1800; ++i) {
      ASSERT_FALSE(collector.Add(renderer.Next(), "Gears").has_value());
    }
    renderer.Idle(absl::Seconds(1));
  }
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_EQ(reports[0].frames(), 9000);
  EXPECT_NEAR(reports[0].fps(), 1800.0, 1800.0 * 0.02);
}

TEST(FrameStatsCollectorTest, ReportEndedSlices_ReportsAnIdleScenesSliceOnceItsTimeIsOver) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  const TimeTicks begin = maker.next_vsync();
  for (int i = 0; i < 60; ++i) collector.Add(maker.Next(), "Home");  // 1 s, then idle.
  EXPECT_THAT(collector.ReportEndedSlices(begin + absl::Seconds(5)), IsEmpty());
  EXPECT_THAT(collector.ReportEndedSlices(begin + absl::Seconds(10) - absl::Nanoseconds(1)),
              IsEmpty());
  std::vector<FrameReport> reports = collector.ReportEndedSlices(begin + absl::Seconds(10));
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_EQ(reports[0].frames(), 60);
  EXPECT_DOUBLE_EQ(reports[0].fps(), 60.0);
  // Reported once; nothing pending until the scene draws again.
  EXPECT_THAT(collector.ReportEndedSlices(begin + absl::Seconds(30)), IsEmpty());
  EXPECT_THAT(collector.Flush(), IsEmpty());
}

TEST(FrameStatsCollectorTest, FrameEndingPastItsSlice_ClosesItAtOnce) {
  // A 12 s frozen frame after two on time: its vsync is in the slice, it ends
  // after it; the slice is reported with it, not when the next frame comes.
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  ASSERT_FALSE(collector.Add(maker.Next(), "Home").has_value());
  ASSERT_FALSE(collector.Add(maker.Next(), "Home").has_value());
  std::optional<FrameReport> report = collector.Add(maker.Next(720), "Home");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 3);
  EXPECT_EQ(report->drop_level().frozen(), 1);
  EXPECT_DOUBLE_EQ(report->window_ms(), 723 * 1000.0 / 60);
  EXPECT_THAT(collector.Flush(), IsEmpty());
}

TEST(FrameStatsCollectorTest, FrameAfterALongIdleGap_BeginsANewSlice) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  for (int i = 0; i < 3; ++i) collector.Add(maker.Next(), "Home");
  maker.Skip(60 * 60);  // A minute later.
  std::optional<FrameReport> report = collector.Add(maker.Next(), "Home");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->frames(), 3);
  EXPECT_NEAR(report->window_ms(), 3000.0 / 60, 1e-6);
  std::vector<FrameReport> rest = collector.Flush();
  ASSERT_THAT(rest, SizeIs(1));
  EXPECT_EQ(rest[0].frames(), 1);
  EXPECT_NEAR(rest[0].window_ms(), 1000.0 / 60, 1e-6);  // One interval: the gap is left out.
  EXPECT_TRUE(rest[0].too_short_for_rate());
}

TEST(FrameStatsCollectorTest, PhaseCosts_AreAveragedPerFrame) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker;
  FrameData f1 = maker.Next();
  f1.SetPhaseCosts(absl::Milliseconds(2), absl::Milliseconds(4), absl::Milliseconds(6),
                   absl::Milliseconds(1));
  FrameData f2 = maker.Next();
  f2.SetPhaseCosts(absl::Milliseconds(4), absl::Milliseconds(2), absl::Milliseconds(10),
                   absl::Milliseconds(3));
  collector.Add(f1, "Home");
  collector.Add(f2, "Home");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_DOUBLE_EQ(reports[0].input_ms(), 3.0);
  EXPECT_DOUBLE_EQ(reports[0].animation_ms(), 3.0);
  EXPECT_DOUBLE_EQ(reports[0].traversal_ms(), 8.0);
  EXPECT_DOUBLE_EQ(reports[0].commit_ms(), 2.0);
  // Frame time: vsync to end, averaged (100 us each here).
  EXPECT_NEAR(reports[0].frame_ms(), 0.1, 1e-9);
}

TEST(FrameStatsCollectorTest, RefreshRate_IsTheFrameWeightedAverage) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker(RefreshRate::FromHz(60));
  collector.Add(maker.Next(), "Home");
  maker.set_rate(RefreshRate::FromHz(120));
  for (int i = 0; i < 3; ++i) collector.Add(maker.Next(), "Home");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_DOUBLE_EQ(reports[0].refresh_rate(), 105.0);
  // 1/60 + 3/120 s = 41.67 ms for 4 frames.
  EXPECT_NEAR(reports[0].window_ms(), 1000.0 / 60 + 3000.0 / 120, 1e-6);
}

TEST(FrameStatsCollectorTest, Smoothness_GivesTheWorstAndP95OfTheSlidingWindow) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker;
  // The first frame drops 1 vsync, the 19 after it none. The percentage of
  // dropped vsyncs in the window ending at frame k is 1 / (k + 1).
  collector.Add(maker.Next(1), "Home");
  for (int i = 0; i < 19; ++i) collector.Add(maker.Next(0), "Home");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  EXPECT_DOUBLE_EQ(reports[0].worst_dropped_percent(), 50.0);
  // Nearest rank 19 of 20: the second worst, 1/3.
  EXPECT_DOUBLE_EQ(reports[0].p95_dropped_percent(), 100.0 / 3.0);
}

TEST(FrameStatsCollectorTest, Smoothness_ForgetsDropsOlderThanTheWindow) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(100)));
  FrameMaker maker;  // 60 Hz: a 1 s window holds 60 vsyncs.
  for (int i = 0; i < 100; ++i) collector.Add(maker.Next(0), "Home");  // Ticks 0..99.
  collector.Add(maker.Next(6), "Home");  // Tick 100: drops 6 (ticks 101..106).
  for (int i = 0; i < 200; ++i) collector.Add(maker.Next(0), "Home");  // Ticks 107..306.
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(1));
  // While the jank is in the window (frames at ticks 107..159) the window
  // holds 54 frames and 6 dropped vsyncs: 10 %. At tick 160 it leaves the
  // window, so the 147 frames after it are at 0 %. Without forgetting, the
  // share would keep shrinking (6 / (6 + 102 + k)) and stay below 6 %.
  EXPECT_DOUBLE_EQ(reports[0].worst_dropped_percent(), 10.0);
  EXPECT_DOUBLE_EQ(reports[0].p95_dropped_percent(), 10.0);
}

TEST(FrameStatsCollectorTest, LostFrames_AreReportedOnceWithTheNextReport) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker;
  collector.AddLostFrames(7);
  collector.Add(maker.Next(), "Home");
  std::vector<FrameReport> first = collector.Flush();
  ASSERT_THAT(first, SizeIs(1));
  EXPECT_EQ(first[0].lost_frames(), 7);
  collector.Add(maker.Next(), "Home");
  std::vector<FrameReport> second = collector.Flush();
  ASSERT_THAT(second, SizeIs(1));
  EXPECT_EQ(second[0].lost_frames(), 0);
}

TEST(FrameStatsCollectorTest, Flush_ReportsEveryScenePendingAndStartsAfresh) {
  FrameStatsCollector collector(SliceOf(absl::Seconds(10)));
  FrameMaker maker;
  maker.set_scene(1);
  collector.Add(maker.Next(), "A");
  maker.set_scene(2);
  collector.Add(maker.Next(), "B");
  collector.Add(maker.Next(), "B");
  std::vector<FrameReport> reports = collector.Flush();
  ASSERT_THAT(reports, SizeIs(2));
  int64_t total = 0;
  for (const FrameReport& r : reports) {
    total += r.frames();
    EXPECT_EQ(r.frames(), r.scene() == "A" ? 1 : 2);
  }
  EXPECT_EQ(total, 3);
  EXPECT_THAT(collector.Flush(), IsEmpty());
}

}  // namespace
