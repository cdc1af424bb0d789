// matrix::uv on private libuv loops, timed with a fake clock (UV_RUN_NOWAIT,
// so no wait is idle time): a dispatch runs from the poll phase to the next
// prepare phase and holds I/O callbacks, timers, idle and check callbacks;
// the handles never keep the loop alive; detach closes them; scene; errors.
// And AnrTracer through the adapter (fake idle time, fake clock, the watchdog
// on a TestEnvironment looper): a hang in an I/O callback is watched live.

#include "matrix/uv/uv_monitor.h"

#include <uv.h>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace {

using matrix::TimeTicks;

using RecordingListener = matrix::trace_test::RecordingDispatchListener;

matrix::uv::Options NoScene() {
  matrix::uv::Options options;
  options.name_scene = false;
  return options;
}

class UvMonitorTest : public ::testing::Test {
 protected:
  UvMonitorTest() : monitor_(&clock_) {
    uv_loop_init(&loop_);
    monitor_.Start();
    registration_ = monitor_.AddListener(&listener_);
  }
  ~UvMonitorTest() override {
    uv_run(&loop_, UV_RUN_NOWAIT);  // Finishes closing handles.
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  // A one-shot timer (due now) whose callback advances the fake clock by
  // `step`; uv_timer_again() re-arms it for the next turn.
  uv_timer_t* AddTimer(absl::Duration step) {
    timers_.push_back(std::make_unique<Timer>(Timer{{}, &clock_, step}));
    Timer* timer = timers_.back().get();
    uv_timer_init(&loop_, &timer->handle);
    timer->handle.data = timer;
    uv_timer_start(&timer->handle, &TimerStep, 0, 0);
    return &timer->handle;
  }
  static void TimerStep(uv_timer_t* handle) {
    auto* t = static_cast<Timer*>(handle->data);
    t->clock->Advance(t->step);
  }

  struct Timer {
    uv_timer_t handle;
    matrix::testing::FakeTickClock* clock;
    absl::Duration step;
  };
  matrix::testing::FakeTickClock clock_;
  uv_loop_t loop_;
  matrix::LooperMonitor monitor_;
  RecordingListener listener_;
  matrix::ObserverRegistration registration_;
  std::vector<std::unique_ptr<Timer>> timers_;
};

// Closes a handle and lets libuv finish (before a stack handle goes away).
void CloseHandle(uv_handle_t* handle) {
  uv_close(handle, nullptr);
  uv_run(handle->loop, UV_RUN_NOWAIT);
}

TEST_F(UvMonitorTest, TimersRunInsideTheDispatchThatBeganAtThePreviousPoll) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  uv_timer_t* timer = AddTimer(absl::Milliseconds(10));

  // Turn 1: the timer runs before the first wait: not monitored yet; the
  // dispatch begins after the poll phase.
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE((*uv)->in_dispatch());
  EXPECT_TRUE(listener_.durations.empty());
  clock_.Advance(absl::Milliseconds(2));  // Between uv_run calls: still the dispatch.
  uv_timer_start(timer, &TimerStep, 0, 0);
  uv_run(&loop_, UV_RUN_NOWAIT);  // Timer (10 ms), then prepare ends it.
  ASSERT_EQ(listener_.durations.size(), 1u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(12));
  EXPECT_EQ((*uv)->dispatch_count(), 2u);
  ASSERT_EQ(listener_.labels.size(), 2u);
  EXPECT_EQ(listener_.labels[0], "uv-dispatch");

  uv_timer_stop(timer);
  uv->reset();  // Detaching mid-dispatch ends it.
  ASSERT_EQ(listener_.durations.size(), 2u);
  EXPECT_FALSE(monitor_.is_dispatching());
  uv_run(&loop_, UV_RUN_NOWAIT);  // Unmonitored now.
  EXPECT_EQ(listener_.labels.size(), 2u);
  CloseHandle(reinterpret_cast<uv_handle_t*>(timer));
}

