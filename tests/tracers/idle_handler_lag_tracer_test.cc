// IdleHandlerLagTracer on the fake clock: a real IdleHandler on the main
// looper that "works" by advancing the clock while letting the watchdog and
// the worker (background loopers) run, as they would on their own threads.

#include "matrix/trace/idle_handler_lag_tracer.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {

volatile int g_idle_sink = 0;
__attribute__((noinline)) void CompactCache() {
  g_idle_sink = 31;
  asm volatile("" ::: "memory");
}

// An idle handler that runs for `duration` each time it is called.
class CacheCompactor : public matrix::IdleHandler {
 public:
  CacheCompactor(matrix::testing::TestEnvironment* env, matrix::Looper* watchdog,
                 matrix::Looper* worker)
      : env_(env), watchdog_(watchdog), worker_(worker) {}
  void set_duration(absl::Duration d) { duration_ = d; }
  int runs() const { return runs_; }
  matrix::TimeTicks last_begin() const { return last_begin_; }

  bool QueueIdle() override {
    ++runs_;
    last_begin_ = env_->Now();
    matrix::trace_test::RunLoopersFor(env_, {watchdog_, worker_}, duration_);
    return true;
  }

 private:
  matrix::testing::TestEnvironment* const env_;
  matrix::Looper* const watchdog_;
  matrix::Looper* const worker_;
  absl::Duration duration_;
  int runs_ = 0;
  matrix::TimeTicks last_begin_;
};

// The same, with a name of its own for reports.
class NamedCompactor : public CacheCompactor {
 public:
  using CacheCompactor::CacheCompactor;
  std::string Name() const override { return "thumbnail-cache compaction"; }
};

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

class IdleHandlerLagTracerTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  IdleHandlerLagTracerTest()
      : TracerRig(NoChoreographer()),
        handler_(env_.looper()),
        looper_monitor_(env_.looper()),
        monitor_(&looper_monitor_, nullptr, UIThreadMonitor::Options()),
        compactor_(&env_, watchdog_, worker_) {
    capture_.SetFrames({ReturnAddressIn(&app::CompactCache), ReturnAddressIn(&Looper::Loop)});
    looper_monitor_.Start();
    monitor_.Start();
    IdleHandlerLagTracer::Options options;
    Wire(&options, &monitor_);
    options.looper = env_.looper();
    options.threshold = kThreshold;
    tracer_ = std::make_unique<IdleHandlerLagTracer>(std::move(options));
    tracer_->OnStartTrace();
    env_.RunUntilIdle();
  }
  ~IdleHandlerLagTracerTest() override {
    env_.looper()->queue()->RemoveIdleHandler(&compactor_);
    tracer_.reset();
  }

  // Makes the looper go idle once (a message, then nothing due): the idle
  // handlers run.
  void GoIdleOnce() {
    handler_.Post([] {});
    env_.RunUntilIdle();
  }

  Handler handler_;
  LooperMonitor looper_monitor_;
  UIThreadMonitor monitor_;
  app::CacheCompactor compactor_;
  std::unique_ptr<IdleHandlerLagTracer> tracer_;
};


TEST_F(IdleHandlerLagTracerTest, SlowIdleHandler_ReportedOnceWithTheStackAtTheCrossing) {
  AppState::Get()->OnSceneShown("Feed");
  env_.FastForwardBy(absl::Milliseconds(700));  // Off the watchdog's idle grid.
  compactor_.set_duration(absl::Seconds(9));
  env_.looper()->queue()->AddIdleHandler(&compactor_);
  GoIdleOnce();
  ASSERT_EQ(compactor_.runs(), 1);
  const TimeTicks begin = compactor_.last_begin();

  // Captured exactly at begin + threshold, once, although it ran for 9 s.
  EXPECT_THAT(capture_.times(), ElementsAre(begin + kThreshold));
  EXPECT_THAT(capture_.tids(), ElementsAre(ThreadHandle::Current().tid()));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(tracer_->lag_count(), 1);
  const Issue& issue = issues_.all()[0];
  EXPECT_EQ(issue.tag(), kTagEvilMethod);
  ASSERT_TRUE(issue.proto().has_anr());
  const proto::AnrReport& report = issue.proto().anr();
  EXPECT_EQ(report.detail(), proto::LAG_IDLE_HANDLER);
  EXPECT_EQ(report.idle_handler(), "app::CacheCompactor");
  EXPECT_DOUBLE_EQ(report.cost_ms(), 2000);
  EXPECT_DOUBLE_EQ(report.detection_delay_ms(), 0);
  EXPECT_DOUBLE_EQ(report.thread_stack().captured_at_ms(), 2000);
  ASSERT_GE(report.thread_stack().frames_size(), 1);
  EXPECT_EQ(report.thread_stack().frames(0).function(), "app::CompactCache()");
  EXPECT_EQ(report.stack_key(), "app::CompactCache()");
  EXPECT_EQ(issue.key(), "app::CompactCache()");
  EXPECT_EQ(report.scene(), "Feed");
  EXPECT_TRUE(report.is_process_foreground());

  // Idle for a while: nothing more.
  env_.FastForwardBy(absl::Seconds(20));
  EXPECT_THAT(issues_.all(), SizeIs(1));
}

TEST_F(IdleHandlerLagTracerTest, IdleHandlerWithItsOwnName_ReportedByThatName) {
  app::NamedCompactor named(&env_, watchdog_, worker_);
  named.set_duration(absl::Seconds(3));
  env_.looper()->queue()->AddIdleHandler(&named);
  GoIdleOnce();
  env_.looper()->queue()->RemoveIdleHandler(&named);
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().idle_handler(), "thumbnail-cache compaction");
}

TEST_F(IdleHandlerLagTracerTest, EachSlowRunIsReported) {
  compactor_.set_duration(absl::Seconds(3));
  env_.looper()->queue()->AddIdleHandler(&compactor_);
  GoIdleOnce();
  env_.FastForwardBy(absl::Seconds(1));
  GoIdleOnce();
  ASSERT_EQ(compactor_.runs(), 2);
  EXPECT_THAT(issues_.WithDetail(proto::LAG_IDLE_HANDLER), SizeIs(2));
  EXPECT_EQ(capture_.times().back(), compactor_.last_begin() + kThreshold);
}

TEST_F(IdleHandlerLagTracerTest, FastIdleHandler_ReportsNothing) {
  compactor_.set_duration(kThreshold - absl::Nanoseconds(1));
  env_.looper()->queue()->AddIdleHandler(&compactor_);
  for (int i = 0; i < 5; ++i) {
    GoIdleOnce();
    env_.FastForwardBy(absl::Milliseconds(300));
  }
  EXPECT_EQ(compactor_.runs(), 5);
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
}

TEST_F(IdleHandlerLagTracerTest, SlowMessage_IsNotAnIdleHandlerLag) {
  handler_.Post([this] {
    trace_test::RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(5));
  });
  env_.RunUntilIdle();
  EXPECT_THAT(issues_.all(), IsEmpty());
}

TEST_F(IdleHandlerLagTracerTest, Closed_ReportsNothing) {
  tracer_->OnCloseTrace();
  compactor_.set_duration(absl::Seconds(5));
  env_.looper()->queue()->AddIdleHandler(&compactor_);
  GoIdleOnce();
  env_.FastForwardBy(absl::Seconds(5));
  EXPECT_THAT(issues_.all(), IsEmpty());
}

}  // namespace
}  // namespace matrix
