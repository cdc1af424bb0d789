// Tests for UIThreadMonitor: begin / frame / end for every dispatch, vsync
// frames told from other messages, the intended frame time, exact per-queue
// costs, markers that never request frames, foreign frame hooks, observers
// that change the set during callbacks, CPU sampling and SnapshotFrame().

#include "matrix/trace/ui_thread_monitor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/frame_stats.h"
#include "matrix/trace/looper_monitor.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::DispatchData;
using ::matrix::FrameData;
using ::matrix::Handler;
using ::matrix::Looper;
using ::matrix::LooperMonitor;
using ::matrix::LooperObserver;
using ::matrix::ObserverRegistration;
using ::matrix::RefreshRate;
using ::matrix::TimeTicks;
using ::matrix::UIThreadMonitor;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

absl::Duration Ms(double ms) { return absl::Milliseconds(ms); }

class RecordingObserver : public LooperObserver {
 public:
  explicit RecordingObserver(std::string name = "O") : name_(std::move(name)) {}
  void DispatchBegin(const DispatchData& d) override {
    log.push_back(name_ + ".begin");
    begins.push_back(d);
    if (on_begin) on_begin();
  }
  void DoFrame(const FrameData& f) override {
    log.push_back(name_ + ".frame");
    frames.push_back(f);
    if (on_frame) on_frame();
  }
  void DispatchEnd(const DispatchData& d) override {
    log.push_back(name_ + ".end");
    ends.push_back(d);
    if (on_end) on_end();
  }

  std::vector<std::string> log;
  std::vector<DispatchData> begins;
  std::vector<FrameData> frames;
  std::vector<DispatchData> ends;
  std::function<void()> on_begin, on_frame, on_end;

 private:
  std::string name_;
};

mt::TestEnvironment::Options ManualVsync() {
  mt::TestEnvironment::Options options;
  options.auto_vsync = false;
  return options;
}

class UIThreadMonitorTest : public ::testing::Test {
 protected:
  explicit UIThreadMonitorTest(mt::TestEnvironment::Options options = ManualVsync())
      : env_(options) {
    AppState::Get()->ResetForTesting();
  }

  void StartMonitor(UIThreadMonitor::Options options = {}) {
    looper_monitor_.Start();
    monitor_ = std::make_unique<UIThreadMonitor>(&looper_monitor_, env_.choreographer(), options);
    monitor_->Start();
    registration_ = monitor_->AddObserver(&observer_);
  }

  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  // Fires the requested vsync at `timestamp` and runs the frame.
  void FireVsyncAt(TimeTicks timestamp) {
    ASSERT_TRUE(env_.vsync()->Fire(timestamp));
    RunPending();
  }

  // Posts a frame whose INPUT, ANIMATION, TRAVERSAL and COMMIT callbacks
  // each take the given fake time.
  void PostFrame(absl::Duration input, absl::Duration animation, absl::Duration traversal,
                 absl::Duration commit) {
    Choreographer* c = env_.choreographer();
    c->PostCallback(Choreographer::kInput, [this, input] { env_.AdvanceClock(input); });
    c->PostCallback(Choreographer::kAnimation, [this, animation] { env_.AdvanceClock(animation); });
    c->PostCallback(Choreographer::kTraversal, [this, traversal] { env_.AdvanceClock(traversal); });
    c->PostCallback(Choreographer::kCommit, [this, commit] { env_.AdvanceClock(commit); });
  }

  mt::TestEnvironment env_;
  Handler handler_{env_.looper(), "matrix::UIThreadMonitorTest"};
  LooperMonitor looper_monitor_{env_.looper()};
  std::unique_ptr<UIThreadMonitor> monitor_;
  RecordingObserver observer_;
  ObserverRegistration registration_;
};

TEST_F(UIThreadMonitorTest, EveryDispatch_GivesBeginAndEnd_AVsyncFrameAlsoDoFrameBetween) {
  StartMonitor();
  handler_.Post([] {});
  RunPending();
  env_.choreographer()->PostCallback(Choreographer::kTraversal, [] {});
  FireVsyncAt(env_.Now());
  handler_.Post([] {});
  RunPending();

  // Plain messages get no DoFrame (Matrix calls it for every message, which
  // is how its classic FPS counted messages as frames).
  EXPECT_THAT(observer_.log, ElementsAre("O.begin", "O.end",             //
                                         "O.begin", "O.frame", "O.end",  //
                                         "O.begin", "O.end"));
  ASSERT_THAT(observer_.frames, SizeIs(1));
  EXPECT_TRUE(observer_.frames[0].is_vsync_frame);
  EXPECT_FALSE(observer_.ends[0].is_vsync_frame);
  EXPECT_TRUE(observer_.ends[1].is_vsync_frame);
  EXPECT_FALSE(observer_.ends[2].is_vsync_frame);
  // Dispatch numbers come from the heartbeat and match begin to end.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(observer_.begins[i].dispatch_number, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(observer_.ends[i].dispatch_number, static_cast<uint64_t>(i + 1));
  }
}

TEST_F(UIThreadMonitorTest, PlainMessage_DispatchDataHasItsTimes) {
  StartMonitor();
  const TimeTicks t0 = env_.Now();
  handler_.Post([this] { env_.AdvanceClock(Ms(12)); });
  RunPending();

  EXPECT_THAT(observer_.frames, IsEmpty());
  ASSERT_THAT(observer_.ends, SizeIs(1));
  EXPECT_FALSE(observer_.ends[0].is_vsync_frame);
  EXPECT_EQ(observer_.begins[0].begin, t0);
  EXPECT_EQ(observer_.ends[0].begin, t0);
  EXPECT_EQ(observer_.ends[0].end, t0 + Ms(12));
}