// The boundary choice: I/O callbacks run inside the poll phase, before the
// check handle, and must belong to the dispatch (not to idle time).
TEST_F(UvMonitorTest, IoCallbacksBelongToTheDispatch) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  uv_pipe_t ends[2];
  uv_file fds[2];
  ASSERT_EQ(uv_pipe(fds, 0, 0), 0);
  uv_pipe_init(&loop_, &ends[0], 0);
  uv_pipe_init(&loop_, &ends[1], 0);
  ASSERT_EQ(uv_pipe_open(&ends[0], fds[0]), 0);
  ASSERT_EQ(uv_pipe_open(&ends[1], fds[1]), 0);
  ends[0].data = &clock_;
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&ends[0]),
      [](uv_handle_t*, size_t, uv_buf_t* buf) {
        static char storage[64];
        *buf = uv_buf_init(storage, sizeof(storage));
      },
      [](uv_stream_t* stream, ssize_t n, const uv_buf_t*) {
        if (n > 0) static_cast<matrix::testing::FakeTickClock*>(stream->data)->Advance(
            absl::Milliseconds(7));
      });
  uv_run(&loop_, UV_RUN_NOWAIT);  // First dispatch begins.
  uv_run(&loop_, UV_RUN_NOWAIT);  // Empty dispatch; the next begins.
  ASSERT_EQ(listener_.durations.size(), 1u);
  EXPECT_EQ(listener_.durations[0], absl::ZeroDuration());

  char byte = 'x';
  uv_buf_t buf = uv_buf_init(&byte, 1);
  ASSERT_EQ(uv_try_write(reinterpret_cast<uv_stream_t*>(&ends[1]), &buf, 1), 1);
  uv_run(&loop_, UV_RUN_NOWAIT);  // Prepare ends one; poll reads (7 ms); check begins.
  uv_run(&loop_, UV_RUN_NOWAIT);  // Prepare ends the dispatch with the read.
  ASSERT_EQ(listener_.durations.size(), 3u);
  EXPECT_EQ(listener_.durations[1], absl::ZeroDuration());
  EXPECT_EQ(listener_.durations[2], absl::Milliseconds(7));

  uv->reset();
  CloseHandle(reinterpret_cast<uv_handle_t*>(&ends[0]));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&ends[1]));
}

TEST_F(UvMonitorTest, IdleAndCheckCallbacksBelongToTheDispatch) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  uv_idle_t idle;
  uv_idle_init(&loop_, &idle);
  idle.data = &clock_;
  uv_idle_start(&idle, [](uv_idle_t* handle) {
    static_cast<matrix::testing::FakeTickClock*>(handle->data)->Advance(absl::Milliseconds(3));
  });
  // Started after ours: libuv runs it before ours (newest first) but after
  // the poll phase either way.
  uv_check_t check;
  uv_check_init(&loop_, &check);
  check.data = &clock_;
  uv_check_start(&check, [](uv_check_t* handle) {
    static_cast<matrix::testing::FakeTickClock*>(handle->data)->Advance(absl::Milliseconds(5));
  });
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_run(&loop_, UV_RUN_NOWAIT);
  ASSERT_EQ(listener_.durations.size(), 2u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(8));
  EXPECT_EQ(listener_.durations[1], absl::Milliseconds(8));
  uv->reset();
  CloseHandle(reinterpret_cast<uv_handle_t*>(&idle));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&check));
}

TEST_F(UvMonitorTest, NeverKeepsTheLoopAliveAndDetachClosesItsHandles) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  EXPECT_EQ(uv_loop_alive(&loop_), 0);
  EXPECT_EQ(uv_run(&loop_, UV_RUN_DEFAULT), 0);  // Returns at once: nothing else to do.
  int handles = 0;
  uv_walk(&loop_, [](uv_handle_t*, void* n) { ++*static_cast<int*>(n); }, &handles);
  EXPECT_EQ(handles, 2);
  EXPECT_EQ(uv_loop_close(&loop_), UV_EBUSY);  // Ours are open.
  uv->reset();
  EXPECT_FALSE(monitor_.is_dispatching());
  uv_run(&loop_, UV_RUN_NOWAIT);  // libuv finishes closing (and we free) them.
  handles = 0;
  uv_walk(&loop_, [](uv_handle_t*, void* n) { ++*static_cast<int*>(n); }, &handles);
  EXPECT_EQ(handles, 0);
}

