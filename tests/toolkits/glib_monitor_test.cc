// matrix::glib on a private GMainContext, timed with a fake clock: one
// dispatch per poll-to-poll span, the previous poll function kept, called and
// restored, nested iterations, clear errors, and idle runs (idle-priority
// sources) through to IdleHandlerLagTracer's LAG_IDLE_HANDLER report.

#include "matrix/glib/glib_monitor.h"

#include <glib.h>

#include <memory>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/idle_handler_lag_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {

volatile int g_glib_idle_sink = 0;
__attribute__((noinline)) void PrefetchThumbnails() {
  g_glib_idle_sink = 7;
  asm volatile("" ::: "memory");
}

}  // namespace app

namespace {

using matrix::TimeTicks;

using RecordingListener = matrix::trace_test::RecordingDispatchListener;

// Idle runs as LooperMonitor reports them. Cancelled runs (the check phase
// reached idle priority but nothing was ready) last no time on the fake clock.
class RecordingIdleListener : public matrix::LooperIdleListener {
 public:
  void OnIdleBegin(TimeTicks, const char* name) override { names.push_back(name); }
  void OnIdleEnd(TimeTicks begin, TimeTicks end) override {
    if (end > begin) durations.push_back(end - begin);
  }
  std::vector<const char*> names;
  std::vector<absl::Duration> durations;  // The runs that took time.
};

int g_counting_polls = 0;
gint CountingPoll(GPollFD* fds, guint nfds, gint timeout) {
  ++g_counting_polls;
  return g_poll(fds, nfds, timeout);
}

class GlibMonitorTest : public ::testing::Test {
 protected:
  GlibMonitorTest() : context_(g_main_context_new()), monitor_(&clock_) {
    monitor_.Start();
    registration_ = monitor_.AddListener(&listener_);
    idle_registration_ = monitor_.AddIdleListener(&idle_listener_);
  }
  ~GlibMonitorTest() override { g_main_context_unref(context_); }

  // Adds an idle source that advances the fake clock by `step` per call, `calls` times.
  void AddIdle(absl::Duration step, int calls) {
    AddSource(G_PRIORITY_DEFAULT_IDLE, step, calls);
  }

  // The same at `priority`.
  void AddSource(int priority, absl::Duration step, int calls) {
    struct Work {
      matrix::testing::FakeTickClock* clock;
      absl::Duration step;
      int left;
    };
    GSource* source = g_idle_source_new();
    g_source_set_callback(
        source,
        [](gpointer data) -> gboolean {
          auto* work = static_cast<Work*>(data);
          work->clock->Advance(work->step);
          return --work->left > 0 ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
        },
        new Work{&clock_, step, calls}, [](gpointer data) { delete static_cast<Work*>(data); });
    g_source_set_priority(source, priority);
    g_source_attach(source, context_);
    g_source_unref(source);
  }

  matrix::testing::FakeTickClock clock_;
  GMainContext* context_;
  matrix::LooperMonitor monitor_;
  RecordingListener listener_;
  matrix::ObserverRegistration registration_;
  RecordingIdleListener idle_listener_;
  matrix::ObserverRegistration idle_registration_;
};

TEST_F(GlibMonitorTest, EachPollToPollSpanIsOneDispatch) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  AddIdle(absl::Milliseconds(10), 3);

  g_main_context_iteration(context_, FALSE);  // Poll, then dispatch 1 (10 ms).
  EXPECT_TRUE((*glib)->in_dispatch());
  EXPECT_TRUE(listener_.durations.empty());  // Ends at the next poll.
  g_main_context_iteration(context_, FALSE);
  g_main_context_iteration(context_, FALSE);
  ASSERT_EQ(listener_.durations.size(), 2u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(10));
  EXPECT_EQ(listener_.durations[1], absl::Milliseconds(10));
  EXPECT_EQ((*glib)->dispatch_count(), 3u);
  ASSERT_EQ(listener_.labels.size(), 3u);
  EXPECT_EQ(listener_.labels[0], "glib-dispatch");

  glib->reset();  // Detaching mid-dispatch ends it.
  ASSERT_EQ(listener_.durations.size(), 3u);
  EXPECT_EQ(listener_.durations[2], absl::Milliseconds(10));
  EXPECT_FALSE(monitor_.is_dispatching());
  g_main_context_iteration(context_, FALSE);  // Unmonitored now.
  EXPECT_EQ(listener_.labels.size(), 3u);
}

