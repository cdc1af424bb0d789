// matrix::RenderLoopMonitor on a foreign LooperMonitor + UIThreadMonitor timed
// with a fake clock: one dispatch and one frame per iteration, phases from the
// markers, the intended vsync with and without a swap that waits for the
// vsync, scenes, and clear errors.

#include "matrix/render_loop/render_loop_monitor.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

using matrix::FrameData;
using matrix::RefreshRate;
using matrix::RenderLoopMonitor;
using matrix::TimeTicks;
using Ms = absl::Duration;

Ms ms(double v) { return absl::Milliseconds(v); }

// (Designated initializers would do, but GCC 12 warns about the fields left out.)
RenderLoopMonitor::Options WithVsync() {
  RenderLoopMonitor::Options options;
  options.swap_waits_for_vsync = true;
  return options;
}
RenderLoopMonitor::Options WithScene(std::string scene) {
  RenderLoopMonitor::Options options;
  options.scene = std::move(scene);
  return options;
}
RenderLoopMonitor::Options WithRate(RefreshRate rate) {
  RenderLoopMonitor::Options options;
  options.refresh_rate = rate;
  return options;
}

class Recorder : public matrix::LooperObserver {
 public:
  void DispatchBegin(const matrix::DispatchData& d) override { labels.push_back(d.info->label); }
  void DoFrame(const FrameData& frame) override {
    FrameData f = frame;
    f.dropped_frames = matrix::CountDroppedFrames(f.intended_frame_time, f.end, last_end_,
                                                  f.refresh_rate);
    last_end_ = f.end;
    frames.push_back(f);
  }
  void DispatchEnd(const matrix::DispatchData& d) override { durations.push_back(d.end - d.begin); }

  std::vector<const char*> labels;
  std::vector<FrameData> frames;
  std::vector<absl::Duration> durations;

 private:
  TimeTicks last_end_;
};

class RenderLoopMonitorTest : public ::testing::Test {
 protected:
  RenderLoopMonitorTest() : looper_monitor_(&clock_), ui_monitor_(&looper_monitor_, nullptr, {}) {
    looper_monitor_.Start();
    ui_monitor_.Start();
    registration_ = ui_monitor_.AddObserver(&recorder_);
  }
  ~RenderLoopMonitorTest() override { ui_monitor_.Stop(); }

  std::unique_ptr<RenderLoopMonitor> Attach(RenderLoopMonitor::Options options = {}) {
    auto monitor = RenderLoopMonitor::Attach(&looper_monitor_, &ui_monitor_, std::move(options));
    EXPECT_TRUE(monitor.ok()) << monitor.status();
    return monitor.ok() ? *std::move(monitor) : nullptr;
  }
  void Advance(double milliseconds) { clock_.Advance(ms(milliseconds)); }

  matrix::testing::FakeTickClock clock_;
  matrix::LooperMonitor looper_monitor_;
  matrix::UIThreadMonitor ui_monitor_;
  Recorder recorder_;
  matrix::ObserverRegistration registration_;
};

TEST_F(RenderLoopMonitorTest, EachIterationIsOneDispatchDrawingOneFrameWithMarkedPhases) {
  auto loop = Attach();
  for (int i = 0; i < 2; ++i) {
    const TimeTicks begin = clock_.NowTicks();
    loop->FrameBegin();
    EXPECT_TRUE(loop->in_frame());
    Advance(1);  // Event polling.
    loop->MarkUpdate();
    Advance(2);
    loop->MarkRender();
    Advance(3);
    loop->Swap([&] { Advance(4); });
    EXPECT_FALSE(loop->in_frame());
    ASSERT_EQ(recorder_.frames.size(), static_cast<size_t>(i + 1));
    const FrameData& f = recorder_.frames.back();
    EXPECT_EQ(f.intended_frame_time, begin);  // No vsync wait: the frame began on its own.
    EXPECT_EQ(f.frame_number, i + 1);
    EXPECT_EQ(f.refresh_rate, RefreshRate::FromHz(60));
    EXPECT_EQ(f.input(), ms(1));
    EXPECT_EQ(f.animation(), ms(2));
    EXPECT_EQ(f.traversal(), ms(3));
    EXPECT_EQ(f.commit(), ms(4));
    EXPECT_EQ(f.end - f.start, ms(10));
    Advance(6.67);  // Idle until the next iteration: not in any dispatch.
  }
  EXPECT_EQ(loop->frame_count(), 2);
  ASSERT_EQ(recorder_.labels.size(), 2u);
  EXPECT_STREQ(recorder_.labels[0], matrix::kRenderLoopDispatchLabel);
  EXPECT_EQ(recorder_.durations, (std::vector<absl::Duration>{ms(10), ms(10)}));
}

