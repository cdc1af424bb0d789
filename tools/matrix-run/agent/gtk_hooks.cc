// GTK hooks of libmatrix-agent.so (gtk_hooks.h): GTK 3 frame clocks and
// windows, GTK 2 exposes.

#include "gtk_hooks.h"

#include <dlfcn.h>

#include <type_traits>

#include "matrix/core/app_state.h"
#include "matrix/core/time_ticks.h"
#include "session.h"

namespace matrix::agent {
namespace {

struct GList {
  void* data;
  GList* next;
  GList* prev;
};
struct GtkFns {
  void* (*display_get_default)() = nullptr;         // gdk_display_get_default
  GList* (*list_toplevels)() = nullptr;             // gtk_window_list_toplevels
  void (*list_free)(GList*) = nullptr;              // g_list_free
  int (*get_mapped)(void*) = nullptr;               // gtk_widget_get_mapped
  int (*is_toplevel)(void*) = nullptr;              // gtk_widget_is_toplevel
  void* (*get_frame_clock)(void*) = nullptr;        // gtk_widget_get_frame_clock
  unsigned long (*connect)(void*, const char*, void (*)(), void*, void*,
                           int) = nullptr;          // g_signal_connect_data
  unsigned long (*widget_type)() = nullptr;         // gtk_widget_get_type
  unsigned long (*window_type)() = nullptr;         // gtk_window_get_type
  void* (*class_ref)(unsigned long) = nullptr;      // g_type_class_ref
  int (*instance_is_a)(void*, unsigned long) = nullptr;  // g_type_check_instance_is_a
  const char* (*type_name)(void*) = nullptr;        // g_type_name_from_instance
  unsigned (*signal_lookup)(const char*, unsigned long) = nullptr;  // g_signal_lookup
  // g_signal_add_emission_hook
  unsigned long (*add_emission_hook)(unsigned, unsigned,
                                     int (*)(void*, unsigned, const void*, void*), void*,
                                     void (*)(void*)) = nullptr;
  void* (*peek_pointer)(const void*) = nullptr;     // g_value_peek_pointer
  void* (*get_data)(void*, const char*) = nullptr;  // g_object_get_data
  void (*set_data)(void*, const char*, void*) = nullptr;  // g_object_set_data
  const char* (*get_title)(void*) = nullptr;        // gtk_window_get_title
  int (*is_active)(void*) = nullptr;                // gtk_window_is_active
  int (*window_kind)(void*) = nullptr;              // gtk_window_get_window_type
  void (*add_weak)(void*, void**) = nullptr;        // g_object_add_weak_pointer
  void (*remove_weak)(void*, void**) = nullptr;     // g_object_remove_weak_pointer
  // Optional (the refresh rate; gdk_monitor_get_refresh_rate is GTK 3.22+).
  void* (*widget_window)(void*) = nullptr;          // gtk_widget_get_window
  void* (*window_display)(void*) = nullptr;         // gdk_window_get_display
  void* (*monitor_at_window)(void*, void*) = nullptr;  // gdk_display_get_monitor_at_window
  int (*monitor_refresh)(void*) = nullptr;          // gdk_monitor_get_refresh_rate (mHz)
};
constexpr char kGtkMark[] = "matrix-agent-connected";

// The GTK state of the session (main thread).
struct GtkState {
  GtkFns fns;
  // The window that names the scene; a GObject weak pointer (GLib clears it
  // when the window is finalized).
  void* scene_window = nullptr;
  TimeTicks last_paint;  // GTK 2: when the last frame's dispatch began.
};
GtkState g_gtk;

// GTK 2 paints in "expose-event" handlers (there is no frame clock): the
// first expose of a dispatch makes it a frame. Main thread.
int OnGtk2Expose(void*, unsigned, const void*, void*) {
  if (!MonitoringOnMainThread()) return 1;
  Session& s = *g_session;
  if (!s.in_dispatch || s.frame_marked) return 1;
  // A paint within 3/4 of a refresh interval of the last frame's is part of
  // it: the screen shows one image per refresh, so the X Expose events of
  // each window after a map, or a burst of redraws, are one update; a timer
  // animation at the refresh rate keeps every frame despite its jitter.
  if (s.frames > 0 && s.rate.IntervalsIn(4 * (s.dispatch_begin - g_gtk.last_paint)) < 3) return 1;
  g_gtk.last_paint = s.dispatch_begin;
  MarkDispatchFrame(s, s.looper->clock()->NowTicks());
  return 1;  // Stay installed.
}

}  // namespace

bool HookGtk2Paint() {
  void* gtk = dlopen("libgtk-x11-2.0.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (gtk == nullptr) return false;
  GtkFns f;
  f.widget_type = reinterpret_cast<decltype(f.widget_type)>(dlsym(gtk, "gtk_widget_get_type"));
  f.class_ref = reinterpret_cast<decltype(f.class_ref)>(dlsym(gtk, "g_type_class_ref"));
  f.signal_lookup = reinterpret_cast<decltype(f.signal_lookup)>(dlsym(gtk, "g_signal_lookup"));
  f.add_emission_hook =
      reinterpret_cast<decltype(f.add_emission_hook)>(dlsym(gtk, "g_signal_add_emission_hook"));
  bool hooked = false;
  if (f.widget_type != nullptr && f.class_ref != nullptr && f.signal_lookup != nullptr &&
      f.add_emission_hook != nullptr) {
    f.class_ref(f.widget_type());  // g_signal_lookup needs the class; the reference is kept.
    const unsigned expose = f.signal_lookup("expose-event", f.widget_type());
    if (expose != 0) hooked = f.add_emission_hook(expose, 0, &OnGtk2Expose, nullptr, nullptr) != 0;
  }
  dlclose(gtk);  // RTLD_NOLOAD took a reference; the program keeps its own.
  return hooked;
}

namespace {

// "before-paint": this dispatch draws a frame; "after-paint": its commit.
void OnGtkBeforePaint(void*, void*) {
  if (!MonitoringOnMainThread()) return;
  Session& s = *g_session;
  if (!s.in_dispatch || s.frame_marked) return;
  MarkDispatchFrame(s, s.looper->clock()->NowTicks());
}

void OnGtkAfterPaint(void*, void*) {
  if (!MonitoringOnMainThread()) return;
  Session& s = *g_session;
  if (!s.in_dispatch || !s.frame_marked) return;
  s.ui->MarkPhase(UIThreadMonitor::Phase::kCommit, s.looper->clock()->NowTicks());
}

// Names the scene from a window's title (its type name when it has none),
// as matrix::gtk does. Main thread, outside the hot path (map, focus and title
// changes only).
void NameSceneFrom(void* window) {
  const GtkFns& f = g_gtk.fns;
  const char* title = f.get_title(window);
  const char* name = title != nullptr && title[0] != '\0' ? title : f.type_name(window);
  if (g_gtk.scene_window != window) {
    if (g_gtk.scene_window != nullptr) f.remove_weak(g_gtk.scene_window, &g_gtk.scene_window);
    g_gtk.scene_window = window;
    f.add_weak(window, &g_gtk.scene_window);
  }
  if (name != nullptr) AppState::Get()->OnSceneShown(name);
}

// "notify::is-active" and "notify::title" of a connected window: the focused
// window names the scene; the naming window's new title renames it.
void OnGtkWindowNotify(void* window, void*, void*) {
  if (!MonitoringOnMainThread()) return;
  const GtkFns& f = g_gtk.fns;
  if (f.window_kind(window) != 0) return;
  if (f.is_active(window) || window == g_gtk.scene_window) NameSceneFrom(window);
}

// "unmap" of a connected window: when it named the scene, the focused (else
// any) other mapped toplevel names it now.
void OnGtkWindowUnmap(void* window, void*) {
  if (!MonitoringOnMainThread()) return;
  if (window != g_gtk.scene_window) return;
  const GtkFns& f = g_gtk.fns;
  void* next = nullptr;
  GList* windows = f.list_toplevels();
  for (GList* w = windows; w != nullptr; w = w->next) {
    void* other = w->data;
    if (other == nullptr || other == window || !f.get_mapped(other) ||
        f.window_kind(other) != 0) {
      continue;
    }
    if (next == nullptr || f.is_active(other)) next = other;
  }
  if (next != nullptr) NameSceneFrom(next);
  f.list_free(windows);
}

// The refresh rate of the monitor the newest toplevel `window` is on (when
// GDK knows it; Xvfb reports none). Main thread.
void ReadMonitorRefresh(void* window) {
  const GtkFns& f = g_gtk.fns;
  if (f.widget_window == nullptr || f.window_display == nullptr ||
      f.monitor_at_window == nullptr || f.monitor_refresh == nullptr) {
    return;
  }
  void* gdk_window = f.widget_window(window);
  if (gdk_window == nullptr) return;
  void* monitor = f.monitor_at_window(f.window_display(gdk_window), gdk_window);
  if (monitor != nullptr) SetReportedRefresh(f.monitor_refresh(monitor));
}

// Connects a toplevel window's frame clock (and the window's focus and title)
// once each. Main thread.
void AttachGtkWindow(void* window) {
  const GtkFns& f = g_gtk.fns;
  if (!f.instance_is_a(window, f.window_type())) return;  // GtkInvisible, ...
  if (void* clock = f.get_frame_clock(window); clock != nullptr && !f.get_data(clock, kGtkMark)) {
    f.connect(clock, "before-paint", reinterpret_cast<void (*)()>(&OnGtkBeforePaint), nullptr,
              nullptr, 0);
    f.connect(clock, "after-paint", reinterpret_cast<void (*)()>(&OnGtkAfterPaint), nullptr,
              nullptr, 0);
    f.set_data(clock, kGtkMark, const_cast<char*>(kGtkMark));
  }
  if (!f.get_data(window, kGtkMark)) {
    f.connect(window, "notify::is-active", reinterpret_cast<void (*)()>(&OnGtkWindowNotify),
              nullptr, nullptr, 0);
    f.connect(window, "notify::title", reinterpret_cast<void (*)()>(&OnGtkWindowNotify), nullptr,
              nullptr, 0);
    f.connect(window, "unmap", reinterpret_cast<void (*)()>(&OnGtkWindowUnmap), nullptr, nullptr,
              0);
    f.set_data(window, kGtkMark, const_cast<char*>(kGtkMark));
  }
  // The newest mapped window names the scene unless a focused one does.
  // Popups (menus, tooltips) draw frames but do not name the scene.
  if (f.window_kind(window) != 0 /* GTK_WINDOW_TOPLEVEL */) return;
  if (f.is_active(window) || g_gtk.scene_window == nullptr || !f.is_active(g_gtk.scene_window)) {
    NameSceneFrom(window);
  }
  ReadMonitorRefresh(window);
}

// Emission hook of GtkWidget "map" (runs before the widget maps; a window is
// realized by then, so its frame clock exists).
int OnGtkMap(void*, unsigned, const void* params, void*) {
  if (!MonitoringOnMainThread()) return 1;
  const GtkFns& f = g_gtk.fns;
  void* widget = f.peek_pointer(params);  // params[0]: the instance.
  if (widget != nullptr && f.is_toplevel(widget)) AttachGtkWindow(widget);
  return 1;  // Stay installed.
}

}  // namespace

void TryHookGtk() {
  const GtkFns& f = g_gtk.fns;
  if (f.display_get_default() == nullptr) return;
  g_session->gtk_hooked = true;
  // g_signal_lookup needs the class initialized; the reference is kept.
  f.class_ref(f.widget_type());
  const unsigned map = f.signal_lookup("map", f.widget_type());
  if (map != 0) f.add_emission_hook(map, 0, &OnGtkMap, nullptr, nullptr);
  GList* windows = f.list_toplevels();
  for (GList* w = windows; w != nullptr; w = w->next) {
    if (w->data != nullptr && f.get_mapped(w->data)) AttachGtkWindow(w->data);
  }
  f.list_free(windows);
}

bool FindGtk() {
  void* gtk = dlopen("libgtk-3.so.0", RTLD_NOW | RTLD_NOLOAD);
  if (gtk == nullptr) return false;
  GtkFns& f = g_gtk.fns;
  // dlsym on GTK's handle also searches its dependencies (GDK, GObject).
  bool all = true;
  auto get = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(gtk, symbol));
    all = all && fn != nullptr;
  };
  get(f.display_get_default, "gdk_display_get_default");
  get(f.list_toplevels, "gtk_window_list_toplevels");
  get(f.list_free, "g_list_free");
  get(f.get_mapped, "gtk_widget_get_mapped");
  get(f.is_toplevel, "gtk_widget_is_toplevel");
  get(f.get_frame_clock, "gtk_widget_get_frame_clock");
  get(f.connect, "g_signal_connect_data");
  get(f.widget_type, "gtk_widget_get_type");
  get(f.window_type, "gtk_window_get_type");
  get(f.class_ref, "g_type_class_ref");
  get(f.instance_is_a, "g_type_check_instance_is_a");
  get(f.type_name, "g_type_name_from_instance");
  get(f.signal_lookup, "g_signal_lookup");
  get(f.add_emission_hook, "g_signal_add_emission_hook");
  get(f.peek_pointer, "g_value_peek_pointer");
  get(f.get_data, "g_object_get_data");
  get(f.set_data, "g_object_set_data");
  get(f.get_title, "gtk_window_get_title");
  get(f.is_active, "gtk_window_is_active");
  get(f.window_kind, "gtk_window_get_window_type");
  get(f.add_weak, "g_object_add_weak_pointer");
  get(f.remove_weak, "g_object_remove_weak_pointer");
  const bool found = all;
  get(f.widget_window, "gtk_widget_get_window");
  get(f.window_display, "gdk_window_get_display");
  get(f.monitor_at_window, "gdk_display_get_monitor_at_window");
  get(f.monitor_refresh, "gdk_monitor_get_refresh_rate");
  dlclose(gtk);  // RTLD_NOLOAD took a reference; the program keeps its own.
  return found;
}

}  // namespace matrix::agent
