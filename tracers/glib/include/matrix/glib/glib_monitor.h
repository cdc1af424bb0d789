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
// Time spent blocked in poll is idle time, not a dispatch. A nested loop on the
// same context (gtk_dialog_run, g_main_context_iteration inside a callback)
// ends the outer dispatch at its poll and starts a new one when that poll
// returns, so a modal loop's idle time is not counted as a hang.
//
// Per dispatch the adapter adds two clock reads (vDSO, no syscall) and the
// LooperMonitor's listeners; no allocation, lock or log line.
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

class GlibMonitor {
 public:
  // How many GMainContexts may be monitored at the same time.
  static constexpr int kMaxAttachedContexts = 8;

  // Detaches (see Detach()). Loop thread.
  ~GlibMonitor();
  GlibMonitor(const GlibMonitor&) = delete;
  GlibMonitor& operator=(const GlibMonitor&) = delete;

  // Restores the poll function that was installed before ours and ends a
  // dispatch in progress (detaching from inside a callback is fine). When
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

 private:
  friend absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context,
                                                            LooperMonitor* looper_monitor);
  template <int kIndex>
  friend struct PollTrampoline;

  GlibMonitor(GMainContext* context, LooperMonitor* looper_monitor, int slot);
  // Called by the slot's poll function around the previous poll function.
  void BeforePoll();
  void AfterPoll();

  GMainContext* const context_;
  LooperMonitor* const looper_monitor_;
  const int slot_;
  bool attached_ = false;
  bool in_dispatch_ = false;
  uint64_t dispatch_count_ = 0;
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