TEST_F(UvMonitorTest, DetachInsideACallback) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  struct Ctx {
    std::unique_ptr<matrix::uv::UvMonitor>* monitor;
    matrix::testing::FakeTickClock* clock;
    int calls = 0;
  } ctx{&*uv, &clock_};
  uv_idle_t idle;  // Runs every turn, before the prepare phase.
  uv_idle_init(&loop_, &idle);
  idle.data = &ctx;
  uv_idle_start(&idle, [](uv_idle_t* handle) {
    auto* c = static_cast<Ctx*>(handle->data);
    if (++c->calls < 2) return;  // Turn 1: the first dispatch begins after it.
    c->clock->Advance(absl::Milliseconds(4));
    c->monitor->reset();
    uv_idle_stop(handle);
  });
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(listener_.durations.empty());
  uv_run(&loop_, UV_RUN_NOWAIT);
  ASSERT_EQ(listener_.durations.size(), 1u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(4));
  EXPECT_FALSE(monitor_.is_dispatching());
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(listener_.labels.size(), 1u);
  CloseHandle(reinterpret_cast<uv_handle_t*>(&idle));
}

TEST_F(UvMonitorTest, HandlesClosedByAWalkTeardownThenDetach) {
  auto uv = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(uv.ok()) << uv.status();
  uv_run(&loop_, UV_RUN_NOWAIT);
  uv_walk(&loop_, [](uv_handle_t* h, void*) { if (!uv_is_closing(h)) uv_close(h, nullptr); },
          nullptr);
  uv->reset();  // Must not close them again nor free them under libuv.
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_FALSE(monitor_.is_dispatching());
}

TEST_F(UvMonitorTest, NamesTheSceneUnlessTheApplicationDid) {
  matrix::AppState* state = matrix::AppState::Get();
  state->ResetForTesting();
  {
    auto uv = matrix::uv::Attach(&loop_, &monitor_);
    ASSERT_TRUE(uv.ok()) << uv.status();
    EXPECT_EQ((*uv)->scene(), "libuv");
    EXPECT_EQ(state->visible_scene(), "libuv");
  }
  state->ResetForTesting();
  {
    matrix::uv::Options options;
    options.scene = "proxy";
    auto uv = matrix::uv::Attach(&loop_, &monitor_, options);
    ASSERT_TRUE(uv.ok()) << uv.status();
    EXPECT_EQ(state->visible_scene(), "proxy");
  }
  state->ResetForTesting();
  state->OnSceneShown("Checkout");
  {
    auto uv = matrix::uv::Attach(&loop_, &monitor_);
    ASSERT_TRUE(uv.ok()) << uv.status();
    EXPECT_EQ((*uv)->scene(), "");
    EXPECT_EQ(state->visible_scene(), "Checkout");
  }
  state->ResetForTesting();
}

