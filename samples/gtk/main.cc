// gtk-sample: matrix-cpp on a GTK 3 program with one line
// (matrix::gtk::Attach). A window animates at the display's rate; every 90th
// frame paints slowly (jank: FPS report), a button hangs the loop for 1.5 s
// (ANR with the GTK thread's stack) and another runs a 300 ms idle callback
// (slow method). Reports are printed to stdout.
//
//   ./build/samples/gtk/gtk-sample            (under X11/Wayland, or xvfb-run -a)

#include <gtk/gtk.h>

#include <cstdio>
#include <memory>
#include <string_view>

#include "absl/time/clock.h"
#include "matrix/core/matrix.h"
#include "matrix/gtk/gtk_monitor.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"

namespace {

__attribute__((no_instrument_function)) void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

class Console : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    std::printf("[issue] %s\n", matrix::SummarizeIssue(issue).c_str());
    std::fflush(stdout);
  }
};

int g_draws = 0;

gboolean OnDraw(GtkWidget*, cairo_t* cr, gpointer) {
  cairo_set_source_rgb(cr, (g_draws % 90) / 90.0, 0.4, 0.7);
  cairo_paint(cr);
  if (++g_draws % 90 == 0) Spin(absl::Milliseconds(80));  // A janky frame.
  return FALSE;
}

gboolean OnTick(GtkWidget* widget, GdkFrameClock*, gpointer) {
  gtk_widget_queue_draw(widget);
  return G_SOURCE_CONTINUE;
}

__attribute__((noinline)) void LoadHugeFile() { absl::SleepFor(absl::Milliseconds(1500)); }

__attribute__((noinline)) gboolean RebuildIndex(gpointer) {
  Spin(absl::Milliseconds(300));
  return G_SOURCE_REMOVE;
}

}  // namespace

int main(int argc, char** argv) {
  gtk_init(&argc, &argv);
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableFps(true)
                    .SetFpsTimeSlice(absl::Seconds(5))
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    .EnableEvilMethodTrace(true)
                    .SetEvilThreshold(absl::Milliseconds(200))
                    .Build();
  if (!config.ok()) return 1;
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                .AddPlugin(std::move(trace))
                                .SetPluginListener(std::make_shared<Console>())
                                .Build())
           .ok() ||
      !plugin->Start().ok()) {  // On the GTK thread.
    return 1;
  }

  GtkWidget* window = gtk_window_new(GTK_WINDOW_TOPLEVEL);
  gtk_window_set_title(GTK_WINDOW(window), "Gallery");  // The scene's name.
  gtk_window_set_default_size(GTK_WINDOW(window), 400, 300);
  g_signal_connect(window, "destroy", G_CALLBACK(gtk_main_quit), nullptr);
  GtkWidget* box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 4);
  GtkWidget* area = gtk_drawing_area_new();
  gtk_widget_set_vexpand(area, TRUE);
  g_signal_connect(area, "draw", G_CALLBACK(&OnDraw), nullptr);
  gtk_widget_add_tick_callback(area, &OnTick, nullptr, nullptr);
  GtkWidget* hang = gtk_button_new_with_label("Hang 1.5 s");
  g_signal_connect(hang, "clicked", G_CALLBACK(+[](GtkButton*, gpointer) { LoadHugeFile(); }),
                   nullptr);
  GtkWidget* slow = gtk_button_new_with_label("Slow idle 300 ms");
  g_signal_connect(slow, "clicked",
                   G_CALLBACK(+[](GtkButton*, gpointer) { g_idle_add(&RebuildIndex, nullptr); }),
                   nullptr);
  gtk_box_pack_start(GTK_BOX(box), area, TRUE, TRUE, 0);
  gtk_box_pack_start(GTK_BOX(box), hang, FALSE, FALSE, 0);
  gtk_box_pack_start(GTK_BOX(box), slow, FALSE, FALSE, 0);
  gtk_container_add(GTK_CONTAINER(window), box);

  auto monitor = matrix::gtk::Attach(window, plugin);  // The one line.
  if (!monitor.ok()) std::fprintf(stderr, "unmonitored: %s\n", monitor.status().ToString().c_str());
  gtk_widget_show_all(window);

  // Without a user, press the buttons: hang at 3 s, slow idle at 6 s, quit at 8 s.
  if (argc > 1 && std::string_view(argv[1]) == "--auto") {
    g_timeout_add(3000, [](gpointer b) -> gboolean { gtk_button_clicked(GTK_BUTTON(b)); return FALSE; }, hang);
    g_timeout_add(6000, [](gpointer b) -> gboolean { gtk_button_clicked(GTK_BUTTON(b)); return FALSE; }, slow);
    g_timeout_add(8000, [](gpointer w) -> gboolean { gtk_widget_destroy(GTK_WIDGET(w)); return FALSE; }, window);
  }
  gtk_main();
  plugin->GetFrameTracer()->FlushReports();
  if (monitor.ok()) monitor->reset();  // Detach before Shutdown.
  absl::SleepFor(absl::Milliseconds(300));  // Let the worker deliver the last reports.
  matrix::Matrix::Shutdown();
  return 0;
}
