// File: matrix/testing/fake_tick_clock.h
//
// FakeTickClock is a TickClock that moves only when told. It also fakes
// thread CPU time, so CPU-usage logic is testable.
//
//   matrix::testing::FakeTickClock clock;
//   matrix::TimeTicks t0 = clock.NowTicks();
//   clock.Advance(absl::Milliseconds(16));
//   EXPECT_EQ(clock.NowTicks() - t0, absl::Milliseconds(16));
//
// Thread safety: thread-safe.

#ifndef MATRIX_TESTING_FAKE_TICK_CLOCK_H_
#define MATRIX_TESTING_FAKE_TICK_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "matrix/core/tick_clock.h"

namespace matrix::testing {

class FakeTickClock : public TickClock {
 public:
  // Starts at 1 s, so a null TimeTicks is never a valid reading.
  explicit FakeTickClock(TimeTicks start = TimeTicks::FromNanoseconds(1'000'000'000));

  TimeTicks NowTicks() const override;
  // Returns the fake CPU time (the same for every thread).
  absl::Duration ThreadCpuTime(const ThreadHandle& thread) const override;

  // Moves time forward (a negative duration is a fatal error).
  void Advance(absl::Duration delta);
  // Sets the time; moving it backwards is a fatal error.
  void SetNowTicks(TimeTicks now);
  void AdvanceThreadCpuTime(absl::Duration delta);
  void SetThreadCpuTime(absl::Duration cpu);

 private:
  std::atomic<int64_t> now_ns_;
  std::atomic<int64_t> cpu_ns_{0};
};

}  // namespace matrix::testing

#endif  // MATRIX_TESTING_FAKE_TICK_CLOCK_H_
