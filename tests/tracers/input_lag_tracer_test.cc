// InputLagTracer on the fake clock: input events stamped with fake times, the
// watchdog and worker as background loopers, and a FrameTracer receiving the
// latencies of handled events.

#include "matrix/trace/input_lag_tracer.h"

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
#include "matrix/trace/frame_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {
volatile int g_input_sink = 0;
__attribute__((noinline)) void HandleScroll() {
  g_input_sink = 41;
  asm volatile("" ::: "memory");
}
}  // namespace app

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using trace_test::FakeCapture;
using trace_test::IssueCollector;
using trace_test::ReturnAddressIn;

constexpr absl::Duration kThreshold = absl::Seconds(2);
constexpr absl::Duration kThrottle = absl::Seconds(4);

class InputLagTracerTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  InputLagTracerTest()
      : handler_(env_.looper()),
        looper_monitor_(env_.looper()),
        monitor_(&looper_monitor_, env_.choreographer(), UIThreadMonitor::Options()) {
    capture_.SetFrames({ReturnAddressIn(&app::HandleScroll), ReturnAddressIn(&Looper::Loop)});
    looper_monitor_.Start();
    monitor_.Start();
    FrameTracer::Options frame_options;
    frame_options.env.monitor = &monitor_;
    frame_options.env.worker_looper = worker_;
    frame_options.env.report = frame_issues_.callback();
    frame_tracer_ = std::make_unique<FrameTracer>(std::move(frame_options));
    frame_tracer_->OnStartTrace();
    InputLagTracer::Options options;
    Wire(&options, &monitor_);
    options.threshold = kThreshold;
    options.throttle = kThrottle;
    options.frame_tracer = frame_tracer_.get();
    tracer_ = std::make_unique<InputLagTracer>(std::move(options));
    tracer_->OnStartTrace();
    env_.RunUntilIdle();
  }
  ~InputLagTracerTest() override {
    tracer_.reset();
    frame_tracer_.reset();
  }

  Handler handler_;
  LooperMonitor looper_monitor_;
  UIThreadMonitor monitor_;
  IssueCollector frame_issues_;
  std::unique_ptr<FrameTracer> frame_tracer_;
  std::unique_ptr<InputLagTracer> tracer_;
};


TEST_F(InputLagTracerTest, EventNotHandledWithinThreshold_ReportsLagTouchWithTheStack) {
  AppState::Get()->OnSceneShown("Map");
  env_.FastForwardBy(absl::Milliseconds(500));  // Off the watchdog's grid.
  const TimeTicks event_time = env_.Now();
  const uint64_t id = tracer_->OnInputEventReceived(event_time, "mouse-down");
  ASSERT_NE(id, 0u);
  env_.FastForwardBy(kThreshold - absl::Nanoseconds(1));
  EXPECT_THAT(issues_.all(), IsEmpty());
  env_.FastForwardBy(absl::Nanoseconds(1));

  EXPECT_THAT(capture_.times(), ElementsAre(event_time + kThreshold));
  EXPECT_THAT(capture_.tids(), ElementsAre(ThreadHandle::Current().tid()));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(tracer_->lag_count(), 1);
  const Issue& issue = issues_.all()[0];
  EXPECT_EQ(issue.tag(), kTagEvilMethod);
  const proto::AnrReport& report = issue.proto().anr();
  EXPECT_EQ(report.detail(), proto::LAG_TOUCH);
  EXPECT_EQ(report.input_event(), "mouse-down");
  EXPECT_DOUBLE_EQ(report.cost_ms(), 2000);
  EXPECT_DOUBLE_EQ(report.detection_delay_ms(), 0);
  EXPECT_EQ(report.scene(), "Map");
  ASSERT_GE(report.thread_stack().frames_size(), 1);
  EXPECT_EQ(report.thread_stack().frames(0).function(), "app::HandleScroll()");
  EXPECT_EQ(report.stack_key(), "app::HandleScroll()");
  EXPECT_EQ(issue.key(), report.stack_key());

  // Each event is judged once: still unhandled later, no second report.
  env_.FastForwardBy(absl::Seconds(20));
  EXPECT_THAT(issues_.all(), SizeIs(1));
  tracer_->OnInputEventHandled(id);
}

TEST_F(InputLagTracerTest, EventHandledInTime_NoReport) {
  const uint64_t id = tracer_->OnInputEventReceived(env_.Now(), "key");
  env_.FastForwardBy(kThreshold - absl::Milliseconds(1));
  tracer_->OnInputEventHandled(id);
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
}

