// StoppedTime: late wake-ups of the watchdog's timed tasks as stopped
// intervals, merged when two tasks saw the same stop, and the overlap with a
// dispatch.

#include "matrix/trace/stopped_time.h"

#include "gtest/gtest.h"

namespace {

using ::matrix::StoppedTime;
using ::matrix::TimeTicks;

TimeTicks At(int64_t ms) { return TimeTicks() + absl::Milliseconds(1'000'000 + ms); }

TEST(StoppedTimeTest, OnTimeAndSlightlyLateWakeupsAreNotStops) {
  StoppedTime stopped;
  EXPECT_FALSE(stopped.OnWakeup(At(0), At(0)));
  EXPECT_FALSE(stopped.OnWakeup(At(50), At(150)));  // 100 ms late: the tolerance.
  EXPECT_FALSE(stopped.OnWakeup(TimeTicks(), At(9000)));  // Not scheduled: cannot be late.
  EXPECT_EQ(stopped.Within(At(0), At(10'000)), absl::ZeroDuration());
  EXPECT_EQ(stopped.total(), absl::ZeroDuration());
  EXPECT_EQ(stopped.observed_until(), At(9000));
}

TEST(StoppedTimeTest, ALateWakeupIsAStopAndOverlapsAreCountedOnce) {
  StoppedTime stopped;
  // The sampler's poll due at 50 ms and an ANR check due at 2 s both run at
  // 7 s: one stop, [50 ms, 7 s].
  EXPECT_TRUE(stopped.OnWakeup(At(50), At(7000)));
  stopped.OnWakeup(At(2000), At(7001));
  EXPECT_EQ(stopped.total(), absl::Milliseconds(6951));
  EXPECT_EQ(stopped.Within(At(0), At(8000)), absl::Milliseconds(6951));
  // Partial overlaps.
  EXPECT_EQ(stopped.Within(At(1000), At(2000)), absl::Seconds(1));
  EXPECT_EQ(stopped.Within(At(0), At(50)), absl::ZeroDuration());
  EXPECT_EQ(stopped.Within(At(7001), At(9000)), absl::ZeroDuration());
  // A second stop later.
  stopped.OnWakeup(At(10'000), At(12'000));
  EXPECT_EQ(stopped.Within(At(0), At(20'000)), absl::Milliseconds(6951 + 2000));
  EXPECT_EQ(stopped.Within(At(11'000), At(20'000)), absl::Seconds(1));
}

TEST(StoppedTimeTest, LateBecauseTheWatchdogWasBusy_IsNotAStop) {
  StoppedTime stopped;
  // A capture kept the watchdog busy from 0 to 300 ms; the sampler due at
  // 50 ms runs right after it: not stopped.
  stopped.OnBusyUntil(At(300));
  EXPECT_FALSE(stopped.OnWakeup(At(50), At(320)));
  EXPECT_EQ(stopped.Within(At(0), At(1000)), absl::ZeroDuration());
  // A real stop after the busy spell counts from its end, not from the due time.
  EXPECT_TRUE(stopped.OnWakeup(At(100), At(900)));
  EXPECT_EQ(stopped.Within(At(0), At(1000)), absl::Milliseconds(600));
  // An earlier busy mark never moves the reference back.
  stopped.OnBusyUntil(At(200));
  EXPECT_TRUE(stopped.OnWakeup(At(250), At(500)));
}

TEST(StoppedTimeTest, KeepsTheLastCapacityStops) {
  StoppedTime stopped;
  for (int i = 0; i < StoppedTime::kCapacity + 10; ++i) {
    stopped.OnWakeup(At(i * 1000), At(i * 1000 + 500));
  }
  const int64_t last = StoppedTime::kCapacity + 9;
  EXPECT_EQ(stopped.Within(At(last * 1000), At(last * 1000 + 1000)), absl::Milliseconds(500));
  // Older than the ring: forgotten.
  EXPECT_EQ(stopped.Within(At(0), At(5000)), absl::ZeroDuration());
  EXPECT_EQ(stopped.total(), absl::Milliseconds(500) * (StoppedTime::kCapacity + 10));
}

}  // namespace
