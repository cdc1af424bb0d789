// File: matrix/trace/idle_handler_lag_tracer.h
//
// IdleHandlerLagTracer reports an IdleHandler that runs longer than its
// threshold (2 s by default): Trace_EvilMethod, detail LAG_IDLE_HANDLER, with
// the looper thread's stack captured when the threshold was crossed and the
// idle handler's name (IdleHandler::Name(), evaluated when it was added to the
// queue). One report per run.
//
// Matrix replaces the MessageQueue's idle-handler list by reflection (and
// drops the handlers registered before it); here the Looper tells its
// dispatch observers about every idle-handler run, so nothing is replaced.
// A foreign loop (GLib's idle-priority sources through matrix::glib) reports
// its idle runs to a kForeign LooperMonitor instead (Options::looper_monitor,
// LooperMonitor::IdleBegin/IdleEnd); the report names what the loop named.
// The watchdog schedules itself like AnrTracer's: at the running handler's
// begin + threshold, or one threshold from now when none runs.
//
//   matrix::IdleHandlerLagTracer idle({.looper = main_looper, .monitor = &ui_monitor,
//                                      .watchdog_looper = watchdog, .worker_looper = worker,
//                                      .report = publish});
//   idle.OnStartTrace();   // on the looper thread
//
// Thread safety: OnStartTrace()/OnCloseTrace() on the looper thread; checks
// on the watchdog looper; reports built on the worker.

#ifndef MATRIX_TRACE_IDLE_HANDLER_LAG_TRACER_H_
#define MATRIX_TRACE_IDLE_HANDLER_LAG_TRACER_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/looper.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class Handler;

class IdleHandlerLagTracer : public Tracer,
                             private DispatchObserver,
                             private LooperIdleListener {
 public:
  struct Options {
    // Required: monitor, watchdog_looper, worker_looper, report.
    TracerEnv env;
    // Exactly one of the two: the looper whose idle handlers to watch, or a
    // foreign-loop (kForeign) monitor whose IdleBegin()/IdleEnd() to watch.
    Looper* looper = nullptr;
    LooperMonitor* looper_monitor = nullptr;
    absl::Duration threshold = absl::Seconds(2);
    AnrTracer::CaptureFn capture;  // Default: StackCapturer::Get().
  };

  explicit IdleHandlerLagTracer(Options options);
  ~IdleHandlerLagTracer() override;

  int64_t lag_count() const { return lag_count_.load(); }

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  // DispatchObserver (looper thread), for idle-handler runs only: the Looper
  // never calls the dispatch callbacks of an observer that does not want them.
  void OnDispatchBegin(const Message&, TimeTicks) override {}
  void OnDispatchEnd(const Message&, TimeTicks, TimeTicks) override {}
  void OnIdleHandlerBegin(const IdleHandler& handler, TimeTicks begin) override;
  void OnIdleHandlerEnd(const IdleHandler& handler, TimeTicks begin, TimeTicks end) override;
  // LooperIdleListener (looper thread): a foreign loop's idle runs.
  void OnIdleBegin(TimeTicks begin, const char* name) override;
  void OnIdleEnd(TimeTicks begin, TimeTicks end) override;
  void RunBegin(TimeTicks begin, const char* name);
  void RunEnd();

  void Check();

  Options options_;
  ObserverRegistration looper_registration_;
  std::unique_ptr<Handler> watchdog_handler_;
  std::unique_ptr<Handler> worker_handler_;
  std::atomic<bool> alive_{false};

  // Published by the looper thread (run number is odd while a handler runs).
  std::atomic<uint64_t> run_seq_{0};
  std::atomic<int64_t> run_begin_ns_{0};
  // IdleHandler::registered_name() (interned) or a foreign loop's static
  // name: valid after the run ends.
  std::atomic<const char*> run_name_{nullptr};

  // Watchdog thread.
  uint64_t reported_seq_ = 0;
  std::atomic<int64_t> lag_count_{0};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_IDLE_HANDLER_LAG_TRACER_H_
