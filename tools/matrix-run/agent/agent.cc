// libmatrix-agent.so: matrix-cpp for an unmodified program, through LD_PRELOAD
// (see docs/matrix-run.md).
//
// The agent interposes the blocking waits (poll, ppoll, epoll_wait,
// epoll_pwait, select, pselect) and the buffer swaps (glXSwapBuffers,
// eglSwapBuffers). On the main thread, the time between two blocking waits is
// one dispatch; a swap ends a frame (and its dispatch) and begins the next
// iteration. Other threads' calls pass straight to the real function. In GTK 3
// programs the first mapped toplevel's GdkFrameClock marks frames too.
//
// Lifecycle:
//   constructor   reads the configuration (MATRIX_* variables), resolves the
//                 real functions, records the main thread, registers a
//                 pthread_atfork child handler. Starts nothing.
//   first wait or swap on the main thread
//                 starts Matrix (TracePlugin on a foreign loop, the JSON-lines
//                 sink), once. From then on each wait/swap feeds the monitors.
//   destructor    (exit on the main thread) ends the dispatch in progress,
//                 flushes FPS reports and shuts Matrix down; one log line.
//
// Per interposed call on another thread, or when dormant: one relaxed atomic
// load and pthread_self() (a TLS read), then the real call. On the main thread
// while monitoring: two clock reads (vDSO) and the LooperMonitor hooks, no
// allocation, lock, syscall or log.
//
// Thread safety: the monitors are touched only on the main thread (the only
// thread whose waits are timed); the state word is atomic.

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent_config.h"
#include "matrix/core/matrix.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

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
using SwapFn = void (*)(void*, unsigned long);
using EglSwapFn = unsigned (*)(void*, void*);

// The real functions, resolved in the constructor (or on first use by a call
// that comes before it, e.g. from another library's constructor).
template <typename Fn>
Fn Resolve(std::atomic<Fn>& slot, const char* name) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

std::atomic<PollFn> g_poll{nullptr};
std::atomic<PpollFn> g_ppoll{nullptr};
std::atomic<EpollWaitFn> g_epoll_wait{nullptr};
std::atomic<EpollPwaitFn> g_epoll_pwait{nullptr};
std::atomic<SelectFn> g_select{nullptr};
std::atomic<PselectFn> g_pselect{nullptr};
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

// GTK 3, through dlsym (the agent links no GTK): the first mapped toplevel
// window's GdkFrameClock reports frames ("before-paint", "after-paint").
struct GList {
  void* data;
  GList* next;
  GList* prev;
};
struct GtkFns {
  GList* (*list_toplevels)() = nullptr;             // gtk_window_list_toplevels
  void (*list_free)(GList*) = nullptr;              // g_list_free
  int (*get_mapped)(void*) = nullptr;               // gtk_widget_get_mapped
  void* (*get_frame_clock)(void*) = nullptr;        // gtk_widget_get_frame_clock
  unsigned long (*connect)(void*, const char*, void (*)(), void*, void*,
                           int) = nullptr;          // g_signal_connect_data
};

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
  TimeTicks dispatch_begin;
  int64_t dispatches = 0;
  int64_t frames = 0;
  // GTK: found at start; attached to a window's frame clock once one is mapped
  // (looked for every kGtkCheckInterval dispatches until then).
  bool gtk = false;
  bool gtk_attached = false;
  int gtk_countdown = 0;
  GtkFns gtk_fns;
};
constexpr int kGtkCheckInterval = 32;
Session* g_session = nullptr;  // Leaked on purpose: alive until exit.

const char* ProgramName() { return program_invocation_short_name; }

