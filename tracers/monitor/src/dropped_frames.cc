#include "matrix/trace/dropped_frames.h"

#include "absl/time/time.h"

namespace matrix {

namespace {

// absl::ToInt64Nanoseconds(a - b), without the absl::Duration round trip for
// finite times whose difference fits (every real frame; once per frame for
// each of FrameTracer and the timeline on the looper thread).
int64_t NanosecondsBetween(TimeTicks a, TimeTicks b) {
  if (!a.is_max() && !a.is_min() && !b.is_max() && !b.is_min()) {
    int64_t out;
    if (!__builtin_sub_overflow(a.ToNanoseconds(), b.ToNanoseconds(), &out)) return out;
  }
  return absl::ToInt64Nanoseconds(a - b);
}

}  // namespace

TimeTicks FrameCouldStart(TimeTicks intended_vsync, TimeTicks previous_frame_end,
                          RefreshRate rate) {
  if (previous_frame_end <= intended_vsync) return intended_vsync;
  // The vsync (on this frame's grid) during which the previous frame ended.
  return rate.TickAfter(intended_vsync, rate.IntervalsInNanoseconds(NanosecondsBetween(
                                            previous_frame_end, intended_vsync)));
}

int64_t CountDroppedFramesSlow(TimeTicks intended_vsync, TimeTicks end,
                               TimeTicks previous_frame_end, RefreshRate rate) {
  const TimeTicks could_start = FrameCouldStart(intended_vsync, previous_frame_end, rate);
  // The vsyncs that passed with no new frame to show: a frame spanning d
  // shows on the ceil(d / interval)-th vsync after it could start, so it
  // dropped one fewer. Exact in integers: a frame of exactly N intervals
  // (vsync-timed swaps, fake clocks) drops N - 1, not N.
  const int64_t ns = NanosecondsBetween(end, could_start);
  if (ns <= 0) return 0;
  // In 64 bits when it fits (frames under about 42 hours at 60 Hz).
  constexpr int64_t kPerInterval64 = 1'000'000'000'000;
  int64_t scaled64;
  if (!__builtin_mul_overflow(ns, rate.millihertz(), &scaled64) &&
      !__builtin_add_overflow(scaled64, kPerInterval64 - 1, &scaled64)) {
    return scaled64 / kPerInterval64 - 1;
  }
  const __int128 scaled = static_cast<__int128>(ns) * rate.millihertz();
  constexpr __int128 kPerInterval = 1'000'000'000'000;  // ns x mHz in one interval.
  const __int128 shown_on = (scaled + kPerInterval - 1) / kPerInterval;
  return static_cast<int64_t>(shown_on - 1);
}

}  // namespace matrix
