// Dropped vsyncs: how many vsyncs a frame missed, counted once on the looper
// thread by UIThreadMonitor at each frame's end (FrameData::counted_drops)
// and reused by FrameTracer, the frame statistics and the timeline.
//
//   int64_t dropped = matrix::CountDroppedFrames(frame.intended_frame_time,
//                                                frame.end, previous_end, rate);
//
// Thread safety: pure functions, any thread.

#ifndef MATRIX_TRACE_DROPPED_FRAMES_H_
#define MATRIX_TRACE_DROPPED_FRAMES_H_

#include <cstdint>

#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

// CountDroppedFrames()
//
// The vsyncs a frame missed: ceil(d / interval) - 1, where d runs from when
// it could first have started to its end (the vsyncs that passed with no new
// frame to show). That start is its own vsync, or, when the previous frame
// was still running then, the vsync on which the previous frame ended. So a
// frame of exactly one interval dropped none, one of exactly three intervals
// (50 ms at 60 Hz) dropped 2, one ending 33.4 ms after its vsync at 60 Hz
// dropped 2 (ceil(2.004) - 1), and a frame
// queued behind a janky one is not charged for the same vsyncs again: each
// missed vsync counts once (Matrix charges it to every frame that waited).
//
// The common case (the previous frame ended by this frame's vsync, finite
// times, no overflow) is inline: it runs on the looper thread once per frame.
int64_t CountDroppedFramesSlow(TimeTicks intended_vsync, TimeTicks end,
                               TimeTicks previous_frame_end, RefreshRate rate);
inline int64_t CountDroppedFrames(TimeTicks intended_vsync, TimeTicks end,
                                  TimeTicks previous_frame_end, RefreshRate rate) {
  // The usual cases in 64-bit integers, inline (the looper thread counts
  // every frame): a frame that could start at its vsync, and one whose vsync
  // came while the previous frame still ran (a busy render loop), which could
  // start on the first tick of its grid after that frame ended.
  // Nanoseconds times millihertz in one interval (as CountDroppedFramesSlow).
  constexpr int64_t kPerInterval64 = 1'000'000'000'000;
  const int64_t mhz = rate.millihertz();
  if (mhz > 0 && !end.is_max() && !end.is_min() && !intended_vsync.is_max() &&
      !intended_vsync.is_min() && !previous_frame_end.is_max() && !previous_frame_end.is_min()) {
    int64_t start = intended_vsync.ToNanoseconds();
    int64_t late;
    int64_t scaled;
    int64_t offset;
    bool fits = true;
    if (previous_frame_end > intended_vsync) {  // FrameCouldStart().
      fits = !__builtin_sub_overflow(previous_frame_end.ToNanoseconds(), start, &late) &&
             !__builtin_mul_overflow(late, mhz, &scaled) &&
             !__builtin_mul_overflow(scaled / kPerInterval64, kPerInterval64, &offset) &&
             !__builtin_add_overflow(start, offset / mhz, &start);
    }
    int64_t ns;
    if (fits && !__builtin_sub_overflow(end.ToNanoseconds(), start, &ns)) {
      if (ns <= 0) return 0;
      if (!__builtin_mul_overflow(ns, mhz, &scaled) &&
          !__builtin_add_overflow(scaled, kPerInterval64 - 1, &scaled)) {
        return scaled / kPerInterval64 - 1;
      }
    }
  }
  return CountDroppedFramesSlow(intended_vsync, end, previous_frame_end, rate);
}

TimeTicks FrameCouldStart(TimeTicks intended_vsync, TimeTicks previous_frame_end,
                          RefreshRate rate);

}  // namespace matrix

#endif  // MATRIX_TRACE_DROPPED_FRAMES_H_
