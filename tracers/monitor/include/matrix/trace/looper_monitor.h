// File: matrix/trace/looper_monitor.h
//
// LooperMonitor turns each message dispatch of a loop into begin/end events
// for any number of listeners. Sources: kDispatchObserver (our Looper's
// dispatch observers and clock readings: the default and cheapest),
// kPrinter (Android's ">>>>> Dispatching" / "<<<<< Finished" Printer lines,
// as BlockCanary and Matrix hook them; a printer already installed is
// chained) and kForeign (a loop that is not ours calls DispatchBegin() /
// DispatchEnd(), and IdleBegin() / IdleEnd() around idle callbacks). Only
// the outermost dispatch of nested loops is reported, and it is written once
// into the DispatchHeartbeat (and MethodTracer) given to RecordDispatches()
// before any listener hears it (docs/architecture.md, "The per-dispatch
// path").
//
//   matrix::LooperMonitor monitor(matrix::Looper::MyLooper());   // observer source
//   monitor.Start();
//   auto registration = monitor.AddListener(&my_listener);
//
//   matrix::LooperMonitor foreign(matrix::TickClock::Default());  // a foreign loop
//   foreign.DispatchBegin("sdl-event");
//   HandleEvent(event);
//   foreign.DispatchEnd();
//
// Thread safety: bound to the loop's thread. Every method must be called on
// it (except ProvisionalBegin(), any thread), and listeners are called on it.

#ifndef MATRIX_TRACE_LOOPER_MONITOR_H_
#define MATRIX_TRACE_LOOPER_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/check.h"
#include "matrix/core/looper.h"
#include "matrix/core/message.h"
#include "matrix/core/observer_list.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/dispatch_info.h"

namespace matrix {

class LooperMonitor;

// Receives the outermost dispatches, on the loop's thread, for every message:
// implementations must be extremely fast. The monitor's first listener may
// ask for less: no begins (set_wants_dispatch_begin(false)), and ends only of
// dispatches at least dispatch_end_floor_ns() long, of one during which it
// called RequestDispatchEnd(), or of the first to end after a floor changed
// (NoteEndFloorChange()). The others hear every dispatch.
//
// Thread safety: loop thread, except NoteEndFloorChange() (any thread).
class LooperDispatchListener {
 public:
  virtual ~LooperDispatchListener() = default;
  virtual void OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) = 0;
  // Follows an OnDispatchBegin() this listener received (or, when it wants
  // no begins, a begin it would have received).
  virtual void OnDispatchEnd(TimeTicks begin, TimeTicks end) = 0;

  void set_wants_dispatch_begin(bool wants);
  bool wants_dispatch_begin() const { return wants_begin_; }
  void set_dispatch_end_floor_ns(int64_t ns) {
    end_floor_ns_ = ns;
    if (!end_requested_) effective_floor_ns_ = ns;
  }
  int64_t dispatch_end_floor_ns() const { return end_floor_ns_; }
  // This dispatch's end, whatever its length (inside a dispatch).
  void RequestDispatchEnd() {
    end_requested_ = true;
    effective_floor_ns_ = INT64_MIN;
  }
  // Some floor that a listener's own floor follows changed. Any thread.
  static void NoteEndFloorChange() { end_floor_changes_.fetch_add(1); }
  static uint64_t end_floor_changes() { return end_floor_changes_.load(); }

 private:
  friend class LooperMonitor;
  // The monitor whose first listener this is (it caches wants_begin_).
  std::weak_ptr<LooperMonitor*> monitor_;
  bool wants_begin_ = true;
  bool end_requested_ = false;
  int64_t end_floor_ns_ = INT64_MIN;  // Every end.
  // The floor, or INT64_MIN while an end is requested (one compare).
  int64_t effective_floor_ns_ = INT64_MIN;
  static inline std::atomic<uint64_t> end_floor_changes_{0};
};

class DispatchHeartbeat;
class MethodTracer;

// Receives the idle-callback runs a foreign loop reports (IdleBegin() /
// IdleEnd()). Thread safety: called on the loop's thread; must be fast.
class LooperIdleListener {
 public:
  virtual ~LooperIdleListener() = default;
  // `name` has static storage (valid after the run ends).
  virtual void OnIdleBegin(TimeTicks begin, const char* name) = 0;
  // Always follows an OnIdleBegin() this listener received.
  virtual void OnIdleEnd(TimeTicks begin, TimeTicks end) = 0;
};

