// File: matrix/trace/anr_tracer.h
//
// AnrTracer reports dispatches that do not finish in time, with the looper
// thread's native stack captured at the moment the threshold was crossed:
//
//   ANR  (5 s)  reported at the crossing: Trace_EvilMethod, detail ANR, key =
//               the stack key, with the stack, the call tree since the
//               dispatch began (when methods are traced), the current frame's
//               queue costs, thread state, priority and nice, memory, scene,
//               foreground, CPU usage and the message being dispatched.
//   LAG  (2 s)  the stack is captured at the crossing; the report (detail LAG)
//               is sent when the dispatch ends, with its real cost, unless the
//               dispatch goes on to become an ANR: one report per stuck
//               dispatch (Matrix sends both).
//
// How the watchdog decides (on the matrix-watchdog looper; the looper thread
// only publishes its heartbeat, a few stores per message):
//   - It sleeps until the next instant a threshold could be crossed: the
//     running dispatch's begin + threshold, or, when the looper is idle, one
//     lag threshold from now (a dispatch that begins later cannot cross before
//     then). Detection is therefore late only by timer slack. After a LAG
//     crossing it sleeps until the ANR deadline, so the end of a dispatch that
//     lagged wakes it (DispatchEnd posts once) to watch the next one.
//   - A foreign loop that reports a dispatch only after it began (libuv: the
//     I/O callbacks run before the adapter's check handle) registers a
//     ProvisionalDispatchSource (LooperMonitor::SetProvisionalSource()).
//     While the heartbeat shows no dispatch, the watchdog asks it and watches
//     its answer as the next dispatch (UIThreadMonitor::ReadProvisional());
//     when the loop reports that dispatch with the same number it is the same
//     one: one report. Its stack is taken live; its call tree only once the
//     dispatch is reported (a LAG), none for an ANR taken before.
//   - When the watchdog itself wakes more than StoppedTime::kTolerance after
//     it asked to, it did not watch the gap. If the kernel's counters say the
//     looper thread ran or waited to run meanwhile (a CPU quota throttled the
//     process, the machine was busy), the gap is hang time, reported as
//     throttled_ms within the cost: the user waited. Otherwise the process
//     was stopped (SIGSTOP, a debugger, a frozen cgroup): that time is left
//     out, reported as stopped_ms, and the deadlines move by it, so a real
//     hang is reported once it has run the threshold. (CLOCK_MONOTONIC does
//     not advance during system suspend, so a suspend never looks like a
//     hang either.)
//   - With a debugger attached (TracerPid in /proc) nothing is reported unless
//     `report_with_debugger` is set.
//
//   matrix::AnrTracer anr({.monitor = &ui_monitor, .watchdog_looper = watchdog,
//                          .worker_looper = worker, .report = publish});
//   anr.OnStartTrace();
//
// Thread safety: OnStartTrace()/OnCloseTrace() and the LooperObserver
// callbacks on the looper thread; the checks on the watchdog looper; reports
// are built on the worker looper. Counters can be read from any thread.

#ifndef MATRIX_TRACE_ANR_TRACER_H_
#define MATRIX_TRACE_ANR_TRACER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class Handler;
class Looper;

class AnrTracer : public Tracer {
 public:
  using CaptureFn = std::function<absl::Status(const ThreadHandle& thread, RawStack* out)>;

  struct Options {
    // Required: monitor, watchdog_looper (deadlines only), worker_looper
    // (report building), report. The timeline, when given, is snapshot at the
    // crossing (ANR) or when the lagging dispatch ends (LAG).
    TracerEnv env;
    absl::Duration anr_threshold = absl::Seconds(5);
    absl::Duration lag_threshold = absl::Seconds(2);
    bool report_with_debugger = false;
    // Reads the looper thread's state, memory and the debugger flag.
    std::string proc_root = "/proc";
    // Captures the looper thread's stack (default: StackCapturer::Get()).
    CaptureFn capture;
    // Extra captures of the looper thread's stack just before each crossing,
    // `key_capture_spacing` apart, the last one that long before it: the
    // report's key is the deepest frame they share with the crossing's stack
    // (HangStackKey), not wherever one sample fell (a clock helper, malloc).
    // The reported stack stays the crossing's. 0 to key on it alone; at most
    // kMaxKeyCaptures.
    int key_captures = 2;
    absl::Duration key_capture_spacing = absl::Milliseconds(50);
    // Takes the key captures. Default: `capture` when one is given, else
    // StackCapturer::Get() with a kKeyCaptureTimeout deadline, so a thread
    // that does not answer in time never delays the crossing.
    CaptureFn key_capture;
  };

