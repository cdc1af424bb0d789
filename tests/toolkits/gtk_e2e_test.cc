// A real GTK 3 program under Xvfb (xvfb-run), monitored with one line
// (matrix::gtk::Attach). It draws at the frame clock's rate (a tick callback
// queues a draw every frame), makes 5 janky frames (100 ms in the draw
// handler), blocks the loop for 1.5 s in a function built without method
// tracing, and runs a 300 ms idle callback. The reports must show:
//   FPS: the window's title as scene, the 5 janky frames (each >= 3 dropped
//        frames at 60 Hz; tolerance: up to 3 more slow frames from start-up)
//        and their paint time in the traversal phase (>= 450 ms in all);
//   ANR: the native stack names HangInUninstrumentedCode;
//   slow method: the key names SlowIdle (this file is method-traced);
//   idle lag (200 ms threshold): a LAG_IDLE_HANDLER whose stack names
//        SlowIdle (a g_idle_add callback), none for the 1.5 s block (a
//        timeout, not an idle callback).

#include <gtk/gtk.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "e2e_util.h"
#include "toolkit_e2e.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/gtk/gtk_monitor.h"
#include "matrix/plugins/trace_plugin.h"
#include "uninstrumented.h"

namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kTitle[] = "MatrixGtkE2E";
constexpr int kFirstJankyDraw = 60;  // After about 1 s of steady frames.
constexpr int kJankyDraws = 5;

struct Program {
  matrix::TracePlugin* plugin = nullptr;
  int draws = 0;
  int janky = 0;
  bool slow_idle_ran = false;
};

__attribute__((noinline)) gboolean SlowIdle(gpointer p) {
  e2e::SpinFor(absl::Milliseconds(300));
  static_cast<Program*>(p)->slow_idle_ran = true;
  return G_SOURCE_REMOVE;
}

gboolean OnDraw(GtkWidget*, cairo_t* cr, gpointer p) {
  auto* program = static_cast<Program*>(p);
  const int draw = program->draws++;
  cairo_set_source_rgb(cr, (draw % 60) / 60.0, 0.3, 0.6);
  cairo_paint(cr);
  if (draw >= kFirstJankyDraw && draw < kFirstJankyDraw + kJankyDraws) {
    e2e::SpinFor(absl::Milliseconds(100));
    ++program->janky;
  }
  return FALSE;
}

gboolean OnTick(GtkWidget* widget, GdkFrameClock*, gpointer) {
  gtk_widget_queue_draw(widget);
  return G_SOURCE_CONTINUE;
}