// A foreign loop that learns when a dispatch began only after the fact
// (libuv: its DispatchBegin() comes later, dated back). While no dispatch is
// open, the watchdogs ask it whether the loop thread already runs the next
// one, so a hang there is watched as it happens.
//
// Thread safety: ProvisionalBegin() runs on watchdog threads, concurrently
// with the loop thread; it must not block for long.
class ProvisionalDispatchSource {
 public:
  virtual ~ProvisionalDispatchSource() = default;
  // When the loop thread began work not reported yet (its next
  // DispatchBegin() carries exactly this time), or null when it cannot tell.
  // While the loop waits, "now" is a fine answer.
  virtual TimeTicks ProvisionalBegin() const = 0;
};

class LooperMonitor {
 public:
  enum class Source { kDispatchObserver, kPrinter, kForeign };
  static const char* SourceName(Source source);

  struct Options {
    Source source = Source::kDispatchObserver;
    // How often (at most) an idle looper checks that our printer is still
    // installed (kPrinter only). Matrix: 60 s.
    absl::Duration printer_check_interval = absl::Seconds(60);
  };

  // Monitors `looper` (not owned; must outlive the monitor). Construct and use
  // on the looper's thread.
  LooperMonitor(Looper* looper, Options options);
  explicit LooperMonitor(Looper* looper) : LooperMonitor(looper, Options()) {}
  // Monitors a foreign loop (source kForeign), timing with `clock`.
  explicit LooperMonitor(const TickClock* clock);
  ~LooperMonitor();
  LooperMonitor(const LooperMonitor&) = delete;
  LooperMonitor& operator=(const LooperMonitor&) = delete;

  // Start() hooks the source; Stop() unhooks it (restoring the printer that
  // was installed before ours, when ours is still the installed one).
  void Start();
  void Stop();
  bool is_started() const { return started_; }

  // AddListener()
  //
  // Registers `listener` (not owned) until the handle is destroyed; one
  // added during a dispatch first hears the next. Listeners hear dispatches
  // in the order added; the first (the UIThreadMonitor) is called directly.
  [[nodiscard]] ObserverRegistration AddListener(LooperDispatchListener* listener);

  // RecordDispatches()
  //
  // Writes each outermost dispatch, at its begin and end and before any
  // listener hears it, into `heartbeat` (with the method-trace mark) and, when
  // not null, as `methods`' dispatch records (it must trace this thread).
  // Null stops it. Not owned; both outlive the recording. Loop thread.
  void RecordDispatches(DispatchHeartbeat* heartbeat, MethodTracer* methods);
  // The dispatch in progress (or the last): its begin, the method-trace mark
  // written at its begin (0 without one), and the end of the dispatch before
  // it (null before any ended). Loop thread.
  TimeTicks dispatch_begin() const { return begin_; }
  uint64_t dispatch_method_mark() const { return method_mark_; }
  TimeTicks last_dispatch_end() const { return last_end_; }
  // Whether `listener` hears the dispatch in progress (it was the first
  // listener when the dispatch began and still is). Loop thread.
  bool HearsCurrentDispatch(const LooperDispatchListener* listener) const {
    return depth_ > 0 && first_in_dispatch_ == listener;
  }

  // SetWaitThreshold() / waited()
  //
  // Whether the loop waited at least `ns` between two dispatches (the end of
  // one and the begin of the next) since ClearWaited(); true until the first
  // ClearWaited(). One compare per dispatch. Loop thread.
  void SetWaitThreshold(int64_t ns) { wait_threshold_ns_ = ns; }
  bool waited() const { return waited_; }
  void ClearWaited() { waited_ = false; }

  // Foreign-loop hooks. Without a timestamp they read the clock.
  void DispatchBegin(TimeTicks begin, const char* label = nullptr);
  void DispatchBegin(const char* label = nullptr) { DispatchBegin(clock_->NowTicks(), label); }
  void DispatchEnd(TimeTicks end);
  void DispatchEnd() { DispatchEnd(clock_->NowTicks()); }

  // SetProvisionalSource()
  //
  // Registers `source` (not owned) until the handle is destroyed (empty when
  // another source is registered); destroying the handle waits for a call in
  // progress. `label` (static storage, may be null) labels the provisional
  // dispatch. Loop thread; costs nothing per dispatch.
  [[nodiscard]] ObserverRegistration SetProvisionalSource(ProvisionalDispatchSource* source,
                                                          const char* label = nullptr);
  // Any thread (the watchdogs): the registered source's answer (null when
  // there is none). Sets `*label` to the source's label.
  TimeTicks ProvisionalBegin(const char** label) const;

  // Foreign-loop idle-callback hooks: a run may lie inside or outside a
  // dispatch; runs do not nest (a begin while one runs, or an end without a
  // begin, is ignored). `name` has static storage. Stop() ends a run.
  void IdleBegin(TimeTicks begin, const char* name);
  void IdleBegin(const char* name) { IdleBegin(clock_->NowTicks(), name); }
  void IdleEnd(TimeTicks end);
  void IdleEnd() { IdleEnd(clock_->NowTicks()); }
  bool is_idle_running() const { return idle_running_; }