TEST_F(UvMonitorTest, Errors) {
  EXPECT_EQ(matrix::uv::Attach(nullptr, &monitor_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      matrix::uv::Attach(&loop_, static_cast<matrix::LooperMonitor*>(nullptr)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(matrix::uv::Attach(&loop_, static_cast<matrix::TracePlugin*>(nullptr)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  ASSERT_TRUE(first.ok());
  auto again = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  first->reset();
  auto after_detach = matrix::uv::Attach(&loop_, &monitor_, NoScene());
  EXPECT_TRUE(after_detach.ok()) << after_detach.status();
}

// libuv's idle time as the fake clock sees it: the finished waits plus the
// wait in progress (uv_metrics_idle_time() counts it, from the wait's entry).
class FakeIdleTime {
 public:
  explicit FakeIdleTime(const matrix::TickClock* clock) : clock_(clock) {}
  uint64_t Now() const {
    const int64_t entry = entry_ns_.load();
    const int64_t in_progress = entry == 0 ? 0 : clock_->NowTicks().ToNanoseconds() - entry;
    return static_cast<uint64_t>(idle_ns_.load() + in_progress);
  }
  void EnterWait() { entry_ns_.store(clock_->NowTicks().ToNanoseconds()); }
  // What libuv does when the wait returns, before the I/O callbacks.
  void WaitReturned() {
    idle_ns_.store(static_cast<int64_t>(Now()));
    entry_ns_.store(0);
  }

 private:
  const matrix::TickClock* const clock_;
  std::atomic<int64_t> idle_ns_{0};
  std::atomic<int64_t> entry_ns_{0};
};

class UvAnrTest : public ::testing::Test, protected matrix::trace_test::TracerRig {
 protected:
  static constexpr absl::Duration kLag = absl::Seconds(2);
  static constexpr absl::Duration kAnr = absl::Seconds(5);
  static constexpr absl::Duration kWait = absl::Seconds(7);  // Longer than kAnr: idle.

  UvAnrTest() : TracerRig(NoChoreographer()), idle_(env_.clock()), looper_monitor_(env_.clock()) {
    uv_loop_init(&loop_);
    looper_monitor_.Start();
    monitor_ = std::make_unique<matrix::UIThreadMonitor>(&looper_monitor_, nullptr,
                                                         matrix::UIThreadMonitor::Options());
    monitor_->Start();
    matrix::AnrTracer::Options options;
    Wire(&options, monitor_.get());
    options.key_captures = 0;  // The test counts captures.
    options.anr_threshold = kAnr;
    options.lag_threshold = kLag;
    anr_ = std::make_unique<matrix::AnrTracer>(std::move(options));
    anr_->OnStartTrace();
    env_.RunUntilIdle();

    // The wait: started before Attach, so libuv runs it after our prepare
    // handle (newest first), just before the poll. UV_RUN_NOWAIT never
    // blocks, so it plays the blocking wait on the fake clock (the watchdog
    // runs meanwhile) and then does what libuv does when the wait returns.
    uv_prepare_init(&loop_, &wait_);
    wait_.data = this;
    uv_prepare_start(&wait_, [](uv_prepare_t* handle) {
      auto* self = static_cast<UvAnrTest*>(handle->data);
      self->idle_.EnterWait();
      self->env_.FastForwardBy(kWait);
      self->idle_.WaitReturned();
      self->wait_returned_at_ = self->env_.Now();
    });

    matrix::uv::Options uv_options;
    uv_options.name_scene = false;
    uv_options.idle_time_for_testing = [this](uv_loop_t*) { return idle_.Now(); };
    auto uv = matrix::uv::Attach(&loop_, &looper_monitor_, std::move(uv_options));
    EXPECT_TRUE(uv.ok()) << uv.status();
    if (uv.ok()) uv_ = std::move(*uv);
  }
  ~UvAnrTest() override {
    uv_.reset();
    if (pipe_open_) {  // Also when an assertion ended the test early.
      uv_close(reinterpret_cast<uv_handle_t*>(&ends_[0]), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&ends_[1]), nullptr);
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&wait_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    anr_.reset();
    monitor_.reset();
  }

  // A pipe whose read callback hangs for `hang` (the watchdog runs meanwhile)
  // and records what the tracer had reported by the callback's end.
  void HangInReadCallback(absl::Duration hang) {
    hang_ = hang;
    ASSERT_EQ(uv_pipe(fds_, 0, 0), 0);
    uv_pipe_init(&loop_, &ends_[0], 0);
    uv_pipe_init(&loop_, &ends_[1], 0);
    ASSERT_EQ(uv_pipe_open(&ends_[0], fds_[0]), 0);
    ASSERT_EQ(uv_pipe_open(&ends_[1], fds_[1]), 0);
    pipe_open_ = true;
    ends_[0].data = this;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&ends_[0]),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          static char storage[64];
          *buf = uv_buf_init(storage, sizeof(storage));
        },
        [](uv_stream_t* stream, ssize_t n, const uv_buf_t*) {
          if (n <= 0) return;
          auto* self = static_cast<UvAnrTest*>(stream->data);
          self->read_began_at_ = self->env_.Now();
          self->env_.FastForwardBy(self->hang_);  // Hangs; the watchdog watches.
          self->anr_in_callback_ = self->anr_->anr_count();
          self->captures_in_callback_ = self->capture_.times().size();
          self->dispatching_in_callback_ = self->looper_monitor_.is_dispatching();
        });
    char byte = 'x';
    uv_buf_t buf = uv_buf_init(&byte, 1);
    ASSERT_EQ(uv_try_write(reinterpret_cast<uv_stream_t*>(&ends_[1]), &buf, 1), 1);
  }

  FakeIdleTime idle_;
  matrix::LooperMonitor looper_monitor_;
  std::unique_ptr<matrix::UIThreadMonitor> monitor_;
  std::unique_ptr<matrix::AnrTracer> anr_;
  uv_loop_t loop_;
  uv_prepare_t wait_;
  std::unique_ptr<matrix::uv::UvMonitor> uv_;
  uv_pipe_t ends_[2];
  uv_file fds_[2];
  bool pipe_open_ = false;
  absl::Duration hang_;
  TimeTicks wait_returned_at_;
  TimeTicks read_began_at_;
  int64_t anr_in_callback_ = -1;
  size_t captures_in_callback_ = 0;
  bool dispatching_in_callback_ = true;
};

TEST_F(UvAnrTest, LongWaitsAreIdle) {
  ASSERT_NE(uv_, nullptr);
  for (int i = 0; i < 3; ++i) uv_run(&loop_, UV_RUN_NOWAIT);  // Three 7 s waits.
  env_.RunUntilIdle();
  EXPECT_EQ(anr_->anr_count(), 0);
  EXPECT_EQ(anr_->lag_count(), 0);
  EXPECT_TRUE(capture_.times().empty());
}

TEST_F(UvAnrTest, AHangInAnIoCallbackIsAnAnrWhileItHangs) {
  ASSERT_NE(uv_, nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);  // The first dispatch begins (after a wait).
  HangInReadCallback(kAnr + absl::Seconds(1));
  uv_run(&loop_, UV_RUN_NOWAIT);  // Prepare, the wait (7 s), the read hangs 6 s, check.

  // Reported inside the callback, before the check handle opened the
  // dispatch, with the loop thread's stack taken at the crossing.
  EXPECT_FALSE(dispatching_in_callback_);
  EXPECT_EQ(anr_in_callback_, 1);
  ASSERT_EQ(captures_in_callback_, 2u);  // The LAG's capture, then the ANR's.
  EXPECT_EQ(read_began_at_, wait_returned_at_);
  EXPECT_EQ(capture_.times()[0], wait_returned_at_ + kLag);
  EXPECT_EQ(capture_.times()[1], wait_returned_at_ + kAnr);

  // The check handle reports the same dispatch (begun when the wait
  // returned); it ends at the next prepare: one report, no LAG.
  EXPECT_TRUE(looper_monitor_.is_dispatching());
  uv_run(&loop_, UV_RUN_NOWAIT);
  env_.RunUntilIdle();
  EXPECT_EQ(anr_->anr_count(), 1);
  EXPECT_EQ(anr_->lag_count(), 0);
  EXPECT_EQ(capture_.times().size(), 2u);
  const auto anrs = issues_.WithDetail(matrix::proto::ANR);
  ASSERT_EQ(anrs.size(), 1u);
  EXPECT_DOUBLE_EQ(anrs[0].proto().anr().cost_ms(), absl::ToDoubleMilliseconds(kAnr));
  EXPECT_DOUBLE_EQ(anrs[0].proto().anr().detection_delay_ms(), 0);
  EXPECT_TRUE(issues_.WithDetail(matrix::proto::LAG).empty());
}

TEST_F(UvAnrTest, AShorterHangInAnIoCallbackIsOneLagWithItsRealCost) {
  ASSERT_NE(uv_, nullptr);
  uv_run(&loop_, UV_RUN_NOWAIT);
  HangInReadCallback(kLag + absl::Seconds(1));
  uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_EQ(captures_in_callback_, 1u);  // Captured at the crossing, in the callback.
  ASSERT_EQ(capture_.times().size(), 1u);
  EXPECT_EQ(capture_.times()[0], wait_returned_at_ + kLag);
  env_.FastForwardBy(absl::Milliseconds(10));  // Still the dispatch (check, then this).
  uv_run(&loop_, UV_RUN_NOWAIT);  // Prepare ends it.
  env_.RunUntilIdle();
  EXPECT_EQ(anr_->anr_count(), 0);
  EXPECT_EQ(anr_->lag_count(), 1);
  const auto lags = issues_.WithDetail(matrix::proto::LAG);
  ASSERT_EQ(lags.size(), 1u);
  EXPECT_DOUBLE_EQ(lags[0].proto().anr().cost_ms(), 3010);
}

}  // namespace
