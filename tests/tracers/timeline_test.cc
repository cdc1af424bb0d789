// Tests for Timeline (the flight recorder) with the fake clock and the test
// looper: what a dispatch and a frame record, the ring wrapping, the window
// cut, an unfinished dispatch, idle gaps, traced calls taken from the method
// tracer, and FillTimeline's proto.

#include "matrix/trace/timeline.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/symbolizer.h"
#include "matrix/trace/ui_thread_monitor.h"

extern "C" void __cyg_profile_func_enter(void* this_fn, void* call_site);
extern "C" void __cyg_profile_func_exit(void* this_fn, void* call_site);

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::DispatchHeartbeat;
using ::matrix::DispatchInfo;
using ::matrix::FrameData;
using ::matrix::Handler;
using ::matrix::LooperMonitor;
using ::matrix::ObserverRegistration;
using ::matrix::RefreshRate;
using ::matrix::TimeTicks;
using ::matrix::Timeline;
using ::matrix::TimelineEvent;
using ::matrix::TimelineSnapshot;
using ::matrix::UIThreadMonitor;
using ::testing::SizeIs;

absl::Duration Ms(double ms) { return absl::Milliseconds(ms); }

TimeTicks At(double ms) { return TimeTicks() + absl::Seconds(100) + Ms(ms); }

// Writes a dispatch into the heartbeat a Timeline reads, as the
// UIThreadMonitor does.
void Dispatch(DispatchHeartbeat* hb, double begin_ms, double end_ms, const char* label = "work") {
  DispatchInfo info;
  info.label = label;
  hb->Begin(At(begin_ms), info);
  hb->End(At(end_ms));
}

TEST(TimelineTest, FrameRing_IsHalfTheCapacityAPowerOfTwoWithinBounds) {
  EXPECT_EQ(Timeline({.capacity = 1000}).capacity(), 256u);
  EXPECT_EQ(Timeline({.capacity = 1}).capacity(), matrix::TimelineOptions::kMinCapacity);
  EXPECT_EQ(Timeline({.capacity = 4096}).capacity(), 2048u);
  // The dispatches are the heartbeat's: its ring rounds the same way.
  EXPECT_EQ(DispatchHeartbeat(1000).capacity(), 512u);
  EXPECT_EQ(DispatchHeartbeat(1).capacity(), DispatchHeartbeat::kMinCapacity);
}

TEST(TimelineTest, Dispatches_AreCopiedOldestFirstWithTheirTimesAndLabel) {
  DispatchHeartbeat hb(64);
  Timeline t({.capacity = 64, .dispatches = &hb});
  Dispatch(&hb, 0, 10, "a");
  Dispatch(&hb, 20, 25, "b");
  const TimelineSnapshot s = t.Snapshot(At(30), absl::Seconds(5));
  ASSERT_THAT(s.events, SizeIs(2));
  EXPECT_EQ(s.events[0].begin, At(0));
  EXPECT_EQ(s.events[0].end, At(10));
  EXPECT_STREQ(s.events[0].label, "a");
  EXPECT_EQ(s.events[0].DispatchName(), "a");
  EXPECT_EQ(s.events[1].begin, At(20));
  EXPECT_EQ(s.events[1].end, At(25));
  EXPECT_EQ(s.lost, 0u);
  EXPECT_FALSE(s.ring_wrapped);
}

TEST(TimelineTest, Wrap_KeepsTheNewestCapacityEventsAndSaysTheWindowWasCut) {
  DispatchHeartbeat hb(16);
  Timeline t({.capacity = 16, .dispatches = &hb});
  for (int i = 0; i < 40; ++i) Dispatch(&hb, i * 10, i * 10 + 5);
  EXPECT_EQ(t.event_count(), 40u);
  const TimelineSnapshot s = t.Snapshot(At(400), absl::Seconds(5));
  ASSERT_THAT(s.events, SizeIs(16));
  EXPECT_EQ(s.events.front().number, 25u);  // Dispatch numbers start at 1.
  EXPECT_EQ(s.events.front().begin, At(240));
  EXPECT_EQ(s.events.back().begin, At(390));
  for (size_t i = 1; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i].number, s.events[i - 1].number + 1);
  }
  // The 5 s window reaches further back than the ring holds.
  EXPECT_TRUE(s.ring_wrapped);
  EXPECT_EQ(s.lost, 0u);
}

