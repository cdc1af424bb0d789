// File: matrix/qt/qt_monitor.h
//
// Reports a Qt 6 program to matrix-cpp: the dispatches of the main thread's
// event loop and the frames of its windows, without owning the loop. One line,
// after the QApplication exists, on the GUI thread:
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableFps(true).EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   QApplication app(argc, argv);
//   ...                                     // Matrix::Init, plugin->Start() on the GUI thread
//   auto monitor = matrix::qt::Attach(plugin);
//   if (!monitor.ok()) { /* report monitor.status(); the app runs unmonitored */ }
//   app.exec();
//   monitor->reset();                       // detach, before Matrix::Shutdown()
//
// Dispatches (DispatchSource), chosen from the main thread's event dispatcher:
//
//   kGlibPoll           QEventDispatcherGlib (Qt's default on Linux; the xcb
//                       plugin's QXcbGlibEventDispatcher): the main thread's
//                       GMainContext (g_main_context_default()) is monitored
//                       with matrix::glib, so one dispatch is the time from one
//                       poll's return to the next poll's call. The dispatcher's
//                       awake()/aboutToBlock() signals alone cannot be used
//                       here: Qt emits aboutToBlock() before
//                       g_main_context_iteration() and awake() after it, so
//                       every timer, posted event and X event runs *between*
//                       aboutToBlock() and awake(), in what those signals call
//                       idle time. (The signal mode's event filter would see
//                       Qt's events, but not GLib sources that are no Qt
//                       events, nor the poll's exact return.)
//   kDispatcherSignals  any other dispatcher (QEventDispatcherUNIX with
//                       QT_NO_GLIB=1, or a Qt built without GLib): a dispatch
//                       begins at awake() (ending one in progress) or at the
//                       first event delivered to any main-thread object while
//                       none is in progress (Qt activates timers, socket
//                       notifiers and window-system events after its poll and
//                       before the next awake()), and ends at aboutToBlock().
//
// Dispatches are labelled "qt-dispatch" (kDispatchLabel) in the signal mode,
// "glib-dispatch" in the GLib mode. LAG, ANR (with the GUI thread's native
// stack), slow method and idle lag then work on every slot, timer and event.
//
// Frames (with a QGuiApplication), from an application event filter (phases:
// UIThreadMonitor::Phase):
//
//   first input event (mouse, key, wheel, touch, tablet) delivered to a
//   window earlier in the dispatch that draws  -> kInput (zero when none)
//   QEvent::UpdateRequest to a top-level QWidget or a QWindow
//                                              -> kAnimation (Qt's repaint
//                                                 manager sync; a QWindow's own
//                                                 update code before it paints)
//   first QEvent::Paint after it               -> kTraversal (widget painting,
//                                                 then the backing-store flush)
//   kCommit is not marked: Qt has no public hook at the raster backing-store
//   flush, so the flush is counted in traversal and commit is zero.
//
// A frame's intended start is its first input event, else its UpdateRequest
// (Qt's raster windows have no vsync time); the refresh rate is the window's
// QScreen::refreshRate() (60 Hz when unknown). At most one frame per dispatch.
//
// Scene: the active (focus) window's title, or its class name (the top-level
// widget's, for widget windows) when untitled, or Options::scene. Set as
// AppState's visible scene at attach, on focus changes and title changes,
// unless the application has since shown another scene through AppState.
//
// Hot path: per dispatch the GLib mode adds two clock reads; the signal mode
// adds one signal call per awake()/aboutToBlock() and a clock read per
// dispatch. The event filter adds a virtual call and a type switch per event,
// and per frame up to three clock reads (first input, UpdateRequest, first
// Paint). No allocation, lock, syscall or log line.
//
// Thread safety: GUI thread only (the thread of QCoreApplication::instance()):
// Attach(), the destructor and every method. One monitor per process.

#ifndef MATRIX_QT_QT_MONITOR_H_
#define MATRIX_QT_QT_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace matrix {
class LooperMonitor;
class TracePlugin;
class UIThreadMonitor;
}  // namespace matrix

namespace matrix::qt {

// The label of each dispatch in the kDispatcherSignals mode.
inline constexpr char kDispatchLabel[] = "qt-dispatch";

enum class DispatchSource { kGlibPoll, kDispatcherSignals };
const char* DispatchSourceName(DispatchSource source);

struct Options {
  // The scene's name; empty: the active window's title, or its class name.
  std::string scene;
  // False: leave AppState's scene alone.
  bool name_scene = true;
  // False: dispatches only (no frames, no event filter in the GLib mode).
  bool frames = true;
  // Tests: force the dispatcher-signals mode even on a GLib dispatcher (whose
  // signals bracket the wrong span, see above; only for driving the signals
  // by hand).
  bool force_dispatcher_signals = false;
};

class QtMonitor {
 public:
  // Detaches (see Detach()). GUI thread.
  virtual ~QtMonitor() = default;

  // Disconnects from the dispatcher, removes the event filter, ends a dispatch
  // in progress. Idempotent. GUI thread.
  virtual void Detach() = 0;
  virtual bool attached() const = 0;

  virtual DispatchSource dispatch_source() const = 0;
  // Dispatches reported since Attach(). GUI thread.
  virtual uint64_t dispatch_count() const = 0;
  virtual bool in_dispatch() const = 0;
  // Frames reported since Attach(). GUI thread.
  virtual int64_t frame_count() const = 0;
  // The scene this monitor named last (empty when none).
  virtual const std::string& scene() const = 0;
};

// Attach()
//
// Monitors the main thread's event loop and its windows' frames, reporting to
// `plugin` (a started TracePlugin configured with
// SetLooperSource(LooperMonitor::Source::kForeign)). Destroy the result
// before Matrix::Shutdown(). Errors: InvalidArgument (null plugin),
// FailedPrecondition (no QCoreApplication, not its thread, plugin not started
// or not a foreign-loop plugin, a QtMonitor already attached, a GLib
// dispatcher in a build without matrix::glib), those of glib::Attach().
// GUI thread.
absl::StatusOr<std::unique_ptr<QtMonitor>> Attach(TracePlugin* plugin, Options options = {});

// The same, reporting to any foreign-source LooperMonitor and, for frames,
// UIThreadMonitor (null: no frames). Neither is owned; both must outlive the
// result. GUI thread.
absl::StatusOr<std::unique_ptr<QtMonitor>> Attach(LooperMonitor* looper_monitor,
                                                  UIThreadMonitor* ui_monitor,
                                                  Options options = {});

}  // namespace matrix::qt

#endif  // MATRIX_QT_QT_MONITOR_H_
