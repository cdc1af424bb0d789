// File: matrix/core/refresh_rate.h
//
// RefreshRate is a display refresh rate held exactly, in millihertz, so frame
// arithmetic has no rounding drift at any rate: 60 Hz frames are 16.666...ms,
// and a frame that ends 50 ms after its vsync is exactly 3 intervals late.
//
//   matrix::RefreshRate rate = matrix::RefreshRate::FromHz(120);
//   absl::Duration interval = rate.Interval();          // 8.333333ms
//   int64_t late = rate.IntervalsIn(absl::Milliseconds(25));   // 3
//   matrix::TimeTicks tick = rate.TickAfter(base, 10);  // base + 10 intervals
//
// Thread safety: a value type.

#ifndef MATRIX_CORE_REFRESH_RATE_H_
#define MATRIX_CORE_REFRESH_RATE_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

class RefreshRate {
 public:
  // 60 Hz.
  constexpr RefreshRate() = default;
  static constexpr RefreshRate FromMillihertz(int64_t mhz) { return RefreshRate(mhz); }
  static RefreshRate FromHz(double hz) { return RefreshRate(std::llround(hz * 1000.0)); }

  constexpr int64_t millihertz() const { return mhz_; }
  double hz() const { return static_cast<double>(mhz_) / 1000.0; }
  constexpr bool valid() const { return mhz_ > 0; }

  // One frame interval (to the nearest quarter nanosecond).
  absl::Duration Interval() const {
    return absl::Nanoseconds(1e12 / static_cast<double>(mhz_));
  }
  // Whole intervals in `d` (floor), exact for durations in whole nanoseconds.
  // Negative durations give 0.
  int64_t IntervalsIn(absl::Duration d) const {
    return IntervalsInNanoseconds(absl::ToInt64Nanoseconds(d));
  }
  // The same for `ns` nanoseconds. In 64 bits when the product fits (any
  // span under about 42 hours at 60 Hz), else in 128: the same result.
  int64_t IntervalsInNanoseconds(int64_t ns) const {
    if (ns <= 0) return 0;
    int64_t scaled;
    if (!__builtin_mul_overflow(ns, mhz_, &scaled)) return scaled / kNsTimesMhzPerInterval;
    return static_cast<int64_t>((static_cast<__int128>(ns) * mhz_) / kNsTimesMhzPerInterval);
  }
  // The `k`-th tick after `base` (base + k intervals, rounded down to a
  // nanosecond). Ticks computed from one base never drift.
  TimeTicks TickAfter(TimeTicks base, int64_t k) const {
    int64_t scaled;
    if (!__builtin_mul_overflow(k, kNsTimesMhzPerInterval, &scaled)) {
      // 64-bit fast path (no absl::Duration round trip); the offset is a
      // whole number of nanoseconds well inside int64, as below.
      const int64_t offset = scaled / mhz_;
      int64_t out;
      if (!__builtin_add_overflow(base.ToNanoseconds(), offset, &out)) {
        return TimeTicks::FromNanoseconds(out);
      }
    }
    const __int128 offset = static_cast<__int128>(k) * kNsTimesMhzPerInterval / mhz_;
    return base + absl::Nanoseconds(static_cast<int64_t>(offset));
  }
  // Duration of `k` intervals, rounded down to a nanosecond.
  absl::Duration Intervals(int64_t k) const { return TickAfter(TimeTicks(), k) - TimeTicks(); }

  std::string ToString() const;  // "60Hz", "59.94Hz"

  friend constexpr bool operator==(RefreshRate a, RefreshRate b) { return a.mhz_ == b.mhz_; }

 private:
  // Nanoseconds times millihertz in one interval (1 s = 1e9 ns, 1 Hz = 1e3 mHz).
  static constexpr int64_t kNsTimesMhzPerInterval = 1'000'000'000'000;

  constexpr explicit RefreshRate(int64_t mhz) : mhz_(mhz) {}
  int64_t mhz_ = 60'000;
};

}  // namespace matrix

#endif  // MATRIX_CORE_REFRESH_RATE_H_
