#include "matrix/qt/qt_monitor.h"

#include <QAbstractEventDispatcher>
#include <QApplication>
#include <QCoreApplication>
#include <QEvent>
#include <QGuiApplication>
#include <QObject>
#include <QScreen>
#include <QThread>
#include <QWidget>
#include <QWindow>

#include <atomic>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "matrix/core/app_state.h"
#include "matrix/core/check.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

#ifdef MATRIX_QT_HAVE_GLIB
#include "matrix/glib/glib_monitor.h"
#endif

namespace matrix::qt {

namespace {

constexpr int64_t kDefaultRefreshMillihertz = 60'000;

std::atomic<bool> g_attached{false};

bool IsInputEvent(QEvent::Type type) {
  switch (type) {
    case QEvent::MouseButtonPress:
    case QEvent::MouseButtonRelease:
    case QEvent::MouseButtonDblClick:
    case QEvent::MouseMove:
    case QEvent::KeyPress:
    case QEvent::KeyRelease:
    case QEvent::Wheel:
    case QEvent::TouchBegin:
    case QEvent::TouchUpdate:
    case QEvent::TouchEnd:
    case QEvent::TouchCancel:
    case QEvent::TabletPress:
    case QEvent::TabletMove:
    case QEvent::TabletRelease:
      return true;
    default:
      return false;
  }
}

RefreshRate RefreshRateOf(QScreen* screen) {
  const qreal hz = screen != nullptr ? screen->refreshRate() : 0;
  if (!(hz > 0)) return RefreshRate::FromMillihertz(kDefaultRefreshMillihertz);
  return RefreshRate::FromMillihertz(std::llround(hz * 1000));
}

class QtMonitorImpl final : public QObject, public QtMonitor {
 public:
  QtMonitorImpl(LooperMonitor* looper_monitor, UIThreadMonitor* ui_monitor, Options options)
      : looper_monitor_(looper_monitor), ui_monitor_(ui_monitor), options_(std::move(options)) {}

  ~QtMonitorImpl() override { Detach(); }

  absl::Status Start(QAbstractEventDispatcher* dispatcher) {
    const bool glib = dispatcher->inherits("QEventDispatcherGlib");
    if (glib && !options_.force_dispatcher_signals) {
#ifdef MATRIX_QT_HAVE_GLIB
      // Qt's main-thread GLib dispatcher iterates the default context.
      absl::StatusOr<std::unique_ptr<glib::GlibMonitor>> monitor =
          glib::Attach(g_main_context_default(), looper_monitor_);
      if (!monitor.ok()) return monitor.status();
      glib_ = *std::move(monitor);
      source_ = DispatchSource::kGlibPoll;
#else
      return absl::FailedPreconditionError(
          "matrix::qt::Attach: Qt runs the GLib event dispatcher, whose awake()/aboutToBlock() "
          "do not bracket dispatches, and this matrix-cpp was built without matrix::glib "
          "(MATRIX_WITH_GLIB); build it, or run with QT_NO_GLIB=1");
#endif
    } else {
      source_ = DispatchSource::kDispatcherSignals;
      connections_[0] =
          connect(dispatcher, &QAbstractEventDispatcher::awake, this, [this] { OnAwake(); });
      connections_[1] = connect(dispatcher, &QAbstractEventDispatcher::aboutToBlock, this,
                                [this] { OnAboutToBlock(); });
    }
    auto* gui = qobject_cast<QGuiApplication*>(QCoreApplication::instance());
    frames_ = options_.frames && ui_monitor_ != nullptr && gui != nullptr;
    if (source_ == DispatchSource::kDispatcherSignals || frames_) {
      QCoreApplication::instance()->installEventFilter(this);
    }
    if (gui != nullptr && options_.name_scene) {
      connections_[2] = connect(gui, &QGuiApplication::focusWindowChanged, this,
                                [this](QWindow* window) { OnFocusWindow(window); });
      OnFocusWindow(QGuiApplication::focusWindow());
    }
    attached_ = true;
    return absl::OkStatus();
  }

