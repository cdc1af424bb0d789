// libmatrix-agent.so: matrix-cpp for an unmodified program, through LD_PRELOAD
// (see docs/matrix-run.md).
//
// The agent interposes the blocking waits (poll, ppoll, epoll_wait,
// epoll_pwait, select, pselect) and the buffer swaps (glXSwapBuffers,
// eglSwapBuffers). On the main thread, the time between two blocking waits is
// one dispatch, and so is each iteration of a loop that polls without
// sleeping while it has work (a zero-timeout poll from the loop's own poll
// site: GLib with idle sources pending); a swap ends a frame (and its
// dispatch) and begins the next iteration. Other threads' calls pass
// straight to the real function (a swap there is counted, and the main thread's next dispatch end marks the frame;
// swaps looked up at run time, and Vulkan presents, are wrapped too:
// present_hooks.h). In GTK 3 programs every mapped toplevel's GdkFrameClock
// marks frames too, and the focused (else newest) window's title names the
// scene. The cold start is
// reported from process start to the first frame (programs that draw) or to
// the first blocking wait (the others).
//
// Loops that wait in anything else: the agent also
// interposes pthread_cond_{,timed,clock}wait (the GLIBC_2.3.2 versions,
// agent.map), sem_{,timed,clock}wait, nanosleep, clock_nanosleep, usleep,
// read and futex waits made through syscall() (C++20 std::atomic<T>::wait).
// On the main thread such a wait is the loop's own wait (a dispatch
// boundary, like poll) only when its call site (return address and stack
// depth, plus the fd for read) was learned as such by LoopWaitSites: its
// waits blocked three times more than they did not, with no shallower
// boundary between (loop_wait_sites.h has the whole rule). Every other wait is work,
// timed inside the dispatch: a sleep in a slow handler still gives its ANR.
// Tcl/Tk (tkinter), condition-variable and semaphore queues, nanosleep frame
// pacing, eventfd and futex loops are covered so.
//
// Lifecycle:
//   constructor   reads the configuration (MATRIX_* variables), resolves the
//                 real functions, records the main thread, registers a
//                 pthread_atfork child handler. Starts nothing.
//   first blocking wait (poll & co., or a learned loop wait) or swap on the
//                 main thread
//                 starts Matrix (TracePlugin on a foreign loop, the JSON-lines
//                 sink), once. From then on each wait/swap feeds the monitors.
//                 The loop's wait sites are learned from the constructor on.
//   destructor    (exit on the main thread) ends the dispatch in progress,
//                 flushes FPS reports and shuts Matrix down; one log line.
//
// Per interposed call on another thread, or when dormant: one relaxed atomic
// load and pthread_self() (a TLS read), then the real call. On the main thread
// while monitoring: two clock reads (vDSO) and the LooperMonitor hooks, no
// allocation, lock, syscall or log. The other waits (and every main-thread
// read) add at most three scans of LoopWaitSites' 16 entries and two vDSO
// clock reads; one fstat only after a read from an unknown site lasted 1 ms.
//
// Thread safety: the monitors are touched only on the main thread (the only
// thread whose waits are timed); the state word is atomic.

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent_config.h"
#include "loop_wait_sites.h"
#include "matrix/core/app_state.h"
#include "matrix/core/matrix.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "exit_hooks.h"
#include "present_hooks.h"
#include "window_hooks.h"

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

using PollFn = int (*)(struct pollfd*, nfds_t, int);
using PpollFn = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
using EpollWaitFn = int (*)(int, struct epoll_event*, int, int);
using EpollPwaitFn = int (*)(int, struct epoll_event*, int, int, const sigset_t*);
using SelectFn = int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
using PselectFn = int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*,
                          const sigset_t*);
using CondWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*);
using CondTimedWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*);
using CondClockWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t,
                                const struct timespec*);
using SemWaitFn = int (*)(sem_t*);
using SemTimedWaitFn = int (*)(sem_t*, const struct timespec*);
using SemClockWaitFn = int (*)(sem_t*, clockid_t, const struct timespec*);
using NanosleepFn = int (*)(const struct timespec*, struct timespec*);
using ClockNanosleepFn = int (*)(clockid_t, int, const struct timespec*, struct timespec*);
using UsleepFn = int (*)(useconds_t);
// syscall(2): glibc's takes the number and six register-sized arguments.
using SyscallFn = long (*)(long, long, long, long, long, long, long);
using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadChkFn = ssize_t (*)(int, void*, size_t, size_t);
using SwapFn = void (*)(void*, unsigned long);
using EglSwapFn = unsigned (*)(void*, void*);

// The real functions are resolved (Resolve(), present_hooks.h) in the
// constructor, or on first use by a call that comes before it (e.g. from
// another library's constructor).

// pthread_cond_wait and pthread_cond_timedwait have two versions in glibc
// (GLIBC_2.2.5, the old condition variable, and GLIBC_2.3.2); plain dlsym may
// return the old one. The agent's wrappers are exported as GLIBC_2.3.2
// (agent.map), so programs bound to the old version never reach them.
template <typename Fn>
Fn ResolveVersioned(std::atomic<Fn>& slot, const char* name, const char* version) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, name, version));
    if (fn == nullptr) fn = reinterpret_cast<Fn>(RealDlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}
constexpr char kCondVersion[] = "GLIBC_2.3.2";

