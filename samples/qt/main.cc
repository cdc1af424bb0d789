// qt-sample: matrix-cpp on a Qt 6 Widgets program with one line
// (matrix::qt::Attach). A canvas animates at about 60 Hz (a 16 ms timer calls
// update()); every 90th paint is slow (jank: FPS report), a button hangs the
// loop for 1.5 s (ANR with the GUI thread's stack) and another runs a 300 ms
// queued slot (slow method). Reports are printed to stdout.
//
//   ./build/samples/qt/qt-sample              (under X11/Wayland)
//   QT_QPA_PLATFORM=xcb xvfb-run -a ./build/samples/qt/qt-sample --auto

#include <QApplication>
#include <QPainter>
#include <QPushButton>
#include <QTimer>
#include <QVBoxLayout>
#include <QWidget>

#include <cstdio>
#include <memory>
#include <string_view>

#include "absl/time/clock.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/qt/qt_monitor.h"

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

class Canvas : public QWidget {
 protected:
  void paintEvent(QPaintEvent*) override {
    QPainter painter(this);
    painter.fillRect(rect(), QColor::fromHsv((paints_ * 4) % 360, 120, 220));
    if (++paints_ % 90 == 0) Spin(absl::Milliseconds(80));  // A janky frame.
  }

 private:
  int paints_ = 0;
};

__attribute__((noinline)) void LoadHugeFile() { absl::SleepFor(absl::Milliseconds(1500)); }

__attribute__((noinline)) void RebuildIndex() { Spin(absl::Milliseconds(300)); }

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
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
      !plugin->Start().ok()) {  // On the GUI thread.
    return 1;
  }

  QWidget window;
  window.setWindowTitle("Gallery");  // The scene's name.
  window.resize(400, 300);
  auto* layout = new QVBoxLayout(&window);
  auto* canvas = new Canvas;
  auto* hang = new QPushButton("Hang 1.5 s");
  auto* slow = new QPushButton("Slow slot 300 ms");
  layout->addWidget(canvas, 1);
  layout->addWidget(hang);
  layout->addWidget(slow);
  QObject::connect(hang, &QPushButton::clicked, [] { LoadHugeFile(); });
  QObject::connect(slow, &QPushButton::clicked,
                   [] { QTimer::singleShot(0, [] { RebuildIndex(); }); });
  QTimer animation;
  QObject::connect(&animation, &QTimer::timeout, canvas, [canvas] { canvas->update(); });
  animation.start(16);

  auto monitor = matrix::qt::Attach(plugin);  // The one line.
  if (!monitor.ok()) std::fprintf(stderr, "unmonitored: %s\n", monitor.status().ToString().c_str());
  window.show();

  // Without a user, press the buttons: hang at 3 s, slow slot at 6 s, quit at 8 s.
  if (argc > 1 && std::string_view(argv[1]) == "--auto") {
    QTimer::singleShot(3000, hang, &QPushButton::click);
    QTimer::singleShot(6000, slow, &QPushButton::click);
    QTimer::singleShot(8000, &app, &QCoreApplication::quit);
  }
  app.exec();
  plugin->GetFrameTracer()->FlushReports();
  if (monitor.ok()) monitor->reset();  // Detach before Shutdown.
  absl::SleepFor(absl::Milliseconds(300));  // Let the worker deliver the last reports.
  matrix::Matrix::Shutdown();
  return 0;
}
