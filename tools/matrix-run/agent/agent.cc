// libmatrix-agent.so: matrix-cpp for an unmodified program, through LD_PRELOAD
// (see docs/matrix-run.md).
//
// The agent interposes the blocking waits (poll, ppoll, epoll_wait,
// epoll_pwait, select, pselect: wait_hooks.h) and the buffer swaps
// (glXSwapBuffers, eglSwapBuffers: here). On the main thread, the time
// between two blocking waits is one dispatch, and so is each iteration of a
// loop that polls without sleeping while it has work (a zero-timeout poll
// from the loop's own poll site: GLib with idle sources pending); a swap
// ends a frame (and its dispatch) and begins the next iteration. Other
// threads' calls pass straight to the real function (a swap there is
// counted, and the main thread's next dispatch end marks the frame; swaps
// looked up at run time, and Vulkan presents, are wrapped too:
// present_hooks.h). In GTK 3 programs every mapped toplevel's GdkFrameClock
// marks frames too, and the focused (else newest) window's title names the
// scene (gtk_hooks.h). The cold start is reported from process start to the
// first frame (programs that draw) or to the first blocking wait (the
// others).
//
// Loops that wait in anything else: the agent also interposes
// pthread_cond_{,timed,clock}wait (the GLIBC_2.3.2 versions, agent.map),
// sem_{,timed,clock}wait, nanosleep, clock_nanosleep, usleep, read and futex
// waits made through syscall() (C++20 std::atomic<T>::wait). On the main
// thread such a wait is the loop's own wait (a dispatch boundary, like poll)
// only when its call site (return address and stack depth, plus the fd for
// read) was learned as such by LoopWaitSites: its waits blocked three times
// more than they did not, with no shallower boundary between
// (loop_wait_sites.h has the whole rule). Every other wait is work, timed
// inside the dispatch: a sleep in a slow handler still gives its ANR. Tcl/Tk
// (tkinter), condition-variable and semaphore queues, nanosleep frame
// pacing, eventfd and futex loops are covered so.
//
// This file holds the session's life (session.h): the constructor, its start
// on the first wait or swap, its end; the swap wrappers; and the functions
// the other hooks (exit_hooks.h, window_hooks.h, present_hooks.h) call back.
//
// Lifecycle:
//   constructor   reads the configuration (MATRIX_* variables), resolves the
//                 real functions, records the main thread, registers a
//                 pthread_atfork child handler. Starts nothing; in a shell
//                 (IsShell: a wrapper script, a pyenv shim) it stays dormant,
//                 and the program the shell execs is monitored. Last, it
//                 releases the pages of the libraries only the agent needs
//                 (own_pages.h).
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
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent_config.h"
#include "exit_hooks.h"
#include "gtk_hooks.h"
#include "matrix/core/app_state.h"
#include "matrix/core/matrix.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_config.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "own_pages.h"
#include "present_hooks.h"
#include "session.h"
#include "shells.h"
#include "wait_hooks.h"
#include "window_hooks.h"

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))
// The caller's stack depth, in the exported wrappers themselves.
#define MATRIX_AGENT_FRAME() reinterpret_cast<uintptr_t>(__builtin_frame_address(0))