TEST(TimelineTest, Window_DropsEventsThatEndedBeforeItAndKeepsOverlappingOnes) {
  DispatchHeartbeat hb(64);
  Timeline t({.capacity = 64, .dispatches = &hb});
  Dispatch(&hb, 0, 100);     // Ends before the window [900, 1900].
  Dispatch(&hb, 850, 950);   // Overlaps its start.
  Dispatch(&hb, 1000, 1100);
  Dispatch(&hb, 2000, 2100);  // After the snapshot instant.
  const TimelineSnapshot s = t.Snapshot(At(1900), absl::Seconds(1));
  ASSERT_THAT(s.events, SizeIs(2));
  EXPECT_EQ(s.events[0].begin, At(850));
  EXPECT_EQ(s.events[1].begin, At(1000));
  EXPECT_FALSE(s.ring_wrapped);
  EXPECT_EQ(s.begin, At(900));
  EXPECT_EQ(s.end, At(1900));
}

TEST(TimelineTest, RunningDispatch_IsCopiedUnfinishedAndExportedToTheSnapshotEnd) {
  DispatchHeartbeat hb(64);
  Timeline t({.capacity = 64, .dispatches = &hb});
  Dispatch(&hb, 0, 10);
  DispatchInfo info;
  info.label = "hang";
  hb.Begin(At(20), info);  // No end yet: the looper is stuck.
  const TimelineSnapshot s = t.Snapshot(At(5020), absl::Seconds(6), At(5010));
  ASSERT_THAT(s.events, SizeIs(2));
  EXPECT_FALSE(s.events[1].finished());

  matrix::proto::Timeline proto;
  matrix::FillTimeline(s, "ANR watchdog", &proto);
  // The window starts 980 ms before the first dispatch.
  EXPECT_EQ(proto.window_us(), 6000000);
  EXPECT_EQ(proto.detected_at_us(), 5990000);
  EXPECT_EQ(proto.detected_by(), "ANR watchdog");
  ASSERT_EQ(proto.dispatches_size(), 2);
  EXPECT_EQ(proto.dispatches(0).ts_us(), 980000);
  EXPECT_EQ(proto.dispatches(0).dur_us(), 10000);
  EXPECT_FALSE(proto.dispatches(0).unfinished());
  EXPECT_EQ(proto.dispatches(1).name(), "hang");
  EXPECT_EQ(proto.dispatches(1).callback(), "hang");
  EXPECT_EQ(proto.dispatches(1).ts_us(), 1000000);
  EXPECT_EQ(proto.dispatches(1).dur_us(), 5000000);
  EXPECT_TRUE(proto.dispatches(1).unfinished());
  // The 10 ms gap between them was idle; nothing after the running one.
  ASSERT_EQ(proto.idle_size(), 1);
  EXPECT_EQ(proto.idle(0).ts_us(), 990000);
  EXPECT_EQ(proto.idle(0).dur_us(), 10000);

  // Once it ends, a later snapshot has its end.
  hb.End(At(6000));
  const TimelineSnapshot after = t.Snapshot(At(6000), absl::Seconds(6));
  ASSERT_THAT(after.events, SizeIs(2));
  EXPECT_EQ(after.events[1].end, At(6000));
}

