// File: matrix/trace/stopped_time.h
//
// StoppedTime: when the process was not running (SIGSTOP, a debugger
// breakpoint, a suspended VM or laptop). The watchdog thread's timed tasks
// tell: a task scheduled for T that runs at T + L, with L over the tolerance
// (100 ms), saw the whole process stopped over [T, T + L]. Hang and slow-
// method costs leave that time out (it is reported in its own field), so a
// dispatch held at a breakpoint is not reported as slow.
//
//   // Watchdog thread, in every timed task (the CPU sampler's 50 ms poll, the
//   // ANR checks):
//   stopped.OnWakeup(scheduled_for, clock->NowTicks());
//   // Any thread:
//   absl::Duration stopped_in_dispatch = stopped.Within(begin, end);
//
// Intervals that overlap are merged, so two tasks late for the same stop count
// it once. The last kCapacity intervals are kept (older ones are forgotten).
// A task late because the machine was overloaded (every thread starved, not
// stopped) is also counted when it is over the tolerance.
//
// Thread safety: OnWakeup() from one thread at a time (the watchdog); the
// readers from any thread, lock-free (a sequence counter; a reader racing a
// write retries).

#ifndef MATRIX_TRACE_STOPPED_TIME_H_
#define MATRIX_TRACE_STOPPED_TIME_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

class StoppedTime {
 public:
  static constexpr absl::Duration kTolerance = absl::Milliseconds(100);
  static constexpr int kCapacity = 64;

  // Watchdog thread: a task scheduled for `scheduled` runs at `now`. Returns
  // whether it came more than kTolerance late (recorded as stopped time).
  bool OnWakeup(TimeTicks scheduled, TimeTicks now);

  // Watchdog thread: a task kept the watchdog itself busy until `until` (a
  // stack capture waiting for the looper thread, say). A task due before then
  // that runs late is late from `until` on, not from when it was due: the
  // watchdog was working, not the process stopped.
  void OnBusyUntil(TimeTicks until) {
    const int64_t ns = until.ToNanoseconds();
    if (ns > busy_until_ns_.load(std::memory_order_relaxed)) {
      busy_until_ns_.store(ns, std::memory_order_relaxed);
    }
  }

  // Any thread: the stopped time within [begin, end].
  absl::Duration Within(TimeTicks begin, TimeTicks end) const;

  // Any thread: the latest wake-up seen; a stop that ended before it is
  // known, one still going on is not.
  TimeTicks observed_until() const {
    return TimeTicks::FromNanoseconds(observed_ns_.load(std::memory_order_acquire));
  }

  // Any thread: the stopped time seen so far.
  absl::Duration total() const {
    return absl::Nanoseconds(total_ns_.load(std::memory_order_relaxed));
  }

 private:
  struct Interval {
    std::atomic<int64_t> begin_ns{0};
    std::atomic<int64_t> end_ns{0};
  };
  std::array<Interval, kCapacity> intervals_;
  std::atomic<uint64_t> count_{0};     // Intervals written (the last is count_ - 1).
  std::atomic<uint64_t> sequence_{0};  // Odd while the writer changes an interval.
  std::atomic<int64_t> observed_ns_{0};
  std::atomic<int64_t> total_ns_{0};
  std::atomic<int64_t> busy_until_ns_{0};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_STOPPED_TIME_H_