TEST_F(RenderLoopMonitorTest, AFrameWithoutMarkersCountsItsWorkAsRendering) {
  auto loop = Attach();
  loop->FrameBegin();
  Advance(5);
  loop->Swap([&] { Advance(1); });
  loop->FrameBegin();  // Swap outside the frame: FrameEnd() alone.
  Advance(7);
  loop->FrameEnd();
  ASSERT_EQ(recorder_.frames.size(), 2u);
  EXPECT_EQ(recorder_.frames[0].input(), absl::ZeroDuration());
  EXPECT_EQ(recorder_.frames[0].traversal(), ms(5));
  EXPECT_EQ(recorder_.frames[0].commit(), ms(1));
  EXPECT_EQ(recorder_.frames[1].input(), absl::ZeroDuration());
  EXPECT_EQ(recorder_.frames[1].traversal(), ms(7));
  EXPECT_EQ(recorder_.frames[1].commit(), absl::ZeroDuration());
}

TEST_F(RenderLoopMonitorTest, MarkersGoForwardOnlyAndOutsideAFrameDoNothing) {
  auto loop = Attach();
  loop->MarkRender();  // No frame: ignored.
  loop->FrameEnd();    // Ignored.
  EXPECT_TRUE(recorder_.durations.empty());
  loop->FrameBegin();
  Advance(1);
  loop->MarkRender();
  Advance(2);
  loop->MarkUpdate();  // Already past: ignored.
  loop->MarkInput();   // Likewise.
  Advance(3);
  loop->MarkRender();  // The same phase again: ignored.
  Advance(4);
  loop->FrameEnd();
  ASSERT_EQ(recorder_.frames.size(), 1u);
  const FrameData& f = recorder_.frames[0];
  EXPECT_EQ(f.input(), ms(1));
  EXPECT_EQ(f.animation(), absl::ZeroDuration());
  EXPECT_EQ(f.traversal(), ms(9));
  EXPECT_EQ(f.commit(), absl::ZeroDuration());
}

TEST_F(RenderLoopMonitorTest, FrameBeginEndsAnUnfinishedFrameAndTheDestructorEndsTheLast) {
  auto loop = Attach();
  loop->FrameBegin();
  Advance(3);
  loop->FrameBegin();  // The loop `continue`d past its FrameEnd().
  Advance(4);
  EXPECT_EQ(recorder_.durations, (std::vector<absl::Duration>{ms(3)}));
  EXPECT_TRUE(looper_monitor_.is_dispatching());
  loop.reset();
  EXPECT_FALSE(looper_monitor_.is_dispatching());
  EXPECT_EQ(recorder_.durations, (std::vector<absl::Duration>{ms(3), ms(4)}));
  EXPECT_EQ(recorder_.frames.size(), 2u);
}

TEST_F(RenderLoopMonitorTest, SwapReturnsWhatTheSwapFunctionReturns) {
  auto loop = Attach();
  loop->FrameBegin();
  EXPECT_EQ(loop->Swap([] { return 42; }), 42);
  EXPECT_FALSE(loop->in_frame());
}

// A vsync-locked loop at 60 Hz: each swap blocks until the next vsync. Steady
// frames (5 ms of work) drop nothing; a 100 ms frame drops 6 vsyncs: it began
// on the tick its previous swap returned on and is shown on the 7th after it
// instead of the 1st (the animation's due rule, UIThreadMonitor::MarkFrame(),
// counts it from half an interval after the previous frame).
void RunVsyncLockedLoop(RenderLoopMonitor* loop, matrix::testing::FakeTickClock* clock,
                        const std::vector<double>& work_ms) {
  const RefreshRate rate = RefreshRate::FromHz(60);
  const TimeTicks base = clock->NowTicks();
  for (double work : work_ms) {
    loop->FrameBegin();
    clock->Advance(ms(work));
    loop->Swap([&] {
      const TimeTicks now = clock->NowTicks();
      clock->SetNowTicks(rate.TickAfter(base, rate.IntervalsIn(now - base) + 1) + ms(0.05));
    });
  }
}

TEST_F(RenderLoopMonitorTest, ASwapThatWaitsForTheVsyncIsNotADroppedFrame) {
  auto loop = Attach(WithVsync());
  RunVsyncLockedLoop(loop.get(), &clock_, {5, 5, 5, 100, 5, 5});
  ASSERT_EQ(recorder_.frames.size(), 6u);
  std::vector<int64_t> dropped;
  for (const FrameData& f : recorder_.frames) dropped.push_back(f.dropped_frames);
  EXPECT_EQ(dropped, (std::vector<int64_t>{0, 0, 0, 6, 0, 0}));
  // Intended vsyncs are on the grid of the swaps' returns, one tick ahead
  // (the second frame: no animation is running yet).
  const FrameData& second = recorder_.frames[1];
  EXPECT_EQ(second.intended_frame_time - recorder_.frames[0].end,
            RefreshRate::FromHz(60).Intervals(1));
}

