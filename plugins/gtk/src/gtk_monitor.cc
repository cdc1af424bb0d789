#include "matrix/gtk/gtk_monitor.h"

#include <utility>

#include "absl/status/status.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/plugins/trace_plugin.h"

namespace matrix::gtk {

namespace {

constexpr int64_t kDefaultRefreshMillihertz = 60'000;

// The frame clock's times are g_get_monotonic_time() microseconds; the plugin
// may time with another clock (a fake one in tests), so a frame time is
// carried over as its distance from now.
TimeTicks FrameTimeToTicks(int64_t frame_time_us, TimeTicks now) {
  const int64_t age_us = g_get_monotonic_time() - frame_time_us;
  if (age_us <= 0) return now;
  return now - absl::Microseconds(age_us);
}

RefreshRate RefreshRateOf(GdkFrameClock* clock, int64_t frame_time_us) {
  gint64 interval_us = 0;
  gint64 presentation_us = 0;
  gdk_frame_clock_get_refresh_info(clock, frame_time_us, &interval_us, &presentation_us);
  if (interval_us <= 0) return RefreshRate::FromMillihertz(kDefaultRefreshMillihertz);
  return RefreshRate::FromMillihertz(1'000'000'000 / interval_us);
}

}  // namespace

FrameMonitor::FrameMonitor(GtkWidget* window, UIThreadMonitor* ui_monitor,
                           const glib::GlibMonitor* dispatches, Options options)
    : window_(GTK_WIDGET(g_object_ref(window))),
      ui_monitor_(ui_monitor),
      dispatches_(dispatches),
      options_(std::move(options)) {
  window_handlers_[0] = g_signal_connect(window_, "realize", G_CALLBACK(&OnRealize), this);
  window_handlers_[1] = g_signal_connect(window_, "unrealize", G_CALLBACK(&OnUnrealize), this);
  window_handlers_[2] = g_signal_connect(window_, "notify::title", G_CALLBACK(&OnTitle), this);
  ui_monitor_->AddFrameSource();  // Before the scene is shown: it ends at a frame.
  if (gtk_widget_get_realized(window_)) HookClock();
  NameScene();
}

FrameMonitor::~FrameMonitor() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  UnhookClock();
  ui_monitor_->RemoveFrameSource();
  // A destroyed window has dropped its handlers already.
  for (gulong id : window_handlers_) {
    if (g_signal_handler_is_connected(window_, id)) g_signal_handler_disconnect(window_, id);
  }
  g_object_unref(window_);
}

// Phase markers are emission hooks, which GLib runs before every handler of
// the signal (GDK's own paint handler, connected when the window was realized,
// would otherwise draw before a handler of ours could mark the phase). Hooks
// are per signal, for every frame clock: each checks the instance.
void FrameMonitor::HookClock() {
  UnhookClock();
  GdkFrameClock* clock = gtk_widget_get_frame_clock(window_);
  if (clock == nullptr) return;
  frame_clock_ = GDK_FRAME_CLOCK(g_object_ref(clock));
  static constexpr const char* kSignals[kHookCount] = {"flush-events", "before-paint", "update",
                                                        "layout",       "paint",        "after-paint"};
  static constexpr GSignalEmissionHook kHooks[kHookCount] = {
      &OnFlushEvents, &OnBeforePaint, &OnUpdate, &OnLayout, &OnLayout, &OnAfterPaint};
  for (int i = 0; i < kHookCount; ++i) {
    hook_signals_[i] = g_signal_lookup(kSignals[i], GDK_TYPE_FRAME_CLOCK);
    hook_ids_[i] = g_signal_add_emission_hook(hook_signals_[i], 0, kHooks[i], this, nullptr);
  }
}

void FrameMonitor::UnhookClock() {
  if (frame_clock_ == nullptr) return;
  for (int i = 0; i < kHookCount; ++i) {
    g_signal_remove_emission_hook(hook_signals_[i], hook_ids_[i]);
    hook_ids_[i] = 0;
  }
  g_object_unref(frame_clock_);
  frame_clock_ = nullptr;
  in_frame_ = false;
}

FrameMonitor* FrameMonitor::ForClock(const GValue* params, gpointer self) {
  auto* monitor = static_cast<FrameMonitor*>(self);
  return g_value_peek_pointer(&params[0]) == monitor->frame_clock_ ? monitor : nullptr;
}

void FrameMonitor::NameScene() {
  if (!options_.name_scene) return;
  std::string name = options_.scene;
  if (name.empty()) {
    const char* title = gtk_window_get_title(GTK_WINDOW(window_));
    name = title != nullptr && title[0] != '\0' ? title : G_OBJECT_TYPE_NAME(window_);
  }
  AppState* state = AppState::Get();
  // The application's own scene (shown through AppState after ours) stands.
  const SceneId visible = state->visible_scene_id();
  if (visible != AppState::kDefaultScene && visible != scene_id_) return;
  scene_ = std::move(name);
  state->OnSceneShown(scene_);
  scene_id_ = state->InternScene(scene_);
}

void FrameMonitor::OnRealize(GtkWidget*, gpointer self) {
  static_cast<FrameMonitor*>(self)->HookClock();
}

void FrameMonitor::OnUnrealize(GtkWidget*, gpointer self) {
  static_cast<FrameMonitor*>(self)->UnhookClock();
}

void FrameMonitor::OnTitle(GObject*, GParamSpec*, gpointer self) {
  auto* monitor = static_cast<FrameMonitor*>(self);
  if (monitor->options_.scene.empty()) monitor->NameScene();
}

gboolean FrameMonitor::OnFlushEvents(GSignalInvocationHint*, guint, const GValue* params,
                                     gpointer self) {
  FrameMonitor* monitor = ForClock(params, self);
  if (monitor == nullptr) return TRUE;
  monitor->flush_time_ = monitor->Now();
  monitor->flush_dispatch_ = monitor->dispatches_->dispatch_count();
  return TRUE;
}

gboolean FrameMonitor::OnBeforePaint(GSignalInvocationHint*, guint, const GValue* params,
                                     gpointer self) {
  FrameMonitor* monitor = ForClock(params, self);
  if (monitor == nullptr) return TRUE;
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(monitor->thread_checker_);
  monitor->in_frame_ = monitor->dispatches_->in_dispatch();
  if (!monitor->in_frame_) return TRUE;
  GdkFrameClock* clock = monitor->frame_clock_;
  const TimeTicks now = monitor->Now();
  const int64_t frame_time_us = gdk_frame_clock_get_frame_time(clock);
  monitor->ui_monitor_->MarkFrame(FrameTimeToTicks(frame_time_us, now),
                                  RefreshRateOf(clock, frame_time_us),
                                  gdk_frame_clock_get_frame_counter(clock));
  // GTK 3 flushes events in its own dispatch just before the paint one; the
  // input phase starts at the flush only when it ran in this dispatch.
  const bool flushed_here = monitor->flush_dispatch_ == monitor->dispatches_->dispatch_count() &&
                            monitor->flush_time_ != TimeTicks();
  monitor->ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kInput,
                                  flushed_here ? monitor->flush_time_ : now);
  monitor->traversal_marked_ = false;
  ++monitor->frame_count_;
  return TRUE;
}