TEST_F(UIThreadMonitorTest, DispatchEndFloor_SkipsShorterDispatchesAndCanChangeAnyTime) {
  StartMonitor();
  observer_.set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(Ms(10)));
  handler_.Post([this] { env_.AdvanceClock(Ms(9)); });   // Below the floor: no end.
  handler_.Post([this] { env_.AdvanceClock(Ms(10)); });  // At the floor: heard.
  RunPending();
  ASSERT_THAT(observer_.begins, SizeIs(2));
  ASSERT_THAT(observer_.ends, SizeIs(1));
  EXPECT_EQ(observer_.ends[0].dispatch_number, 2u);
  EXPECT_EQ(observer_.ends[0].end - observer_.ends[0].begin, Ms(10));

  // Lowered during a dispatch: that dispatch's end already counts.
  handler_.Post([this] {
    env_.AdvanceClock(Ms(1));
    observer_.set_dispatch_end_floor_ns(0);
  });
  RunPending();
  ASSERT_THAT(observer_.ends, SizeIs(2));
  EXPECT_EQ(observer_.ends[1].dispatch_number, 3u);
}

TEST_F(UIThreadMonitorTest, DispatchEndFloors_OfSeveralObservers_EachHearsWhatItsOwnFloorLets) {
  StartMonitor();
  observer_.set_dispatch_end_floor_ns(LooperObserver::kNoDispatchEnd);
  RecordingObserver slow("S");
  slow.set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(Ms(50)));
  ObserverRegistration slow_registration = monitor_->AddObserver(&slow);
  handler_.Post([this] { env_.AdvanceClock(Ms(20)); });
  handler_.Post([this] { env_.AdvanceClock(Ms(60)); });  // Only the slow one's floor lets it.
  RunPending();
  EXPECT_THAT(observer_.ends, IsEmpty());
  ASSERT_THAT(slow.ends, SizeIs(1));
  EXPECT_EQ(slow.ends[0].dispatch_number, 2u);

  // Lowered between dispatches, from another observer than the lowest one:
  // the next end is heard by it alone.
  observer_.set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(Ms(10)));
  handler_.Post([this] { env_.AdvanceClock(Ms(20)); });
  RunPending();
  ASSERT_THAT(observer_.ends, SizeIs(1));
  EXPECT_EQ(observer_.ends[0].dispatch_number, 3u);
  EXPECT_THAT(slow.ends, SizeIs(1));

  // An observer added with a low floor lowers the monitor's: it hears the
  // next short dispatch; the one that left hears nothing more.
  slow_registration.Reset();
  RecordingObserver every("E");
  ObserverRegistration every_registration = monitor_->AddObserver(&every);
  handler_.Post([this] { env_.AdvanceClock(Ms(1)); });
  handler_.Post([this] { env_.AdvanceClock(Ms(70)); });
  RunPending();
  ASSERT_THAT(every.ends, SizeIs(2));
  EXPECT_EQ(every.ends[0].dispatch_number, 4u);
  EXPECT_THAT(observer_.ends, SizeIs(2));  // The 70 ms one.
  EXPECT_THAT(slow.ends, SizeIs(1));
}

TEST_F(UIThreadMonitorTest, FirstDispatchAndInDispatch_AreKeptForTheTracers) {
  StartMonitor();
  EXPECT_TRUE(monitor_->first_dispatch_begin().is_null());
  EXPECT_FALSE(monitor_->in_dispatch());
  const TimeTicks t0 = env_.Now();
  bool inside = false;
  handler_.Post([&] {
    inside = monitor_->in_dispatch();
    env_.AdvanceClock(Ms(3));
  });
  handler_.Post([] {});
  RunPending();
  EXPECT_TRUE(inside);
  EXPECT_FALSE(monitor_->in_dispatch());
  EXPECT_EQ(monitor_->first_dispatch_begin(), t0);  // The first one's, not the last one's.
}

TEST_F(UIThreadMonitorTest, VsyncFrame_IntendedFrameTimeIsTheVsyncTimestamp) {
  StartMonitor();
  AppState::Get()->OnSceneShown("Settings");
  env_.choreographer()->PostCallback(Choreographer::kInput, [] {});
  ASSERT_TRUE(env_.vsync()->vsync_requested());
  const TimeTicks vsync = env_.Now();
  env_.AdvanceClock(Ms(6));  // The frame message runs 6 ms after its vsync.
  FireVsyncAt(vsync);

  ASSERT_THAT(observer_.frames, SizeIs(1));
  const FrameData& f = observer_.frames[0];
  EXPECT_TRUE(f.is_vsync_frame);
  EXPECT_EQ(f.intended_frame_time, vsync);
  EXPECT_EQ(f.start, vsync + Ms(6));
  EXPECT_EQ(f.end, vsync + Ms(6));
  EXPECT_EQ(f.jitter(), Ms(6));
  EXPECT_EQ(f.refresh_rate, RefreshRate::FromHz(60));
  EXPECT_EQ(f.frame_number, 1);
  EXPECT_EQ(f.scene, AppState::Get()->InternScene("Settings"));
}

TEST_F(UIThreadMonitorTest, VsyncFrameLateByIntervals_IntendedStaysTheOriginalVsync) {
  StartMonitor();
  env_.choreographer()->PostCallback(Choreographer::kInput, [] {});
  const TimeTicks vsync = env_.Now();
  env_.AdvanceClock(Ms(40));  // The Choreographer skips to a later vsync...
  FireVsyncAt(vsync);

  ASSERT_THAT(observer_.frames, SizeIs(1));
  // ...but the frame is charged from the vsync that started it (Matrix's
  // mTimestampNanos), not from the adjusted frame time.
  EXPECT_EQ(observer_.frames[0].intended_frame_time, vsync);
  EXPECT_GT(env_.choreographer()->frame_info().frame_time, vsync);
}