TEST_F(RenderLoopMonitorTest, WithoutTheVsyncOptionAVsyncLockedLoopDropsAFrameEveryFrame) {
  // Why the option exists: counted from its begin, every vsync-locked frame
  // lasts more than one interval.
  auto loop = Attach();
  RunVsyncLockedLoop(loop.get(), &clock_, {5, 5, 5});
  ASSERT_EQ(recorder_.frames.size(), 3u);
  EXPECT_EQ(recorder_.frames[1].dropped_frames, 1);
  EXPECT_EQ(recorder_.frames[2].dropped_frames, 1);
}

TEST_F(RenderLoopMonitorTest, SwapOutsideTheFrameCountsFromTheFrameBeginEvenWithVsync) {
  auto loop = Attach(WithVsync());
  loop->FrameBegin();
  Advance(5);
  loop->FrameEnd();
  Advance(11.67);  // The swap, outside the frame, waits for the vsync.
  const TimeTicks begin = clock_.NowTicks();
  loop->FrameBegin();
  Advance(100);
  loop->FrameEnd();
  ASSERT_EQ(recorder_.frames.size(), 2u);
  EXPECT_EQ(recorder_.frames[1].intended_frame_time, begin);
  // Exactly 6 intervals (100 ms at 60 Hz) from its begin: 5 dropped.
  EXPECT_EQ(recorder_.frames[1].dropped_frames, 5);
}

TEST_F(RenderLoopMonitorTest, PacedLoopWithoutVsyncCountsJankFromTheFrameBegin) {
  auto loop = Attach();
  const RefreshRate rate = RefreshRate::FromHz(60);
  const std::vector<double> work = {4, 4, 100, 4, 40, 4};
  const TimeTicks base = clock_.NowTicks();
  int64_t tick = 0;
  for (double w : work) {
    loop->FrameBegin();
    Advance(w);
    loop->Swap([&] { Advance(0.3); });
    // Sleep until the next tick of the loop's own 60 Hz pacing.
    tick = std::max(tick + 1, rate.IntervalsIn(clock_.NowTicks() - base) + 1);
    clock_.SetNowTicks(rate.TickAfter(base, tick));
  }
  std::vector<int64_t> dropped;
  for (const FrameData& f : recorder_.frames) dropped.push_back(f.dropped_frames);
  EXPECT_EQ(dropped, (std::vector<int64_t>{0, 0, 6, 0, 2, 0}));
}

TEST_F(RenderLoopMonitorTest, RefreshRateFromOptionsAndSetRefreshRate) {
  auto loop = Attach(WithRate(RefreshRate::FromHz(144)));
  loop->FrameBegin();
  loop->FrameEnd();
  EXPECT_FALSE(loop->SetRefreshRate(RefreshRate::FromMillihertz(0)));
  EXPECT_TRUE(loop->SetRefreshRate(RefreshRate::FromHz(59.94)));
  loop->FrameBegin();
  loop->FrameEnd();
  ASSERT_EQ(recorder_.frames.size(), 2u);
  EXPECT_EQ(recorder_.frames[0].refresh_rate, RefreshRate::FromHz(144));
  EXPECT_EQ(recorder_.frames[1].refresh_rate, RefreshRate::FromMillihertz(59'940));
}

TEST_F(RenderLoopMonitorTest, SceneFromOptionsRenamedUnlessTheApplicationShowedItsOwn) {
  matrix::AppState* state = matrix::AppState::Get();
  state->OnSceneShown("BeforeAttach");
  auto loop = Attach(WithScene("Level1"));  // Asked for explicitly: shown.
  EXPECT_EQ(state->visible_scene(), "Level1");
  EXPECT_EQ(loop->scene(), "Level1");
  EXPECT_TRUE(loop->NameScene("Level2"));
  EXPECT_EQ(state->visible_scene(), "Level2");
  state->OnSceneShown("PauseMenu");  // The application's own scene stands.
  EXPECT_FALSE(loop->NameScene("Level3"));
  EXPECT_EQ(state->visible_scene(), "PauseMenu");
  EXPECT_EQ(loop->scene(), "Level2");
}

TEST_F(RenderLoopMonitorTest, ClearErrors) {
  using Options = RenderLoopMonitor::Options;
  EXPECT_EQ(RenderLoopMonitor::Attach(nullptr, &ui_monitor_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderLoopMonitor::Attach(&looper_monitor_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderLoopMonitor::Attach(&looper_monitor_, &ui_monitor_,
                                      WithRate(RefreshRate::FromMillihertz(0)))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  Options no_label;
  no_label.label = nullptr;
  EXPECT_EQ(RenderLoopMonitor::Attach(&looper_monitor_, &ui_monitor_, no_label).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderLoopMonitor::Attach(static_cast<matrix::TracePlugin*>(nullptr)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  matrix::TracePlugin not_started(*config);
  const absl::Status status = RenderLoopMonitor::Attach(&not_started).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("Start()"), std::string::npos) << status;
}

}  // namespace