std::atomic<PollFn> g_poll{nullptr};
std::atomic<PpollFn> g_ppoll{nullptr};
std::atomic<EpollWaitFn> g_epoll_wait{nullptr};
std::atomic<EpollPwaitFn> g_epoll_pwait{nullptr};
std::atomic<SelectFn> g_select{nullptr};
std::atomic<PselectFn> g_pselect{nullptr};
std::atomic<CondWaitFn> g_cond_wait{nullptr};
std::atomic<CondTimedWaitFn> g_cond_timedwait{nullptr};
std::atomic<CondClockWaitFn> g_cond_clockwait{nullptr};
std::atomic<SemWaitFn> g_sem_wait{nullptr};
std::atomic<SemTimedWaitFn> g_sem_timedwait{nullptr};
std::atomic<SemClockWaitFn> g_sem_clockwait{nullptr};
std::atomic<NanosleepFn> g_nanosleep{nullptr};
std::atomic<ClockNanosleepFn> g_clock_nanosleep{nullptr};
std::atomic<UsleepFn> g_usleep{nullptr};
std::atomic<SyscallFn> g_syscall{nullptr};
std::atomic<ReadFn> g_read{nullptr};
std::atomic<ReadChkFn> g_read_chk{nullptr};
std::atomic<SwapFn> g_glx_swap{nullptr};
std::atomic<EglSwapFn> g_egl_swap{nullptr};

enum State : int {
  kUninitialized = 0,  // Before the constructor.
  kDormant,            // Not this process (exec'ed child, fork child, disabled, error).
  kArmed,              // Waiting for the main thread's first wait or swap.
  kStarting,           // Starting Matrix (calls on the main thread pass through).
  kRunning,            // Monitoring.
  kStopped,            // After the destructor, or a failed start.
};
std::atomic<int> g_state{kUninitialized};
pthread_t g_main_thread;
pid_t g_pid = 0;

// GTK 3, through dlsym (the agent links no GTK). Every toplevel window's
// GdkFrameClock reports frames ("before-paint", "after-paint"): the windows
// mapped when GTK is found, and every toplevel mapped later (an emission hook
// on GtkWidget "map", which also catches a re-realized window's new clock).
// A clock or window already connected carries a GObject data mark, so it is
// connected once and the mark dies with it (no stale pointers).
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

// Main-thread state (only the main thread touches it).
struct Session {
  AgentConfig config;
  std::string report_path;
  TracePlugin* plugin = nullptr;
  LooperMonitor* looper = nullptr;
  UIThreadMonitor* ui = nullptr;
  RefreshRate rate;
  bool in_dispatch = false;
  bool in_swap = false;
  bool frame_marked = false;  // This dispatch already reported its frame.
  bool draws = false;         // Registered as a frame source.
  // The first top-level window map (window_hooks.h): seen, and whether the
  // frame source was registered only because the program might draw.
  bool window_mapped = false;
  bool draws_if_presenting = false;
  TimeTicks last_paint;  // GTK 2: when the last frame's dispatch began.
  bool glx_rate_read = false;  // ReadGlxRefreshRate() ran.
  TimeTicks dispatch_begin;
  // The loop's own waits among the other waits (condition variables, ...),
  // learned from their call sites; used from the constructor on (armed too).
  LoopWaitSites wait_sites;
  // The call site of the last blocking poll & co.: the loop's own poll.
  LoopWaitSites::CallSite loop_poll;
  int64_t dispatches = 0;
  int64_t frames = 0;
  // GTK: found at start; hooked once GDK has a display (gtk_init ran),
  // checked between dispatches until then.
  bool gtk = false;
  bool gtk_hooked = false;
  // The window that names the scene; a GObject weak pointer (GLib clears it
  // when the window is finalized).
  void* scene_window = nullptr;
  GtkFns gtk_fns;
};
Session* g_session = nullptr;  // Leaked on purpose: alive until exit.

// This dispatch draws a frame (one per dispatch: the caller checks and
// sets nothing else): it counts from `due` (by default the dispatch's
// begin), its traversal phase from `traversal`. Main thread, in a dispatch.
void MarkDispatchFrame(Session& s, TimeTicks traversal, TimeTicks due = TimeTicks()) {
  s.frame_marked = true;
  s.ui->MarkFrame(due.is_null() ? s.dispatch_begin : due, s.rate, ++s.frames);
  s.ui->MarkPhase(UIThreadMonitor::Phase::kTraversal, traversal);
}

const char* ProgramName() { return program_invocation_short_name; }

