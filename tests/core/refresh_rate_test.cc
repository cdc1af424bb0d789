// Tests for RefreshRate's exact millihertz arithmetic: interval counting with
// no rounding error at 60/90/120/144 Hz (and NTSC 59.94 Hz), and ticks that
// never drift however far from their base.

#include "matrix/core/refresh_rate.h"

#include <cstdint>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/time_ticks.h"

namespace matrix {
namespace {

TEST(RefreshRateTest, Default_Is60Hz) {
  RefreshRate rate;
  EXPECT_EQ(rate.millihertz(), 60'000);
  EXPECT_EQ(rate, RefreshRate::FromHz(60));
  EXPECT_TRUE(rate.valid());
  EXPECT_FALSE(RefreshRate::FromMillihertz(0).valid());
}

TEST(RefreshRateTest, FromHz_WithFractionalRate_KeepsMillihertz) {
  EXPECT_EQ(RefreshRate::FromHz(59.94).millihertz(), 59'940);
  EXPECT_DOUBLE_EQ(RefreshRate::FromMillihertz(143'856).hz(), 143.856);
}

TEST(RefreshRateTest, IntervalsIn_At60Hz_CountsWholeIntervalsExactly) {
  const RefreshRate rate = RefreshRate::FromHz(60);
  EXPECT_EQ(rate.IntervalsIn(absl::Microseconds(33'400)), 2);
  EXPECT_EQ(rate.IntervalsIn(absl::Milliseconds(50)), 3);  // Exactly 3, not 2.999...
  EXPECT_EQ(rate.IntervalsIn(absl::Nanoseconds(49'999'999)), 2);
  EXPECT_EQ(rate.IntervalsIn(absl::Nanoseconds(16'666'666)), 0);
  EXPECT_EQ(rate.IntervalsIn(absl::Nanoseconds(16'666'667)), 1);
  EXPECT_EQ(rate.IntervalsIn(absl::Seconds(1)), 60);
  EXPECT_EQ(rate.IntervalsIn(absl::Hours(1)), 216'000);
}

TEST(RefreshRateTest, IntervalsIn_AtHighRates_CountsWholeIntervalsExactly) {
  const RefreshRate hz90 = RefreshRate::FromHz(90);
  EXPECT_EQ(hz90.IntervalsIn(absl::Nanoseconds(33'333'333)), 2);  // 2.99999997
  EXPECT_EQ(hz90.IntervalsIn(absl::Nanoseconds(33'333'334)), 3);
  EXPECT_EQ(hz90.IntervalsIn(absl::Milliseconds(100)), 9);

  const RefreshRate hz120 = RefreshRate::FromHz(120);
  EXPECT_EQ(hz120.IntervalsIn(absl::Milliseconds(25)), 3);
  EXPECT_EQ(hz120.IntervalsIn(absl::Nanoseconds(24'999'999)), 2);
  EXPECT_EQ(hz120.IntervalsIn(absl::Seconds(1)), 120);

  const RefreshRate hz144 = RefreshRate::FromHz(144);
  EXPECT_EQ(hz144.IntervalsIn(absl::Microseconds(62'500)), 9);  // 9 * 1/144 s exactly.
  EXPECT_EQ(hz144.IntervalsIn(absl::Nanoseconds(62'499'999)), 8);
  EXPECT_EQ(hz144.IntervalsIn(absl::Seconds(1)), 144);
}

TEST(RefreshRateTest, IntervalsIn_WithZeroOrNegativeDuration_IsZero) {
  const RefreshRate rate;
  EXPECT_EQ(rate.IntervalsIn(absl::ZeroDuration()), 0);
  EXPECT_EQ(rate.IntervalsIn(absl::Milliseconds(-50)), 0);
}

TEST(RefreshRateTest, Interval_AtCommonRates_IsOneOverRate) {
  EXPECT_EQ(absl::ToInt64Nanoseconds(RefreshRate::FromHz(60).Interval()), 16'666'666);
  EXPECT_EQ(absl::ToInt64Nanoseconds(RefreshRate::FromHz(90).Interval()), 11'111'111);
  EXPECT_EQ(absl::ToInt64Nanoseconds(RefreshRate::FromHz(120).Interval()), 8'333'333);
  EXPECT_EQ(absl::ToInt64Nanoseconds(RefreshRate::FromHz(144).Interval()), 6'944'444);
  // Sub-nanosecond precision: 3 intervals at 60 Hz are 50 ms to within 1 ns.
  EXPECT_LE(absl::AbsDuration(RefreshRate::FromHz(60).Interval() * 3 - absl::Milliseconds(50)),
            absl::Nanoseconds(1));
}

TEST(RefreshRateTest, TickAfter_FarFromBase_DoesNotDrift) {
  const TimeTicks base = TimeTicks::FromNanoseconds(5'000'000'000);
  for (int hz : {60, 90, 120, 144}) {
    const RefreshRate rate = RefreshRate::FromHz(hz);
    // After one second, one minute and one day of ticks, the tick lands
    // exactly on the whole second.
    EXPECT_EQ(rate.TickAfter(base, hz), base + absl::Seconds(1)) << hz;
    EXPECT_EQ(rate.TickAfter(base, int64_t{hz} * 60), base + absl::Minutes(1)) << hz;
    EXPECT_EQ(rate.TickAfter(base, int64_t{hz} * 86'400), base + absl::Hours(24)) << hz;
    // Summing the rounded interval instead would be off by many microseconds.
    EXPECT_NE(base + rate.Interval() * (int64_t{hz} * 86'400), base + absl::Hours(24)) << hz;
  }
}

TEST(RefreshRateTest, TickAfter_RoundsEachTickDownToANanosecond) {
  const TimeTicks base = TimeTicks::FromNanoseconds(1'000);
  const RefreshRate rate = RefreshRate::FromHz(60);
  EXPECT_EQ(rate.TickAfter(base, 0), base);
  EXPECT_EQ(rate.TickAfter(base, 1), base + absl::Nanoseconds(16'666'666));
  EXPECT_EQ(rate.TickAfter(base, 2), base + absl::Nanoseconds(33'333'333));
  EXPECT_EQ(rate.TickAfter(base, 3), base + absl::Nanoseconds(50'000'000));
  EXPECT_EQ(rate.Intervals(3), absl::Milliseconds(50));
}

TEST(RefreshRateTest, IntervalsIn_OfTickAfter_RoundTrips) {
  const TimeTicks base = TimeTicks::FromNanoseconds(123'456'789);
  for (int64_t mhz : {59'940, 60'000, 90'000, 120'000, 143'856, 144'000}) {
    const RefreshRate rate = RefreshRate::FromMillihertz(mhz);
    for (int64_t k : {1, 2, 3, 7, 1000, 123'457}) {
      const absl::Duration d = rate.TickAfter(base, k) - base;
      // The tick is at most 1 ns early, so it counts k-1 or k intervals; one
      // nanosecond later it always counts k.
      EXPECT_GE(rate.IntervalsIn(d), k - 1) << mhz << " " << k;
      EXPECT_EQ(rate.IntervalsIn(d + absl::Nanoseconds(1)), k) << mhz << " " << k;
    }
  }
}

TEST(RefreshRateTest, ToString_PrintsWholeAndFractionalRates) {
  EXPECT_EQ(RefreshRate::FromHz(60).ToString(), "60Hz");
  EXPECT_EQ(RefreshRate::FromHz(144).ToString(), "144Hz");
  EXPECT_EQ(RefreshRate::FromHz(59.94).ToString(), "59.94Hz");
  EXPECT_EQ(RefreshRate::FromMillihertz(23'976).ToString(), "23.976Hz");
}

}  // namespace
}  // namespace matrix
