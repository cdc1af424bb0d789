// Real-thread tests for FrameTracer's async listeners: delivery on a
// HandlerThread executor, and removal while a call runs on that thread.
// The looper side still runs in a TestEnvironment (fake clock); only the
// listener's executor is a real thread. Waits are generous (10 s) and end as
// soon as the condition holds.

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/executor.h"
#include "matrix/core/handler.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/frame_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::FrameData;
using ::matrix::FrameTracer;
using ::matrix::HandlerThread;
using ::matrix::IDoFrameListener;
using ::matrix::Looper;
using ::matrix::LooperExecutor;
using ::matrix::LooperMonitor;
using ::matrix::ObserverRegistration;
using ::matrix::UIThreadMonitor;

constexpr absl::Duration kGenerous = absl::Seconds(10);

mt::TestEnvironment::Options ManualVsync() {
  mt::TestEnvironment::Options options;
  options.auto_vsync = false;
  return options;
}

class FrameTracerRealTest : public ::testing::Test {
 protected:
  FrameTracerRealTest() : env_(ManualVsync()) {
    AppState::Get()->ResetForTesting();
    worker_ = env_.CreateBackgroundLooper("matrix-worker");
    looper_monitor_.Start();
    monitor_ = std::make_unique<UIThreadMonitor>(&looper_monitor_, env_.choreographer(),
                                                 UIThreadMonitor::Options{});
    monitor_->Start();
    FrameTracer::Options options;
    options.env.monitor = monitor_.get();
    options.env.worker_looper = worker_;
    options.fps_report = false;
    tracer_ = std::make_unique<FrameTracer>(std::move(options));
    tracer_->OnStartTrace();
    listener_thread_.Start();
    executor_ = std::make_unique<LooperExecutor>(listener_thread_.GetLooper());
  }
  ~FrameTracerRealTest() override {
    tracer_.reset();
    monitor_.reset();
  }

  // Draws a frame and lets the worker hand it to the executor.
  void DrawFrameAndDrain() {
    env_.choreographer()->PostCallback(Choreographer::kInput,
                                       [this] { env_.AdvanceClock(absl::Milliseconds(1)); });
    ASSERT_TRUE(env_.vsync()->Fire(env_.Now()));
    env_.FastForwardBy(absl::Milliseconds(100));
  }

  // Waits until the listener thread has run everything posted so far.
  void FlushListenerThread() {
    absl::Notification done;
    matrix::Handler handler(listener_thread_.GetLooper(), "flush");
    handler.Post([&] { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kGenerous));
  }

  mt::TestEnvironment env_;
  Looper* worker_ = nullptr;
  LooperMonitor looper_monitor_{env_.looper()};
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<FrameTracer> tracer_;
  HandlerThread listener_thread_{"frame-listener"};
  std::unique_ptr<LooperExecutor> executor_;
};

class ThreadRecordingListener : public IDoFrameListener {
 public:
  ThreadRecordingListener(matrix::Executor* executor, Looper* expected)
      : IDoFrameListener(executor), expected_(expected) {}
  void DoFrameAsync(const FrameData& frame) override {
    absl::MutexLock lock(&mu_);
    on_expected_thread_ &= Looper::MyLooper() == expected_;
    frame_numbers_.push_back(frame.frame_number);
    if (frame_numbers_.size() == 3) three_.Notify();
  }
  bool WaitForThree() { return three_.WaitForNotificationWithTimeout(kGenerous); }
  std::vector<int64_t> frame_numbers() {
    absl::MutexLock lock(&mu_);
    return frame_numbers_;
  }
  bool on_expected_thread() {
    absl::MutexLock lock(&mu_);
    return on_expected_thread_;
  }

 private:
  Looper* const expected_;
  absl::Mutex mu_;
  bool on_expected_thread_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<int64_t> frame_numbers_ ABSL_GUARDED_BY(mu_);
  absl::Notification three_;
};

TEST_F(FrameTracerRealTest, AsyncListenerOnHandlerThreadExecutor_RunsOnThatThreadInOrder) {
  ThreadRecordingListener listener(executor_.get(), listener_thread_.GetLooper());
  ObserverRegistration r = tracer_->AddListener(&listener);

  for (int i = 0; i < 3; ++i) DrawFrameAndDrain();

  ASSERT_TRUE(listener.WaitForThree());
  EXPECT_TRUE(listener.on_expected_thread());
  EXPECT_THAT(listener.frame_numbers(), ::testing::ElementsAre(1, 2, 3));
  EXPECT_NE(Looper::MyLooper(), listener_thread_.GetLooper());
}