void Log(const std::string& line) {
  std::string text = absl::StrCat("matrix-agent: ", ProgramName(), " (pid ", getpid(), "): ", line,
                                  "\n");
  // One write: whole lines even beside the program's own output.
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

bool HookGtk2Paint();

// Appends "<report name> <pid>" to matrix-run's process list, so its exit
// summary has a line for this process. One short O_APPEND write: whole
// lines beside other processes'. A missing list is no error.
void AnnounceProcess(const std::string& list, const std::string& name) {
  if (list.empty()) return;
  const int fd = open(list.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  const std::string line = absl::StrCat(name, " ", getpid(), "\n");
  ssize_t ignored = write(fd, line.data(), line.size());
  (void)ignored;
  close(fd);
}

// Starts Matrix on the main thread. Returns false (and logs why) on failure.
// `from_swap`: the first call is a buffer swap (the program draws).
bool StartSession(bool from_swap) {
  Session& s = *g_session;
  const AgentConfig& c = s.config;
  absl::StatusOr<TraceConfig> config =
      TraceConfig::Builder()
          .SetLooperSource(LooperMonitor::Source::kForeign)
          .UseChoreographer(false)
          .EnableFps(c.frames)
          .SetFpsTimeSlice(c.fps_time_slice)
          .SetTimelineWindow(c.timeline_window)
          .EnableAnrTrace(true)
          .SetAnrThreshold(c.anr_threshold)
          .SetLagThreshold(c.lag_threshold)
          .EnableEvilMethodTrace(true)
          .SetEvilThreshold(c.evil_threshold)
          // Sampled every 50 ms, or once per threshold when that is shorter
          // (TraceConfig's smallest interval is 10 ms).
          .EnableEvilMethodStacks(c.slow_stacks &&
                                  c.evil_threshold >= TraceConfig::kMinEvilMethodSampleInterval)
          .SetEvilMethodSampleInterval(std::min(absl::Milliseconds(50), c.evil_threshold))
          .EnableStartup(true)
          .SetStackKeyRule({.skip_modules = c.key_skip_modules,
                            .program_modules = c.key_program_modules})
          .EnableSymbolize(c.symbolize)
          // The program is not method-traced: a small ring is enough.
          .SetMethodTraceBufferBytes(size_t{64} << 10)
          .Build();
  if (!config.ok()) {
    Log(absl::StrCat("not monitoring: ", config.status().ToString()));
    return false;
  }
  const std::string name = c.ReportName(getpid(), ProgramName());
  auto sink = JsonLinesIssueSink::Create({.directory = c.report_dir, .name = name});
  if (!sink.ok()) {
    Log(absl::StrCat("not monitoring: ", sink.status().ToString()));
    return false;
  }
  s.report_path = absl::StrCat(c.report_dir, "/", name, ".jsonl");
  auto trace = std::make_unique<TracePlugin>(*config);
  TracePlugin* plugin = trace.get();
  absl::Status status = Matrix::Init(
      Matrix::Builder().AddPlugin(std::move(trace)).SetPluginListener(*sink).Build());
  if (status.ok()) status = plugin->Start();
  if (!status.ok() || plugin->GetLooperMonitor() == nullptr) {
    Log(absl::StrCat("not monitoring: ", status.ToString()));
    Matrix::Shutdown();
    return false;
  }
  s.plugin = plugin;
  s.looper = plugin->GetLooperMonitor();
  AnnounceProcess(c.process_list, name);
  s.ui = plugin->GetUIThreadMonitor();
  s.rate = RefreshRate::FromMillihertz(c.RefreshMillihertz(0));
  // _exit, exec and the forwarded termination signals drain through it.
  StartDrainThread();
  // GTK 3 in the process (linked, or dlopen'ed before the first wait).
  if (c.frames) {
    if (void* gtk = dlopen("libgtk-3.so.0", RTLD_NOW | RTLD_NOLOAD)) {
      GtkFns& f = s.gtk_fns;
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
      s.gtk = all;
      get(f.widget_window, "gtk_widget_get_window");
      get(f.window_display, "gdk_window_get_display");
      get(f.monitor_at_window, "gdk_display_get_monitor_at_window");
      get(f.monitor_refresh, "gdk_monitor_get_refresh_rate");
      dlclose(gtk);  // RTLD_NOLOAD took a reference; the program keeps its own.
    }
  }
  // Cold start (StartupTracer, from process start in /proc): a program that
  // draws (its first call is a swap, GTK is in it, or GL/EGL swaps resolve to
  // a loaded library) registers as a frame source, so the startup ends at its
  // first frame; any other program's startup ends here, at its first blocking
  // wait. The scene is the program's name (GTK: renamed from its windows).
  const bool gtk2 = c.frames && !s.gtk && HookGtk2Paint();
  const bool presents = from_swap || s.gtk || gtk2 ||
                        g_glx_swap.load(std::memory_order_relaxed) ||
                        g_egl_swap.load(std::memory_order_relaxed) || RendererLoaded();
  // A display client with no window on screen yet may load its renderer
  // later (glmark2 loads libGL after its first poll): it waits for its first
  // frame too, unless its first top-level map shows it does not present.
  s.draws_if_presenting = c.frames && !presents && !s.window_mapped && DisplayClientLoaded();
  s.draws = (c.frames && presents) || s.draws_if_presenting;
  if (s.draws) s.ui->AddFrameSource();
  AppState::Get()->OnSceneCreated(ProgramName());
  AppState::Get()->OnSceneShown(ProgramName());
  return true;
}

// GTK 2 paints in "expose-event" handlers (there is no frame clock): the
// first expose of a dispatch makes it a frame. Main thread.
int OnGtk2Expose(void*, unsigned, const void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return 1;
  if (!pthread_equal(pthread_self(), g_main_thread)) return 1;
  Session& s = *g_session;
  if (!s.in_dispatch || s.frame_marked) return 1;
  // A paint within 3/4 of a refresh interval of the last frame's is part of
  // it: the screen shows one image per refresh, so the X Expose events of
  // each window after a map, or a burst of redraws, are one update; a timer
  // animation at the refresh rate keeps every frame despite its jitter.
  if (s.frames > 0 && s.rate.IntervalsIn(4 * (s.dispatch_begin - s.last_paint)) < 3) return 1;
  s.last_paint = s.dispatch_begin;
  MarkDispatchFrame(s, s.looper->clock()->NowTicks());
  return 1;  // Stay installed.
}

// GTK 2 in the process: installs the "expose-event" emission hook on
// GtkWidget. Returns whether it did. Main thread, at the session's start.
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

// "before-paint": this dispatch draws a frame; "after-paint": its commit.
void OnGtkBeforePaint(void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  if (!s.in_dispatch || s.frame_marked) return;
  MarkDispatchFrame(s, s.looper->clock()->NowTicks());
}

void OnGtkAfterPaint(void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  if (!s.in_dispatch || !s.frame_marked) return;
  s.ui->MarkPhase(UIThreadMonitor::Phase::kCommit, s.looper->clock()->NowTicks());
}

// Names the scene from a window's title (its type name when it has none),
// as matrix::gtk does. Main thread, outside the hot path (map, focus and title
// changes only).
void NameSceneFrom(void* window) {
  Session& s = *g_session;
  const GtkFns& f = s.gtk_fns;
  const char* title = f.get_title(window);
  const char* name = title != nullptr && title[0] != '\0' ? title : f.type_name(window);
  if (s.scene_window != window) {
    if (s.scene_window != nullptr) f.remove_weak(s.scene_window, &s.scene_window);
    s.scene_window = window;
    f.add_weak(window, &s.scene_window);
  }
  if (name != nullptr) AppState::Get()->OnSceneShown(name);
}

// "notify::is-active" and "notify::title" of a connected window: the focused
// window names the scene; the naming window's new title renames it.
void OnGtkWindowNotify(void* window, void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  const GtkFns& f = s.gtk_fns;
  if (f.window_kind(window) != 0) return;
  if (f.is_active(window) || window == s.scene_window) NameSceneFrom(window);
}

// "unmap" of a connected window: when it named the scene, the focused (else
// any) other mapped toplevel names it now.
void OnGtkWindowUnmap(void* window, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  if (window != s.scene_window) return;
  const GtkFns& f = s.gtk_fns;
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

// Connects a toplevel window's frame clock (and the window's focus and title)
// once each. Main thread.
void AttachGtkWindow(void* window) {
  Session& s = *g_session;
  const GtkFns& f = s.gtk_fns;
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
  if (f.is_active(window) || s.scene_window == nullptr || !f.is_active(s.scene_window)) {
    NameSceneFrom(window);
  }
  // The refresh rate of the monitor the newest toplevel is on (when GDK
  // knows it; Xvfb reports none).
  if (f.widget_window != nullptr && f.window_display != nullptr &&
      f.monitor_at_window != nullptr && f.monitor_refresh != nullptr) {
    if (void* gdk_window = f.widget_window(window); gdk_window != nullptr) {
      void* monitor = f.monitor_at_window(f.window_display(gdk_window), gdk_window);
      if (monitor != nullptr) {
        const int64_t mhz = s.config.RefreshMillihertz(f.monitor_refresh(monitor));
        s.rate = RefreshRate::FromMillihertz(mhz);
      }
    }
  }
}

// Emission hook of GtkWidget "map" (runs before the widget maps; a window is
// realized by then, so its frame clock exists).
int OnGtkMap(void*, unsigned, const void* params, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return 1;
  if (!pthread_equal(pthread_self(), g_main_thread)) return 1;
  const GtkFns& f = g_session->gtk_fns;
  void* widget = f.peek_pointer(params);  // params[0]: the instance.
  if (widget != nullptr && f.is_toplevel(widget)) AttachGtkWindow(widget);
  return 1;  // Stay installed.
}

// Between dispatches, until hooked: once GDK has a display (gtk_init ran),
// installs the "map" hook and attaches the toplevels mapped so far. One call
// (gdk_display_get_default) per dispatch until then.
void TryHookGtk() {
  Session& s = *g_session;
  const GtkFns& f = s.gtk_fns;
  if (f.display_get_default() == nullptr) return;
  s.gtk_hooked = true;
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

// True when this call is the main thread's and the agent monitors it; starts
// the session on the first such call.
inline bool MainThreadMonitoring(bool swap = false) {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state != kRunning && state != kArmed) return false;
  if (!pthread_equal(pthread_self(), g_main_thread)) return false;
  if (state == kRunning) return true;
  // kArmed, main thread: start once. Calls made while starting pass through.
  g_state.store(kStarting, std::memory_order_relaxed);
  const int saved_errno = errno;
  const bool ok = StartSession(swap);
  errno = saved_errno;
  g_state.store(ok ? kRunning : kStopped, std::memory_order_release);
  return ok;
}

inline void DispatchBegin(TimeTicks now, const char* label) {
  Session& s = *g_session;
  s.looper->DispatchBegin(now, label);
  s.in_dispatch = true;
  s.frame_marked = false;
  s.dispatch_begin = now;
  ++s.dispatches;
}

// Presents on other threads since the last dispatch end (a render thread's):
// this dispatch, the main thread's part of the frame, is marked as a frame,
// shown at the last present. It was due then, unless an animation made it
// due earlier (UIThreadMonitor's due rule): the main thread's dispatch says
// nothing of when the render thread's frame was due.
inline void MarkOffThreadFrame() {
  Session& s = *g_session;
  TimeTicks presented;
  if (TakeOffThreadPresents(&presented) == 0 || !s.config.frames || s.frame_marked) return;
  MarkDispatchFrame(s, s.dispatch_begin, presented);
  s.ui->MarkPresented(presented);
}

// The main thread is about to block: the dispatch in progress ends.
inline void WaitEnter() {
  Session& s = *g_session;
  if (s.in_swap || !s.in_dispatch) return;
  MarkOffThreadFrame();
  s.looper->DispatchEnd(s.looper->clock()->NowTicks());
  s.in_dispatch = false;
  if (s.gtk && !s.gtk_hooked) TryHookGtk();
}

// The main thread woke up: a dispatch begins.
inline void WaitExit() {
  Session& s = *g_session;
  if (s.in_swap || s.in_dispatch) return;
  DispatchBegin(s.looper->clock()->NowTicks(), "matrix-run:dispatch");
}

// GLX, first swap: the screen's refresh rate from XRandR when libXrandr is
// already in the process (the agent loads no library into the host). One X
// round trip on the program's display, on its own (main) thread, once.
using XRRGetScreenInfoFn = void* (*)(void*, unsigned long);
using XRRConfigCurrentRateFn = short (*)(void*);
using XRRFreeScreenConfigInfoFn = void (*)(void*);
using XDefaultRootWindowFn = unsigned long (*)(void*);
void ReadGlxRefreshRate(void* display) {
  Session& s = *g_session;
  if (s.config.refresh_hz_set || display == nullptr) return;
  void* xrandr = dlopen("libXrandr.so.2", RTLD_NOW | RTLD_NOLOAD);
  if (xrandr == nullptr) return;
  auto get_info = reinterpret_cast<XRRGetScreenInfoFn>(dlsym(xrandr, "XRRGetScreenInfo"));
  auto rate_of = reinterpret_cast<XRRConfigCurrentRateFn>(dlsym(xrandr, "XRRConfigCurrentRate"));
  auto free_info =
      reinterpret_cast<XRRFreeScreenConfigInfoFn>(dlsym(xrandr, "XRRFreeScreenConfigInfo"));
  auto root_of = reinterpret_cast<XDefaultRootWindowFn>(dlsym(xrandr, "XDefaultRootWindow"));
  if (get_info != nullptr && rate_of != nullptr && free_info != nullptr && root_of != nullptr) {
    if (void* info = get_info(display, root_of(display)); info != nullptr) {
      const int64_t hz = rate_of(info);
      free_info(info);
      s.rate = RefreshRate::FromMillihertz(s.config.RefreshMillihertz(hz * 1000));
    }
  }
  dlclose(xrandr);  // RTLD_NOLOAD took a reference; the program keeps its own.
}

// A buffer swap starts: this dispatch draws a frame, now in its commit phase.
// The swap, made at stack depth `frame`, is a boundary: wait sites deeper
// than it are the frame's work, not the loop's wait.
inline void SwapEnter(uintptr_t frame) {
  Session& s = *g_session;
  if (s.in_swap) return;
  s.wait_sites.OnBoundary(frame);
  const TimeTicks now = s.looper->clock()->NowTicks();
  if (!s.in_dispatch) DispatchBegin(now, "matrix-run:frame");
  if (s.config.frames && !s.frame_marked) {
    MarkDispatchFrame(s, s.dispatch_begin);
    s.ui->MarkPhase(UIThreadMonitor::Phase::kCommit, now);
  }
  s.in_swap = true;
}

// The swap returned: the frame (and its dispatch) ends, the next iteration
// of a render loop begins.
inline void SwapExit() {
  Session& s = *g_session;
  if (!s.in_swap) return;
  s.in_swap = false;
  const TimeTicks now = s.looper->clock()->NowTicks();
  s.looper->DispatchEnd(now);
  DispatchBegin(now, "matrix-run:frame");
}

// The main thread's wait at stack depth `frame` is a dispatch boundary: the
// dispatch in progress ends, the next begins when it returns. Deeper wait
// sites were inside the dispatch (LoopWaitSites::OnBoundary). Waits inside a
// swap (the driver's) split nothing. Main thread, monitoring.
template <typename Call>
inline auto BoundaryWait(uintptr_t frame, Call&& real) {
  if (!g_session->in_swap) g_session->wait_sites.OnBoundary(frame);
  WaitEnter();
  auto result = real();
  const int saved_errno = errno;
  WaitExit();
  errno = saved_errno;
  return result;
}

// Runs `real` (poll & co.) from call site `site` on the main thread. A
// blocking call is a dispatch boundary, and its site becomes the loop's poll
// site. A call with a zero timeout is a boundary too when it comes from that
// same site (return address and stack depth): the loop polling without
// sleeping because it has more work (GLib with idle sources pending, libuv
// with idle handles), one iteration per poll. From anywhere else it is work
// inside the dispatch.
template <typename Call>
inline auto TimedWait(bool blocking, const LoopWaitSites::CallSite& site, Call&& real) {
  if (blocking) {
    if (!MainThreadMonitoring()) return real();
    Session& s = *g_session;
    if (!s.in_swap) s.loop_poll = site;
    return BoundaryWait(site.frame, real);
  }
  if (g_state.load(std::memory_order_relaxed) != kRunning ||
      !pthread_equal(pthread_self(), g_main_thread)) {
    return real();
  }
  const Session& s = *g_session;
  if (s.in_swap || site.return_address != s.loop_poll.return_address ||
      site.frame != s.loop_poll.frame) {
    return real();
  }
  return BoundaryWait(site.frame, real);
}

// True when the call is the main thread's and the agent watches it: running,
// or armed (Matrix not started yet; the loop's wait is learned already, and
// its first wait as a boundary starts Matrix). Starts nothing.
inline bool MainThreadWatched() {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state != kRunning && state != kArmed) return false;
  return pthread_equal(pthread_self(), g_main_thread);
}

inline int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall.
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// A wait that is not poll & co. (condition variable, semaphore, sleep, read
// of a wake fd) from call site `site`: a dispatch boundary when the site is
// the loop's wait (the first one starts Matrix, as poll does); otherwise
// work inside the dispatch, timed (two vDSO clock reads) and counted towards
// learning the site when `count` says the wait may be the loop's (a read:
// its fd is a wake fd). Main thread only; other threads call `real` directly.
template <typename Count, typename Call>
inline auto SiteWait(const LoopWaitSites::CallSite& site, Count&& count, Call&& real) {
  LoopWaitSites& sites = g_session->wait_sites;
  if (sites.IsLoopWait(site) && MainThreadMonitoring()) return BoundaryWait(site.frame, real);
  if (g_session->in_swap) return real();  // The driver's waits belong to the present.
  const int64_t begin = MonotonicNanos();
  auto result = real();
  const int saved_errno = errno;
  const int64_t waited = MonotonicNanos() - begin;
  if (count(waited)) sites.CountWait(site, waited);
  errno = saved_errno;
  return result;
}

// A read() of `fd` may be the loop's wait when `fd` is a pipe, FIFO, socket,
// eventfd/timerfd/signalfd (anonymous inodes have no file type) or character
// device; a regular file, directory or block device never is. One fstat,
// only after a read that lasted kWakeReadNanos from a site not known yet
// (a millisecond or more spent in the read already: the fstat adds little).
constexpr int64_t kWakeReadNanos = 1'000'000;
bool IsWakeFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISBLK(st.st_mode);
}

// read() on the main thread: only a read of a wake fd that blocked (or
// from a site already being learned for that fd) counts towards the loop's
// wait; ordinary reads pay two table scans and two vDSO clock reads.
template <typename Call>
inline ssize_t ReadWait(const LoopWaitSites::CallSite& site, Call&& real) {
  const LoopWaitSites& sites = g_session->wait_sites;
  return SiteWait(
      site,
      [&](int64_t waited) {
        if (sites.Knows(site)) return true;
        return waited >= kWakeReadNanos && IsWakeFd(site.fd);
      },
      real);
}

// The wrapper's call site: its return address and its frame (the caller's
// stack depth). Used in the exported wrappers themselves.
#define MATRIX_AGENT_CALL_SITE(fd)                                            \
  ::matrix::agent::LoopWaitSites::CallSite {                                 \
    reinterpret_cast<uintptr_t>(__builtin_return_address(0)),                \
        reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), (fd)       \
  }
