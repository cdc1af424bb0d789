// AnrTracer with a Timeline, on the fake clock: ANR and LAG reports carry the
// looper thread's last seconds, with the hang as an unfinished (ANR) or
// finished (LAG) dispatch and the watchdog's detection instant.

#include <memory>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace matrix {
namespace {

using trace_test::FakeCapture;
using trace_test::IssueCollector;
using trace_test::ProcFixture;
using trace_test::RunLoopersFor;

constexpr absl::Duration kLag = absl::Seconds(2);
constexpr absl::Duration kAnr = absl::Seconds(5);

class AnrTimelineTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  AnrTimelineTest() : TracerRig(NoChoreographer()) {
    looper_monitor_ = std::make_unique<LooperMonitor>(env_.clock());
    looper_monitor_->Start();
    monitor_ = std::make_unique<UIThreadMonitor>(looper_monitor_.get(), nullptr,
                                                 UIThreadMonitor::Options());
    monitor_->Start();
    timeline_ = std::make_unique<Timeline>(
        TimelineOptions{.capacity = 64, .dispatches = &monitor_->heartbeat()});
    timeline_registration_ = monitor_->AddObserver(timeline_.get());
    AnrTracer::Options options;
    Wire(&options, monitor_.get());
    options.anr_threshold = kAnr;
    options.lag_threshold = kLag;
    options.env.timeline = {.timeline = timeline_.get(), .window = absl::Seconds(3)};
    anr_ = std::make_unique<AnrTracer>(std::move(options));
    anr_->OnStartTrace();
    env_.RunUntilIdle();
  }
  ~AnrTimelineTest() override {
    anr_.reset();
    timeline_registration_.Reset();
    monitor_.reset();
    looper_monitor_.reset();
  }
  // A dispatch of `d` on the looper thread while the watchdog and worker run.
  void Dispatch(const char* label, absl::Duration d) {
    looper_monitor_->DispatchBegin(label);
    RunLoopersFor(&env_, {watchdog_, worker_}, d);
    looper_monitor_->DispatchEnd();
  }
  void Idle(absl::Duration d) { RunLoopersFor(&env_, {watchdog_, worker_}, d); }

  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<Timeline> timeline_;
  ObserverRegistration timeline_registration_;
  std::unique_ptr<AnrTracer> anr_;
};


TEST_F(AnrTimelineTest, Anr_CarriesTheHangAndTheWindowBeforeItWithTheDetectionInstant) {
  Dispatch("old", absl::Milliseconds(10));  // Ends more than 3 s before the hang.
  Idle(absl::Seconds(4));
  Dispatch("click", absl::Milliseconds(30));
  Idle(absl::Milliseconds(100));
  const TimeTicks hang_begin = env_.Now();
  looper_monitor_->DispatchBegin("hang");
  RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(6));

  const std::vector<Issue> anrs = issues_.WithDetail(proto::ANR);
  ASSERT_EQ(anrs.size(), 1u);
  ASSERT_TRUE(anrs[0].proto().has_timeline());
  const proto::Timeline& t = anrs[0].proto().timeline();
  EXPECT_EQ(t.detected_by(), "ANR watchdog");
  // The hang up to the crossing (5 s) and the 3 s window before it.
  EXPECT_EQ(t.window_us(), 8000000);
  EXPECT_EQ(t.tid(), ThreadHandle::Current().tid());
  ASSERT_EQ(t.dispatches_size(), 2);  // "old" is older than 3 s before the hang.
  EXPECT_EQ(t.dispatches(0).name(), "click");
  EXPECT_EQ(t.dispatches(1).name(), "hang");
  EXPECT_TRUE(t.dispatches(1).unfinished());
  // The window ends at the detection, 5 s into the hang.
  const TimeTicks start = TimeTicks::FromNanoseconds(t.start_ns());
  EXPECT_EQ(start + absl::Microseconds(t.detected_at_us()), hang_begin + kAnr);
  EXPECT_EQ(t.detected_at_us(), t.window_us());
  EXPECT_EQ(t.dispatches(1).ts_us(), 3000000);  // The hang begins 3 s into the window.
  EXPECT_EQ(t.dispatches(1).dur_us(), 5000000);
  looper_monitor_->DispatchEnd();
}

TEST_F(AnrTimelineTest, Lag_IsTakenWhenTheDispatchEndsWithItFinished) {
  Dispatch("click", absl::Milliseconds(30));
  Idle(absl::Milliseconds(200));
  const TimeTicks lag_begin = env_.Now();
  Dispatch("slow", absl::Milliseconds(2500));
  Idle(absl::Milliseconds(10));

  const std::vector<Issue> lags = issues_.WithDetail(proto::LAG);
  ASSERT_EQ(lags.size(), 1u);
  ASSERT_TRUE(lags[0].proto().has_timeline());
  const proto::Timeline& t = lags[0].proto().timeline();
  EXPECT_EQ(t.detected_by(), "lag watchdog");
  ASSERT_EQ(t.dispatches_size(), 2);
  EXPECT_EQ(t.dispatches(0).name(), "click");
  EXPECT_EQ(t.dispatches(0).dur_us(), 30000);
  EXPECT_EQ(t.dispatches(1).name(), "slow");
  EXPECT_FALSE(t.dispatches(1).unfinished());
  EXPECT_EQ(t.dispatches(1).dur_us(), 2500000);
  EXPECT_EQ(t.dispatches(1).ts_us() - t.dispatches(0).ts_us(), 230000);
  ASSERT_GE(t.idle_size(), 1);
  EXPECT_EQ(t.idle(0).dur_us(), 200000);
  const TimeTicks start = TimeTicks::FromNanoseconds(t.start_ns());
  EXPECT_EQ(start + absl::Microseconds(t.detected_at_us()), lag_begin + kLag);
}

}  // namespace
}  // namespace matrix