TEST_F(InputLagTracerTest, Reports_AreThrottledToOnePerFourSeconds) {
  const TimeTicks t0 = env_.Now();
  tracer_->OnInputEventReceived(t0 + absl::Milliseconds(100), "a");  // Due at 2.1 s.
  env_.FastForwardBy(absl::Milliseconds(600));
  tracer_->OnInputEventReceived(env_.Now(), "b");  // Due at 2.6 s: throttled.
  env_.FastForwardBy(absl::Seconds(3));
  EXPECT_EQ(tracer_->lag_count(), 1);
  EXPECT_EQ(tracer_->throttled_count(), 1);
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().input_event(), "a");

  // Due at exactly 4 s after the first report (6.1 s): reported.
  tracer_->OnInputEventReceived(t0 + absl::Milliseconds(4100), "c");
  env_.FastForwardBy(absl::Seconds(5));
  EXPECT_EQ(tracer_->lag_count(), 2);
  EXPECT_EQ(tracer_->throttled_count(), 1);
  ASSERT_THAT(issues_.all(), SizeIs(2));
  EXPECT_EQ(issues_.all()[1].proto().anr().input_event(), "c");
  EXPECT_EQ(capture_.times().back(), t0 + absl::Milliseconds(6100));
}

TEST_F(InputLagTracerTest, OldEventDeliveredLate_WakesTheWatchdogEarly) {
  env_.FastForwardBy(absl::Milliseconds(4100));  // The next check is at 6 s.
  // Happened 1.5 s ago: due in 0.5 s, long before the watchdog's next check.
  const TimeTicks event_time = env_.Now() - absl::Milliseconds(1500);
  tracer_->OnInputEventReceived(event_time, "touch");
  env_.FastForwardBy(absl::Milliseconds(500));
  EXPECT_THAT(capture_.times(), ElementsAre(event_time + kThreshold));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().detection_delay_ms(), 0);
}

TEST_F(InputLagTracerTest, EventAlreadyOverdueOnArrival_ReportedAtOnce) {
  env_.FastForwardBy(absl::Milliseconds(5100));
  const TimeTicks now = env_.Now();
  tracer_->OnInputEventReceived(now - absl::Seconds(3), "stale");
  env_.RunUntilIdle();
  EXPECT_THAT(capture_.times(), ElementsAre(now));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cost_ms(), 3000);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().detection_delay_ms(), 1000);
}

TEST_F(InputLagTracerTest, HandledEvents_FeedInputLatencyIntoTheFpsReport) {
  AppState::Get()->OnSceneShown("Gallery");
  const absl::Duration latencies[] = {absl::Milliseconds(30), absl::Milliseconds(10),
                                      absl::Milliseconds(90), absl::Milliseconds(50)};
  for (absl::Duration latency : latencies) {
    // The event happened `latency` ago minus the 5 ms its handler takes.
    const TimeTicks event_time = env_.Now() - latency + absl::Milliseconds(5);
    tracer_->PostInputEvent(&handler_, event_time, "tap",
                            [this] { env_.AdvanceClock(absl::Milliseconds(5)); });
    env_.RunUntilIdle();
    env_.FastForwardBy(absl::Milliseconds(100));
  }
  // A frame in the scene, then the report.
  env_.choreographer()->PostCallback(Choreographer::kTraversal, [] {});
  env_.FastForwardBy(absl::Milliseconds(50));
  frame_tracer_->FlushReports();
  env_.RunUntilIdle();

  std::vector<Issue> fps = frame_issues_.WithTag(kTagFps);
  ASSERT_THAT(fps, SizeIs(1));
  const proto::FrameReport& report = fps[0].proto().frame();
  EXPECT_EQ(report.scene(), "Gallery");
  EXPECT_EQ(report.input_events(), 4);
  EXPECT_DOUBLE_EQ(report.input_latency_median_ms(), 40);
  EXPECT_DOUBLE_EQ(report.input_latency_worst_ms(), 90);
  EXPECT_THAT(issues_.all(), IsEmpty());
}

TEST_F(InputLagTracerTest, MoreThanMaxPending_AreCountedAsUntracked) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < InputLagTracer::kMaxPending; ++i) {
    ids.push_back(tracer_->OnInputEventReceived(env_.Now(), "flood"));
    ASSERT_NE(ids.back(), 0u) << i;
  }
  EXPECT_EQ(tracer_->OnInputEventReceived(env_.Now(), "one too many"), 0u);
  EXPECT_EQ(tracer_->untracked_events(), 1);
  tracer_->OnInputEventHandled(0);  // Untracked ids are ignored.

  // A handled event frees its slot.
  tracer_->OnInputEventHandled(ids[7]);
  EXPECT_NE(tracer_->OnInputEventReceived(env_.Now(), "fits again"), 0u);
  EXPECT_EQ(tracer_->untracked_events(), 1);

  // All of them overdue at once: one report, not 64.
  env_.FastForwardBy(absl::Seconds(3));
  EXPECT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(tracer_->lag_count(), 1);
}

TEST_F(InputLagTracerTest, Closed_ReportsNothing) {
  tracer_->OnCloseTrace();
  tracer_->OnInputEventReceived(env_.Now() - absl::Seconds(5), "late");
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
}

}  // namespace
}  // namespace matrix