#define MATRIX_AGENT_FRAME() reinterpret_cast<uintptr_t>(__builtin_frame_address(0))

// Every call of the other waits may be the loop's.
inline bool AlwaysCount(int64_t) { return true; }

inline bool Blocking(const struct timespec* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_nsec != 0;
}
inline bool Blocking(const struct timeval* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_usec != 0;
}

// A swap that MainThreadMonitoring() turned away: counted when it is another
// thread's while monitoring (one relaxed load, then CountOffThreadPresent()).
inline void CountIfOffThread() {
  if (g_state.load(std::memory_order_relaxed) == kRunning) CountOffThreadPresent();
}

void AtForkChild() {
  // The child has no matrix threads: it does nothing from here on.
  g_state.store(kDormant, std::memory_order_relaxed);
}

__attribute__((constructor)) void AgentInit() {
  g_pid = getpid();
  Resolve(g_poll, "poll");
  Resolve(g_ppoll, "ppoll");
  Resolve(g_epoll_wait, "epoll_wait");
  Resolve(g_epoll_pwait, "epoll_pwait");
  Resolve(g_select, "select");
  Resolve(g_pselect, "pselect");
  ResolveVersioned(g_cond_wait, "pthread_cond_wait", kCondVersion);
  ResolveVersioned(g_cond_timedwait, "pthread_cond_timedwait", kCondVersion);
  Resolve(g_cond_clockwait, "pthread_cond_clockwait");
  Resolve(g_sem_wait, "sem_wait");
  Resolve(g_sem_timedwait, "sem_timedwait");
  Resolve(g_sem_clockwait, "sem_clockwait");
  Resolve(g_nanosleep, "nanosleep");
  Resolve(g_clock_nanosleep, "clock_nanosleep");
  Resolve(g_usleep, "usleep");
  Resolve(g_syscall, "syscall");
  Resolve(g_read, "read");
  Resolve(g_read_chk, "__read_chk");
  Resolve(g_glx_swap, "glXSwapBuffers");
  Resolve(g_egl_swap, "eglSwapBuffers");
  absl::StatusOr<AgentConfig> config = AgentConfig::FromEnvironment(
      [](const char* name) -> const char* { return getenv(name); });
  if (!config.ok()) {
    Log(absl::StrCat("not monitoring: ", config.status().message()));
    g_state.store(kDormant);
    return;
  }
  if (!config->ShouldMonitor(g_pid)) {
    g_state.store(kDormant);  // Another program exec'ed by the target: silent.
    return;
  }
  if (static_cast<pid_t>(syscall(SYS_gettid)) != g_pid) {
    Log("not monitoring: loaded on a thread other than the main thread");
    g_state.store(kDormant);
    return;
  }
  g_main_thread = pthread_self();
  g_session = new Session();
  g_session->config = *std::move(config);
  pthread_atfork(nullptr, nullptr, &AtForkChild);
  g_state.store(kArmed, std::memory_order_release);
}