TEST_F(UIThreadMonitorTest, VsyncFrame_ReportsExactPerPhaseCosts) {
  StartMonitor();
  PostFrame(Ms(5), Ms(7), Ms(20), Ms(1));
  const TimeTicks vsync = env_.Now();
  FireVsyncAt(vsync);

  ASSERT_THAT(observer_.frames, SizeIs(1));
  const FrameData& f = observer_.frames[0];
  EXPECT_TRUE(f.is_vsync_frame);
  EXPECT_EQ(f.input(), Ms(5));
  EXPECT_EQ(f.animation(), Ms(7));
  EXPECT_EQ(f.traversal(), Ms(20));
  EXPECT_EQ(f.commit(), Ms(1));
  EXPECT_EQ(f.end, vsync + Ms(33));
}

TEST_F(UIThreadMonitorTest, VsyncFrame_InsetsAnimationCountsAsAnimation) {
  StartMonitor();
  PostFrame(Ms(1), Ms(2), Ms(3), Ms(4));
  env_.choreographer()->PostCallback(Choreographer::kInsetsAnimation,
                                     [this] { env_.AdvanceClock(Ms(10)); });
  FireVsyncAt(env_.Now());

  ASSERT_THAT(observer_.frames, SizeIs(1));
  EXPECT_EQ(observer_.frames[0].input(), Ms(1));
  EXPECT_EQ(observer_.frames[0].animation(), Ms(12));
  EXPECT_EQ(observer_.frames[0].traversal(), Ms(3));
  EXPECT_EQ(observer_.frames[0].commit(), Ms(4));
}

TEST_F(UIThreadMonitorTest, ConsecutiveFrames_EachIsTimedAndMessagesBetweenAreNotFrames) {
  StartMonitor();
  PostFrame(Ms(1), Ms(2), Ms(3), Ms(4));
  FireVsyncAt(env_.Now());
  handler_.Post([this] { env_.AdvanceClock(Ms(2)); });
  RunPending();
  env_.AdvanceClock(Ms(10));
  PostFrame(Ms(4), Ms(3), Ms(2), Ms(1));
  FireVsyncAt(env_.Now());

  ASSERT_THAT(observer_.frames, SizeIs(2));
  ASSERT_THAT(observer_.ends, SizeIs(3));
  EXPECT_TRUE(observer_.frames[0].is_vsync_frame);
  EXPECT_FALSE(observer_.ends[1].is_vsync_frame);
  const FrameData& second = observer_.frames[1];
  EXPECT_TRUE(second.is_vsync_frame);
  EXPECT_EQ(second.frame_number, 2);
  EXPECT_EQ(second.input(), Ms(4));
  EXPECT_EQ(second.animation(), Ms(3));
  EXPECT_EQ(second.traversal(), Ms(2));
  EXPECT_EQ(second.commit(), Ms(1));
}

TEST_F(UIThreadMonitorTest, Markers_NeverRequestAFrameByThemselves) {
  StartMonitor();
  EXPECT_FALSE(env_.vsync()->vsync_requested());
  env_.set_auto_vsync(true);
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(env_.vsync()->frames_fired(), 0);

  // One frame the app asked for; the re-armed markers must not ask for more.
  env_.choreographer()->PostCallback(Choreographer::kTraversal, [] {});
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(env_.vsync()->frames_fired(), 1);
  EXPECT_FALSE(env_.vsync()->vsync_requested());
  ASSERT_THAT(observer_.frames, SizeIs(1));
  EXPECT_TRUE(observer_.frames[0].is_vsync_frame);
}

TEST_F(UIThreadMonitorTest, Stop_RemovesTheMarkersAndStopsObserving) {
  StartMonitor();
  // The INPUT marker is a flag the monitor's queue-start hook reads (no
  // callback per frame): the monitor holds the Choreographer's hook slot.
  struct OtherHook : Choreographer::FrameStartListener {
    void OnFrameStart(TimeTicks) override {}
  } other_hook;
  EXPECT_FALSE(env_.choreographer()->SetFrameStartListener(&other_hook));
  monitor_->Stop();
  EXPECT_FALSE(monitor_->is_alive());
  EXPECT_FALSE(env_.choreographer()->HasPendingCallbacks(Choreographer::kInput));
  // Released: another monitor may take the hook.
  EXPECT_TRUE(env_.choreographer()->SetFrameStartListener(&other_hook));
  EXPECT_TRUE(env_.choreographer()->SetFrameStartListener(nullptr));

  handler_.Post([] {});
  RunPending();
  env_.choreographer()->PostCallback(Choreographer::kInput, [] {});
  FireVsyncAt(env_.Now());
  EXPECT_THAT(observer_.log, IsEmpty());
}

// --- Foreign render loops -----------------------------------------------------