TEST(TimelineTest, IdleGapsShorterThanAMillisecondAreNotExported) {
  DispatchHeartbeat hb(64);
  Timeline t({.capacity = 64, .dispatches = &hb});
  Dispatch(&hb, 0, 10);
  Dispatch(&hb, 10.5, 20);
  Dispatch(&hb, 30, 40);
  matrix::proto::Timeline proto;
  matrix::FillTimeline(t.Snapshot(At(45), Ms(100)), "test", &proto);
  ASSERT_EQ(proto.idle_size(), 2);  // 20..30 and the trailing 40..45.
  EXPECT_EQ(proto.idle(0).dur_us(), 10000);
  EXPECT_EQ(proto.idle(1).dur_us(), 5000);
}

class TimelineLooperTest : public ::testing::Test {
 protected:
  TimelineLooperTest() : env_(Options()) { AppState::Get()->ResetForTesting(); }
  static mt::TestEnvironment::Options Options() {
    mt::TestEnvironment::Options options;
    options.auto_vsync = false;
    return options;
  }
  void Start(const matrix::MethodTracer* tracer = nullptr,
             matrix::MethodTracer* monitor_tracer = nullptr) {
    looper_monitor_.Start();
    UIThreadMonitor::Options options;
    options.method_tracer = monitor_tracer;
    monitor_ = std::make_unique<UIThreadMonitor>(&looper_monitor_, env_.choreographer(), options);
    monitor_->Start();
    timeline_ = std::make_unique<Timeline>(matrix::TimelineOptions{
        .capacity = 256, .dispatches = &monitor_->heartbeat(), .method_tracer = tracer});
    registration_ = monitor_->AddObserver(timeline_.get());
  }
  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  mt::TestEnvironment env_;
  Handler handler_{env_.looper(), "app::TimelineHandler"};
  LooperMonitor looper_monitor_{env_.looper()};
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<Timeline> timeline_;
  ObserverRegistration registration_;
};

TEST_F(TimelineLooperTest, Message_IsNamedByWhereItWasPostedAndItsHandler) {
  Start();
  const TimeTicks t0 = env_.Now();
  handler_.Post([this] { env_.AdvanceClock(Ms(12)); });
  RunPending();
  const TimelineSnapshot s = timeline_->Snapshot(env_.Now(), absl::Seconds(1));
  ASSERT_THAT(s.events, SizeIs(1));
  const TimelineEvent& e = s.events[0];
  EXPECT_EQ(e.begin, t0);
  EXPECT_EQ(e.end, t0 + Ms(12));
  ASSERT_NE(e.target_name, nullptr);
  EXPECT_EQ(*e.target_name, "app::TimelineHandler");
  EXPECT_TRUE(e.has_callback);
  EXPECT_THAT(e.DispatchName(), ::testing::HasSubstr("timeline_test.cc:"));

  matrix::proto::Timeline proto;
  matrix::FillTimeline(s, "test", &proto);
  ASSERT_EQ(proto.dispatches_size(), 1);
  EXPECT_EQ(proto.dispatches(0).target(), "app::TimelineHandler");
  EXPECT_EQ(proto.dispatches(0).callback(), e.DispatchName());
}

TEST_F(TimelineLooperTest, Frame_RecordsItsPhasesAndDroppedVsyncs) {
  Start();
  Choreographer* c = env_.choreographer();
  c->PostCallback(Choreographer::kInput, [this] { env_.AdvanceClock(Ms(2)); });
  c->PostCallback(Choreographer::kAnimation, [this] { env_.AdvanceClock(Ms(3)); });
  c->PostCallback(Choreographer::kTraversal, [this] { env_.AdvanceClock(Ms(40)); });
  const TimeTicks vsync = env_.Now();
  ASSERT_TRUE(env_.vsync()->Fire(vsync));
  RunPending();

  const TimelineSnapshot s = timeline_->Snapshot(env_.Now(), absl::Seconds(1));
  ASSERT_THAT(s.events, SizeIs(2));  // The frame's dispatch, then the frame.
  EXPECT_EQ(s.events[0].kind, TimelineEvent::Kind::kDispatch);
  const TimelineEvent& f = s.events[1];
  ASSERT_EQ(f.kind, TimelineEvent::Kind::kFrame);
  EXPECT_EQ(f.begin, vsync);
  EXPECT_EQ(f.end, vsync + Ms(45));
  EXPECT_EQ(f.intended_vsync, vsync);
  EXPECT_EQ(f.frame_number, 1);
  EXPECT_EQ(f.phases[0], Ms(2));
  EXPECT_EQ(f.phases[1], Ms(3));
  EXPECT_EQ(f.phases[2], Ms(40));
  // 45 ms at 60 Hz: two whole intervals missed.
  EXPECT_EQ(f.dropped_frames, 2);

  matrix::proto::Timeline proto;
  matrix::FillTimeline(s, "test", &proto);
  ASSERT_EQ(proto.frames_size(), 1);
  EXPECT_EQ(proto.frames(0).name(), "frame 1");
  EXPECT_EQ(proto.frames(0).dur_us(), 45000);
  EXPECT_EQ(proto.frames(0).traversal_us(), 40000);
  EXPECT_EQ(proto.frames(0).dropped_frames(), 2);
}