__attribute__((destructor)) void AgentFini() {
  if (getpid() != g_pid) return;
  const int state = g_state.load(std::memory_order_acquire);
  if (state == kArmed) {
    g_state.store(kStopped);
    Log("no blocking wait or buffer swap on the main thread: nothing was monitored");
    return;
  }
  if (state != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) {
    // Exit from another thread while the main thread may still run: leave
    // the monitors alone (the reports already written stay).
    g_state.store(kStopped);
    Log(absl::StrCat("exit on a non-main thread; reports so far in ", g_session->report_path));
    return;
  }
  StopMonitoring(ProcessEnd::kExit);
}

}  // namespace

// Exit hooks (exit_hooks.h).
bool MonitoringThisProcess() {
  return getpid() == g_pid && g_state.load(std::memory_order_acquire) == kRunning;
}

bool OnMainThread() { return pthread_equal(pthread_self(), g_main_thread); }

void StopMonitoring(ProcessEnd end) {
  int expected = kRunning;
  if (!g_state.compare_exchange_strong(expected, kStopped)) return;
  Session& s = *g_session;
  const int saved_errno = errno;
  if (s.in_dispatch) s.looper->DispatchEnd(s.looper->clock()->NowTicks());
  s.in_dispatch = false;
  if (end == ProcessEnd::kExit) {
    if (s.config.frames) {
      if (FrameTracer* frames = s.plugin->GetFrameTracer()) frames->FlushReports();
    }
    if (s.draws) s.ui->RemoveFrameSource();
    // Drains the reports in flight (within the drain timeout) before it stops.
    Matrix::Shutdown();
  } else {
    // The process image ends here (and the monitors belong to the main
    // thread, which waits in the hook): deliver (FPS included), but free
    // nothing.
    s.plugin->FlushReportsFor(kShutdownDrainTimeout);
  }
  Log(absl::StrCat(s.dispatches, " dispatches, ", s.frames, " frames; reports in ",
                   s.report_path, "; loop wait sites learned: ", s.wait_sites.LoopWaitCount(),
                   end == ProcessEnd::kExit ? ""
                                            : absl::StrCat(" (at ", ProcessEndName(end), ")")));
  errno = saved_errno;
}