TEST_F(UIThreadMonitorTest, ForeignFrameHooks_GiveTheSameFrameDataAsTheChoreographer) {
  StartMonitor();
  const TimeTicks vsync = env_.Now();
  env_.AdvanceClock(Ms(2));
  PostFrame(Ms(5), Ms(7), Ms(20), Ms(1));
  FireVsyncAt(vsync);
  ASSERT_THAT(observer_.frames, SizeIs(1));
  const FrameData ours = observer_.frames[0];

  // The same frame, reported by a foreign loop with explicit timestamps.
  LooperMonitor foreign(env_.clock());
  UIThreadMonitor foreign_monitor(&foreign, /*choreographer=*/nullptr, {});
  foreign_monitor.Start();
  RecordingObserver foreign_observer("F");
  ObserverRegistration r = foreign_monitor.AddObserver(&foreign_observer);
  const TimeTicks begin = ours.start;
  foreign.DispatchBegin(begin, "render");
  foreign_monitor.MarkFrame(vsync, RefreshRate::FromHz(60), ours.frame_number);
  foreign_monitor.MarkPhase(UIThreadMonitor::Phase::kInput, begin);
  foreign_monitor.MarkPhase(UIThreadMonitor::Phase::kAnimation, begin + Ms(5));
  foreign_monitor.MarkPhase(UIThreadMonitor::Phase::kTraversal, begin + Ms(12));
  foreign_monitor.MarkPhase(UIThreadMonitor::Phase::kCommit, begin + Ms(32));
  foreign.DispatchEnd(begin + Ms(33));

  EXPECT_THAT(foreign_observer.log, ElementsAre("F.begin", "F.frame", "F.end"));
  ASSERT_THAT(foreign_observer.frames, SizeIs(1));
  const FrameData& theirs = foreign_observer.frames[0];
  EXPECT_TRUE(theirs.is_vsync_frame);
  EXPECT_EQ(theirs.scene, ours.scene);
  EXPECT_EQ(theirs.start, ours.start);
  EXPECT_EQ(theirs.end, ours.end);
  EXPECT_EQ(theirs.intended_frame_time, ours.intended_frame_time);
  EXPECT_EQ(theirs.refresh_rate, ours.refresh_rate);
  EXPECT_EQ(theirs.frame_number, ours.frame_number);
  EXPECT_EQ(theirs.input(), ours.input());
  EXPECT_EQ(theirs.animation(), ours.animation());
  EXPECT_EQ(theirs.traversal(), ours.traversal());
  EXPECT_EQ(theirs.commit(), ours.commit());
  EXPECT_EQ(ours.input(), Ms(5));
  EXPECT_EQ(ours.commit(), Ms(1));
  EXPECT_TRUE(foreign_observer.ends[0].is_vsync_frame);
}

TEST_F(UIThreadMonitorTest, ForeignDispatchWithoutMarkFrame_IsNotAFrame) {
  LooperMonitor foreign(env_.clock());
  UIThreadMonitor foreign_monitor(&foreign, nullptr, {});
  foreign_monitor.Start();
  RecordingObserver observer;
  ObserverRegistration r = foreign_monitor.AddObserver(&observer);

  foreign.DispatchBegin(env_.Now(), "event");
  foreign.DispatchEnd(env_.Now() + Ms(3));
  foreign.DispatchBegin(env_.Now() + Ms(5), "frame");
  foreign_monitor.MarkFrame(env_.Now() + Ms(4), RefreshRate::FromHz(120));
  foreign.DispatchEnd(env_.Now() + Ms(6));
  foreign.DispatchBegin(env_.Now() + Ms(7), "event");
  foreign.DispatchEnd(env_.Now() + Ms(8));

  EXPECT_THAT(observer.log, ElementsAre("O.begin", "O.end",             //
                                        "O.begin", "O.frame", "O.end",  //
                                        "O.begin", "O.end"));
  ASSERT_THAT(observer.frames, SizeIs(1));
  EXPECT_TRUE(observer.frames[0].is_vsync_frame);
  EXPECT_EQ(observer.frames[0].refresh_rate, RefreshRate::FromHz(120));
  EXPECT_EQ(observer.frames[0].intended_frame_time, env_.Now() + Ms(4));
  EXPECT_EQ(observer.frames[0].start, env_.Now() + Ms(5));
  EXPECT_EQ(observer.frames[0].end, env_.Now() + Ms(6));
  EXPECT_FALSE(observer.ends[2].is_vsync_frame);
}

// --- Observers changing the set during callbacks ------------------------------

// --- The due rule for foreign frames (MarkFrame) ---------------------------

// A foreign loop (an adapter or the agent) whose frames count from their own
// dispatch's begin, as most adapters mark them. Dropped frames as FrameTracer
// counts them.
class ForeignFramesTest : public UIThreadMonitorTest {
 protected:
  ForeignFramesTest() : foreign_(&foreign_looper_, /*choreographer=*/nullptr, {}) {
    foreign_.Start();
    recorder_registration_ = foreign_.AddObserver(&recorder_);
    now_ = env_.Now();
  }
  // A dispatch of `busy_ms` after a wait of `wait_ms`; a frame when `frame`.
  void Dispatch(double wait_ms, double busy_ms, bool frame) {
    now_ += absl::Microseconds(wait_ms * 1000);
    const TimeTicks begin = now_;
    foreign_looper_.DispatchBegin(begin, "loop");
    if (frame) foreign_.MarkFrame(begin, RefreshRate::FromHz(60), ++frames_);
    now_ += absl::Microseconds(busy_ms * 1000);
    foreign_looper_.DispatchEnd(now_);
  }
  // A render thread presented at `presented`; the main thread then wakes
  // `wait_ms` after it (or is in a dispatch already, when negative: it began
  // that long before the present) and takes the present in a dispatch that
  // ends `busy_ms` after the present, as matrix-run's agent marks it.
  void PresentedDispatch(TimeTicks presented, double wait_ms, double busy_ms) {
    const TimeTicks begin = presented + absl::Microseconds(wait_ms * 1000);
    now_ = begin;
    foreign_looper_.DispatchBegin(begin, "loop");
    foreign_.MarkFrame(presented, RefreshRate::FromHz(60), ++frames_);
    foreign_.MarkPresented(presented);
    now_ = presented + absl::Microseconds(busy_ms * 1000);
    foreign_looper_.DispatchEnd(now_);
  }
  // A 60 Hz animation: frames of 4 ms with 12.67 ms waits.
  void Animate(int frames) {
    for (int i = 0; i < frames; ++i) Dispatch(12.67, 4, true);
  }
  std::vector<int64_t> Dropped() const {
    std::vector<int64_t> dropped;
    TimeTicks previous_end;
    for (const FrameData& f : recorder_.frames) {
      dropped.push_back(
          matrix::CountDroppedFrames(f.intended_frame_time, f.shown(), previous_end, f.refresh_rate));
      EXPECT_EQ(f.counted_drops, dropped.back());
      previous_end = f.shown();
    }
    return dropped;
  }
  int64_t LastDropped() const { return Dropped().back(); }