TEST(GtkE2ETest, FramesJankAnrAndSlowIdleOnARealWindow) {
  ASSERT_TRUE(gtk_init_check(nullptr, nullptr)) << "no display (run under xvfb-run -a)";
  auto config = e2e::ToolkitTraceConfig(absl::Seconds(30));
  ASSERT_TRUE(config.ok()) << config.status();
  config->idle_handler = true;
  config->idle_handler_threshold = absl::Milliseconds(200);
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  Program program;
  program.plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();

  GtkWidget* window = gtk_window_new(GTK_WINDOW_TOPLEVEL);
  gtk_window_set_title(GTK_WINDOW(window), kTitle);
  gtk_window_set_default_size(GTK_WINDOW(window), 320, 240);
  GtkWidget* area = gtk_drawing_area_new();
  gtk_container_add(GTK_CONTAINER(window), area);
  g_signal_connect(area, "draw", G_CALLBACK(&OnDraw), &program);
  gtk_widget_add_tick_callback(area, &OnTick, nullptr, nullptr);

  auto monitor = matrix::gtk::Attach(window, program.plugin);  // The one line.
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  EXPECT_EQ((*monitor)->frames()->scene(), kTitle);
  gtk_widget_show_all(window);

  g_timeout_add(2500, [](gpointer) -> gboolean {
    e2e::HangInUninstrumentedCode(absl::Milliseconds(1500));
    return G_SOURCE_REMOVE;
  }, nullptr);
  g_timeout_add(4500, [](gpointer p) -> gboolean {
    g_idle_add(&SlowIdle, p);
    return G_SOURCE_REMOVE;
  }, &program);
  g_timeout_add(6000, [](gpointer p) -> gboolean {
    static_cast<Program*>(p)->plugin->GetFrameTracer()->FlushReports();
    gtk_main_quit();
    return G_SOURCE_REMOVE;
  }, &program);
  gtk_main();

  const int64_t frames = (*monitor)->frames()->frame_count();
  EXPECT_EQ(program.janky, kJankyDraws);
  EXPECT_TRUE(program.slow_idle_ran);
  EXPECT_GT(frames, 100);  // About 6 s at 60 Hz minus the blocks and janks.

  auto has = [](const std::vector<matrix::Issue>& issues, auto pred) {
    return e2e::HasIssue(issues, pred);
  };
  const auto is_fps = e2e::IsFps;
  const auto is_anr = e2e::IsAnr;
  const auto is_slow = e2e::IsSlowMethod;
  EXPECT_TRUE(listener->WaitFor(
      [&](const auto& issues) {
        return has(issues, is_fps) && has(issues, is_anr) && has(issues, is_slow) &&
               has(issues, [](const matrix::Issue& i) {
                 return i.proto().has_anr() &&
                        i.proto().anr().detail() == matrix::proto::LAG_IDLE_HANDLER;
               });
      },
      absl::Seconds(15)));
  monitor->reset();
  std::vector<matrix::Issue> issues = listener->issues();

  // FPS.
  const e2e::FpsTotals fps = e2e::SumFps(issues);
  EXPECT_THAT(fps.scenes, ElementsAre(kTitle));
  EXPECT_GT(fps.frames, 100);
  EXPECT_GE(fps.slow_frames, kJankyDraws);
  EXPECT_LE(fps.slow_frames, kJankyDraws + 3);
  EXPECT_GE(fps.dropped, kJankyDraws * 5);  // 100 ms at 60 Hz: 5 or 6 vsyncs each.
  EXPECT_GE(fps.traversal_ms, 0.9 * kJankyDraws * 100) << "paint time in the traversal phase";
  EXPECT_GT(fps.animation_ms, 0);

  // ANR: the native stack names the blocking function.
  std::string anrs;
  const matrix::Issue* anr = e2e::FindAnrNaming(issues, "HangInUninstrumentedCode", &anrs);
  ASSERT_NE(anr, nullptr) << "no ANR names the hang; ANRs:\n" << anrs;
  EXPECT_EQ(anr->proto().anr().scene(), kTitle);

  // Slow method: the key names the idle callback.
  EXPECT_THAT(e2e::SlowMethodKeys(issues), Contains(HasSubstr("SlowIdle")));

  // Idle lag: the g_idle_add callback, captured while it ran; not the hang
  // in a timeout.
  bool idle_lag_names_slow_idle = false;
  std::string idle_stacks;
  for (const auto& issue : issues) {
    if (!issue.proto().has_anr() ||
        issue.proto().anr().detail() != matrix::proto::LAG_IDLE_HANDLER) {
      continue;
    }
    EXPECT_EQ(issue.proto().anr().idle_handler(), "glib idle source");
    bool names_slow_idle = false;
    for (const auto& frame : issue.proto().anr().thread_stack().frames()) {
      idle_stacks += frame.function() + "\n";
      names_slow_idle |= absl::StrContains(frame.function(), "SlowIdle");
      EXPECT_FALSE(absl::StrContains(frame.function(), "HangInUninstrumentedCode"));
    }
    idle_stacks += "--\n";
    idle_lag_names_slow_idle |= names_slow_idle;
  }
  EXPECT_TRUE(idle_lag_names_slow_idle) << idle_stacks;

  gtk_widget_destroy(window);
}

}  // namespace
