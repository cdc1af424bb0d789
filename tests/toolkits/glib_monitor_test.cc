// matrix::glib on a private GMainContext, timed with a fake clock: one
// dispatch per poll-to-poll span, the previous poll function kept, called and
// restored, nested iterations, and clear errors.

#include "matrix/glib/glib_monitor.h"

#include <glib.h>

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/trace/looper_monitor.h"

namespace {

using matrix::TimeTicks;

class RecordingListener : public matrix::LooperDispatchListener {
 public:
  void OnDispatchBegin(TimeTicks, const matrix::DispatchInfo& info) override {
    labels.push_back(info.label);
  }
  void OnDispatchEnd(TimeTicks begin, TimeTicks end) override {
    durations.push_back(end - begin);
  }
  std::vector<const char*> labels;
  std::vector<absl::Duration> durations;
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
  }
  ~GlibMonitorTest() override { g_main_context_unref(context_); }

  // Adds an idle source that advances the fake clock by `step` per call, `calls` times.
  void AddIdle(absl::Duration step, int calls) {
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
    g_source_attach(source, context_);
    g_source_unref(source);
  }

  matrix::testing::FakeTickClock clock_;
  GMainContext* context_;
  matrix::LooperMonitor monitor_;
  RecordingListener listener_;
  matrix::ObserverRegistration registration_;
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
  EXPECT_STREQ(listener_.labels[0], "glib-dispatch");

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

}  // namespace
