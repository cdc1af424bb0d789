// File: matrix/glib/glib_monitor.h
//
// Reports the dispatches of a GLib GMainContext to matrix-cpp, without owning
// the loop: the context's poll function is wrapped (g_main_context_set_poll_func;
// the previous one is kept and called, and restored on detach). The time from
// one poll's return to the next poll's call is one dispatch, labelled
// "glib-dispatch": the sources GLib dispatched in that iteration (timeouts,
// idle callbacks, I/O watches, GTK's event and paint sources). LAG, ANR (with
// the loop thread's native stack), slow-method and FPS then work on the loop.
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   ...                                   // Matrix::Init, plugin->Start() on the loop thread
//   auto monitor = matrix::glib::Attach(g_main_context_default(), plugin);
//   if (!monitor.ok()) { /* report (*monitor).status(); the loop runs unmonitored */ }
//   g_main_loop_run(loop);
//   monitor->reset();                     // detach, before Matrix::Shutdown()
//
// Idle lag (IdleHandlerLagTracer, EnableIdleHandlerTrace): an iteration that
// dispatches idle-priority sources (g_idle_add and anything else at
// G_PRIORITY_DEFAULT_IDLE or lower priority, kIdlePriority) is also reported
// as an idle run, named kIdleSourceName, so a slow idle callback gives a
// LAG_IDLE_HANDLER report with the loop thread's stack (and, being inside a
// dispatch, LAG / slow method / ANR as any slow callback). GLib has no
// per-source dispatch hook; two never-ready probe sources tell exactly when
// GLib's check phase chooses idle-priority sources: GLib dispatches only the
// ready sources of the highest ready priority, and checks sources in priority
// order until it has found one, so a probe at kIdlePriority is checked only
// when no source above idle priority is ready, and a probe at G_MAXINT only
// when no source at all is ready. The run begins at the first probe's check
// and is cancelled by the second's (nothing to dispatch); otherwise it spans
// the idle-priority callbacks of the iteration, up to the next poll. The
// probes never become ready and add no timeout: GLib's blocking, priorities
// and the return values of g_main_context_iteration/pending are unchanged.
// GLib does not tell which idle source runs (g_main_current_source() is only
// known inside a dispatch), so reports say "glib idle source"; the stack
// names the callback. One known approximation: g_main_context_pending()
// (gtk_events_pending) also runs the check phase without dispatching, so a
// callback that calls it while an idle source is ready and then keeps
// working without iterating is counted as an idle run until the next poll.
//
// Time spent blocked in poll is idle time, not a dispatch. A nested loop on the
// same context (gtk_dialog_run, g_main_context_iteration inside a callback)
// ends the outer dispatch at its poll and starts a new one when that poll
// returns, so a modal loop's idle time is not counted as a hang.
//
// Per dispatch the adapter adds two clock reads (vDSO, no syscall) and the
// LooperMonitor's listeners, plus, when GLib's check phase reaches idle
// priority, one or two probe checks and one clock read; no allocation, lock
// or log line.
//
// Thread safety: GlibMonitor is bound to the thread that iterates the context
// (the loop thread): Attach(), the destructor and Detach() must run there,
// with no other thread iterating the context. Up to kMaxAttachedContexts
// contexts may be attached at once (process-wide).

#ifndef MATRIX_GLIB_GLIB_MONITOR_H_
#define MATRIX_GLIB_GLIB_MONITOR_H_

#include <glib.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "matrix/core/check.h"
#include "matrix/trace/looper_monitor.h"

namespace matrix {
class TracePlugin;
}

namespace matrix::glib {

// The label of each GLib dispatch (DispatchInfo::label).
inline constexpr char kDispatchLabel[] = "glib-dispatch";
// The name of an idle run (LooperMonitor::IdleBegin, the LAG_IDLE_HANDLER
// report's idle_handler): GLib does not say which source it dispatches.
inline constexpr char kIdleSourceName[] = "glib idle source";
// Sources at this priority or lower (numerically greater) are idle callbacks.
inline constexpr int kIdlePriority = G_PRIORITY_DEFAULT_IDLE;

class GlibMonitor {
 public:
  // How many GMainContexts may be monitored at the same time.
  static constexpr int kMaxAttachedContexts = 8;

  // Detaches (see Detach()). Loop thread.
  ~GlibMonitor();
  GlibMonitor(const GlibMonitor&) = delete;
  GlibMonitor& operator=(const GlibMonitor&) = delete;

  // Restores the poll function that was installed before ours, destroys the
  // two probe sources, and ends an idle run and a dispatch in progress
  // (detaching from inside a callback is fine). When
  // another component replaced our poll function after Attach(), ours is left
  // in its chain, forwarding to the previous one without monitoring, and its
  // slot is not reused. Idempotent. Loop thread.
  void Detach();
  bool attached() const { return attached_; }

  GMainContext* context() const { return context_; }
  // Dispatches reported since Attach(). Loop thread.
  uint64_t dispatch_count() const { return dispatch_count_; }
  // Whether a dispatch is in progress (between a poll's return and the next
  // poll). Loop thread.
  bool in_dispatch() const { return in_dispatch_; }
  // Whether the current dispatch dispatches idle-priority sources (an idle
  // run is in progress). Loop thread.
  bool in_idle_run() const { return in_idle_run_; }
  // Idle runs reported since Attach() (not counting cancelled ones). Loop
  // thread.
  uint64_t idle_run_count() const { return idle_run_count_; }

 private:
  friend absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context,
                                                            LooperMonitor* looper_monitor);
  template <int kIndex>
  friend struct PollTrampoline;
  friend struct ProbeFuncs;

  GlibMonitor(GMainContext* context, LooperMonitor* looper_monitor, int slot);
  // Called by the slot's poll function around the previous poll function.
  void BeforePoll();
  void AfterPoll();
  // Called by the probe sources' check (GLib's check phase, after the poll).
  void OnIdlePriorityChecked();
  void OnNothingReadyChecked();
  void EndIdleRun(TimeTicks end);

  GMainContext* const context_;
  LooperMonitor* const looper_monitor_;
  const int slot_;
  bool attached_ = false;
  bool in_dispatch_ = false;
  bool in_idle_run_ = false;
  uint64_t dispatch_count_ = 0;
  uint64_t idle_run_count_ = 0;
  // Never-ready probes at kIdlePriority and G_MAXINT (owned; destroyed on
  // Detach()).
  GSource* idle_probe_ = nullptr;
  GSource* last_probe_ = nullptr;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

// Attach()
//
// Monitors `context` (not owned; a reference is held until detach; null means
// the global default context) and reports its dispatches to `plugin`'s
// LooperMonitor. The plugin must be configured with
// SetLooperSource(LooperMonitor::Source::kForeign) and started on this thread.
// Destroy the returned monitor before Matrix::Shutdown() (which destroys the
// plugin's monitors). Errors: InvalidArgument (null plugin),
// FailedPrecondition (plugin not started, not a foreign-loop plugin, or the
// context already monitored), ResourceExhausted (kMaxAttachedContexts).
// Loop thread.
absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context, TracePlugin* plugin);

// The same, reporting to any foreign-source LooperMonitor (not owned; must
// outlive the returned monitor). Loop thread.
absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context,
                                                    LooperMonitor* looper_monitor);

}  // namespace matrix::glib

#endif  // MATRIX_GLIB_GLIB_MONITOR_H_
