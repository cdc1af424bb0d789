// The per-frame cost matrix::gtk adds, against the same frames without it, in
// one run. GdkFrameClock's own timer paces frames at the refresh rate, so
// timing real frames would measure mostly waiting; instead each iteration is
// one frame: an idle source's callback emits the six frame-clock signals of
// one frame (flush-events, before-paint, update, layout, paint, after-paint)
// on the shown, idle window's real GdkFrameClock, with GDK's own handlers
// blocked (they only work inside the clock's own frame cycle): no drawing,
// so the frame is the cheapest possible one and the ratio an upper bound.
// Each flush-events makes GDK schedule its frame clock's paint idle
// (GDK_PRIORITY_REDRAW, above the bench's idle) to resume event processing,
// as after every real GTK 3 frame; so a frame is two dispatches of the
// default GMainContext (GDK's resume, then the bench's emission), and an
// iteration runs g_main_context_iteration until the frame was emitted. (One
// g_main_context_iteration per iteration emitted a frame only every other
// iteration: the adapter counted every emitted frame, the bench emitted half
// as many frames as iterations.)
// Arg 0: no adapter; 1: matrix::glib only (the dispatch
// is reported, the frame is not); 2: matrix::gtk (the dispatch plus the
// frame: emission hooks, phases, MarkFrame) reporting to a TracePlugin with
// FPS, ANR and slow method on. Needs a display:
//
//   xvfb-run -a ./matrix_gtk_bench --benchmark_min_time=0.2 --benchmark_repetitions=3

#include <gtk/gtk.h>

#include <cstdint>
#include <memory>

#include "benchmark/benchmark.h"
#include "matrix/core/matrix.h"
#include "matrix/glib/glib_monitor.h"
#include "matrix/gtk/gtk_monitor.h"
#include "matrix/plugins/trace_plugin.h"
#include "monitoring.h"

namespace {

using bench::Monitoring;

struct Frame {
  GdkFrameClock* clock = nullptr;
  guint signals[6] = {};
  int64_t emitted = 0;
};

gboolean EmitFrame(gpointer data) {
  auto* frame = static_cast<Frame*>(data);
  for (guint signal : frame->signals) g_signal_emit(frame->clock, signal, 0);
  ++frame->emitted;
  return G_SOURCE_CONTINUE;
}

void BM_GtkFrame(benchmark::State& state) {
  if (!gtk_init_check(nullptr, nullptr)) {
    state.SkipWithError("gtk_init_check failed: no display (run under xvfb-run -a)");
    return;
  }
  GtkWidget* window = gtk_window_new(GTK_WINDOW_TOPLEVEL);
  gtk_window_set_title(GTK_WINDOW(window), "bench");
  gtk_widget_show(window);
  // Let GTK map, lay out and draw the window with its real frame clock until
  // it is idle (no handler connected for a pending resize or redraw).
  const gint64 settle_until = g_get_monotonic_time() + 300000;
  while (g_get_monotonic_time() < settle_until) g_main_context_iteration(nullptr, FALSE);
  Frame frame;
  frame.clock = gtk_widget_get_frame_clock(window);
  const char* names[6] = {"flush-events", "before-paint", "update",
                          "layout",       "paint",        "after-paint"};
  for (int i = 0; i < 6; ++i) {
    frame.signals[i] = g_signal_lookup(names[i], GDK_TYPE_FRAME_CLOCK);
    // GDK's handlers expect the clock's own frame cycle (they crash on a
    // frame emitted outside it): block them, so that an emission is the
    // signal machinery plus, with matrix::gtk, its emission hooks.
    g_signal_handlers_block_matched(frame.clock, G_SIGNAL_MATCH_ID, frame.signals[i], 0,
                                    nullptr, nullptr, nullptr);
  }
  GMainContext* context = g_main_context_default();
  const guint idle = g_idle_add(&EmitFrame, &frame);

  std::unique_ptr<Monitoring> monitoring;
  std::unique_ptr<matrix::glib::GlibMonitor> glib_monitor;
  std::unique_ptr<matrix::gtk::GtkMonitor> gtk_monitor;
  if (state.range(0) >= 1) monitoring = std::make_unique<Monitoring>();
  if (state.range(0) == 1) {
    auto attached = matrix::glib::Attach(context, monitoring->plugin());
    if (!attached.ok()) {
      state.SkipWithError(attached.status().ToString().c_str());
      return;
    }
    glib_monitor = *std::move(attached);
  } else if (state.range(0) == 2) {
    auto attached = matrix::gtk::Attach(window, monitoring->plugin());
    if (!attached.ok()) {
      state.SkipWithError(attached.status().ToString().c_str());
      return;
    }
    gtk_monitor = *std::move(attached);
  }
  int64_t turns = 0;
  frame.emitted = 0;
  for (auto _ : state) {
    const int64_t before = frame.emitted;
    while (frame.emitted == before) {
      g_main_context_iteration(context, FALSE);
      ++turns;
    }
  }
  // Per iteration (= per emitted frame): loop turns, dispatches reported and
  // frames reported (1 with matrix::gtk: every emitted frame is counted).
  const double frames = static_cast<double>(frame.emitted);
  state.counters["turns_per_frame"] = static_cast<double>(turns) / frames;
  if (glib_monitor != nullptr) {
    state.counters["dispatches_per_frame"] =
        static_cast<double>(glib_monitor->dispatch_count()) / frames;
  }
  if (gtk_monitor != nullptr) {
    state.counters["dispatches_per_frame"] =
        static_cast<double>(gtk_monitor->dispatches()->dispatch_count()) / frames;
    state.counters["frames_reported_per_frame"] =
        static_cast<double>(gtk_monitor->frames()->frame_count()) / frames;
  }
  gtk_monitor.reset();
  glib_monitor.reset();
  monitoring.reset();
  g_source_remove(idle);
  gtk_widget_destroy(window);
}
BENCHMARK(BM_GtkFrame)->Arg(0)->Arg(1)->Arg(2);

}  // namespace

BENCHMARK_MAIN();
