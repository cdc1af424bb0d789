// The cost matrix::qt adds to a Qt 6 main loop, against the same loop without
// it, in the same run (docs/performance.md, "Toolkit adapters"). Offscreen
// platform, real clock, a started LooperMonitor + UIThreadMonitor (no
// tracers) behind the adapter.
//
//   BM_PostedEventDispatch/<mode>: post one event to a QObject and run one
//     QCoreApplication::processEvents() (one GLib iteration on Qt's default
//     dispatcher: one dispatch). mode 0: no monitor; 1: kGlibPoll;
//     2: kDispatcherSignals (forced; signals + event filter).
//   BM_Frame/<mode>: one dispatch drawing one frame, driven by hand:
//     awake(), a mouse move to the window, an UpdateRequest to a shown
//     top-level widget with nothing dirty (Qt's sync finds no work, so the
//     adapter's share is not hidden by painting), aboutToBlock().
//     mode 0: no monitor; 1: monitored (kDispatcherSignals, frames on).

#include <QAbstractEventDispatcher>
#include <QApplication>
#include <QMouseEvent>
#include <QWidget>
#include <QWindow>

#include <cstdlib>
#include <memory>

#include "benchmark/benchmark.h"
#include "matrix/core/tick_clock.h"
#include "matrix/qt/qt_monitor.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

class Sink : public QObject {
 public:
  int64_t events = 0;

 protected:
  bool event(QEvent* e) override {
    if (e->type() == QEvent::User) {
      ++events;
      return true;
    }
    return QObject::event(e);
  }
};

struct Monitors {
  Monitors()
      : looper(matrix::TickClock::Default()), ui(&looper, nullptr, {}) {
    looper.Start();
    ui.Start();
  }
  matrix::LooperMonitor looper;
  matrix::UIThreadMonitor ui;
};

std::unique_ptr<matrix::qt::QtMonitor> AttachMode(Monitors* monitors, int64_t mode) {
  if (mode == 0) return nullptr;
  matrix::qt::Options options;
  options.name_scene = false;
  options.force_dispatcher_signals = mode == 2;
  auto monitor = matrix::qt::Attach(&monitors->looper, &monitors->ui, options);
  if (!monitor.ok()) std::abort();
  return *std::move(monitor);
}

void BM_PostedEventDispatch(benchmark::State& state) {
  Monitors monitors;
  Sink sink;
  auto monitor = AttachMode(&monitors, state.range(0));
  for (auto _ : state) {
    QCoreApplication::postEvent(&sink, new QEvent(QEvent::User));
    QCoreApplication::processEvents();
  }
  if (sink.events != static_cast<int64_t>(state.iterations())) state.SkipWithError("lost events");
  state.SetLabel(state.range(0) == 0 ? "baseline" : state.range(0) == 1 ? "glib-poll" : "signals");
}
BENCHMARK(BM_PostedEventDispatch)->Arg(0)->Arg(1)->Arg(2);

void BM_Frame(benchmark::State& state) {
  Monitors monitors;
  QWidget window;
  window.resize(64, 64);
  window.show();
  QCoreApplication::processEvents();
  QAbstractEventDispatcher* dispatcher = QAbstractEventDispatcher::instance();
  std::unique_ptr<matrix::qt::QtMonitor> monitor;
  if (state.range(0) == 1) {
    matrix::qt::Options options;
    options.name_scene = false;
    options.force_dispatcher_signals = true;
    auto attached = matrix::qt::Attach(&monitors.looper, &monitors.ui, options);
    if (!attached.ok()) std::abort();
    monitor = *std::move(attached);
  }
  QMouseEvent move(QEvent::MouseMove, QPointF(5, 5), QPointF(5, 5), Qt::NoButton, Qt::NoButton,
                   Qt::NoModifier);
  QEvent update(QEvent::UpdateRequest);
  for (auto _ : state) {
    emit dispatcher->awake();
    QCoreApplication::sendEvent(window.windowHandle(), &move);
    QCoreApplication::sendEvent(&window, &update);
    emit dispatcher->aboutToBlock();
  }
  if (monitor != nullptr && monitor->frame_count() != static_cast<int64_t>(state.iterations())) {
    state.SkipWithError("frames not counted");
  }
  state.SetLabel(state.range(0) == 0 ? "baseline" : "monitored");
}
BENCHMARK(BM_Frame)->Arg(0)->Arg(1);

}  // namespace

int main(int argc, char** argv) {
  setenv("QT_QPA_PLATFORM", "offscreen", 0);
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
