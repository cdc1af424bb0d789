// File: matrix/core/time_ticks.h
//
// TimeTicks is a point on a monotonic clock, in nanoseconds. Differences
// between two TimeTicks are absl::Duration. Every clock in matrix-cpp produces
// TimeTicks (see tick_clock.h), so code that decides never reads the clock
// itself: it takes TimeTicks as parameters, and tests drive it with a fake clock.
//
//   matrix::TimeTicks begin = clock->NowTicks();
//   ...
//   absl::Duration cost = clock->NowTicks() - begin;
//   if (cost >= absl::Milliseconds(700)) ...
//
// Thread safety: a value type; thread-compatible.

#ifndef MATRIX_CORE_TIME_TICKS_H_
#define MATRIX_CORE_TIME_TICKS_H_

#include <compare>
#include <cstdint>
#include <limits>
#include <ostream>

#include "absl/time/time.h"

namespace matrix {

class TimeTicks {
 public:
  // The null value: zero nanoseconds on the clock's scale.
  constexpr TimeTicks() = default;

  static constexpr TimeTicks FromNanoseconds(int64_t ns) { return TimeTicks(ns); }
  // Earliest and latest representable points. Arithmetic saturates at both.
  static constexpr TimeTicks Min() {
    return TimeTicks(std::numeric_limits<int64_t>::min());
  }
  static constexpr TimeTicks Max() {
    return TimeTicks(std::numeric_limits<int64_t>::max());
  }

  constexpr int64_t ToNanoseconds() const { return ns_; }
  constexpr bool is_null() const { return ns_ == 0; }
  constexpr bool is_max() const { return *this == Max(); }
  constexpr bool is_min() const { return *this == Min(); }

  // Saturating arithmetic with absl::Duration (infinite durations saturate).
  TimeTicks operator+(absl::Duration d) const {
    // ToInt64Nanoseconds() clamps infinite (and out-of-range) durations to the
    // int64 limits, which a finite ns_ would pull back into range (5ns minus
    // an infinite duration is not Min() + 5ns): saturate them explicitly.
    const int64_t d_ns = absl::ToInt64Nanoseconds(d);
    if (d_ns == std::numeric_limits<int64_t>::max()) return Max();
    if (d_ns == std::numeric_limits<int64_t>::min()) return Min();
    return TimeTicks(SaturatedAdd(ns_, d_ns));
  }
  TimeTicks operator-(absl::Duration d) const { return *this + (-d); }
  TimeTicks& operator+=(absl::Duration d) { return *this = *this + d; }
  TimeTicks& operator-=(absl::Duration d) { return *this = *this - d; }
  absl::Duration operator-(TimeTicks other) const {
    if (is_max() || other.is_min()) return absl::InfiniteDuration();
    if (is_min() || other.is_max()) return -absl::InfiniteDuration();
    return absl::Nanoseconds(ns_ - other.ns_);
  }

  constexpr auto operator<=>(const TimeTicks&) const = default;

 private:
  constexpr explicit TimeTicks(int64_t ns) : ns_(ns) {}
  static int64_t SaturatedAdd(int64_t a, int64_t b) {
    int64_t out;
    if (__builtin_add_overflow(a, b, &out)) {
      return b > 0 ? std::numeric_limits<int64_t>::max()
                   : std::numeric_limits<int64_t>::min();
    }
    return out;
  }

  int64_t ns_ = 0;
};

inline std::ostream& operator<<(std::ostream& os, TimeTicks t) {
  return os << "TimeTicks(" << t.ToNanoseconds() << "ns)";
}

}  // namespace matrix

#endif  // MATRIX_CORE_TIME_TICKS_H_
