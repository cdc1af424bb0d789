// File: matrix/trace/frame_stats.h
//
// FrameStatsCollector turns a stream of frames into Trace_FPS reports, one per
// scene per time slice (10 s) of wall time. It is pure logic (no threads, no
// clock: times come with the frames, and "now" as a parameter), fed by
// FrameTracer on the worker.
//
// Definitions (see docs/tracers.md):
//   dropped   ceil(d / interval) - 1, d from when the frame could start (its
//             vsync, or the vsync the previous frame ended in) to its end;
//             the frame is shown on the (dropped + 1)-th vsync after that.
//   levels    BEST [0, 3), NORMAL [3, 9), MIDDLE [9, 24), HIGH [24, 42),
//             FROZEN [42, inf) dropped frames, thresholds given at 60 Hz and
//             scaled to the frame's refresh rate (3 at 60 Hz is 6 at 120 Hz).
//   frame time  what a frame stands for: the time from when it could start
//             to the vsync it is shown on ((dropped + 1) intervals), less the
//             part the previous frame already stood for (frames drawn faster
//             than the refresh rate share a vsync interval). A gap of at
//             most kPacingGap between the vsync the previous frame was shown
//             on and when this one could start is the program pacing itself
//             (sleeping until its next frame: a game capped at 30 fps, a
//             video at its own rate) and belongs to this frame too, and so
//             does a longer one whose time the looper thread spent waiting
//             for a CPU (a loaded machine late to wake the program) all but
//             kPacingGap at most. Any other longer gap, when no frame was
//             waiting to be drawn, is nobody's.
//   fps       frames / the sum of their frame times: the frames presented
//             per second of wall time while the program was drawing. An
//             uncapped renderer drawing 1,800 frames a second reports
//             ~1,800, a vsync'd loop at most its refresh rate, a program
//             pacing itself to 30 fps 30, a frozen frame counts its full
//             length, and idle time between bursts of drawing does not
//             lower it. (Matrix's fps, frames /
//             sum of (dropped + 1) intervals, assumes at most one frame per
//             vsync; both agree when that holds.)
//   slice     a scene's slice begins at its first frame's vsync and lasts
//             `time_slice` of wall time; a frame belongs to the slice its
//             vsync falls in. It is reported when a frame ends at or after
//             its end, when a frame of a later slice comes, or (from
//             ReportEndedSlices) once its time is over.
//   smoothness  for each frame, the percent of vsyncs that dropped a frame
//             among the frames of the last 1 s; the report gives the worst
//             and the 95th percentile (Chromium's dropped-frame counter).
//
//   matrix::FrameStatsCollector collector({});
//   for (const matrix::FrameData& f : frames) {
//     if (auto report = collector.Add(f, "Gallery")) Publish(*report);
//   }
//   for (auto& report : collector.ReportEndedSlices(clock->NowTicks())) Publish(report);
//
// Thread safety: thread-compatible.

#ifndef MATRIX_TRACE_FRAME_STATS_H_
#define MATRIX_TRACE_FRAME_STATS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/proto/frame.pb.h"
#include "matrix/trace/dropped_frames.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

// Dropped-frame thresholds of the drop levels, in frames at 60 Hz.
struct DropThresholds {
  int normal = 3;
  int middle = 9;
  int high = 24;
  int frozen = 42;
};

enum class DropLevel { kBest = 0, kNormal = 1, kMiddle = 2, kHigh = 3, kFrozen = 4 };

// The level of a frame that dropped `dropped` frames at `rate`.
DropLevel ClassifyDroppedFrames(int64_t dropped, RefreshRate rate, const DropThresholds& t);

// Whether a Trace_FPS report measured a rate (FrameStatsCollector's rule:
// at least kMinFramesForRate frames over kMinWindowForRate of frame time).
// Reports written before `too_short_for_rate` existed are judged by the
// same numbers. Viewers leave the others out of rates, worst and median.
bool HasFrameRate(const proto::FrameReport& report);