  // AddIdleListener()
  //
  // Registers `listener` (not owned) for IdleBegin()/IdleEnd() until the
  // handle is destroyed. One added during a run first hears the next one.
  [[nodiscard]] ObserverRegistration AddIdleListener(LooperIdleListener* listener);

  Source source() const { return options_.source; }
  Looper* looper() const { return looper_; }
  const TickClock* clock() const { return clock_; }
  bool is_dispatching() const { return depth_ > 0; }
  // kPrinter: false once the first line turned out not to be Android's
  // format (then no dispatch is reported, as in Matrix).
  bool printer_valid() const { return printer_valid_; }
  // kPrinter: how many times our printer was found replaced and re-installed.
  int printer_reinstall_count() const { return printer_reinstalls_; }
  // kPrinter: checks now (instead of waiting for the idle check) that our
  // printer is installed, re-installing it if another replaced it.
  void CheckPrinter();

 private:
  friend class LooperDispatchListener;  // set_wants_dispatch_begin().
  class DispatchObserverBridge;
  class MonitorPrinter;
  class PrinterCheck;

  // The hot path (inline in looper_monitor.cc) and the listeners' calls,
  // out of line.
  bool OpenDispatch(TimeTicks begin);
  bool WriteMethodBegin(TimeTicks begin);
  // Recomputes notify_begin_ (the listeners changed, or what they want).
  void UpdateNotifyBegin();
  void Begin(TimeTicks begin, const DispatchInfo& info);
  void End(TimeTicks end);
  [[gnu::noinline]] void NotifyBegin(TimeTicks begin, const DispatchInfo& info);
  [[gnu::noinline]] void NotifyBeginOfMessage(TimeTicks begin, const Message& msg);
  // `first_hears`: End() found that the first listener hears this end.
  [[gnu::noinline]] void NotifyEnd(TimeTicks end, bool first_hears);
  void OnPrinterLine(std::string_view line);
  void InstallPrinter();

  Looper* const looper_;
  const TickClock* const clock_;
  const Options options_;
  bool started_ = false;
  int depth_ = 0;
  TimeTicks begin_;
  // RecordDispatches().
  DispatchHeartbeat* heartbeat_ = nullptr;
  MethodTracer* methods_ = nullptr;
  uint64_t method_mark_ = 0;
  TimeTicks last_end_;
  int64_t wait_threshold_ns_ = INT64_MAX;
  bool waited_ = true;
  // LooperDispatchListener::end_floor_changes() when the first listener last
  // heard an end.
  uint64_t end_floors_seen_ = UINT64_MAX;
  // The first listener (see AddListener()), outside the list, and the one
  // that heard the current dispatch begin (it hears its end only if it is
  // still registered then).
  LooperDispatchListener* first_listener_ = nullptr;
  LooperDispatchListener* first_in_dispatch_ = nullptr;
  // Whether some listener hears dispatch begins (the first one wants them,
  // or the list has any): one flag for the hot path.
  bool notify_begin_ = false;
  // Keeps registrations from touching a destroyed monitor.
  std::shared_ptr<LooperMonitor*> self_ = std::make_shared<LooperMonitor*>(this);
  ObserverList<LooperDispatchListener> listeners_;
  std::optional<ObserverList<LooperDispatchListener>::Scope> scope_;
  bool idle_running_ = false;
  TimeTicks idle_begin_;
  ObserverList<LooperIdleListener> idle_listeners_;
  std::optional<ObserverList<LooperIdleListener>::Scope> idle_scope_;

  // The provisional source: set and cleared on the loop thread, read by the
  // watchdogs (the flag spares them the mutex when there is none).
  std::atomic<bool> has_provisional_{false};
  mutable absl::Mutex provisional_mu_;
  ProvisionalDispatchSource* provisional_ ABSL_GUARDED_BY(provisional_mu_) = nullptr;
  const char* provisional_label_ ABSL_GUARDED_BY(provisional_mu_) = nullptr;

  // kDispatchObserver.
  std::unique_ptr<DispatchObserverBridge> bridge_;
  ObserverRegistration bridge_registration_;
  // kPrinter.
  MonitorPrinter* printer_ = nullptr;  // Owned by the process-wide printer pool.
  std::unique_ptr<PrinterCheck> printer_check_;
  bool printer_checked_ = false;
  bool printer_valid_ = true;
  int printer_reinstalls_ = 0;
  TimeTicks last_printer_check_;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_TRACE_LOOPER_MONITOR_H_