TEST_F(GlibMonitorTest, KeepsCallsAndRestoresThePreviousPollFunction) {
  g_main_context_set_poll_func(context_, &CountingPoll);
  g_counting_polls = 0;
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  EXPECT_NE(g_main_context_get_poll_func(context_), &CountingPoll);
  AddIdle(absl::Milliseconds(1), 2);
  g_main_context_iteration(context_, FALSE);
  g_main_context_iteration(context_, FALSE);
  EXPECT_EQ(g_counting_polls, 2);
  EXPECT_EQ((*glib)->dispatch_count(), 2u);

  (*glib)->Detach();
  EXPECT_FALSE((*glib)->attached());
  EXPECT_EQ(g_main_context_get_poll_func(context_), &CountingPoll);
  (*glib)->Detach();  // Idempotent.
  EXPECT_EQ(g_main_context_get_poll_func(context_), &CountingPoll);
}

TEST_F(GlibMonitorTest, NestedIterationEndsTheOuterDispatchAtItsPoll) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  struct Nest {
    GMainContext* context;
    matrix::testing::FakeTickClock* clock;
  };
  Nest nest{context_, &clock_};
  GSource* source = g_idle_source_new();
  g_source_set_callback(
      source,
      [](gpointer data) -> gboolean {
        auto* n = static_cast<Nest*>(data);
        n->clock->Advance(absl::Milliseconds(7));
        g_main_context_iteration(n->context, FALSE);  // A modal loop's iteration.
        n->clock->Advance(absl::Milliseconds(3));
        return G_SOURCE_REMOVE;
      },
      &nest, nullptr);
  g_source_attach(source, context_);
  g_source_unref(source);

  g_main_context_iteration(context_, FALSE);
  glib->reset();
  // Outer part before the nested poll (7 ms), then from the nested poll's
  // return to the detach (3 ms).
  ASSERT_EQ(listener_.durations.size(), 2u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(7));
  EXPECT_EQ(listener_.durations[1], absl::Milliseconds(3));
}

TEST_F(GlibMonitorTest, ReplacedAfterAttach_DetachLeavesTheChainWorking) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  static GPollFunc ours = nullptr;
  ours = g_main_context_get_poll_func(context_);
  static int wrapper_calls = 0;
  wrapper_calls = 0;
  g_main_context_set_poll_func(context_, [](GPollFD* fds, guint nfds, gint timeout) -> gint {
    ++wrapper_calls;
    return ours(fds, nfds, timeout);
  });
  const GPollFunc wrapper = g_main_context_get_poll_func(context_);
  g_main_context_iteration(context_, FALSE);
  EXPECT_EQ((*glib)->dispatch_count(), 1u);
  glib->reset();
  EXPECT_EQ(g_main_context_get_poll_func(context_), wrapper);  // Not ours to undo.
  g_main_context_iteration(context_, FALSE);                 // Still forwards.
  EXPECT_EQ(wrapper_calls, 2);
  EXPECT_FALSE(monitor_.is_dispatching());
  g_main_context_set_poll_func(context_, nullptr);
}

TEST_F(GlibMonitorTest, Errors) {
  EXPECT_EQ(matrix::glib::Attach(context_, static_cast<matrix::LooperMonitor*>(nullptr))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(matrix::glib::Attach(context_, static_cast<matrix::TracePlugin*>(nullptr))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto first = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(first.ok());
  auto again = matrix::glib::Attach(context_, &monitor_);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
}

TEST_F(GlibMonitorTest, AtMostEightContexts) {
  // Slots are process-wide (a test above leaks one on purpose when its poll
  // function stays in another's chain): attach until refused.
  std::vector<GMainContext*> contexts;
  std::vector<std::unique_ptr<matrix::glib::GlibMonitor>> monitors;
  absl::Status refused;
  for (int i = 0; i <= matrix::glib::GlibMonitor::kMaxAttachedContexts; ++i) {
    contexts.push_back(g_main_context_new());
    auto monitor = matrix::glib::Attach(contexts.back(), &monitor_);
    if (!monitor.ok()) {
      refused = monitor.status();
      break;
    }
    monitors.push_back(*std::move(monitor));
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_GE(monitors.size(), 1u);
  EXPECT_LE(monitors.size(), static_cast<size_t>(matrix::glib::GlibMonitor::kMaxAttachedContexts));
  monitors.pop_back();  // Frees a slot.
  auto retry = matrix::glib::Attach(context_, &monitor_);
  EXPECT_TRUE(retry.ok()) << retry.status();
  retry->reset();
  monitors.clear();
  for (GMainContext* c : contexts) g_main_context_unref(c);
}

TEST_F(GlibMonitorTest, IdlePrioritySource_IsAnIdleRunUntilTheNextPoll) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  AddIdle(absl::Milliseconds(30), 1);
  AddSource(G_PRIORITY_LOW, absl::Milliseconds(20), 1);  // Lower than idle: idle too.

  g_main_context_iteration(context_, FALSE);  // The idle source (30 ms).
  EXPECT_TRUE((*glib)->in_idle_run());
  ASSERT_EQ(idle_listener_.names.size(), 1u);
  EXPECT_STREQ(idle_listener_.names[0], matrix::glib::kIdleSourceName);
  EXPECT_STREQ(idle_listener_.names[0], "glib idle source");
  g_main_context_iteration(context_, FALSE);  // G_PRIORITY_LOW (20 ms).
  g_main_context_iteration(context_, FALSE);  // Nothing ready: no run.
  EXPECT_FALSE((*glib)->in_idle_run());
  EXPECT_EQ(idle_listener_.durations,
            (std::vector<absl::Duration>{absl::Milliseconds(30), absl::Milliseconds(20)}));
  EXPECT_EQ((*glib)->idle_run_count(), 2u);
  // Still dispatches too (LAG / slow method / ANR apply as to any callback).
  ASSERT_GE(listener_.durations.size(), 2u);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(30));
}

TEST_F(GlibMonitorTest, SourcesAboveIdlePriority_AreNoIdleRun) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  AddSource(G_PRIORITY_DEFAULT, absl::Milliseconds(40), 2);
  AddSource(G_PRIORITY_HIGH_IDLE, absl::Milliseconds(15), 1);  // GTK's resize/redraw level.
  AddSource(G_PRIORITY_DEFAULT_IDLE - 1, absl::Milliseconds(5), 1);
  for (int i = 0; i < 5; ++i) g_main_context_iteration(context_, FALSE);
  EXPECT_EQ(listener_.durations.size(), 4u);  // 40, 40, 15, 5 ms.
  EXPECT_TRUE(idle_listener_.durations.empty());
  EXPECT_EQ((*glib)->idle_run_count(), 0u);
}

