// matrix::glib on a real GMainLoop (the default context), real matrix
// threads, no display: timeouts are counted as dispatches, a 700 ms block is
// a LAG, a 1.5 s block in a function built without tracing is an ANR whose
// native stack names it, and detaching restores GLib's poll function.

#include <glib.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/glib/glib_monitor.h"
#include "matrix/plugins/trace_plugin.h"
#include "uninstrumented.h"

namespace {

const matrix::proto::AnrReport* Find(const std::vector<matrix::Issue>& issues,
                                     matrix::proto::Detail detail) {
  const auto found = e2e::AnrReports(issues, detail);
  return found.empty() ? nullptr : found.front();
}

struct Program {
  GMainLoop* loop = nullptr;
  int ticks = 0;
};

TEST(GlibE2ETest, TimeoutsLagAndAnrOnTheDefaultContext) {
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  matrix::TracePlugin* plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();

  GMainContext* context = g_main_context_default();
  const GPollFunc glib_poll = g_main_context_get_poll_func(context);
  auto monitor = matrix::glib::Attach(context, plugin);
  ASSERT_TRUE(monitor.ok()) << monitor.status();

  Program program;
  program.loop = g_main_loop_new(context, FALSE);
  g_timeout_add(10, [](gpointer p) -> gboolean {
    ++static_cast<Program*>(p)->ticks;
    return G_SOURCE_CONTINUE;
  }, &program);
  g_timeout_add(300, [](gpointer) -> gboolean {
    e2e::SpinFor(absl::Milliseconds(700));  // LAG (500 ms), not ANR (1 s).
    return G_SOURCE_REMOVE;
  }, nullptr);
  g_timeout_add(1500, [](gpointer) -> gboolean {
    e2e::HangInUninstrumentedCode(absl::Milliseconds(1500));  // ANR.
    return G_SOURCE_REMOVE;
  }, nullptr);
  g_timeout_add(3500, [](gpointer p) -> gboolean {
    g_main_loop_quit(static_cast<Program*>(p)->loop);
    return G_SOURCE_REMOVE;
  }, &program);
  g_main_loop_run(program.loop);

  // Each 10 ms tick ran in its own dispatch (about 3.5 s / 10 ms minus the
  // 2.2 s of blocking; generous bounds).
  EXPECT_GT(program.ticks, 50);
  EXPECT_GE((*monitor)->dispatch_count(), static_cast<uint64_t>(program.ticks));
  monitor->reset();
  EXPECT_EQ(g_main_context_get_poll_func(context), glib_poll);

  ASSERT_TRUE(listener->WaitFor(
      [](const auto& issues) {
        return Find(issues, matrix::proto::LAG) != nullptr &&
               Find(issues, matrix::proto::ANR) != nullptr;
      },
      absl::Seconds(10)));
  std::vector<matrix::Issue> issues = listener->issues();
  const matrix::proto::AnrReport* lag = Find(issues, matrix::proto::LAG);
  EXPECT_GE(lag->cost_ms(), 690);  // The whole 700 ms dispatch, under the 1 s ANR.
  EXPECT_LT(lag->cost_ms(), 1000);
  const matrix::proto::AnrReport* anr = Find(issues, matrix::proto::ANR);
  EXPECT_GE(anr->cost_ms(), 1000);
  std::string frames;
  bool named = false;
  for (const auto& frame : anr->thread_stack().frames()) {
    frames += frame.function() + "\n";
    named |= absl::StrContains(frame.function(), "HangInUninstrumentedCode");
  }
  EXPECT_TRUE(named) << frames << anr->thread_stack().error();
  EXPECT_TRUE(absl::StrContains(anr->stack_key(), "HangInUninstrumentedCode"))
      << anr->stack_key();

  g_main_loop_unref(program.loop);
}

}  // namespace