bool FlushReportsFor(absl::Duration timeout) {
  if (!MonitoringThisProcess()) return true;
  return g_session->plugin->FlushReportsFor(timeout);
}

// Window hooks (window_hooks.h).
bool WaitingForFirstWindowMap() {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state != kRunning && state != kArmed) return false;
  return pthread_equal(pthread_self(), g_main_thread) && !g_session->window_mapped;
}

void OnFirstWindowMapped() {
  Session& s = *g_session;
  s.window_mapped = true;
  if (g_state.load(std::memory_order_relaxed) != kRunning || !s.draws_if_presenting) return;
  s.draws_if_presenting = false;
  // A program that presents has its swap (or its renderer) by the time its
  // window is on screen; any other's startup ends with this dispatch.
  if (g_glx_swap.load(std::memory_order_relaxed) != nullptr ||
      g_egl_swap.load(std::memory_order_relaxed) != nullptr || RendererLoaded()) {
    return;
  }
  s.draws = false;
  s.ui->RemoveFrameSource();
}

// Present hooks (present_hooks.h).
bool PresentBegin() {
  if (!MainThreadMonitoring(/*swap=*/true)) return false;
  SwapEnter(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  return true;
}

void PresentEnd() { SwapExit(); }

void PresentedOffThread() { CountIfOffThread(); }

}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT int poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  const ma::PollFn real = ma::Resolve(ma::g_poll, "poll");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(fds, nfds, timeout); });
}