class FrameStatsCollector {
 public:
  // The longest wait between frames that still counts as drawing: a
  // program pacing itself to 10 fps or more (see "frame time" above).
  static constexpr absl::Duration kPacingGap = absl::Milliseconds(100);
  // The least a slice must hold to measure a rate (fps): frames, and frame
  // time. Below either, a report says too_short_for_rate and gives no fps:
  // one or two frames each "stand for" a vsync interval and would read as
  // the refresh rate whatever the program did.
  static constexpr int64_t kMinFramesForRate = 10;
  static constexpr absl::Duration kMinWindowForRate = absl::Milliseconds(250);

  struct Options {
    DropThresholds thresholds;
    absl::Duration time_slice = absl::Seconds(10);
    absl::Duration smoothness_window = absl::Seconds(1);
    // The time within [from, to] the looper thread waited to run (a busy
    // machine, a CPU quota); null: none known. FrameTracer gives
    // StoppedTime::ThrottledWithin().
    std::function<absl::Duration(TimeTicks from, TimeTicks to)> waited_to_run;
  };
  explicit FrameStatsCollector(Options options);

  // Adds a vsync frame (others are ignored); frames come in the order the
  // looper drew them, all scenes in one stream. When the frame's vsync falls
  // after the end of its scene's slice, returns that slice's report and the
  // frame begins the scene's next slice; otherwise, when the frame ends at or
  // after the end of its slice, returns the slice's report with the frame.
  std::optional<proto::FrameReport> Add(const FrameData& frame, std::string_view scene_name);
  // Reports every scene whose slice ended by `now` (same clock as the
  // frames); those scenes start afresh. FrameTracer calls it on each drain,
  // so a slice is reported on time even when no frame follows it.
  std::vector<proto::FrameReport> ReportEndedSlices(TimeTicks now);
  // Reports every scene that drew frames so far and starts afresh.
  std::vector<proto::FrameReport> Flush();
  // An input event handled `latency` after it happened, in `scene`.
  void AddInputLatency(SceneId scene, std::string_view scene_name, absl::Duration latency);
  // Frames refused upstream (ring full); reported with the next reports.
  void AddLostFrames(int64_t n) { lost_frames_ += n; }

 private:
  struct SceneStats {
    std::string name;
    int64_t frames = 0;
    int64_t dropped = 0;
    int64_t level_count[5] = {};
    int64_t level_sum[5] = {};
    // The slice's start: its first frame's vsync.
    TimeTicks slice_begin;
    // The sum of the frames' frame times. Frames that stand for whole
    // intervals (every frame of a vsync'd loop) are kept as whole intervals
    // per refresh rate (mHz) and converted once when read: adding each
    // frame's interval rounded to a nanosecond drifts (600 frames at 60 Hz
    // would fall 400 ns short of 10 s). The rest (frames sharing intervals)
    // are summed in nanoseconds.
    std::vector<std::pair<int64_t, int64_t>> intervals_by_rate;
    absl::Duration partial_frame_time;
    absl::Duration TotalFrameTime() const;
    absl::Duration jitter_sum;
    absl::Duration phase_sum[4];
    double hz_sum = 0;
    std::deque<std::pair<TimeTicks, int64_t>> window;  // (vsync, dropped) in the last 1 s.
    int64_t window_dropped = 0;
    int64_t window_frames = 0;
    std::vector<double> smoothness;  // Percent dropped per frame.
    std::vector<double> input_latency_ms;
  };
  proto::FrameReport Report(SceneStats& stats);
  // The time `frame` stands for (see frame time above), in whole intervals
  // when it stands for (dropped + 1) of them; advances the previous frame.
  struct FrameTimeParts {
    int64_t whole_intervals = 0;  // Used when `partial` is not set.
    std::optional<absl::Duration> partial;
    absl::Duration paced_gap;  // Added in either case.
  };
  FrameTimeParts TakeFrameTime(const FrameData& frame, int64_t dropped);

  const Options options_;
  absl::flat_hash_map<SceneId, SceneStats> scenes_;
  // The looper's previous frame (any scene): its end and the vsync it was
  // shown on. Null before the first frame.
  TimeTicks previous_end_;
  TimeTicks previous_shown_on_;
  int64_t lost_frames_ = 0;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_FRAME_STATS_H_