void* Fn(uintptr_t address) { return reinterpret_cast<void*>(address); }

TEST_F(TimelineLooperTest, TracedCalls_ComeFromTheMethodTracerWithTheirNesting) {
  matrix::MethodTracer::Options options;
  options.buffer_bytes = 1 << 16;
  options.tick_period = absl::ZeroDuration();  // The test moves time.
  options.clock = env_.clock();
  std::unique_ptr<matrix::MethodTracer> tracer = matrix::MethodTracer::Start(options);
  constexpr uintptr_t kOuter = 0x7f0000001000;
  constexpr uintptr_t kInner = 0x7f0000002000;
  matrix::Symbolizer::Get()->RegisterName(kOuter, "app::Outer()");
  matrix::Symbolizer::Get()->RegisterName(kInner, "app::Inner()");
  Start(tracer.get(), tracer.get());
  const TimeTicks t0 = env_.Now();
  handler_.Post([&] {
    auto step = [&](absl::Duration d) {
      env_.AdvanceClock(d);
      tracer->UpdateTime(env_.Now());
    };
    step(Ms(1));
    __cyg_profile_func_enter(Fn(kOuter), nullptr);
    step(Ms(2));
    __cyg_profile_func_enter(Fn(kInner), nullptr);
    step(Ms(30));
    __cyg_profile_func_exit(Fn(kInner), nullptr);
    step(Ms(4));
    __cyg_profile_func_exit(Fn(kOuter), nullptr);
    step(Ms(1));
  });
  RunPending();

  matrix::proto::Timeline proto;
  matrix::FillTimeline(timeline_->Snapshot(env_.Now(), Ms(100)), "test", &proto);
  ASSERT_EQ(proto.dispatches_size(), 1);
  const int64_t begin_us = proto.dispatches(0).ts_us();
  EXPECT_EQ(proto.dispatches(0).dur_us(), 38000);
  EXPECT_EQ(begin_us, absl::ToInt64Microseconds(t0 - (env_.Now() - Ms(100))));
  ASSERT_EQ(proto.calls_size(), 2);
  // Record times are in 1.024 us units: allow 2 us.
  EXPECT_EQ(proto.calls(0).name(), "app::Outer()");
  EXPECT_EQ(proto.calls(0).depth(), 0);
  EXPECT_NEAR(proto.calls(0).ts_us() - begin_us, 1000, 2);
  EXPECT_NEAR(proto.calls(0).dur_us(), 36000, 2);
  EXPECT_EQ(proto.calls(1).name(), "app::Inner()");
  EXPECT_EQ(proto.calls(1).depth(), 1);
  EXPECT_NEAR(proto.calls(1).ts_us() - begin_us, 3000, 2);
  EXPECT_NEAR(proto.calls(1).dur_us(), 30000, 2);
  EXPECT_FALSE(proto.calls_truncated());
  registration_.Reset();
  monitor_.reset();
}

}  // namespace
