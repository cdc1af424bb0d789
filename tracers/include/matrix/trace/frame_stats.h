// File: matrix/trace/frame_stats.h
//
// FrameStatsCollector turns a stream of frames into Trace_FPS reports, one per
// scene each time the scene has accumulated a time slice (10 s) of frame time.
// It is pure logic (no threads, no clock), fed by FrameTracer on the worker.
//
// Definitions (see docs/tracers.md):
//   dropped   ceil(d / interval) - 1, d from the vsync to the frame's end.
//   levels    BEST [0, 3), NORMAL [3, 9), MIDDLE [9, 24), HIGH [24, 42),
//             FROZEN [42, inf) dropped frames, thresholds given at 60 Hz and
//             scaled to the frame's refresh rate (3 at 60 Hz is 6 at 120 Hz).
//   fps       frames / sum over frames of (dropped + 1) intervals.
//   smoothness  for each frame, the percent of vsyncs that dropped a frame
//             among the frames of the last 1 s; the report gives the worst
//             and the 95th percentile (Chromium's dropped-frame counter).
//
//   matrix::FrameStatsCollector collector({});
//   for (const matrix::FrameData& f : frames) {
//     if (auto report = collector.Add(f, "Gallery")) Publish(*report);
//   }
//
// Thread safety: thread-compatible.

#ifndef MATRIX_TRACE_FRAME_STATS_H_
#define MATRIX_TRACE_FRAME_STATS_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/proto/frame.pb.h"
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
int64_t CountDroppedFrames(TimeTicks intended_vsync, TimeTicks end, TimeTicks previous_frame_end,
                           RefreshRate rate);

// The level of a frame that dropped `dropped` frames at `rate`.
DropLevel ClassifyDroppedFrames(int64_t dropped, RefreshRate rate, const DropThresholds& t);

class FrameStatsCollector {
 public:
  struct Options {
    DropThresholds thresholds;
    absl::Duration time_slice = absl::Seconds(10);
    absl::Duration smoothness_window = absl::Seconds(1);
  };
  explicit FrameStatsCollector(Options options);

  // Adds a vsync frame (others are ignored). Returns the scene's report when
  // its frame time reached the time slice; the scene then starts afresh.
  std::optional<proto::FrameReport> Add(const FrameData& frame, std::string_view scene_name);
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
    // Sum of (dropped + 1) intervals, kept as whole intervals per refresh
    // rate (mHz) and converted once when read: adding each frame's interval
    // rounded to a nanosecond drifts (600 frames at 60 Hz would fall 400 ns
    // short of 10 s).
    std::vector<std::pair<int64_t, int64_t>> intervals_by_rate;
    absl::Duration FrameTime() const;
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

  const Options options_;
  absl::flat_hash_map<SceneId, SceneStats> scenes_;
  int64_t lost_frames_ = 0;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_FRAME_STATS_H_