  LooperMonitor foreign_looper_{env_.clock()};
  UIThreadMonitor foreign_;
  RecordingObserver recorder_;
  ObserverRegistration recorder_registration_;
  TimeTicks now_;
  int64_t frames_ = 0;
};

TEST_F(ForeignFramesTest, AnimationStalledBehindItsOwnDispatch_IsOneFrozenFrame) {
  Animate(5);
  Dispatch(12, 6000, false);  // The stall, in a dispatch of its own.
  Dispatch(1, 4, true);       // A short wait, then the overdue frame.
  // From half an interval after the last frame: ~6,017 ms at 60 Hz.
  EXPECT_EQ(LastDropped(), 360);
  EXPECT_EQ(matrix::ClassifyDroppedFrames(LastDropped(), RefreshRate::FromHz(60), {}),
            matrix::DropLevel::kFrozen);
  // The frame counts from half an interval after the previous one ended.
  const FrameData& frozen = recorder_.frames.back();
  EXPECT_EQ(frozen.intended_frame_time,
            recorder_.frames[4].end + RefreshRate::FromHz(60).Intervals(1) / 2);
}

TEST_F(ForeignFramesTest, SteadyAnimationWithJitter_DropsNothing) {
  // Gaps between frames of 10 to 24 ms at 60 Hz (within 1.5 intervals).
  for (double wait : {6.0, 20.0, 9.0, 16.0, 12.7, 14.0, 19.9, 7.0}) Dispatch(wait, 4, true);
  for (int64_t d : Dropped()) EXPECT_EQ(d, 0);
  // Messages between frames change nothing.
  Dispatch(3, 2, false);
  Dispatch(3, 2, false);
  Dispatch(3, 2, true);
  EXPECT_EQ(LastDropped(), 0);
}

TEST_F(ForeignFramesTest, MissedVsyncsInARunningAnimation_AreCounted) {
  Animate(3);
  Dispatch(12.67, 40, false);  // A 40 ms message between two frames.
  Dispatch(0.1, 4, true);
  // ~57 ms after the last frame: two vsyncs passed with nothing new
  // (counted from its own begin it would be none).
  EXPECT_EQ(LastDropped(), 2);
}

TEST_F(ForeignFramesTest, FrameAfterAnIdleWait_CountsFromItsOwnBegin) {
  Animate(5);
  Dispatch(12, 6000, false);
  Dispatch(40, 1, false);  // The loop waited 40 ms (>= 2 intervals): idle.
  Dispatch(1, 4, true);
  EXPECT_EQ(LastDropped(), 0);
}

TEST_F(ForeignFramesTest, OccasionalFrameOfABusyLoop_IsNotFrozen) {
  // Frames 1 s apart (no animation) between a stream of short messages
  // that never wait long: no frame was due in between.
  Dispatch(0, 4, true);
  for (int second = 0; second < 3; ++second) {
    for (int i = 0; i < 200; ++i) Dispatch(1, 4, false);
    Dispatch(1, 4, true);
  }
  for (int64_t d : Dropped()) EXPECT_EQ(d, 0);
}

TEST_F(ForeignFramesTest, SteadyThirtyFpsStream_DropsNothing) {
  // A video at its own 30 fps on a 60 Hz display: a frame every 33 ms
  // (a 4 ms frame after each 29 ms wait of its own pacing). It is not late:
  // counted against every vsync each frame would drop one.
  for (int i = 0; i < 30; ++i) Dispatch(29, 4, true);
  for (int64_t d : Dropped()) EXPECT_EQ(d, 0);
}

TEST_F(ForeignFramesTest, HitchInAThirtyFpsStream_DropsOnlyTheVsyncsItWasLate) {
  for (int i = 0; i < 20; ++i) Dispatch(29, 4, true);
  Dispatch(29, 200, false);  // A 200 ms hitch where a frame was due.
  Dispatch(0.1, 4, true);
  // It catches up with its schedule: six frames 4 ms apart, then on again.
  for (int i = 0; i < 6; ++i) Dispatch(0.1, 4, true);
  for (int i = 0; i < 10; ++i) Dispatch(29, 4, true);
  const std::vector<int64_t> dropped = Dropped();
  for (size_t i = 0; i < dropped.size(); ++i) {
    // The late frame ends 237 ms after the previous one, which was due
    // after 33 ms: 12 vsyncs at 60 Hz passed without it.
    EXPECT_EQ(dropped[i], i == 20 ? 12 : 0) << "frame " << i;
  }
}

TEST_F(ForeignFramesTest, StallInAThirtyFpsGame_IsOneFrozenFrame) {
  // A game paced to about 28 fps (36 ms a frame: more than two refresh
  // intervals apart) stalls 6 s in its event handling, in a dispatch
  // without a frame; the next frame is frozen.
  for (int i = 0; i < 10; ++i) Dispatch(32, 4, true);
  Dispatch(20, 6000, false);
  Dispatch(1, 4, true);
  // Due 27.7 ms (one pace less half an interval) after the last frame ended,
  // it ended ~6,025 ms after it.
  EXPECT_EQ(LastDropped(), 359);
  EXPECT_EQ(matrix::ClassifyDroppedFrames(LastDropped(), RefreshRate::FromHz(60), {}),
            matrix::DropLevel::kFrozen);
}