gboolean FrameMonitor::OnUpdate(GSignalInvocationHint*, guint, const GValue* params,
                                gpointer self) {
  FrameMonitor* monitor = ForClock(params, self);
  if (monitor == nullptr || !monitor->in_frame_) return TRUE;
  monitor->ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kAnimation, monitor->Now());
  return TRUE;
}

// GTK emits "layout" and "paint" only when requested (a queue_draw alone
// requests the paint): traversal starts at whichever comes first.
gboolean FrameMonitor::OnLayout(GSignalInvocationHint*, guint, const GValue* params,
                                gpointer self) {
  FrameMonitor* monitor = ForClock(params, self);
  if (monitor == nullptr || !monitor->in_frame_ || monitor->traversal_marked_) return TRUE;
  monitor->traversal_marked_ = true;
  monitor->ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kTraversal, monitor->Now());
  return TRUE;
}

gboolean FrameMonitor::OnAfterPaint(GSignalInvocationHint*, guint, const GValue* params,
                                    gpointer self) {
  FrameMonitor* monitor = ForClock(params, self);
  if (monitor == nullptr || !monitor->in_frame_) return TRUE;
  monitor->ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kCommit, monitor->Now());
  monitor->in_frame_ = false;
  return TRUE;
}

absl::StatusOr<std::unique_ptr<FrameMonitor>> AttachWindow(GtkWidget* window, TracePlugin* plugin,
                                                           const glib::GlibMonitor* dispatches,
                                                           Options options) {
  if (window == nullptr || !GTK_IS_WINDOW(window)) {
    return absl::InvalidArgumentError("matrix::gtk::AttachWindow: not a GtkWindow");
  }
  if (plugin == nullptr) return absl::InvalidArgumentError("matrix::gtk: null plugin");
  if (plugin->GetUIThreadMonitor() == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::gtk: the TracePlugin has not started; call Start() on the GTK thread first");
  }
  if (dispatches == nullptr || !dispatches->attached()) {
    return absl::FailedPreconditionError(
        "matrix::gtk::AttachWindow: the GMainContext's dispatches are not monitored "
        "(use matrix::gtk::Attach, or matrix::glib::Attach first)");
  }
  return std::unique_ptr<FrameMonitor>(
      new FrameMonitor(window, plugin->GetUIThreadMonitor(), dispatches, std::move(options)));
}

absl::StatusOr<std::unique_ptr<GtkMonitor>> Attach(GtkWidget* window, TracePlugin* plugin,
                                                   Options options) {
  if (window == nullptr || !GTK_IS_WINDOW(window)) {
    return absl::InvalidArgumentError("matrix::gtk::Attach: not a GtkWindow");
  }
  absl::StatusOr<std::unique_ptr<glib::GlibMonitor>> dispatches =
      glib::Attach(g_main_context_default(), plugin);
  if (!dispatches.ok()) return dispatches.status();
  absl::StatusOr<std::unique_ptr<FrameMonitor>> frames =
      AttachWindow(window, plugin, dispatches->get(), std::move(options));
  if (!frames.ok()) return frames.status();
  return std::make_unique<GtkMonitor>(*std::move(dispatches), *std::move(frames));
}

}  // namespace matrix::gtk
