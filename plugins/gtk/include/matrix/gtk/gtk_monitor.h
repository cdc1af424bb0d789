// File: matrix/gtk/gtk_monitor.h
//
// Reports a GTK 3 program to matrix-cpp: the dispatches of its GLib main
// context (matrix::glib) and the frames of a toplevel window, from the
// window's GdkFrameClock. One line:
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableFps(true).EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   ...                                     // Matrix::Init, plugin->Start() on the GTK thread
//   auto monitor = matrix::gtk::Attach(window, plugin);   // after gtk_init
//   gtk_main();
//   monitor->reset();                       // before Matrix::Shutdown()
//
// Frame phases, from the frame clock's signals (UIThreadMonitor::Phase):
//
//   flush-events            -> kInput      (or before-paint when the flush ran
//                                            in an earlier dispatch)
//   update                  -> kAnimation  (tick callbacks, CSS animations)
//   layout or paint         -> kTraversal  (size allocation, then drawing;
//                                            GTK emits each only when requested)
//   after-paint             -> kCommit     (until the dispatch ends)
//
// The frame's intended vsync is gdk_frame_clock_get_frame_time(); the refresh
// interval comes from gdk_frame_clock_get_refresh_info() (60 Hz when the
// clock does not know it). A frame is reported only when its paint runs inside
// a monitored GLib dispatch.
//
// Scene: the window's title, or its type name (e.g. "GtkWindow") when it has
// none, or Options::scene. The adapter sets it as AppState's visible scene at
// attach and when the title changes, unless the application has since shown
// another scene through AppState (then the application's scene stands).
//
// The frame clock exists once the window is realized; attaching before that
// is fine (frames are hooked at "realize", unhooked at "unrealize").
//
// Per frame the adapter adds up to five clock reads (vDSO) and no allocation, lock,
// syscall or log line.
//
// Thread safety: GTK's thread only (the thread running gtk_main or iterating
// the default GMainContext): Attach(), AttachWindow() and the destructors.

#ifndef MATRIX_GTK_GTK_MONITOR_H_
#define MATRIX_GTK_GTK_MONITOR_H_

#include <gtk/gtk.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "matrix/core/app_state.h"
#include "matrix/core/check.h"
#include "matrix/core/time_ticks.h"
#include "matrix/glib/glib_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {
class TracePlugin;
}

namespace matrix::gtk {

struct Options {
  // The scene's name; empty: the window's title, or its type name.
  std::string scene;
  // False: leave AppState's scene alone.
  bool name_scene = true;
};

// Frames of one toplevel window.
class FrameMonitor {
 public:
  // Disconnects from the window and its frame clock. GTK thread.
  ~FrameMonitor();
  FrameMonitor(const FrameMonitor&) = delete;
  FrameMonitor& operator=(const FrameMonitor&) = delete;

  // Frames reported since attach. GTK thread.
  int64_t frame_count() const { return frame_count_; }
  // The frame clock hooked now (null before the window is realized).
  GdkFrameClock* frame_clock() const { return frame_clock_; }
  // The scene this monitor named (empty when none).
  const std::string& scene() const { return scene_; }

 private:
  friend absl::StatusOr<std::unique_ptr<FrameMonitor>> AttachWindow(
      GtkWidget* window, TracePlugin* plugin, const glib::GlibMonitor* dispatches,
      Options options);

  FrameMonitor(GtkWidget* window, UIThreadMonitor* ui_monitor,
               const glib::GlibMonitor* dispatches, Options options);
  void HookClock();
  void UnhookClock();
  void NameScene();
  TimeTicks Now() const { return ui_monitor_->clock()->NowTicks(); }

  static void OnRealize(GtkWidget* widget, gpointer self);
  static void OnUnrealize(GtkWidget* widget, gpointer self);
  static void OnTitle(GObject* object, GParamSpec* pspec, gpointer self);
  // Emission hooks (see HookClock()); each returns TRUE to stay installed.
  static constexpr int kHookCount = 6;
  static FrameMonitor* ForClock(const GValue* params, gpointer self);
  static gboolean OnFlushEvents(GSignalInvocationHint*, guint, const GValue*, gpointer self);
  static gboolean OnBeforePaint(GSignalInvocationHint*, guint, const GValue*, gpointer self);
  static gboolean OnUpdate(GSignalInvocationHint*, guint, const GValue*, gpointer self);
  static gboolean OnLayout(GSignalInvocationHint*, guint, const GValue*, gpointer self);
  static gboolean OnAfterPaint(GSignalInvocationHint*, guint, const GValue*, gpointer self);

  GtkWidget* const window_;
  UIThreadMonitor* const ui_monitor_;
  const glib::GlibMonitor* const dispatches_;
  const Options options_;
  GdkFrameClock* frame_clock_ = nullptr;
  gulong window_handlers_[3] = {};
  guint hook_signals_[kHookCount] = {};
  gulong hook_ids_[kHookCount] = {};
  // The frame in progress (set at before-paint in a monitored dispatch).
  bool in_frame_ = false;
  bool traversal_marked_ = false;
  uint64_t flush_dispatch_ = 0;  // GlibMonitor::dispatch_count() at flush-events.
  TimeTicks flush_time_;
  int64_t frame_count_ = 0;
  std::string scene_;
  SceneId scene_id_ = AppState::kDefaultScene;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

// Dispatches of the default GMainContext plus one window's frames.
class GtkMonitor {
 public:
  GtkMonitor(std::unique_ptr<glib::GlibMonitor> dispatches, std::unique_ptr<FrameMonitor> frames)
      : dispatches_(std::move(dispatches)), frames_(std::move(frames)) {}
  // Unhooks the frames, then the dispatches. GTK thread.
  ~GtkMonitor() {
    frames_.reset();
    dispatches_.reset();
  }

  glib::GlibMonitor* dispatches() const { return dispatches_.get(); }
  FrameMonitor* frames() const { return frames_.get(); }

 private:
  std::unique_ptr<glib::GlibMonitor> dispatches_;
  std::unique_ptr<FrameMonitor> frames_;
};

// Attach()
//
// Monitors the default GMainContext's dispatches and `window`'s frames
// (`window` must be a GtkWindow; the monitor keeps a reference to it until
// destroyed). `plugin` as for glib::Attach() (a started foreign-loop
// TracePlugin). Errors: InvalidArgument (null or not a GtkWindow), those of
// glib::Attach(). GTK thread.
absl::StatusOr<std::unique_ptr<GtkMonitor>> Attach(GtkWidget* window, TracePlugin* plugin,
                                                   Options options = {});

// AttachWindow()
//
// Frames of one more window, when the dispatches are already monitored
// (`dispatches`, not owned, must outlive the result). GTK thread.
absl::StatusOr<std::unique_ptr<FrameMonitor>> AttachWindow(GtkWidget* window, TracePlugin* plugin,
                                                           const glib::GlibMonitor* dispatches,
                                                           Options options = {});

}  // namespace matrix::gtk

#endif  // MATRIX_GTK_GTK_MONITOR_H_
