// Idle lag through matrix::glib on a real GMainLoop (the default context),
// real matrix threads, no display: a g_idle_add callback that blocks past the
// idle threshold in a known function gives LAG_IDLE_HANDLER with the loop
// thread's stack naming it; a slow default-priority timeout gives LAG but no
// LAG_IDLE_HANDLER.

#include <glib.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/glib/glib_monitor.h"
#include "matrix/plugins/trace_plugin.h"
#include "uninstrumented.h"

namespace {

struct Program {
  GMainLoop* loop = nullptr;
  int idle_runs = 0;
};

TEST(GlibIdleE2ETest, SlowIdleCallbackIsAnIdleHandlerLag_SlowTimeoutIsNot) {
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(5))
                    .EnableIdleHandlerTrace(true)
                    .SetIdleHandlerThreshold(absl::Milliseconds(500))
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  matrix::TracePlugin* plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();
  ASSERT_NE(plugin->GetIdleHandlerLagTracer(), nullptr);

  GMainContext* context = g_main_context_default();
  auto monitor = matrix::glib::Attach(context, plugin);
  ASSERT_TRUE(monitor.ok()) << monitor.status();

  Program program;
  program.loop = g_main_loop_new(context, FALSE);
  // A slow default-priority timeout (1.2 s > the 500 ms lag and idle
  // thresholds): LAG only.
  g_timeout_add(200, [](gpointer) -> gboolean {
    e2e::SpinFor(absl::Milliseconds(1200));
    return G_SOURCE_REMOVE;
  }, nullptr);
  // Then a slow idle callback blocking in a known function.
  g_timeout_add(1800, [](gpointer p) -> gboolean {
    g_idle_add([](gpointer p) -> gboolean {
      ++static_cast<Program*>(p)->idle_runs;
      e2e::HangInUninstrumentedCode(absl::Milliseconds(1200));
      return G_SOURCE_REMOVE;
    }, p);
    return G_SOURCE_REMOVE;
  }, &program);
  // Fast idle callbacks in between: no report.
  g_timeout_add(100, [](gpointer) -> gboolean {
    g_idle_add([](gpointer) -> gboolean { return G_SOURCE_REMOVE; }, nullptr);
    return G_SOURCE_CONTINUE;
  }, nullptr);
  g_timeout_add(4000, [](gpointer p) -> gboolean {
    g_main_loop_quit(static_cast<Program*>(p)->loop);
    return G_SOURCE_REMOVE;
  }, &program);
  g_main_loop_run(program.loop);
  EXPECT_EQ(program.idle_runs, 1);
  EXPECT_GT((*monitor)->idle_run_count(), 10u);  // The fast ones too.
  monitor->reset();

  const bool reported = listener->WaitFor(
      [](const auto& issues) {
        return !e2e::AnrReports(issues, matrix::proto::LAG_IDLE_HANDLER).empty() &&
               e2e::AnrReports(issues, matrix::proto::LAG).size() >= 2;
      },
      absl::Seconds(10));
  std::vector<matrix::Issue> issues = listener->issues();
  std::string all;
  for (const auto& issue : issues) {
    all += issue.proto().tag() + " " + matrix::proto::Detail_Name(issue.proto().anr().detail()) +
           " " + issue.proto().key() + "\n";
  }
  ASSERT_TRUE(reported) << all;
  const auto idle = e2e::AnrReports(issues, matrix::proto::LAG_IDLE_HANDLER);
  ASSERT_EQ(idle.size(), 1u);  // Not the slow timeout.
  EXPECT_EQ(idle[0]->idle_handler(), "glib idle source");
  EXPECT_GE(idle[0]->cost_ms(), 490);
  EXPECT_LT(idle[0]->cost_ms(), 1200);
  std::string frames;
  bool named = false;
  for (const auto& frame : idle[0]->thread_stack().frames()) {
    frames += frame.function() + "\n";
    named |= absl::StrContains(frame.function(), "HangInUninstrumentedCode");
  }
  EXPECT_TRUE(named) << frames << idle[0]->thread_stack().error();
  EXPECT_TRUE(absl::StrContains(idle[0]->stack_key(), "HangInUninstrumentedCode"))
      << idle[0]->stack_key();
  // One LAG per slow block: the slow timeout is a LAG (a dispatch), not an
  // idle lag, and the slow idle callback is a dispatch too, so it is a LAG as
  // well (the second slow dispatch in a row: the watchdog must have been
  // re-armed when the first one ended).
  const auto lags = e2e::AnrReports(issues, matrix::proto::LAG);
  ASSERT_EQ(lags.size(), 2u) << all;
  auto describe = [](const matrix::proto::AnrReport* issue) {
    std::string text = issue->stack_key() + " (" + issue->thread_stack().error() + ")\n";
    for (const auto& frame : issue->thread_stack().frames()) text += frame.function() + "\n";
    return text;
  };
  EXPECT_TRUE(absl::StrContains(lags[0]->stack_key(), "SpinFor")) << describe(lags[0]);
  EXPECT_TRUE(absl::StrContains(lags[1]->stack_key(), "HangInUninstrumentedCode"))
      << lags[1]->stack_key();
  for (const auto* lag : lags) {
    EXPECT_GE(lag->cost_ms(), 1190);
    EXPECT_LT(lag->cost_ms(), 5000);
  }

  g_main_loop_unref(program.loop);
}

}  // namespace