MATRIX_AGENT_EXPORT int __poll_chk(struct pollfd* fds, nfds_t nfds, int timeout, size_t) {
  return poll(fds, nfds, timeout);
}

MATRIX_AGENT_EXPORT int ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                              const sigset_t* sigmask) {
  const ma::PpollFn real = ma::Resolve(ma::g_ppoll, "ppoll");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(fds, nfds, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t nfds,
                                    const struct timespec* timeout, const sigset_t* sigmask,
                                    size_t) {
  return ppoll(fds, nfds, timeout, sigmask);
}

MATRIX_AGENT_EXPORT int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
                                   int timeout) {
  const ma::EpollWaitFn real = ma::Resolve(ma::g_epoll_wait, "epoll_wait");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(epfd, events, maxevents, timeout); });
}

MATRIX_AGENT_EXPORT int epoll_pwait(int epfd, struct epoll_event* events, int maxevents,
                                    int timeout, const sigset_t* sigmask) {
  const ma::EpollPwaitFn real = ma::Resolve(ma::g_epoll_pwait, "epoll_pwait");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(epfd, events, maxevents, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                               struct timeval* timeout) {
  const ma::SelectFn real = ma::Resolve(ma::g_select, "select");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(nfds, readfds, writefds, exceptfds, timeout); });
}

MATRIX_AGENT_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                                const struct timespec* timeout, const sigset_t* sigmask) {
  const ma::PselectFn real = ma::Resolve(ma::g_pselect, "pselect");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1), [&] {
    return real(nfds, readfds, writefds, exceptfds, timeout, sigmask);
  });
}

// The other waits (docs/matrix-run.md, "The loop's own waits"): on the main
// thread, the loop's wait when their call site was learned as such
// (LoopWaitSites), else work. Other threads: the real call after one relaxed
// load and pthread_self().
MATRIX_AGENT_EXPORT int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex) {
  const ma::CondWaitFn real =
      ma::ResolveVersioned(ma::g_cond_wait, "pthread_cond_wait", ma::kCondVersion);
  if (!ma::MainThreadWatched()) return real(cond, mutex);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex); });
}

MATRIX_AGENT_EXPORT int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                               const struct timespec* abstime) {
  const ma::CondTimedWaitFn real =
      ma::ResolveVersioned(ma::g_cond_timedwait, "pthread_cond_timedwait", ma::kCondVersion);
  if (!ma::MainThreadWatched()) return real(cond, mutex, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex, abstime); });
}

MATRIX_AGENT_EXPORT int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                               clockid_t clock, const struct timespec* abstime) {
  const ma::CondClockWaitFn real = ma::Resolve(ma::g_cond_clockwait, "pthread_cond_clockwait");
  if (!ma::MainThreadWatched()) return real(cond, mutex, clock, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex, clock, abstime); });
}

MATRIX_AGENT_EXPORT int sem_wait(sem_t* sem) {
  const ma::SemWaitFn real = ma::Resolve(ma::g_sem_wait, "sem_wait");
  if (!ma::MainThreadWatched()) return real(sem);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount, [&] { return real(sem); });
}

MATRIX_AGENT_EXPORT int sem_timedwait(sem_t* sem, const struct timespec* abstime) {
  const ma::SemTimedWaitFn real = ma::Resolve(ma::g_sem_timedwait, "sem_timedwait");
  if (!ma::MainThreadWatched()) return real(sem, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(sem, abstime); });
}

