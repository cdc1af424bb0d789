// The main-thread session of libmatrix-agent.so: the agent's state word, the
// monitors it feeds, and the dispatch and frame boundaries its hooks mark
// (see docs/matrix-run.md).
//
// agent.cc starts the session (on the main thread's first blocking wait or
// swap) and stops it; the wait hooks (wait_hooks.cc), the swap wrappers
// (agent.cc) and the GTK hooks (gtk_hooks.cc) mark its dispatches and frames
// through the inline functions here, so each interposed call compiles to the
// same few loads and the LooperMonitor hooks.
//
// Thread safety: g_state is atomic and may be read on any thread; the Session
// and everything that touches it belong to the main thread (g_main_thread).

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_SESSION_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_SESSION_H_

#include <errno.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "agent_config.h"
#include "gtk_hooks.h"
#include "loop_wait_sites.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "present_hooks.h"

namespace matrix::agent {

enum State : int {
  kUninitialized = 0,  // Before the constructor.
  kDormant,            // Not this process (exec'ed child, fork child, disabled, error).
  kArmed,              // Waiting for the main thread's first wait or swap.
  kStarting,           // Starting Matrix (calls on the main thread pass through).
  kRunning,            // Monitoring.
  kStopped,            // After the destructor, or a failed start.
};
// Defined in agent.cc.
extern std::atomic<int> g_state;
extern pthread_t g_main_thread;

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
  bool glx_rate_read = false;  // ReadGlxRefreshRate() ran.
  TimeTicks dispatch_begin;
  // The loop's own waits among the other waits (condition variables, ...),
  // learned from their call sites; used from the constructor on (armed too).
  LoopWaitSites wait_sites;
  // The call site of the last blocking poll & co.: the loop's own poll.
  LoopWaitSites::CallSite loop_poll;
  // How many blocking polls in a row came from loop_poll's site, and whether
  // the dispatch in progress began at that site (LoopWaitSites::CountWait's
  // poll loop: established at two in a row).
  int loop_poll_repeats = 0;
  bool dispatch_from_loop_poll = false;
  int64_t dispatches = 0;
  int64_t frames = 0;
  // GTK 3 (gtk_hooks.h): found at start; hooked once GDK has a display
  // (gtk_init ran), tried between dispatches until then.
  bool gtk = false;
  bool gtk_hooked = false;
};
// Defined in agent.cc. Leaked on purpose: alive until exit.
extern Session* g_session;

// Starts Matrix on the main thread. Returns false (and logs why) on failure.
// `from_swap`: the first call is a buffer swap (the program draws). Defined
// in agent.cc.
bool StartSession(bool from_swap);

// The display's refresh rate as `reported_mhz` says (0: unknown), unless
// --refresh-hz set it: the session's rate from now on. Main thread.
inline void SetReportedRefresh(int64_t reported_mhz) {
  Session& s = *g_session;
  s.rate = RefreshRate::FromMillihertz(s.config.RefreshMillihertz(reported_mhz));
}

// Whether the call is the main thread's while monitoring (toolkit callbacks:
// one relaxed load and a thread comparison). Starts nothing.
inline bool MonitoringOnMainThread() {
  return g_state.load(std::memory_order_relaxed) == kRunning &&
         pthread_equal(pthread_self(), g_main_thread);
}

// This dispatch draws a frame (one per dispatch: the caller checks and
// sets nothing else): it counts from `due` (by default the dispatch's
// begin), its traversal phase from `traversal`. Main thread, in a dispatch.
inline void MarkDispatchFrame(Session& s, TimeTicks traversal, TimeTicks due = TimeTicks()) {
  s.frame_marked = true;
  s.ui->MarkFrame(due.is_null() ? s.dispatch_begin : due, s.rate, ++s.frames);
  s.ui->MarkPhase(UIThreadMonitor::Phase::kTraversal, traversal);
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

// True when the call is the main thread's and the agent watches it: running,
// or armed (Matrix not started yet; the loop's wait is learned already, and
// its first wait as a boundary starts Matrix). Starts nothing.
inline bool MainThreadWatched() {
  const int state = g_state.load(std::memory_order_relaxed);
  if (state != kRunning && state != kArmed) return false;
  return pthread_equal(pthread_self(), g_main_thread);
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

// A buffer swap starts: this dispatch draws a frame, now in its commit phase.
// The swap, made at stack depth `frame`, is a boundary: wait sites deeper
// than it are the frame's work, not the loop's wait.
inline void SwapEnter(uintptr_t frame) {
  Session& s = *g_session;
  if (s.in_swap) return;
  s.dispatch_from_loop_poll = false;
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

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_SESSION_H_