  void Detach() override {
    MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
    if (!attached_) return;
    attached_ = false;
    for (const QMetaObject::Connection& connection : connections_) {
      QObject::disconnect(connection);
    }
    QObject::disconnect(title_connection_);
    if (QCoreApplication::instance() != nullptr) {
      QCoreApplication::instance()->removeEventFilter(this);
    }
    if (glib_ != nullptr) glib_->Detach();
    if (in_dispatch_) {
      in_dispatch_ = false;
      looper_monitor_->DispatchEnd();
    }
    g_attached.store(false);
  }

  bool attached() const override { return attached_; }
  DispatchSource dispatch_source() const override { return source_; }
  uint64_t dispatch_count() const override {
    return glib_ != nullptr ? glib_->dispatch_count() : dispatch_count_;
  }
  bool in_dispatch() const override {
    return glib_ != nullptr ? glib_->in_dispatch() : in_dispatch_;
  }
  int64_t frame_count() const override { return frame_count_; }
  const std::string& scene() const override { return scene_; }

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (source_ == DispatchSource::kDispatcherSignals && !in_dispatch_) BeginDispatch();
    if (frames_) OnEvent(watched, event->type());
    return false;  // Never consumes.
  }

 private:
  TimeTicks Now() const { return looper_monitor_->clock()->NowTicks(); }

  void BeginDispatch() {
    in_dispatch_ = true;
    ++dispatch_count_;
    looper_monitor_->DispatchBegin(kDispatchLabel);
  }

  void OnAwake() {
    if (in_dispatch_) {
      in_dispatch_ = false;
      looper_monitor_->DispatchEnd();
    }
    BeginDispatch();
  }

  void OnAboutToBlock() {
    if (!in_dispatch_) return;
    in_dispatch_ = false;
    looper_monitor_->DispatchEnd();
  }

  void OnEvent(QObject* watched, QEvent::Type type) {
    if (IsInputEvent(type)) {
      if (!watched->isWindowType() || !in_dispatch()) return;
      const uint64_t dispatch = dispatch_count();
      if (input_dispatch_ == dispatch) return;
      input_dispatch_ = dispatch;
      input_time_ = Now();
      return;
    }
    if (type == QEvent::UpdateRequest) {
      if (!in_dispatch()) return;
      const uint64_t dispatch = dispatch_count();
      if (frame_dispatch_ == dispatch) return;  // One frame per dispatch.
      QWindow* window = nullptr;
      if (watched->isWindowType()) {
        window = static_cast<QWindow*>(watched);
      } else if (watched->isWidgetType() && static_cast<QWidget*>(watched)->isWindow()) {
        window = static_cast<QWidget*>(watched)->windowHandle();
      }
      if (window == nullptr) return;
      // No focus window yet (e.g. no window manager): name the first that draws.
      if (scene_.empty() && options_.name_scene) NameScene(window);
      QScreen* const screen = window->screen();
      frame_dispatch_ = dispatch;
      traversal_marked_ = false;
      const TimeTicks now = Now();
      const TimeTicks start = input_dispatch_ == dispatch ? input_time_ : now;
      ui_monitor_->MarkFrame(start, RefreshRateOf(screen), ++frame_count_);
      ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kInput, start);
      ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kAnimation, now);
      return;
    }
    if (type == QEvent::Paint) {
      if (traversal_marked_ || frame_dispatch_ != dispatch_count() || !in_dispatch()) return;
      traversal_marked_ = true;
      ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kTraversal, Now());
      return;
    }
    if (type == QEvent::Expose && scene_.empty() && options_.name_scene &&
        watched->isWindowType()) {
      // No focus window yet (e.g. no window manager): name the first exposed.
      auto* window = static_cast<QWindow*>(watched);
      if (window->isTopLevel()) NameScene(window);
    }
  }

  void OnFocusWindow(QWindow* window) {
    QObject::disconnect(title_connection_);
    if (window == nullptr) return;
    title_connection_ = connect(window, &QWindow::windowTitleChanged, this,
                                [this, window](const QString&) { NameScene(window); });
    NameScene(window);
  }

  void NameScene(QWindow* window) {
    std::string name = options_.scene;
    if (name.empty()) {
      name = window->title().toStdString();
      if (name.empty()) {
        // A widget window's QWindow is Qt's QWidgetWindow: name its widget.
        QWidget* widget = nullptr;
        if (qobject_cast<QApplication*>(QCoreApplication::instance()) != nullptr) {
          for (QWidget* top : QApplication::topLevelWidgets()) {
            if (top->windowHandle() == window) widget = top;
          }
        }
        name = widget != nullptr ? widget->metaObject()->className()
                                 : window->metaObject()->className();
      }
    }
    AppState* state = AppState::Get();
    // The application's own scene (shown through AppState after ours) stands.
    const SceneId visible = state->visible_scene_id();
    if (visible != AppState::kDefaultScene && visible != scene_id_) return;
    scene_ = std::move(name);
    state->OnSceneShown(scene_);
    scene_id_ = state->InternScene(scene_);
  }

  LooperMonitor* const looper_monitor_;
  UIThreadMonitor* const ui_monitor_;
  const Options options_;
  DispatchSource source_ = DispatchSource::kDispatcherSignals;