// Blocks inside its first DoFrameAsync until released.
class BlockingListener : public IDoFrameListener {
 public:
  explicit BlockingListener(matrix::Executor* executor) : IDoFrameListener(executor) {}
  void DoFrameAsync(const FrameData&) override {
    calls.fetch_add(1);
    entered.Notify();
    release.WaitForNotificationWithTimeout(kGenerous);
    absl::SleepFor(absl::Milliseconds(20));  // Still inside when released.
    finished.store(true);
  }
  std::atomic<int> calls{0};
  std::atomic<bool> finished{false};
  absl::Notification entered;
  absl::Notification release;
};

TEST_F(FrameTracerRealTest, RemovalWhileACallRuns_WaitsForItAndPreventsMore) {
  BlockingListener listener(executor_.get());
  ObserverRegistration r = tracer_->AddListener(&listener);
  DrawFrameAndDrain();
  ASSERT_TRUE(listener.entered.WaitForNotificationWithTimeout(kGenerous));

  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(100));
    listener.release.Notify();
  });
  r.Reset();  // Must not return while DoFrameAsync still runs.
  EXPECT_TRUE(listener.finished.load());
  releaser.join();

  DrawFrameAndDrain();
  FlushListenerThread();
  EXPECT_EQ(listener.calls.load(), 1);
}

// Removes itself from inside its first call, on the listener thread.
class SelfRemovingListener : public IDoFrameListener {
 public:
  explicit SelfRemovingListener(matrix::Executor* executor) : IDoFrameListener(executor) {}
  void DoFrameAsync(const FrameData&) override {
    calls.fetch_add(1);
    registration->Reset();  // Must not deadlock on its own delivery.
    removed.Notify();
  }
  ObserverRegistration* registration = nullptr;
  std::atomic<int> calls{0};
  absl::Notification removed;
};

TEST_F(FrameTracerRealTest, ListenerRemovingItselfOnTheExecutorThread_DoesNotDeadlock) {
  SelfRemovingListener listener(executor_.get());
  ObserverRegistration r = tracer_->AddListener(&listener);
  listener.registration = &r;
  DrawFrameAndDrain();
  ASSERT_TRUE(listener.removed.WaitForNotificationWithTimeout(kGenerous));
  FlushListenerThread();
  EXPECT_FALSE(r.active());

  DrawFrameAndDrain();
  FlushListenerThread();
  EXPECT_EQ(listener.calls.load(), 1);
}

}  // namespace

namespace {

TEST(FrameTracerRealWorkerTest, Destructor_WaitsForADrainInProgressOnTheWorker) {
  // The worker is inside Drain() (building a report) when the looper thread
  // destroys the tracer: the destructor must wait, not free what the drain
  // still uses.
  matrix::testing::FakeTickClock clock;
  HandlerThread worker("matrix-worker");
  worker.Start();
  LooperMonitor loop(&clock);
  UIThreadMonitor monitor(&loop, nullptr, {});
  monitor.Start();

  absl::Notification in_report;
  std::atomic<bool> report_returned{false};
  FrameTracer::Options options;
  options.env.monitor = &monitor;
  options.env.worker_looper = worker.GetLooper();
  options.drain_period = absl::Milliseconds(1);
  options.time_slice = absl::Milliseconds(10);
  options.env.report = [&](matrix::Issue) {
    in_report.Notify();
    absl::SleepFor(absl::Milliseconds(100));
    report_returned.store(true);
  };
  auto tracer = std::make_unique<FrameTracer>(std::move(options));
  tracer->OnStartTrace();
  FrameData frame;  // One frame of 17 ms: more than the time slice.
  frame.is_vsync_frame = true;
  frame.intended_frame_time = clock.NowTicks();
  frame.start = frame.intended_frame_time;
  frame.end = frame.start + absl::Milliseconds(17);
  tracer->DoFrame(frame);
  ASSERT_TRUE(in_report.WaitForNotificationWithTimeout(kGenerous));

  tracer.reset();
  EXPECT_TRUE(report_returned.load());
}

}  // namespace