MATRIX_AGENT_EXPORT int sem_clockwait(sem_t* sem, clockid_t clock,
                                      const struct timespec* abstime) {
  const ma::SemClockWaitFn real = ma::Resolve(ma::g_sem_clockwait, "sem_clockwait");
  if (!ma::MainThreadWatched()) return real(sem, clock, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(sem, clock, abstime); });
}

MATRIX_AGENT_EXPORT int nanosleep(const struct timespec* duration, struct timespec* remaining) {
  const ma::NanosleepFn real = ma::Resolve(ma::g_nanosleep, "nanosleep");
  if (!ma::MainThreadWatched()) return real(duration, remaining);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(duration, remaining); });
}

MATRIX_AGENT_EXPORT int clock_nanosleep(clockid_t clock, int flags,
                                        const struct timespec* request,
                                        struct timespec* remaining) {
  const ma::ClockNanosleepFn real = ma::Resolve(ma::g_clock_nanosleep, "clock_nanosleep");
  if (!ma::MainThreadWatched()) return real(clock, flags, request, remaining);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(clock, flags, request, remaining); });
}

MATRIX_AGENT_EXPORT int usleep(useconds_t usec) {
  const ma::UsleepFn real = ma::Resolve(ma::g_usleep, "usleep");
  if (!ma::MainThreadWatched()) return real(usec);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount, [&] { return real(usec); });
}

// A futex wait through syscall(SYS_futex, ...): what C++20's
// std::atomic<T>::wait does in libstdc++, and loops built on raw futexes.
// glibc's own waits (mutexes, condition variables, semaphores) make the
// system call inline and never come here. Every other system call passes
// through after one comparison.
MATRIX_AGENT_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  // glibc's syscall() reads six arguments whatever the call: so do we.
  long a[6];
  for (long& arg : a) arg = va_arg(ap, long);
  va_end(ap);
  const ma::SyscallFn real = ma::Resolve(ma::g_syscall, "syscall");
  const int command = static_cast<int>(a[1]) & FUTEX_CMD_MASK;
  if (number != SYS_futex || (command != FUTEX_WAIT && command != FUTEX_WAIT_BITSET) ||
      !ma::MainThreadWatched()) {
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  }
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(number, a[0], a[1], a[2], a[3], a[4], a[5]); });
}

MATRIX_AGENT_EXPORT ssize_t read(int fd, void* buf, size_t count) {
  const ma::ReadFn real = ma::Resolve(ma::g_read, "read");
  if (!ma::MainThreadWatched()) return real(fd, buf, count);
  return ma::ReadWait(MATRIX_AGENT_CALL_SITE(fd), [&] { return real(fd, buf, count); });
}

// The fortified read (_FORTIFY_SOURCE): glibc's checks the buffer size.
MATRIX_AGENT_EXPORT ssize_t __read_chk(int fd, void* buf, size_t count, size_t buf_size) {
  const ma::ReadChkFn real = ma::Resolve(ma::g_read_chk, "__read_chk");
  if (!ma::MainThreadWatched()) return real(fd, buf, count, buf_size);
  return ma::ReadWait(MATRIX_AGENT_CALL_SITE(fd), [&] { return real(fd, buf, count, buf_size); });
}

// GLX and EGL: declared with opaque pointer types (the agent links neither).
MATRIX_AGENT_EXPORT void glXSwapBuffers(void* display, unsigned long drawable) {
  const ma::SwapFn real = ma::Resolve(ma::g_glx_swap, "glXSwapBuffers");
  if (real == nullptr) return;  // No libGL: cannot be called legitimately.
  if (!ma::MainThreadMonitoring(/*swap=*/true)) {
    real(display, drawable);
    ma::CountIfOffThread();
    return;
  }
  if (!ma::g_session->glx_rate_read) {
    ma::g_session->glx_rate_read = true;
    ma::ReadGlxRefreshRate(display);
  }
  ma::SwapEnter(MATRIX_AGENT_FRAME());
  real(display, drawable);
  ma::SwapExit();
}

MATRIX_AGENT_EXPORT unsigned eglSwapBuffers(void* display, void* surface) {
  const ma::EglSwapFn real = ma::Resolve(ma::g_egl_swap, "eglSwapBuffers");
  if (real == nullptr) return 0;  // EGL_FALSE.
  if (!ma::MainThreadMonitoring(/*swap=*/true)) {
    const unsigned result = real(display, surface);
    ma::CountIfOffThread();
    return result;
  }
  ma::SwapEnter(MATRIX_AGENT_FRAME());
  const unsigned result = real(display, surface);
  ma::SwapExit();
  return result;
}

namespace matrix::agent {
// A swap looked up at run time (present_hooks.cc): records the real function
// and returns the agent's wrapper. A global-scope look-up finds the wrapper
// itself, which is not recorded.
void* RecordRealSwap(const char* name, void* real) {
  if (std::strcmp(name, "glXSwapBuffers") == 0) {
    void* wrapper = reinterpret_cast<void*>(&glXSwapBuffers);
    SwapFn expected = nullptr;
    if (real != wrapper) {
      g_glx_swap.compare_exchange_strong(expected, reinterpret_cast<SwapFn>(real),
                                         std::memory_order_relaxed);
    }
    return wrapper;
  }
  if (std::strcmp(name, "eglSwapBuffers") == 0) {
    void* wrapper = reinterpret_cast<void*>(&eglSwapBuffers);
    EglSwapFn expected = nullptr;
    if (real != wrapper) {
      g_egl_swap.compare_exchange_strong(expected, reinterpret_cast<EglSwapFn>(real),
                                         std::memory_order_relaxed);
    }
    return wrapper;
  }
  return RecordDamageSwap(name, real);
}
}  // namespace matrix::agent