namespace matrix::agent {

std::atomic<int> g_state{kUninitialized};
pthread_t g_main_thread;
Session* g_session = nullptr;

namespace {

using SwapFn = void (*)(void*, unsigned long);
using EglSwapFn = unsigned (*)(void*, void*);

// The real swaps are resolved (Resolve(), present_hooks.h) in the
// constructor, on first use by a call that comes before it (e.g. from another
// library's constructor), or recorded by RecordRealSwap.
std::atomic<SwapFn> g_glx_swap{nullptr};
std::atomic<EglSwapFn> g_egl_swap{nullptr};
pid_t g_pid = 0;

const char* ProgramName() { return program_invocation_short_name; }

void Log(const std::string& line) {
  std::string text = absl::StrCat("matrix-agent: ", ProgramName(), " (pid ", getpid(), "): ", line,
                                  "\n");
  // One write: whole lines even beside the program's own output.
  ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}

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

// The session's TraceConfig, from the agent's configuration `c`.
absl::StatusOr<TraceConfig> SessionTraceConfig(const AgentConfig& c) {
  return TraceConfig::Builder()
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
      // The program is not method-traced: no ring and no ticker thread of
      // the agent's own (a MethodTracer the program runs is still used).
      .SetMethodTraceBufferBytes(0)
      .Build();
}

// Initializes Matrix with one TracePlugin of `config` whose reports go to
// `sink`, and starts it. Returns the plugin, or null (logged, Matrix shut
// down) when it could not start.
TracePlugin* StartTracePlugin(const TraceConfig& config,
                              std::shared_ptr<JsonLinesIssueSink> sink) {
  auto trace = std::make_unique<TracePlugin>(config);
  TracePlugin* plugin = trace.get();
  absl::Status status = Matrix::Init(
      Matrix::Builder().AddPlugin(std::move(trace)).SetPluginListener(std::move(sink)).Build());
  if (status.ok()) status = plugin->Start();
  if (!status.ok() || plugin->GetLooperMonitor() == nullptr) {
    Log(absl::StrCat("not monitoring: ", status.ToString()));
    Matrix::Shutdown();
    return nullptr;
  }
  return plugin;
}

// Cold start (StartupTracer, from process start in /proc): a program that
// draws (its first call is a swap, GTK is in it, or GL/EGL swaps resolve to
// a loaded library) registers as a frame source, so the startup ends at its
// first frame; any other program's startup ends here, at its first blocking
// wait. `from_swap`: the session starts at a swap. Main thread, at the start.
void RegisterFrameSource(Session& s, bool from_swap) {
  const AgentConfig& c = s.config;
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
      SetReportedRefresh(hz * 1000);
    }
  }
  dlclose(xrandr);  // RTLD_NOLOAD took a reference; the program keeps its own.
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

// The file this process runs ("/proc/self/exe"), or "" when unreadable.
std::string ExecutablePath() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path));
  return n > 0 && static_cast<size_t>(n) < sizeof(path) ? std::string(path, n) : std::string();
}

// The constructor's work: decides whether this process is monitored.
void Arm() {
  g_pid = getpid();
  ResolveWaits();
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
  if (IsShell(ExecutablePath())) {
    // A launcher: waiting for its children (in waitpid, not interposed) would
    // be its hangs. The program it execs keeps the pid and is monitored.
    g_state.store(kDormant);
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

__attribute__((constructor)) void AgentInit() {
  Arm();
  // Last, so that what the loader and the constructors read is released too.
  ReleaseOwnLibraryPages();
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

bool StartSession(bool from_swap) {
  Session& s = *g_session;
  const AgentConfig& c = s.config;
  absl::StatusOr<TraceConfig> config = SessionTraceConfig(c);
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
  TracePlugin* plugin = StartTracePlugin(*config, *std::move(sink));
  if (plugin == nullptr) return false;
  s.plugin = plugin;
  s.looper = plugin->GetLooperMonitor();
  AnnounceProcess(c.process_list, name);
  s.ui = plugin->GetUIThreadMonitor();
  s.rate = RefreshRate::FromMillihertz(c.RefreshMillihertz(0));
  // _exit, exec and the forwarded termination signals drain through it.
  StartDrainThread();
  // GTK 3 in the process (linked, or dlopen'ed before the first wait).
  s.gtk = c.frames && FindGtk();
  RegisterFrameSource(s, from_swap);
  // The scene is the program's name (GTK: renamed from its windows).
  AppState::Get()->OnSceneCreated(ProgramName());
  AppState::Get()->OnSceneShown(ProgramName());
  // What the start alone ran (the plugin's set-up, its threads' first steps)
  // is not needed again.
  ReleaseOwnLibraryPages();
  return true;
}

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
  NoteDrainProgress();
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
  NoteDrainProgress();
  Log(absl::StrCat(s.dispatches, " dispatches, ", s.frames, " frames; reports in ",
                   s.report_path, "; loop wait sites learned: ", s.wait_sites.LoopWaitCount(),
                   end == ProcessEnd::kExit ? ""
                                            : absl::StrCat(" (at ", ProcessEndName(end), ")")));
  errno = saved_errno;
}

void FlushBeforeProcessEnd(ProcessEnd end) {
  static std::atomic<bool> flushed{false};
  if (!MonitoringThisProcess() || flushed.exchange(true)) return;
  // The main thread's monitors go on (it may be in a dispatch): the matrix
  // threads deliver what they have.
  g_session->plugin->FlushReportsFor(kShutdownDrainTimeout);
  NoteDrainProgress();
  Log(absl::StrCat("reports in ", g_session->report_path, " (at ", ProcessEndName(end),
                   " on a thread other than the main thread)"));
}

void FlushAtLoopReturn() {
  if (!MonitoringOnMainThread()) return;
  Session& s = *g_session;
  const int saved_errno = errno;
  if (s.in_dispatch && !s.in_swap) {
    WaitEnter();
    WaitExit();
  }
  s.plugin->FlushReportsFor(kShutdownDrainTimeout);
  errno = saved_errno;
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
