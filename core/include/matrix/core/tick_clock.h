// File: matrix/core/tick_clock.h
//
// TickClock is the injectable monotonic clock every matrix-cpp component
// reads. Production code uses TickClock::Default() (CLOCK_MONOTONIC); tests
// pass a matrix::testing::FakeTickClock and move time by hand.
//
//   class Watchdog {
//    public:
//     explicit Watchdog(const matrix::TickClock* clock) : clock_(clock) {}
//     bool Expired(matrix::TimeTicks begin) const {
//       return clock_->NowTicks() - begin >= absl::Seconds(5);
//     }
//    private:
//     const matrix::TickClock* clock_;  // Not owned.
//   };
//
// The clock also answers thread CPU time, so that CPU-usage logic can be
// tested with fake values too.
//
// Thread safety: implementations must be safe to call from any thread.
// Monotonic, but not strictly: two reads may return the same value.

#ifndef MATRIX_CORE_TICK_CLOCK_H_
#define MATRIX_CORE_TICK_CLOCK_H_

#include "absl/time/time.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

class TickClock {
 public:
  virtual ~TickClock() = default;

  // NowTicks()
  //
  // The current time. Can be called from any thread.
  virtual TimeTicks NowTicks() const = 0;

  // ThreadCpuTime()
  //
  // CPU time consumed by `thread`. The default reads the thread's CPU clock
  // (a syscall). Can be called from any thread.
  virtual absl::Duration ThreadCpuTime(const ThreadHandle& thread) const {
    return thread.CpuTime();
  }

  // Default()
  //
  // The process-wide CLOCK_MONOTONIC clock. Never destroyed.
  static const TickClock* Default();
};

// Reads CLOCK_MONOTONIC directly, without a virtual call. Async-signal-safe.
TimeTicks MonotonicNow();

}  // namespace matrix

#endif  // MATRIX_CORE_TICK_CLOCK_H_