void Log(const std::string& line) {
  std::string text = absl::StrCat("matrix-agent: ", ProgramName(), " (pid ", getpid(), "): ", line,
                                  "\n");
  // One write: whole lines even beside the program's own output.
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

// Starts Matrix on the main thread. Returns false (and logs why) on failure.
bool StartSession() {
  Session& s = *g_session;
  const AgentConfig& c = s.config;
  absl::StatusOr<TraceConfig> config =
      TraceConfig::Builder()
          .SetLooperSource(LooperMonitor::Source::kForeign)
          .UseChoreographer(false)
          .EnableFps(c.frames)
          .SetFpsTimeSlice(c.fps_time_slice)
          .EnableAnrTrace(true)
          .SetAnrThreshold(c.anr_threshold)
          .SetLagThreshold(c.lag_threshold)
          .EnableEvilMethodTrace(true)
          .SetEvilThreshold(c.evil_threshold)
          // The program is not method-traced: a small ring is enough.
          .SetMethodTraceBufferBytes(size_t{64} << 10)
          .Build();
  if (!config.ok()) {
    Log(absl::StrCat("not monitoring: ", config.status().ToString()));
    return false;
  }
  const std::string name =
      c.report_name.empty() ? absl::StrCat(ProgramName(), "-", getpid()) : c.report_name;
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
  s.ui = plugin->GetUIThreadMonitor();
  s.rate = RefreshRate::FromHz(c.refresh_hz);
  if (c.frames) s.ui->AddFrameSource();
  // GTK 3 in the process (linked, or dlopen'ed before the first wait).
  if (c.frames) {
    if (void* gtk = dlopen("libgtk-3.so.0", RTLD_NOW | RTLD_NOLOAD)) {
      GtkFns& f = s.gtk_fns;
      f.list_toplevels = reinterpret_cast<GList* (*)()>(dlsym(gtk, "gtk_window_list_toplevels"));
      f.list_free = reinterpret_cast<void (*)(GList*)>(dlsym(gtk, "g_list_free"));
      f.get_mapped = reinterpret_cast<int (*)(void*)>(dlsym(gtk, "gtk_widget_get_mapped"));
      f.get_frame_clock =
          reinterpret_cast<void* (*)(void*)>(dlsym(gtk, "gtk_widget_get_frame_clock"));
      f.connect = reinterpret_cast<decltype(f.connect)>(dlsym(gtk, "g_signal_connect_data"));
      s.gtk = f.list_toplevels != nullptr && f.list_free != nullptr && f.get_mapped != nullptr &&
              f.get_frame_clock != nullptr && f.connect != nullptr;
      dlclose(gtk);  // RTLD_NOLOAD took a reference; the program keeps its own.
    }
  }
  return true;
}

// "before-paint": this dispatch draws a frame; "after-paint": its commit.
void OnGtkBeforePaint(void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  if (!s.in_dispatch || s.frame_marked) return;
  s.frame_marked = true;
  s.ui->MarkFrame(s.dispatch_begin, s.rate, ++s.frames);
  s.ui->MarkPhase(UIThreadMonitor::Phase::kTraversal, s.looper->clock()->NowTicks());
}

void OnGtkAfterPaint(void*, void*) {
  if (g_state.load(std::memory_order_relaxed) != kRunning) return;
  if (!pthread_equal(pthread_self(), g_main_thread)) return;
  Session& s = *g_session;
  if (!s.in_dispatch || !s.frame_marked) return;
  s.ui->MarkPhase(UIThreadMonitor::Phase::kCommit, s.looper->clock()->NowTicks());
}

// Between dispatches, until attached: hooks the first mapped toplevel's frame
// clock. Allocates (GTK's list), so only every kGtkCheckInterval dispatches.
void TryAttachGtk() {
  Session& s = *g_session;
  if (++s.gtk_countdown < kGtkCheckInterval) return;
  s.gtk_countdown = 0;
  const GtkFns& f = s.gtk_fns;
  GList* windows = f.list_toplevels();
  for (GList* w = windows; w != nullptr; w = w->next) {
    if (w->data == nullptr || !f.get_mapped(w->data)) continue;
    void* clock = f.get_frame_clock(w->data);
    if (clock == nullptr) continue;
    f.connect(clock, "before-paint", reinterpret_cast<void (*)()>(&OnGtkBeforePaint), nullptr,
              nullptr, 0);
    f.connect(clock, "after-paint", reinterpret_cast<void (*)()>(&OnGtkAfterPaint), nullptr,
              nullptr, 0);
    s.gtk_attached = true;
    break;
  }
  f.list_free(windows);
}

// True when this call is the main thread's and the agent monitors it; starts
// the session on the first such call.
inline bool MainThreadMonitoring() {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state != kRunning && state != kArmed) return false;
  if (!pthread_equal(pthread_self(), g_main_thread)) return false;
  if (state == kRunning) return true;
  // kArmed, main thread: start once. Calls made while starting pass through.
  g_state.store(kStarting, std::memory_order_relaxed);
  const int saved_errno = errno;
  const bool ok = StartSession();
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

// The main thread is about to block: the dispatch in progress ends.
inline void WaitEnter() {
  Session& s = *g_session;
  if (s.in_swap || !s.in_dispatch) return;
  s.looper->DispatchEnd(s.looper->clock()->NowTicks());
  s.in_dispatch = false;
  if (s.gtk && !s.gtk_attached) TryAttachGtk();
}

// The main thread woke up: a dispatch begins.
inline void WaitExit() {
  Session& s = *g_session;
  if (s.in_swap || s.in_dispatch) return;
  DispatchBegin(s.looper->clock()->NowTicks(), "matrix-run:wait");
}

// A buffer swap starts: this dispatch draws a frame, now in its commit phase.
inline void SwapEnter() {
  Session& s = *g_session;
  if (s.in_swap) return;
  const TimeTicks now = s.looper->clock()->NowTicks();
  if (!s.in_dispatch) DispatchBegin(now, "matrix-run:frame");
  if (s.config.frames && !s.frame_marked) {
    s.frame_marked = true;
    s.ui->MarkFrame(s.dispatch_begin, s.rate, ++s.frames);
    s.ui->MarkPhase(UIThreadMonitor::Phase::kTraversal, s.dispatch_begin);
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

// Runs `real` as a blocking wait of the main thread when `blocking`.
template <typename Call>
inline auto TimedWait(bool blocking, Call&& real) {
  if (!blocking || !MainThreadMonitoring()) return real();
  WaitEnter();
  auto result = real();
  const int saved_errno = errno;
  WaitExit();
  errno = saved_errno;
  return result;
}

inline bool Blocking(const struct timespec* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_nsec != 0;
}
inline bool Blocking(const struct timeval* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_usec != 0;
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
  const int state = g_state.load(std::memory_order_acquire);
  if (getpid() != g_pid || state == kDormant || state == kUninitialized) return;
  if (state == kArmed) {
    g_state.store(kStopped);
    Log("no blocking wait or buffer swap on the main thread: nothing was monitored");
    return;
  }
  if (state != kRunning) return;
  Session& s = *g_session;
  if (!pthread_equal(pthread_self(), g_main_thread)) {
    // Exit from another thread while the main thread may still run: leave
    // the monitors alone (the reports already written stay).
    g_state.store(kStopped);
    Log(absl::StrCat("exit on a non-main thread; reports so far in ", s.report_path));
    return;
  }
  g_state.store(kStopped);
  if (s.in_dispatch) s.looper->DispatchEnd(s.looper->clock()->NowTicks());
  s.in_dispatch = false;
  if (s.config.frames) {
    if (FrameTracer* frames = s.plugin->GetFrameTracer()) frames->FlushReports();
    s.ui->RemoveFrameSource();
  }
  Matrix::Shutdown();
  Log(absl::StrCat(s.dispatches, " dispatches, ", s.frames, " frames; reports in ",
                   s.report_path));
}

}  // namespace
}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT int poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  const ma::PollFn real = ma::Resolve(ma::g_poll, "poll");
  return ma::TimedWait(timeout != 0, [&] { return real(fds, nfds, timeout); });
}

