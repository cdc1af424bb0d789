#include "matrix/trace/frame_stats.h"

#include <algorithm>
#include <cmath>

namespace matrix {

DropLevel ClassifyDroppedFrames(int64_t dropped, RefreshRate rate, const DropThresholds& t) {
  // dropped >= threshold * rate / 60, exactly: dropped * 60000 >= threshold * mHz.
  const __int128 scaled = static_cast<__int128>(dropped) * 60'000;
  auto at_least = [&](int threshold) {
    return scaled >= static_cast<__int128>(threshold) * rate.millihertz();
  };
  if (at_least(t.frozen)) return DropLevel::kFrozen;
  if (at_least(t.high)) return DropLevel::kHigh;
  if (at_least(t.middle)) return DropLevel::kMiddle;
  if (at_least(t.normal)) return DropLevel::kNormal;
  return DropLevel::kBest;
}

FrameStatsCollector::FrameStatsCollector(Options options) : options_(options) {}

std::optional<proto::FrameReport> FrameStatsCollector::Add(const FrameData& frame,
                                                           std::string_view scene_name) {
  if (!frame.is_vsync_frame) return std::nullopt;
  const int64_t dropped = std::max<int64_t>(frame.dropped_frames, 0);
  // Before anything returns: the next frame's time depends on this one.
  const FrameTimeParts frame_time = TakeFrameTime(frame, dropped);

  SceneStats& s = scenes_[frame.scene];
  std::optional<proto::FrameReport> ended;
  // A frame whose vsync falls after its scene's slice begins the next slice.
  if (s.frames > 0 && frame.intended_frame_time >= s.slice_begin + options_.time_slice) {
    ended = Report(s);
    s = SceneStats();
  }
  if (s.frames == 0) {
    s.name = std::string(scene_name);
    s.slice_begin = frame.intended_frame_time;
  }

  const int level = static_cast<int>(ClassifyDroppedFrames(dropped, frame.refresh_rate,
                                                           options_.thresholds));
  ++s.frames;
  s.dropped += dropped;
  ++s.level_count[level];
  s.level_sum[level] += dropped;
  // The first frame of a slice stands for no gap before it: the slice
  // begins at its vsync.
  if (s.frames > 1) s.partial_frame_time += frame_time.paced_gap;
  if (frame_time.partial.has_value()) {
    s.partial_frame_time += *frame_time.partial;
  } else {
    auto rate_it = std::find_if(
        s.intervals_by_rate.begin(), s.intervals_by_rate.end(),
        [&](const auto& entry) { return entry.first == frame.refresh_rate.millihertz(); });
    if (rate_it == s.intervals_by_rate.end()) {
      s.intervals_by_rate.emplace_back(frame.refresh_rate.millihertz(),
                                       frame_time.whole_intervals);
    } else {
      rate_it->second += frame_time.whole_intervals;
    }
  }
  s.jitter_sum += std::max(frame.jitter(), absl::ZeroDuration());
  s.phase_sum[0] += frame.input();
  s.phase_sum[1] += frame.animation();
  s.phase_sum[2] += frame.traversal();
  s.phase_sum[3] += frame.commit();
  s.hz_sum += frame.refresh_rate.hz();

  // Smoothness: the share of vsyncs that dropped a frame among the frames of
  // the last `smoothness_window`.
  s.window.emplace_back(frame.intended_frame_time, dropped);
  s.window_dropped += dropped;
  s.window_frames += 1;
  while (!s.window.empty() &&
         frame.intended_frame_time - s.window.front().first >= options_.smoothness_window) {
    s.window_dropped -= s.window.front().second;
    s.window_frames -= 1;
    s.window.pop_front();
  }
  s.smoothness.push_back(100.0 * static_cast<double>(s.window_dropped) /
                         static_cast<double>(s.window_dropped + s.window_frames));

  // A frame that ended at or after its slice's end closes the slice, itself
  // included (a frame longer than the slice, the frame an uncapped renderer
  // was drawing when the slice ran out).
  if (!ended.has_value() && frame.end >= s.slice_begin + options_.time_slice) {
    ended = Report(s);
    scenes_.erase(frame.scene);
  }
  return ended;
}

FrameStatsCollector::FrameTimeParts FrameStatsCollector::TakeFrameTime(const FrameData& frame,
                                                                       int64_t dropped) {
  const RefreshRate rate = frame.refresh_rate;
  const TimeTicks could_start = FrameCouldStart(frame.intended_frame_time, previous_end_, rate);
  const TimeTicks shown_on = rate.TickAfter(could_start, dropped + 1);
  FrameTimeParts parts;
  if (previous_shown_on_ <= could_start) {
    // Nothing shared with the previous frame (every frame of a vsync'd loop;
    // the first frame after an idle gap, which leaves the gap out, unless
    // the gap is short enough to be the program pacing itself).
    parts.whole_intervals = dropped + 1;
    // (Nanoseconds of vsync rounding are no gap.)
    const absl::Duration gap = could_start - previous_shown_on_;
    if (!previous_shown_on_.is_null() && gap >= absl::Microseconds(100) &&
        (gap <= kPacingGap ||
         (options_.waited_to_run &&
          gap - options_.waited_to_run(previous_shown_on_, could_start) <= kPacingGap))) {
      parts.paced_gap = gap;
    }
  } else {
    // Shown on or after the vsync the previous frame was shown on: it stands
    // only for the intervals after that one (none when both share a vsync).
    parts.partial = std::max(shown_on - previous_shown_on_, absl::ZeroDuration());
  }
  previous_end_ = std::max(previous_end_, frame.end);
  previous_shown_on_ = std::max(previous_shown_on_, shown_on);
  return parts;
}

std::vector<proto::FrameReport> FrameStatsCollector::ReportEndedSlices(TimeTicks now) {
  std::vector<proto::FrameReport> reports;
  for (auto it = scenes_.begin(); it != scenes_.end();) {
    SceneStats& stats = it->second;
    if (stats.frames > 0 && now >= stats.slice_begin + options_.time_slice) {
      reports.push_back(Report(stats));
      scenes_.erase(it++);
    } else {
      ++it;
    }
  }
  return reports;
}

void FrameStatsCollector::AddInputLatency(SceneId scene, std::string_view scene_name,
                                          absl::Duration latency) {
  SceneStats& s = scenes_[scene];
  if (s.name.empty()) s.name = std::string(scene_name);
  s.input_latency_ms.push_back(absl::ToDoubleMilliseconds(latency));
}

std::vector<proto::FrameReport> FrameStatsCollector::Flush() {
  std::vector<proto::FrameReport> reports;
  // A scene that drew no frame has no FPS to report (input handled while it
  // was visible but nothing was drawn is dropped with it).
  for (auto& [id, stats] : scenes_) {
    if (stats.frames > 0) reports.push_back(Report(stats));
  }
  scenes_.clear();
  return reports;
}

bool HasFrameRate(const proto::FrameReport& report) {
  return !report.too_short_for_rate() &&
         report.frames() >= FrameStatsCollector::kMinFramesForRate &&
         report.window_ms() >=
             absl::ToDoubleMilliseconds(FrameStatsCollector::kMinWindowForRate);
}

absl::Duration FrameStatsCollector::SceneStats::TotalFrameTime() const {
  absl::Duration total = partial_frame_time;
  for (const auto& [mhz, intervals] : intervals_by_rate) {
    total += RefreshRate::FromMillihertz(mhz).Intervals(intervals);
  }
  return total;
}

proto::FrameReport FrameStatsCollector::Report(SceneStats& s) {
  proto::FrameReport r;
  const double n = static_cast<double>(std::max<int64_t>(s.frames, 1));
  const absl::Duration frame_time = s.TotalFrameTime();
  r.set_scene(s.name);
  r.set_frames(s.frames);
  r.set_dropped_frames(s.dropped);
  if (s.frames >= kMinFramesForRate && frame_time >= kMinWindowForRate) {
    r.set_fps(n / absl::ToDoubleSeconds(frame_time));
  } else {
    r.set_too_short_for_rate(true);
  }
  auto fill = [](proto::DropLevels* levels, const int64_t (&v)[5]) {
    levels->set_best(v[0]);
    levels->set_normal(v[1]);
    levels->set_middle(v[2]);
    levels->set_high(v[3]);
    levels->set_frozen(v[4]);
  };
  fill(r.mutable_drop_level(), s.level_count);
  fill(r.mutable_drop_sum(), s.level_sum);
  r.set_refresh_rate(s.hz_sum / n);
  r.set_window_ms(absl::ToDoubleMilliseconds(frame_time));
  r.set_input_ms(absl::ToDoubleMilliseconds(s.phase_sum[0]) / n);
  r.set_animation_ms(absl::ToDoubleMilliseconds(s.phase_sum[1]) / n);
  r.set_traversal_ms(absl::ToDoubleMilliseconds(s.phase_sum[2]) / n);
  r.set_commit_ms(absl::ToDoubleMilliseconds(s.phase_sum[3]) / n);
  r.set_frame_ms(absl::ToDoubleMilliseconds(s.jitter_sum) / n);
  if (!s.smoothness.empty()) {
    std::vector<double> sorted = s.smoothness;
    std::sort(sorted.begin(), sorted.end());
    r.set_worst_dropped_percent(sorted.back());
    // Nearest-rank 95th percentile.
    const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(sorted.size())));
    r.set_p95_dropped_percent(sorted[std::max<size_t>(rank, 1) - 1]);
  }
  if (!s.input_latency_ms.empty()) {
    std::vector<double> sorted = s.input_latency_ms;
    std::sort(sorted.begin(), sorted.end());
    const size_t n_in = sorted.size();
    const double median = n_in % 2 == 1 ? sorted[n_in / 2]
                                         : (sorted[n_in / 2 - 1] + sorted[n_in / 2]) / 2.0;
    r.set_input_latency_median_ms(median);
    r.set_input_latency_worst_ms(sorted.back());
    r.set_input_events(static_cast<int64_t>(n_in));
  }
  r.set_lost_frames(lost_frames_);
  lost_frames_ = 0;
  return r;
}

}  // namespace matrix