TEST_F(ForeignFramesTest, UnsteadySlowFrames_AreCountedAgainstTheRefreshRate) {
  // Frames 16.7 and 36 ms apart by turns (a 30 ms message before every
  // other frame) have no cadence of their own: the 36 ms ones are late.
  for (int i = 0; i < 16; ++i) {
    if (i % 2 == 0) {
      Dispatch(12.67, 4, true);
    } else {
      Dispatch(2, 30, false);
      Dispatch(0.1, 4, true);
    }
  }
  const std::vector<int64_t> dropped = Dropped();
  for (size_t i = 2; i < dropped.size(); ++i) {
    EXPECT_EQ(dropped[i], i % 2 == 0 ? 0 : 1) << "frame " << i;
  }
}

TEST_F(ForeignFramesTest, RenderThreadStream_CountsFromItsPresentsNotTheMainThread) {
  // A video player's render thread presents a steady 30 fps; the main thread
  // takes each present 0.3 ms later, and every fifth time it has 20 ms of its
  // own work to finish first. The frames reached the screen at the presents:
  // none is late (timed by the main thread's dispatch ends, every fifth
  // dropped a vsync).
  const TimeTicks start = now_ + absl::Milliseconds(10);
  for (int i = 0; i < 40; ++i) {
    const TimeTicks presented = start + absl::Microseconds(33'333 * i);
    PresentedDispatch(presented, 0.3, i % 5 == 4 ? 20.3 : 0.4);
  }
  const std::vector<int64_t> dropped = Dropped();
  for (size_t i = 0; i < dropped.size(); ++i) EXPECT_EQ(dropped[i], 0) << "frame " << i;
  EXPECT_EQ(recorder_.frames.back().presented, start + absl::Microseconds(33'333 * 39));
  EXPECT_EQ(recorder_.frames.back().end, now_);
}

TEST_F(ForeignFramesTest, FirstPresentedFrame_DuringALongDispatch_IsNotLate) {
  // The first present comes 28 ms into a 30 ms dispatch of the main thread
  // (its start-up work): the render thread's frame was not due at the
  // dispatch's begin.
  PresentedDispatch(now_ + absl::Milliseconds(40), -28, 2);
  EXPECT_EQ(LastDropped(), 0);
}

TEST_F(ForeignFramesTest, RenderThreadLatePresent_DropsTheVsyncsItWasLate) {
  const TimeTicks start = now_ + absl::Milliseconds(10);
  for (int i = 0; i < 20; ++i) {
    PresentedDispatch(start + absl::Microseconds(33'333 * i), 0.3, 0.4);
  }
  // The main thread goes on with its own timer every 10 ms (a loop that
  // waits two paces says nothing was due), while the next present is 100 ms
  // late: due 25 ms after the last present (one pace less half a refresh
  // interval), shown 133.3 ms after it: 108.3 ms, 6.5 intervals.
  for (int i = 0; i < 12; ++i) Dispatch(10, 0.1, false);
  PresentedDispatch(start + absl::Microseconds(33'333 * 19 + 133'333), 0.3, 0.4);
  EXPECT_EQ(LastDropped(), 6);
}

TEST_F(ForeignFramesTest, MainThreadStallStopsTheRenderThread_IsOneFrozenFrame) {
  // Qt Quick's threaded loop: the render thread waits for the main thread's
  // sync, so a 6 s stall of the main thread delays the next present.
  const TimeTicks start = now_ + absl::Milliseconds(10);
  for (int i = 0; i < 20; ++i) {
    PresentedDispatch(start + absl::Microseconds(16'667 * i), 0.3, 0.4);
  }
  now_ += absl::Milliseconds(2);
  foreign_looper_.DispatchBegin(now_, "loop");
  now_ += absl::Seconds(6);
  foreign_looper_.DispatchEnd(now_);
  PresentedDispatch(now_ + absl::Milliseconds(5), 0.3, 0.4);
  EXPECT_EQ(matrix::ClassifyDroppedFrames(LastDropped(), RefreshRate::FromHz(60), {}),
            matrix::DropLevel::kFrozen);
  EXPECT_GE(LastDropped(), 359);
}

TEST(FrameCadenceTest, ASteadyCadenceHoldsThroughLateFramesAndTheirCatchUps) {
  // A 30 fps stream whose presents are now and then late by 10-17 ms (a
  // render thread on a busy machine), each followed by a short catch-up.
  matrix::FrameCadence c;
  for (int i = 0; i < 8; ++i) c.Add(33'300'000);
  ASSERT_EQ(c.SteadyNanoseconds(), 33'300'000);
  // Two late frames and their catch-ups in one window: 4 of 8 near.
  for (const int64_t ms : {33, 45, 22, 33, 48, 19, 33, 33}) c.Add(ms * 1'000'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 33'000'000);
  // Frames of 16 to 50 ms by turns never become steady, nor does a stream
  // whose intervals wander by more than 25 %.
  matrix::FrameCadence unsteady;
  for (int i = 0; i < 32; ++i) unsteady.Add((i % 2 == 0 ? 16 : 50) * 1'000'000);
  EXPECT_EQ(unsteady.SteadyNanoseconds(), 0);
  // Once steady, it lets go when fewer than half stay near the median.
  for (const int64_t ms : {33, 60, 18, 45, 25, 70, 33, 20}) c.Add(ms * 1'000'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 0);
}

TEST(FrameCadenceTest, SteadyIntervalsGiveTheirMedian_OthersNone) {
  matrix::FrameCadence c;
  EXPECT_EQ(c.SteadyNanoseconds(), 0);  // No frames yet.
  c.Add(33'300'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 33'300'000);  // The first interval stands for it.
  for (int i = 0; i < 2; ++i) c.Add(33'300'000);
  c.Add(34'000'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 33'300'000);
  c.Add(6'000'000'000);  // A stall is not an interval of the cadence.
  EXPECT_EQ(c.SteadyNanoseconds(), 33'300'000);
  c.Add(233'000'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 33'300'000);
  // One odd interval in eight keeps it.
  for (int i = 0; i < 7; ++i) c.Add(33'300'000);
  c.Add(80'000'000);
  EXPECT_EQ(c.SteadyNanoseconds(), 33'300'000);
  // Intervals all over the place: none.
  matrix::FrameCadence jumpy;
  for (int64_t ms : {16, 50, 16, 50, 25, 40, 16, 50}) jumpy.Add(ms * 1'000'000);
  EXPECT_EQ(jumpy.SteadyNanoseconds(), 0);
}

TEST_F(ForeignFramesTest, AnEarlierIntendedVsync_StandsAsGiven) {
  // The rule only ever moves a frame's start earlier: an adapter that knows
  // an earlier vsync (GTK's frame clock) keeps it.
  Animate(3);
  Dispatch(1, 100, false);
  foreign_looper_.DispatchBegin(now_, "loop");
  foreign_.MarkFrame(now_ - absl::Milliseconds(200), RefreshRate::FromHz(60), ++frames_);
  foreign_looper_.DispatchEnd(now_ + absl::Milliseconds(4));
  // An intended vsync earlier than the due time stands as given.
  EXPECT_EQ(recorder_.frames.back().intended_frame_time, now_ - absl::Milliseconds(200));
}

TEST_F(UIThreadMonitorTest, ObserverAddedDuringBegin_MissesThatDispatchOnly) {
  StartMonitor();
  RecordingObserver late("Late");
  ObserverRegistration late_registration;
  observer_.on_begin = [&] {
    if (!late_registration.active()) late_registration = monitor_->AddObserver(&late);
  };
  PostFrame(Ms(1), Ms(1), Ms(1), Ms(1));
  FireVsyncAt(env_.Now());
  EXPECT_THAT(late.log, IsEmpty());
  PostFrame(Ms(1), Ms(1), Ms(1), Ms(1));
  FireVsyncAt(env_.Now());
  EXPECT_THAT(late.log, ElementsAre("Late.begin", "Late.frame", "Late.end"));
}

TEST_F(UIThreadMonitorTest, ObserverRemovingItselfInDoFrame_GetsNoDispatchEnd) {
  StartMonitor();
  RecordingObserver other("Other");
  ObserverRegistration other_registration = monitor_->AddObserver(&other);
  observer_.on_frame = [&] { registration_.Reset(); };
  for (int i = 0; i < 2; ++i) {
    PostFrame(Ms(1), Ms(1), Ms(1), Ms(1));
    FireVsyncAt(env_.Now());
  }
  EXPECT_THAT(observer_.log, ElementsAre("O.begin", "O.frame"));
  EXPECT_THAT(other.log, ElementsAre("Other.begin", "Other.frame", "Other.end",  //
                                     "Other.begin", "Other.frame", "Other.end"));
}

TEST_F(UIThreadMonitorTest, ObserverRemovedByAnotherDuringBegin_GetsNothing) {
  StartMonitor();
  RecordingObserver victim("V");
  ObserverRegistration victim_registration = monitor_->AddObserver(&victim);
  observer_.on_begin = [&] { victim_registration.Reset(); };
  handler_.Post([] {});
  RunPending();
  EXPECT_THAT(victim.log, IsEmpty());
  EXPECT_THAT(observer_.log, ElementsAre("O.begin", "O.end"));
}

TEST_F(UIThreadMonitorTest, ObserverDeclaringItsCallbacks_GetsOnlyThose) {
  StartMonitor();
  class FrameOnly : public LooperObserver {
   public:
    FrameOnly() : LooperObserver(kDoFrame) {}
    void DispatchBegin(const DispatchData&) override { log.push_back("begin"); }
    void DoFrame(const FrameData&) override { log.push_back("frame"); }
    void DispatchEnd(const DispatchData&) override { log.push_back("end"); }
    std::vector<std::string> log;
  } frame_only;
  class EndOnly : public LooperObserver {
   public:
    EndOnly() : LooperObserver(kDispatchEnd) {}
    void DispatchBegin(const DispatchData&) override { log.push_back("begin"); }
    void DoFrame(const FrameData&) override { log.push_back("frame"); }
    void DispatchEnd(const DispatchData&) override { log.push_back("end"); }
    std::vector<std::string> log;
  } end_only;
  ObserverRegistration r1 = monitor_->AddObserver(&frame_only);
  ObserverRegistration r2 = monitor_->AddObserver(&end_only);

  handler_.Post([] {});
  RunPending();
  PostFrame(Ms(1), Ms(1), Ms(1), Ms(1));
  FireVsyncAt(env_.Now());

  EXPECT_THAT(frame_only.log, ElementsAre("frame"));
  EXPECT_THAT(end_only.log, ElementsAre("end", "end"));
}

// --- CPU sampling ---------------------------------------------------------------

class UIThreadMonitorCpuTest : public UIThreadMonitorTest {
 protected:
  void StartWithSampler() {
    watchdog_ = env_.CreateBackgroundLooper("matrix-watchdog");
    UIThreadMonitor::Options options;
    options.sampler_looper = watchdog_;
    options.cpu_sample_period = Ms(50);
    StartMonitor(options);
  }
  // The watchdog thread gets to run now (it is concurrent with the looper in
  // real life; in the test environment we let it run mid-dispatch).
  void LetWatchdogRun() {
    while (watchdog_->PollOnce(absl::ZeroDuration()) == Looper::PollResult::kDispatched) {
    }
  }
  Looper* watchdog_ = nullptr;
};

TEST_F(UIThreadMonitorCpuTest, LongDispatchCaughtBySampler_CarriesCpuTimeSinceTheSample) {
  StartWithSampler();
  handler_.Post([this] {
    env_.AdvanceClock(Ms(60));
    env_.clock()->AdvanceThreadCpuTime(Ms(45));
    LetWatchdogRun();  // The sampler's 50 ms poll sees this dispatch running.
    env_.AdvanceClock(Ms(40));
    env_.clock()->AdvanceThreadCpuTime(Ms(30));
  });
  RunPending();

  ASSERT_THAT(observer_.ends, SizeIs(1));
  const DispatchData& d = observer_.ends[0];
  EXPECT_TRUE(d.cpu_sampled);
  EXPECT_EQ(d.cpu_time, Ms(30));
  EXPECT_EQ(d.cpu_wall, Ms(40));
  EXPECT_DOUBLE_EQ(d.CpuUsagePercent(), 75.0);
}

TEST_F(UIThreadMonitorCpuTest, ShortDispatch_CarriesNoCpuTime) {
  StartWithSampler();
  handler_.Post([this] {
    env_.AdvanceClock(Ms(10));
    env_.clock()->AdvanceThreadCpuTime(Ms(10));
    LetWatchdogRun();  // Its poll is not due yet.
  });
  RunPending();

  ASSERT_THAT(observer_.ends, SizeIs(1));
  EXPECT_FALSE(observer_.ends[0].cpu_sampled);
  EXPECT_EQ(observer_.ends[0].CpuUsagePercent(), -1);
}

TEST_F(UIThreadMonitorCpuTest, ShortDispatchCaughtInFlight_CarriesNoCpuTime) {
  StartWithSampler();
  env_.FastForwardBy(Ms(45));
  handler_.Post([this] {
    env_.AdvanceClock(Ms(8));
    LetWatchdogRun();  // The 50 ms poll lands inside this 10 ms dispatch...
    env_.AdvanceClock(Ms(2));
  });
  RunPending();
  ASSERT_THAT(observer_.ends, SizeIs(1));
  // ...but a dispatch shorter than the period is not worth a CPU-clock read.
  EXPECT_FALSE(observer_.ends[0].cpu_sampled);
}

TEST_F(UIThreadMonitorCpuTest, SampleOfOneDispatch_IsNotGivenToTheNext) {
  StartWithSampler();
  handler_.Post([this] {
    env_.AdvanceClock(Ms(60));
    LetWatchdogRun();
    env_.AdvanceClock(Ms(10));
  });
  handler_.Post([this] { env_.AdvanceClock(Ms(60)); });  // Long, but not caught.
  RunPending();

  ASSERT_THAT(observer_.ends, SizeIs(2));
  EXPECT_TRUE(observer_.ends[0].cpu_sampled);
  EXPECT_FALSE(observer_.ends[1].cpu_sampled);
}

TEST_F(UIThreadMonitorCpuTest, SamplerPollingAnIdleLooper_SamplesNothing) {
  StartWithSampler();
  env_.FastForwardBy(Ms(500));  // Ten polls, nothing running.
  handler_.Post([this] { env_.AdvanceClock(Ms(5)); });
  RunPending();
  ASSERT_THAT(observer_.ends, SizeIs(1));
  EXPECT_FALSE(observer_.ends[0].cpu_sampled);
}

TEST_F(UIThreadMonitorCpuTest, Stop_StopsTheSampler) {
  StartWithSampler();
  EXPECT_GT(env_.PendingMessageCount(), 0u);
  const size_t with_sampler = watchdog_->queue()->PendingCount();
  EXPECT_EQ(with_sampler, 1u);
  monitor_->Stop();
  EXPECT_EQ(watchdog_->queue()->PendingCount(), 0u);
}

// --- SnapshotFrame ---------------------------------------------------------------

TEST_F(UIThreadMonitorCpuTest, SnapshotFrame_FromAnotherThreadMidFrame_GivesCostsSoFar) {
  StartWithSampler();
  UIThreadMonitor::FrameSnapshot during;
  UIThreadMonitor::FrameSnapshot in_message;
  Handler watchdog_handler(watchdog_, "watchdog");
  Choreographer* c = env_.choreographer();
  c->PostCallback(Choreographer::kInput, [this] { env_.AdvanceClock(Ms(5)); });
  c->PostCallback(Choreographer::kAnimation, [this] { env_.AdvanceClock(Ms(7)); });
  c->PostCallback(Choreographer::kTraversal, [&] {
    env_.AdvanceClock(Ms(12));
    watchdog_handler.Post([&] { during = monitor_->SnapshotFrame(env_.Now()); });
    LetWatchdogRun();
    env_.AdvanceClock(Ms(8));
  });
  FireVsyncAt(env_.Now());
  const UIThreadMonitor::FrameSnapshot after = monitor_->SnapshotFrame(env_.Now());
  handler_.Post([&] {
    env_.AdvanceClock(Ms(3));
    in_message = monitor_->SnapshotFrame(env_.Now());
  });
  RunPending();

  EXPECT_TRUE(during.in_frame);
  EXPECT_EQ(during.phase_costs[0], Ms(5));
  EXPECT_EQ(during.phase_costs[1], Ms(7));
  EXPECT_EQ(during.phase_costs[2], Ms(12));
  EXPECT_EQ(during.phase_costs[3], absl::ZeroDuration());
  EXPECT_FALSE(after.in_frame);
  EXPECT_FALSE(in_message.in_frame);
  EXPECT_EQ(in_message.phase_costs[0], absl::ZeroDuration());
  ASSERT_THAT(observer_.frames, SizeIs(1));
  EXPECT_EQ(observer_.frames[0].traversal(), Ms(20));
}

}  // namespace