MATRIX_AGENT_EXPORT int __poll_chk(struct pollfd* fds, nfds_t nfds, int timeout, size_t) {
  return poll(fds, nfds, timeout);
}

MATRIX_AGENT_EXPORT int ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                              const sigset_t* sigmask) {
  const ma::PpollFn real = ma::Resolve(ma::g_ppoll, "ppoll");
  return ma::TimedWait(ma::Blocking(timeout), [&] { return real(fds, nfds, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t nfds,
                                    const struct timespec* timeout, const sigset_t* sigmask,
                                    size_t) {
  return ppoll(fds, nfds, timeout, sigmask);
}

MATRIX_AGENT_EXPORT int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
                                   int timeout) {
  const ma::EpollWaitFn real = ma::Resolve(ma::g_epoll_wait, "epoll_wait");
  return ma::TimedWait(timeout != 0, [&] { return real(epfd, events, maxevents, timeout); });
}

MATRIX_AGENT_EXPORT int epoll_pwait(int epfd, struct epoll_event* events, int maxevents,
                                    int timeout, const sigset_t* sigmask) {
  const ma::EpollPwaitFn real = ma::Resolve(ma::g_epoll_pwait, "epoll_pwait");
  return ma::TimedWait(timeout != 0,
                       [&] { return real(epfd, events, maxevents, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                               struct timeval* timeout) {
  const ma::SelectFn real = ma::Resolve(ma::g_select, "select");
  return ma::TimedWait(ma::Blocking(timeout),
                       [&] { return real(nfds, readfds, writefds, exceptfds, timeout); });
}

MATRIX_AGENT_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                                const struct timespec* timeout, const sigset_t* sigmask) {
  const ma::PselectFn real = ma::Resolve(ma::g_pselect, "pselect");
  return ma::TimedWait(ma::Blocking(timeout), [&] {
    return real(nfds, readfds, writefds, exceptfds, timeout, sigmask);
  });
}

// GLX and EGL: declared with opaque pointer types (the agent links neither).
MATRIX_AGENT_EXPORT void glXSwapBuffers(void* display, unsigned long drawable) {
  const ma::SwapFn real = ma::Resolve(ma::g_glx_swap, "glXSwapBuffers");
  if (real == nullptr) return;  // No libGL: cannot be called legitimately.
  if (!ma::MainThreadMonitoring()) return real(display, drawable);
  ma::SwapEnter();
  real(display, drawable);
  ma::SwapExit();
}

MATRIX_AGENT_EXPORT unsigned eglSwapBuffers(void* display, void* surface) {
  const ma::EglSwapFn real = ma::Resolve(ma::g_egl_swap, "eglSwapBuffers");
  if (real == nullptr) return 0;  // EGL_FALSE.
  if (!ma::MainThreadMonitoring()) return real(display, surface);
  ma::SwapEnter();
  const unsigned result = real(display, surface);
  ma::SwapExit();
  return result;
}
