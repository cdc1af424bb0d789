// File: matrix/uv/uv_monitor.h
//
// Reports the dispatches of a libuv loop (uv_loop_t) to matrix-cpp, without
// owning the loop. One line:
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   ...                                  // Matrix::Init, plugin->Start() on the loop thread
//   auto monitor = matrix::uv::Attach(uv_default_loop(), plugin);
//   if (!monitor.ok()) { /* report monitor.status(); the loop runs unmonitored */ }
//   uv_run(uv_default_loop(), UV_RUN_DEFAULT);
//   monitor->reset();                    // detach, before Matrix::Shutdown()
//   uv_run(uv_default_loop(), UV_RUN_NOWAIT);   // lets libuv finish closing our handles
//   uv_loop_close(uv_default_loop());
//
// Dispatch boundaries. One turn of uv_run is: timers, pending, idle, prepare,
// poll (the blocking wait, then the I/O callbacks), check, closing. Only the
// blocking wait is idle time; everything else is a dispatch labelled
// "uv-dispatch":
//
//   - a uv_prepare_t ends the dispatch just before the wait (and remembers the
//     loop's idle time, uv_metrics_idle_time());
//   - a uv_check_t begins the next one right after the poll phase, dated back
//     to when the wait returned: the prepare's time plus the idle time libuv
//     measured for that wait (the adapter turns on UV_METRICS_IDLE_TIME with
//     uv_loop_configure; libuv has no way to turn it off again).
//
// So a dispatch holds that turn's I/O callbacks, its check and close
// callbacks, and the next turn's timers and idle callbacks (uv_idle_t). LAG
// and slow-method costs include the I/O callbacks.
//
// I/O callbacks are watched live. libuv gives no hook between the wait's
// return and the first I/O callback, but it brings its idle time up to date
// right there (before the callbacks), and uv_metrics_idle_time() is
// thread-safe. So the monitor registers as the LooperMonitor's
// ProvisionalDispatchSource: while no dispatch is open, the ANR watchdog asks
// for "prepare time + (idle time now - idle time at prepare)". While the loop
// waits that is about now (libuv counts the wait in progress); once the wait
// returned it stays put at the wait's return, and the watchdog watches the
// I/O callbacks as the dispatch that the check handle will report with that
// same begin (one dispatch, one report). An I/O callback that hangs past the
// LAG / ANR threshold gives its LAG / ANR, with the loop thread's stack,
// while it hangs. Hangs in timer, idle, check and close callbacks are
// watched as they happen anyway.
//
// The first dispatch begins when the first wait after Attach() returns. After
// uv_run() returns, the time until the next uv_run() (or the detach) belongs
// to the last dispatch: detach before blocking elsewhere on the loop thread.
//
// Both handles are unreferenced (uv_unref): the monitor never keeps the loop
// alive. Detaching closes them (uv_close); libuv frees them at its next turn,
// so run the loop once (UV_RUN_NOWAIT) before uv_loop_close(). Teardown code
// that uv_walk()s the loop sees them: detach first (closing them stops the
// monitoring, and they must not be freed by others). libuv has no frames: no
// FPS; idle callbacks (uv_idle_t) run inside dispatches, so a slow one is a
// LAG / slow method like any other callback.
//
// Scene: Options::scene ("libuv" by default) is made AppState's visible scene
// at attach, unless the application has shown its own scene already (then the
// application's scene stands, as it does for any scene shown later).
//
// Per dispatch the adapter adds two clock reads (vDSO), one
// uv_metrics_idle_time() (which takes libuv's own, uncontended metrics mutex:
// no syscall), one relaxed atomic store (at prepare, for the watchdog) and
// the LooperMonitor's listeners; no allocation, syscall or log line. The
// watchdog's questions (a mutex and a clock read on its thread, about once per
// LAG threshold while the loop is idle) can briefly contend libuv's metrics
// mutex with the loop thread around a wait. With the metric on, libuv itself adds a clock read and that mutex
// around each blocking wait.
//
// Thread safety: UvMonitor is bound to the thread that runs the loop: Attach(),
// Detach() and the destructor must run there (not necessarily inside a
// callback). The loop must outlive the monitor.

#ifndef MATRIX_UV_UV_MONITOR_H_
#define MATRIX_UV_UV_MONITOR_H_

#include <uv.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "matrix/core/app_state.h"
#include "matrix/core/check.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/looper_monitor.h"

