// SlowDispatchSampler: the looper thread's stacks across a slow dispatch,
// for EvilMethodTracer (private to the tracers library).
//
// On the watchdog looper it sleeps until the running dispatch could cross
// the slow threshold (its begin + the threshold, plus the time the process
// was stopped meanwhile), captures the looper thread's stack at the
// crossing, then one more every `interval` until the dispatch ends: the
// samples of a slow dispatch, the crossing's first. Nothing is captured for
// a dispatch under the threshold, and the looper thread does nothing for it.
// While the looper is idle it looks again one threshold later (a dispatch
// that begins meanwhile cannot cross before then).
//
// Sampling a dispatch stops when it ends, when `stop_sampling` says so (the
// AnrTracer took it over as a LAG or ANR), and when a debugger is attached
// at the crossing (a capture signal would stop the thread in the debugger).
// A dispatch that outlives `max_samples` keeps every other sample and
// halves its rate, so the samples still span it.
//
// The two newest sampled dispatches are kept until EvilMethodTracer takes
// theirs (Take(), on the worker): a third slow dispatch overwrites the
// oldest untaken one.
//
// Thread safety: Start()/Stop() on any thread; the checks on the watchdog
// looper; Take() on any thread (one mutex, never held while capturing).

#ifndef MATRIX_TRACERS_SRC_SLOW_DISPATCH_SAMPLER_H_
#define MATRIX_TRACERS_SRC_SLOW_DISPATCH_SAMPLER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {

class Handler;
class Looper;
class UIThreadMonitor;

class SlowDispatchSampler {
 public:
  using CaptureFn = std::function<absl::Status(const ThreadHandle& thread, RawStack* out)>;

  struct Options {
    UIThreadMonitor* monitor = nullptr;  // Required.
    Looper* watchdog_looper = nullptr;   // Required.
    absl::Duration interval = absl::Milliseconds(50);
    int max_samples = 32;  // Even, at least 4.
    // Reads the slow threshold at each check (it may change at run time).
    std::function<absl::Duration()> threshold;
    // Whether to stop sampling dispatch `number` (another tracer took it).
    std::function<bool(uint64_t number)> stop_sampling;
    bool sample_with_debugger = false;
    std::string proc_root = "/proc";
    CaptureFn capture;  // Default: StackCapturer::Get().
  };

  // The samples of one slow dispatch, the crossing's first.
  struct Samples {
    uint64_t dispatch_number = 0;
    TimeTicks crossing;     // When the dispatch reached the threshold.
    TimeTicks captured_at;  // When the crossing's stack was taken.
    absl::Status crossing_status;
    std::vector<RawStack> stacks;     // Successful captures, by time.
    std::vector<TimeTicks> times;     // When each was taken.
  };

  explicit SlowDispatchSampler(Options options);
  ~SlowDispatchSampler();
  SlowDispatchSampler(const SlowDispatchSampler&) = delete;
  SlowDispatchSampler& operator=(const SlowDispatchSampler&) = delete;

  void Start();
  // From now on no check captures or reschedules (one running now finishes
  // its capture).
  void Stop();

  // The samples of dispatch `number` taken up to `end` (the dispatch's end),
  // or nullopt when it was not sampled (or was overwritten). Each dispatch's
  // samples can be taken once.
  std::optional<Samples> Take(uint64_t number, TimeTicks end);

  // Captures taken so far (crossings and samples). Any thread.
  int64_t captures() const { return captures_.load(std::memory_order_relaxed); }

 private:
  // The record of one sampled dispatch, allocated when it first serves.
  struct Slot {
    uint64_t number = 0;  // 0: free.
    TimeTicks crossing;
    TimeTicks captured_at;
    absl::Status crossing_status;
    int count = 0;
    std::vector<RawStack> stacks;  // max_samples entries from its first use.
    std::vector<TimeTicks> times;
  };

  void Check();
  void ScheduleAt(TimeTicks at);
  // Captures the looper thread's stack into the current slot (the
  // crossing's when `crossing`).
  void CaptureSample(bool crossing);

  Options options_;
  ProcReader proc_;
  std::unique_ptr<Handler> handler_;
  std::atomic<int64_t> captures_{0};
  std::atomic<bool> running_{false};
  // Watchdog thread only.
  TimeTicks scheduled_for_;        // When the next check asked to run.
  uint64_t sampling_number_ = 0;   // The dispatch being sampled (0: none).
  uint64_t skipped_number_ = 0;    // A dispatch not to sample (debugger, stop).
  absl::Duration spacing_;         // The current dispatch's sample spacing.
  RawStack scratch_;               // Captured outside the lock.

  mutable absl::Mutex mu_;
  std::array<Slot, 2> slots_ ABSL_GUARDED_BY(mu_);
  int current_ ABSL_GUARDED_BY(mu_) = 0;  // The slot being written.
};

}  // namespace matrix

#endif  // MATRIX_TRACERS_SRC_SLOW_DISPATCH_SAMPLER_H_