#ifdef MATRIX_QT_HAVE_GLIB
  std::unique_ptr<glib::GlibMonitor> glib_;
#else
  struct NoGlib {
    uint64_t dispatch_count() const { return 0; }
    bool in_dispatch() const { return false; }
    void Detach() {}
  };
  std::unique_ptr<NoGlib> glib_;
#endif
  bool attached_ = false;
  bool frames_ = false;
  // kDispatcherSignals.
  bool in_dispatch_ = false;
  uint64_t dispatch_count_ = 0;
  // Frames: the dispatch numbers (dispatch_count()) of the last input event
  // and the last frame.
  uint64_t input_dispatch_ = 0;
  TimeTicks input_time_;
  uint64_t frame_dispatch_ = 0;
  bool traversal_marked_ = false;
  int64_t frame_count_ = 0;
  // awake, aboutToBlock, focusWindowChanged.
  QMetaObject::Connection connections_[3];
  QMetaObject::Connection title_connection_;
  std::string scene_;
  SceneId scene_id_ = AppState::kDefaultScene;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace

const char* DispatchSourceName(DispatchSource source) {
  switch (source) {
    case DispatchSource::kGlibPoll:
      return "glib-poll";
    case DispatchSource::kDispatcherSignals:
      return "dispatcher-signals";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<QtMonitor>> Attach(LooperMonitor* looper_monitor,
                                                  UIThreadMonitor* ui_monitor, Options options) {
  if (looper_monitor == nullptr) {
    return absl::InvalidArgumentError("matrix::qt::Attach: null LooperMonitor");
  }
  if (looper_monitor->source() != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "matrix::qt::Attach: the LooperMonitor is not a foreign-loop monitor; configure "
        "TraceConfig::SetLooperSource(LooperMonitor::Source::kForeign)");
  }
  QCoreApplication* app = QCoreApplication::instance();
  if (app == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::qt::Attach: no QCoreApplication; create the QApplication first");
  }
  if (QThread::currentThread() != app->thread()) {
    return absl::FailedPreconditionError(
        "matrix::qt::Attach: not on the GUI thread (the QCoreApplication's thread)");
  }
  QAbstractEventDispatcher* dispatcher = QAbstractEventDispatcher::instance(app->thread());
  if (dispatcher == nullptr) {
    return absl::FailedPreconditionError("matrix::qt::Attach: the GUI thread has no event dispatcher");
  }
  if (g_attached.exchange(true)) {
    return absl::FailedPreconditionError("matrix::qt::Attach: a QtMonitor is already attached");
  }
  auto monitor = std::make_unique<QtMonitorImpl>(looper_monitor, ui_monitor, std::move(options));
  if (absl::Status status = monitor->Start(dispatcher); !status.ok()) {
    g_attached.store(false);
    return status;
  }
  return std::unique_ptr<QtMonitor>(std::move(monitor));
}

absl::StatusOr<std::unique_ptr<QtMonitor>> Attach(TracePlugin* plugin, Options options) {
  if (plugin == nullptr) return absl::InvalidArgumentError("matrix::qt::Attach: null plugin");
  if (plugin->GetLooperMonitor() == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::qt::Attach: the TracePlugin has not started; call Start() on the GUI thread "
        "first");
  }
  return Attach(plugin->GetLooperMonitor(), plugin->GetUIThreadMonitor(), std::move(options));
}

}  // namespace matrix::qt