// A source above idle priority that becomes ready only in GLib's check phase
// (after the poll: an fd, an expired timeout, a check function) preempts an
// idle source that was ready at prepare time: the iteration is no idle run.
TEST_F(GlibMonitorTest, SourceReadyAtCheck_PreemptsTheIdleSource) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  struct ReadyAtCheck {
    GSource base;
    matrix::testing::FakeTickClock* clock;
  };
  static GSourceFuncs funcs = {
      [](GSource*, gint* timeout) -> gboolean {
        *timeout = -1;
        return FALSE;  // Not ready at prepare time...
      },
      [](GSource*) -> gboolean { return TRUE; },  // ...but at check time.
      [](GSource* source, GSourceFunc, gpointer) -> gboolean {
        reinterpret_cast<ReadyAtCheck*>(source)->clock->Advance(absl::Milliseconds(40));
        return G_SOURCE_REMOVE;
      },
      nullptr, nullptr, nullptr};
  GSource* source = g_source_new(&funcs, sizeof(ReadyAtCheck));
  reinterpret_cast<ReadyAtCheck*>(source)->clock = &clock_;
  g_source_attach(source, context_);
  g_source_unref(source);
  AddIdle(absl::Milliseconds(30), 1);

  g_main_context_iteration(context_, FALSE);  // The check-time source.
  EXPECT_FALSE((*glib)->in_idle_run());
  EXPECT_EQ((*glib)->idle_run_count(), 0u);
  g_main_context_iteration(context_, FALSE);  // The idle source.
  EXPECT_TRUE((*glib)->in_idle_run());
  g_main_context_iteration(context_, FALSE);
  EXPECT_EQ(listener_.durations[0], absl::Milliseconds(40));
  EXPECT_EQ(idle_listener_.durations, std::vector<absl::Duration>{absl::Milliseconds(30)});
}

// The probes never become ready and set no timeout: GLib blocks, and answers
// g_main_context_pending/iteration, exactly as without matrix.
TEST_F(GlibMonitorTest, ProbesChangeNeitherBlockingNorReadiness) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  EXPECT_FALSE(g_main_context_pending(context_));
  EXPECT_FALSE(g_main_context_iteration(context_, FALSE));
  ASSERT_TRUE(g_main_context_acquire(context_));
  gint max_priority = 0;
  EXPECT_FALSE(g_main_context_prepare(context_, &max_priority));
  GPollFD fds[8];
  gint timeout = 0;
  g_main_context_query(context_, max_priority, &timeout, fds, 8);
  EXPECT_EQ(timeout, -1);  // Would block until an fd wakes it.
  g_main_context_check(context_, max_priority, fds, 0);
  g_main_context_release(context_);
  EXPECT_EQ((*glib)->idle_run_count(), 0u);
}