  static constexpr int kMaxKeyCaptures = 4;
  static constexpr absl::Duration kKeyCaptureTimeout = absl::Milliseconds(20);

  explicit AnrTracer(Options options);
  ~AnrTracer() override;

  // Called by the monitor only while a LAG is pending (its dispatch-end floor
  // is 0 then, kNoDispatchEnd otherwise).
  void DispatchEnd(const DispatchData& dispatch) override;

  // Counters. Any thread.
  int64_t anr_count() const { return anr_count_.load(); }
  int64_t lag_count() const { return lag_count_.load(); }
  // Checks that saw a stop: later than StoppedTime::kTolerance after the
  // watchdog's last wake-up, and not explained by a wait to run.
  int64_t late_wakeups() const { return late_wakeups_.load(); }
  int64_t suppressed_by_debugger() const { return debugger_suppressed_.load(); }
  // The last dispatch this tracer took evidence for (a LAG or an ANR), so
  // other tracers do not report the same dispatch again. Any thread.
  uint64_t last_claimed_dispatch() const { return claimed_dispatch_.load(); }

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  struct Crossing;
  void Check();
  // The watched dispatch `s` crossed the ANR threshold at `crossed_at`.
  void CrossAnr(const DispatchHeartbeat::Snapshot& s, TimeTicks now, TimeTicks crossed_at);
  // The watched dispatch `s` crossed the LAG threshold at `crossed_at`. True
  // when it had already ended (its LAG is reported from here).
  bool CrossLag(const DispatchHeartbeat::Snapshot& s, bool provisional, TimeTicks now,
                TimeTicks crossed_at);
  void ScheduleCheck(TimeTicks at);
  void SyncEndFloor();
  std::unique_ptr<Crossing> Capture(const DispatchHeartbeat::Snapshot& s, TimeTicks now,
                                    TimeTicks threshold_at, bool for_anr);
  // Takes the next key capture of the running dispatch when it is due before
  // the crossing at `deadline`; returns when to check next.
  TimeTicks TakeKeyCapture(const DispatchHeartbeat::Snapshot& s, TimeTicks now, TimeTicks deadline,
                           bool for_anr);
  bool DebuggerSuppresses();
  // `method_mark`: the dispatch's begin record, for a LAG captured before the
  // dispatch was reported (provisional); nullopt when unknown.
  void EmitLag(TimeTicks end, std::optional<uint64_t> method_mark = std::nullopt);
  void BuildAndReport(const Crossing& crossing);

  Options options_;
  const ProcReader proc_;
  ObserverRegistration monitor_registration_;
  std::unique_ptr<Handler> watchdog_handler_;
  std::unique_ptr<Handler> worker_handler_;
  std::atomic<bool> alive_{false};

  // Watchdog-thread state.
  struct Watch {
    uint64_t number = 0;
    TimeTicks begin;
    TimeTicks watch_from;  // begin, or later if the watchdog missed a gap.
    bool lag_done = false;
    bool anr_done = false;
    bool provisional = false;  // Seen only through the loop's provisional source.
  };
  Watch watch_;
  // The key captures taken before the next crossing of one dispatch.
  struct KeyCaptures {
    uint64_t dispatch_number = 0;
    bool for_anr = false;
    int count = 0;
    std::array<RawStack, kMaxKeyCaptures> stacks;
  };
  KeyCaptures key_captures_;
  // Looper-thread captures the current check took (each keeps the watchdog
  // busy for up to StackCapturer::kLongestWait).
  int captures_in_check_ = 0;
  TimeTicks scheduled_for_;
  std::unique_ptr<Crossing> pending_lag_;

  // The dispatch whose LAG waits for its end; claimed (set to 0) by whichever
  // of the looper thread and the watchdog sees the end first.
  std::atomic<uint64_t> lag_pending_number_{0};
  std::atomic<int64_t> lag_end_ns_{0};

  std::atomic<uint64_t> claimed_dispatch_{0};
  std::atomic<int64_t> anr_count_{0};
  std::atomic<int64_t> lag_count_{0};
  std::atomic<int64_t> late_wakeups_{0};
  std::atomic<int64_t> debugger_suppressed_{0};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_ANR_TRACER_H_
