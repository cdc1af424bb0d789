// Tests for the injectable clock: TimeTicks arithmetic, the default
// CLOCK_MONOTONIC TickClock, FakeTickClock, and injection into the looper.
// Thread CPU time on real threads is in thread_cpu_time_real_test.cc.

#include "matrix/core/tick_clock.h"

#include <time.h>

#include <cstdint>
#include <memory>
#include <sstream>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/time_ticks.h"
#include "matrix/testing/fake_tick_clock.h"

namespace matrix {
namespace {

using ::matrix::testing::FakeTickClock;

int64_t RawMonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TEST(TimeTicksTest, Difference_OfTwoTicks_IsExactInNanoseconds) {
  const TimeTicks a = TimeTicks::FromNanoseconds(1'000'000'123);
  const TimeTicks b = TimeTicks::FromNanoseconds(3'500'000'000);

  EXPECT_EQ(b - a, absl::Nanoseconds(2'499'999'877));
  EXPECT_EQ(a - b, absl::Nanoseconds(-2'499'999'877));
  EXPECT_EQ(a + (b - a), b);
  EXPECT_EQ((b - absl::Nanoseconds(1)).ToNanoseconds(), 3'499'999'999);
  EXPECT_LT(a, b);
}

TEST(TimeTicksTest, Arithmetic_PastTheLimits_Saturates) {
  EXPECT_EQ(TimeTicks::Max() + absl::Nanoseconds(1), TimeTicks::Max());
  EXPECT_EQ(TimeTicks::Min() - absl::Nanoseconds(1), TimeTicks::Min());
  EXPECT_EQ(TimeTicks::FromNanoseconds(5) + absl::InfiniteDuration(), TimeTicks::Max());
  EXPECT_EQ(TimeTicks::FromNanoseconds(5) - absl::InfiniteDuration(), TimeTicks::Min());
  EXPECT_EQ(TimeTicks::Max() - TimeTicks::FromNanoseconds(5), absl::InfiniteDuration());
  EXPECT_EQ(TimeTicks::FromNanoseconds(5) - TimeTicks::Max(), -absl::InfiniteDuration());
  EXPECT_TRUE(TimeTicks::Max().is_max());
  EXPECT_TRUE(TimeTicks::Min().is_min());
}

TEST(TimeTicksTest, Default_IsNull) {
  EXPECT_TRUE(TimeTicks().is_null());
  EXPECT_FALSE(TimeTicks::FromNanoseconds(1).is_null());
  std::ostringstream out;
  out << TimeTicks::FromNanoseconds(42);
  EXPECT_EQ(out.str(), "TimeTicks(42ns)");
}

TEST(TickClockTest, Default_ReadsClockMonotonicInNanoseconds) {
  const TickClock* clock = TickClock::Default();
  ASSERT_NE(clock, nullptr);
  EXPECT_EQ(TickClock::Default(), clock);  // One process-wide instance.

  const int64_t before = RawMonotonicNs();
  const TimeTicks now = clock->NowTicks();
  const TimeTicks direct = MonotonicNow();
  const int64_t after = RawMonotonicNs();

  EXPECT_LE(before, now.ToNanoseconds());
  EXPECT_LE(now, direct);
  EXPECT_LE(direct.ToNanoseconds(), after);
}

TEST(TickClockTest, Default_NeverGoesBackwardsAndAdvances) {
  const TickClock* clock = TickClock::Default();
  TimeTicks previous = clock->NowTicks();
  const TimeTicks first = previous;
  for (int i = 0; i < 100'000 && previous == first; ++i) {
    const TimeTicks now = clock->NowTicks();
    ASSERT_GE(now, previous);
    previous = now;
  }
  for (int i = 0; i < 10'000; ++i) {
    const TimeTicks now = clock->NowTicks();
    ASSERT_GE(now, previous);
    previous = now;
  }
  EXPECT_GT(previous, first);
}

TEST(TickClockTest, Default_ThreadCpuTimeOfCallingThread_IsItsCpuClock) {
  const ThreadHandle me = ThreadHandle::Current();
  const absl::Duration before = CurrentThreadCpuTime();
  const absl::Duration via_clock = TickClock::Default()->ThreadCpuTime(me);
  const absl::Duration after = CurrentThreadCpuTime();

  EXPECT_GT(via_clock, absl::ZeroDuration());
  EXPECT_LE(before, via_clock);
  EXPECT_LE(via_clock, after);
}

TEST(FakeTickClockTest, Constructor_ByDefault_StartsAtOneSecond) {
  FakeTickClock clock;
  EXPECT_EQ(clock.NowTicks(), TimeTicks::FromNanoseconds(1'000'000'000));
  FakeTickClock custom(TimeTicks::FromNanoseconds(77));
  EXPECT_EQ(custom.NowTicks(), TimeTicks::FromNanoseconds(77));
}

TEST(FakeTickClockTest, Advance_MovesTimeOnlyWhenTold) {
  FakeTickClock clock;
  const TimeTicks t0 = clock.NowTicks();
  EXPECT_EQ(clock.NowTicks(), t0);

  clock.Advance(absl::Milliseconds(16));
  EXPECT_EQ(clock.NowTicks() - t0, absl::Milliseconds(16));

  clock.SetNowTicks(t0 + absl::Seconds(3));
  EXPECT_EQ(clock.NowTicks(), t0 + absl::Seconds(3));
  clock.SetNowTicks(t0 + absl::Seconds(3));  // Standing still is allowed.
  clock.Advance(absl::ZeroDuration());
  EXPECT_EQ(clock.NowTicks(), t0 + absl::Seconds(3));
}

TEST(FakeTickClockTest, ThreadCpuTime_IsFakedForEveryThread) {
  FakeTickClock clock;
  const ThreadHandle me = ThreadHandle::Current();
  EXPECT_EQ(clock.ThreadCpuTime(me), absl::ZeroDuration());

  clock.AdvanceThreadCpuTime(absl::Milliseconds(5));
  EXPECT_EQ(clock.ThreadCpuTime(me), absl::Milliseconds(5));
  EXPECT_EQ(clock.ThreadCpuTime(ThreadHandle()), absl::Milliseconds(5));

  clock.SetThreadCpuTime(absl::Milliseconds(2));
  EXPECT_EQ(clock.ThreadCpuTime(me), absl::Milliseconds(2));
}

TEST(FakeTickClockTest, InjectedIntoLooper_DecidesWhenDelayedWorkIsDue) {
  FakeTickClock clock;
  std::unique_ptr<Looper> looper = Looper::Create(&clock);
  Handler handler(looper.get());
  bool ran = false;
  handler.PostDelayed([&] { ran = true; }, absl::Seconds(5));
  EXPECT_EQ(looper->queue()->PeekHead()->when, clock.NowTicks() + absl::Seconds(5));

  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kIdle);
  clock.Advance(absl::Seconds(5) - absl::Nanoseconds(1));
  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kIdle);
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kDispatched);
  EXPECT_TRUE(ran);
}

TEST(FakeTickClockDeathTest, GoingBackwards_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeTickClock clock;
  EXPECT_DEATH(clock.Advance(absl::Nanoseconds(-1)), "cannot go backwards");
  EXPECT_DEATH(clock.SetNowTicks(clock.NowTicks() - absl::Nanoseconds(1)),
               "cannot go backwards");
}

}  // namespace
}  // namespace matrix