TEST_F(GlibMonitorTest, Detach_EndsTheIdleRunAndRemovesTheProbes) {
  auto glib = matrix::glib::Attach(context_, &monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  AddIdle(absl::Milliseconds(30), 3);
  g_main_context_iteration(context_, FALSE);
  EXPECT_TRUE((*glib)->in_idle_run());
  EXPECT_TRUE(monitor_.is_idle_running());
  glib->reset();
  EXPECT_FALSE(monitor_.is_idle_running());
  EXPECT_EQ(idle_listener_.durations, std::vector<absl::Duration>{absl::Milliseconds(30)});
  g_main_context_iteration(context_, FALSE);  // Unmonitored: no run, no begin.
  g_main_context_iteration(context_, FALSE);
  EXPECT_EQ(idle_listener_.names.size(), 1u);
  EXPECT_EQ(idle_listener_.durations.size(), 1u);
}

// Through to the tracer: a slow GLib idle callback gives LAG_IDLE_HANDLER with
// the stack captured when the threshold was crossed; a slow default-priority
// source does not.
class GlibIdleLagTest : public ::testing::Test, protected matrix::trace_test::TracerRig {
 protected:
  static constexpr absl::Duration kThreshold = absl::Seconds(2);

  GlibIdleLagTest()
      : TracerRig(NoChoreographer()),
        context_(g_main_context_new()),
        looper_monitor_(env_.clock()),
        monitor_(&looper_monitor_, nullptr, matrix::UIThreadMonitor::Options()) {
    capture_.SetFrames({matrix::trace_test::ReturnAddressIn(&app::PrefetchThumbnails)});
    looper_monitor_.Start();
    monitor_.Start();
    matrix::IdleHandlerLagTracer::Options options;
    Wire(&options, &monitor_);
    options.looper_monitor = &looper_monitor_;
    options.threshold = kThreshold;
    tracer_ = std::make_unique<matrix::IdleHandlerLagTracer>(std::move(options));
    tracer_->OnStartTrace();
    env_.RunUntilIdle();
  }
  ~GlibIdleLagTest() override {
    tracer_.reset();
    g_main_context_unref(context_);
  }

  // A source at `priority` that works for `duration` once (the watchdog and
  // the worker run meanwhile, as on their own threads).
  void AddSlowSource(int priority, absl::Duration duration) {
    work_ = duration;
    GSource* source = g_idle_source_new();
    g_source_set_priority(source, priority);
    g_source_set_callback(
        source,
        [](gpointer data) -> gboolean {
          auto* self = static_cast<GlibIdleLagTest*>(data);
          self->begins_.push_back(self->env_.Now());
          matrix::trace_test::RunLoopersFor(&self->env_, {self->watchdog_, self->worker_},
                                            self->work_);
          return G_SOURCE_REMOVE;
        },
        this, nullptr);
    g_source_attach(source, context_);
    g_source_unref(source);
  }

  GMainContext* context_;
  matrix::LooperMonitor looper_monitor_;
  matrix::UIThreadMonitor monitor_;
  std::unique_ptr<matrix::IdleHandlerLagTracer> tracer_;
  absl::Duration work_;
  std::vector<TimeTicks> begins_;
};


TEST_F(GlibIdleLagTest, SlowIdleCallback_LagIdleHandlerWithTheStackAtTheCrossing) {
  auto glib = matrix::glib::Attach(context_, &looper_monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  env_.FastForwardBy(absl::Milliseconds(700));  // Off the watchdog's grid.
  AddSlowSource(G_PRIORITY_DEFAULT_IDLE, absl::Seconds(3));
  g_main_context_iteration(context_, FALSE);
  g_main_context_iteration(context_, FALSE);
  ASSERT_EQ(begins_.size(), 1u);

  EXPECT_THAT(capture_.times(), ::testing::ElementsAre(begins_[0] + kThreshold));
  EXPECT_THAT(capture_.tids(), ::testing::ElementsAre(matrix::ThreadHandle::Current().tid()));
  ASSERT_EQ(issues_.all().size(), 1u);
  const matrix::proto::AnrReport& report = issues_.all()[0].proto().anr();
  EXPECT_EQ(report.detail(), matrix::proto::LAG_IDLE_HANDLER);
  EXPECT_EQ(report.idle_handler(), "glib idle source");
  EXPECT_DOUBLE_EQ(report.cost_ms(), 2000);
  EXPECT_DOUBLE_EQ(report.detection_delay_ms(), 0);
  EXPECT_EQ(report.stack_key(), "app::PrefetchThumbnails()");
  glib->reset();
}

TEST_F(GlibIdleLagTest, SlowDefaultPrioritySource_IsNoIdleHandlerLag) {
  auto glib = matrix::glib::Attach(context_, &looper_monitor_);
  ASSERT_TRUE(glib.ok()) << glib.status();
  AddSlowSource(G_PRIORITY_DEFAULT, absl::Seconds(5));
  g_main_context_iteration(context_, FALSE);
  g_main_context_iteration(context_, FALSE);
  ASSERT_EQ(begins_.size(), 1u);
  env_.FastForwardBy(absl::Seconds(5));
  EXPECT_TRUE(issues_.all().empty());
  EXPECT_TRUE(capture_.times().empty());
  glib->reset();
}

}  // namespace
