// File: matrix/trace/evil_method_tracer.h
//
// EvilMethodTracer reports dispatches that take at least the evil-method
// threshold (700 ms by default; changeable at run time) as Trace_EvilMethod,
// detail NORMAL: the method-trace call tree of the dispatch, trimmed to 30
// calls, its stack key (the end of the hot path), cost, CPU usage (thread CPU
// over wall time), the frame's queue costs, the scene and the message.
//
// On the looper thread it only remembers the dispatch; a slow one is handed
// to the worker, which copies the dispatch's records out of the method-trace
// ring (while the looper goes on), builds, names and trims the tree.
//
//   matrix::EvilMethodTracer evil({.monitor = &ui_monitor, .worker_looper = worker,
//                                  .report = publish});
//   evil.OnStartTrace();
//   evil.ModifyEvilThreshold(absl::Milliseconds(300));   // any thread
//
// Without method tracing the report still carries cost, CPU, queue costs and
// the message, and the key falls back to where the message was posted from.
// With stack sampling (Options::sampling, off by default; on in matrix-run)
// the watchdog captures the looper thread's stack when a dispatch crosses
// the threshold and every `interval` after it until the dispatch ends; the
// report then carries the crossing's stack, and, when the method trace
// names no call, the samples' call tree and their key (SampledStackKey: the function
// that held the thread for most of the sampled time). A dispatch under the
// threshold is never sampled and costs the looper thread nothing more.
// With a debugger attached nothing is reported (a breakpoint makes any
// dispatch slow) unless `report_with_debugger`.
//
// Thread safety: OnStartTrace()/OnCloseTrace() and the LooperObserver
// callbacks on the looper thread; ModifyEvilThreshold() and counters from any
// thread; analysis on the worker.

#ifndef MATRIX_TRACE_EVIL_METHOD_TRACER_H_
#define MATRIX_TRACE_EVIL_METHOD_TRACER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/thread_handle.h"
#include "matrix/proto/evil_method.pb.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class AnrTracer;
class Handler;
class Looper;
class SlowDispatchSampler;

class EvilMethodTracer : public Tracer {
 public:
  using CaptureFn = std::function<absl::Status(const ThreadHandle& thread, RawStack* out)>;

  // Stacks of slow dispatches, taken on the watchdog looper.
  struct Sampling {
    bool enabled = false;  // Samples on env.watchdog_looper.
    absl::Duration interval = absl::Milliseconds(50);
    // Per dispatch (even, at least 4): a longer one keeps every other
    // sample and halves the rate, so the samples still span it.
    int max_samples = 32;
    CaptureFn capture;  // Default: StackCapturer::Get().
  };

  struct Options {
    // Required: monitor, worker_looper, report. watchdog_looper: needed by
    // `sampling`. The timeline, when given, is snapshot at the slow
    // dispatch's end.
    TracerEnv env;
    absl::Duration threshold = absl::Milliseconds(700);
    // Report dispatches made slow by a debugger (breakpoints, stepping)?
    // Checked on the worker from TracerPid under `proc_root`.
    bool report_with_debugger = false;
    std::string proc_root = "/proc";
    // When set, a dispatch this AnrTracer already reported as LAG or ANR is
    // not reported again (one report per stuck dispatch). Not owned.
    const AnrTracer* anr_tracer = nullptr;
    Sampling sampling;
  };

  explicit EvilMethodTracer(Options options);
  ~EvilMethodTracer() override;

  // Changes the threshold from the next dispatch on. Any thread.
  void ModifyEvilThreshold(absl::Duration threshold);
  absl::Duration evil_threshold() const {
    return absl::Nanoseconds(dispatch_end_floor_ns());
  }
  // Slow dispatches seen. Any thread.
  int64_t evil_count() const { return evil_count_.load(); }
  // Slow dispatches not reported because a debugger was attached. Any thread.
  int64_t suppressed_by_debugger() const { return debugger_suppressed_.load(); }
  // Slow dispatches not reported because, without the time the process was
  // stopped (UIThreadMonitor::stopped_time()), they were under the threshold.
  int64_t suppressed_as_stopped() const { return stopped_suppressed_.load(); }

  // Slow dispatches dropped unanalysed by CancelPendingAnalyses(). Any
  // thread.
  int64_t dropped_analyses() const { return dropped_.load(); }
  // Stacks captured by the sampler so far (0 without sampling). Any thread.
  int64_t stack_samples() const;
  // From now until the next start, an analysis no longer waits for the
  // stop detector's next poll (the ones waiting run now): used when the
  // tracer closes or the process is about to end. Any thread.
  void StopWaitingForStopDetector();
  // Shutdown ran out of time: the analyses still queued are dropped (and
  // counted) instead of run. The one running now finishes. Any thread.
  void CancelPendingAnalyses();

  void DispatchEnd(const DispatchData& dispatch) override;

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  struct SlowDispatch;
  // The slow path of DispatchEnd(), out of line so that the fast path (one
  // comparison per message) pays no register saves for it.
  void OnSlowDispatch(const DispatchData& dispatch);
  // Waits (once per sampler poll, at most three times) until the stop
  // detector has seen past the dispatch's end, then Conclude()s.
  void Analyze(const SlowDispatch& slow);
  void Conclude(const SlowDispatch& slow, absl::Duration cost, absl::Duration stopped);
  // The sampler's stacks of the dispatch: the crossing's stack, and when
  // the method trace gave no key (no tracing, or no traced call), the
  // samples' tree and key instead.
  void AddSamples(const DispatchData& d, proto::EvilMethodReport* report, std::string* key);

  Options options_;
  std::atomic<int64_t> evil_count_{0};
  std::atomic<int64_t> debugger_suppressed_{0};
  std::atomic<int64_t> stopped_suppressed_{0};
  std::atomic<int64_t> dropped_{0};
  // Set by StopWaitingForStopDetector(), cleared by OnAlive().
  std::atomic<bool> closing_{false};
  std::atomic<bool> cancelled_{false};
  // Analyses waiting for the stop detector's next poll (worker thread only).
  std::vector<std::shared_ptr<SlowDispatch>> deferred_;
  ObserverRegistration monitor_registration_;
  std::unique_ptr<SlowDispatchSampler> sampler_;  // With Options::sampling.
  std::unique_ptr<Handler> worker_handler_;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_EVIL_METHOD_TRACER_H_