namespace matrix {
class TracePlugin;
}

namespace matrix::uv {

namespace internal {
struct UvHandles;  // The prepare and check handles (uv_monitor.cc).
}  // namespace internal

// The label of each libuv dispatch (DispatchInfo::label).
inline constexpr char kDispatchLabel[] = "uv-dispatch";
// The scene named at attach when Options::scene is empty.
inline constexpr char kDefaultScene[] = "libuv";

struct Options {
  // The scene's name; empty: kDefaultScene.
  std::string scene;
  // False: leave AppState's scene alone.
  bool name_scene = true;
  // Tests only: replaces uv_metrics_idle_time() (called on the loop thread
  // and on the watchdog thread: must be thread-safe).
  std::function<uint64_t(uv_loop_t*)> idle_time_for_testing;
};

class UvMonitor : private ProvisionalDispatchSource {
 public:
  // Detaches (see Detach()). Loop thread.
  ~UvMonitor() override;
  UvMonitor(const UvMonitor&) = delete;
  UvMonitor& operator=(const UvMonitor&) = delete;

  // Ends a dispatch in progress (detaching from inside a callback is fine)
  // and closes the prepare and check handles (libuv frees them at its next
  // turn). Idempotent. Loop thread.
  void Detach();
  bool attached() const { return handles_ != nullptr; }

  uv_loop_t* loop() const { return loop_; }
  // Dispatches reported since Attach(). Loop thread.
  uint64_t dispatch_count() const { return dispatch_count_; }
  // Whether a dispatch is in progress (between the poll phase and the next
  // prepare phase). Loop thread.
  bool in_dispatch() const { return in_dispatch_; }
  // The scene this monitor named (empty when none).
  const std::string& scene() const { return scene_; }

 private:
  friend absl::StatusOr<std::unique_ptr<UvMonitor>> Attach(uv_loop_t* loop,
                                                          LooperMonitor* looper_monitor,
                                                          Options options);

  static constexpr int64_t kNoWait = std::numeric_limits<int64_t>::min();

  UvMonitor(uv_loop_t* loop, LooperMonitor* looper_monitor);
  void NameScene(const Options& options);
  uint64_t IdleTime() const;
  // ProvisionalDispatchSource: the watchdog thread.
  TimeTicks ProvisionalBegin() const override;
  static void OnPrepare(uv_prepare_t* handle);
  static void OnCheck(uv_check_t* handle);

  uv_loop_t* const loop_;
  LooperMonitor* const looper_monitor_;
  internal::UvHandles* handles_ = nullptr;  // Owned until closed; freed by libuv's close callback.
  bool in_dispatch_ = false;
  uint64_t dispatch_count_ = 0;
  TimeTicks prepare_time_;    // Our prepare callback's time (the wait follows).
  uint64_t idle_before_ = 0;  // uv_metrics_idle_time() at the last check (ns).
  // For the watchdog: the last prepare's time minus the idle time then (ns),
  // so the wait's return is wait_base_ns_ + idle time; kNoWait when detached.
  // Stored (release) at prepare, before that prepare ends the dispatch.
  std::atomic<int64_t> wait_base_ns_{kNoWait};
  std::function<uint64_t(uv_loop_t*)> idle_time_;  // Tests; empty: libuv's.
  ObserverRegistration provisional_registration_;
  std::string scene_;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

// Attach()
//
// Monitors `loop` (not owned; must outlive the monitor) and reports its
// dispatches to `plugin`'s LooperMonitor. The plugin must be configured with
// SetLooperSource(LooperMonitor::Source::kForeign) and started on this
// thread. Destroy the returned monitor before Matrix::Shutdown(). Errors:
// InvalidArgument (null loop or plugin), FailedPrecondition (plugin not
// started, not a foreign-loop plugin, or the loop already monitored),
// Internal (libuv refused a handle or the idle-time metric). Loop thread.
absl::StatusOr<std::unique_ptr<UvMonitor>> Attach(uv_loop_t* loop, TracePlugin* plugin,
                                                  Options options = {});

// The same, reporting to any foreign-source LooperMonitor (not owned; must
// outlive the returned monitor). Loop thread.
absl::StatusOr<std::unique_ptr<UvMonitor>> Attach(uv_loop_t* loop, LooperMonitor* looper_monitor,
                                                  Options options = {});

}  // namespace matrix::uv

#endif  // MATRIX_UV_UV_MONITOR_H_
