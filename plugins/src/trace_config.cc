#include "matrix/plugins/trace_config.h"

#include <csignal>

#include "absl/strings/str_cat.h"

namespace matrix {
namespace {

absl::Status RequirePositive(const char* name, absl::Duration d) {
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TraceConfig: ", name, " must be a positive, finite duration, got ",
                     absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TraceConfig> TraceConfig::Builder::Build() const {
  const TraceConfig& c = c_;
  absl::Status status;
  status.Update(RequirePositive("evil_threshold", c.evil_threshold));
  status.Update(RequirePositive("anr_threshold", c.anr_threshold));
  status.Update(RequirePositive("lag_threshold", c.lag_threshold));
  status.Update(RequirePositive("idle_handler_threshold", c.idle_handler_threshold));
  status.Update(RequirePositive("touch_event_threshold", c.touch_event_threshold));
  status.Update(RequirePositive("cold_startup_threshold", c.cold_startup_threshold));
  status.Update(RequirePositive("warm_startup_threshold", c.warm_startup_threshold));
  status.Update(RequirePositive("fps_time_slice", c.fps_time_slice));
  status.Update(RequirePositive("cpu_sample_period", c.cpu_sample_period));
  if (!status.ok()) return status;

  const DropThresholds& t = c.drop_thresholds;
  if (!(0 < t.normal && t.normal < t.middle && t.middle < t.high && t.high < t.frozen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TraceConfig: drop thresholds must satisfy 0 < normal < middle < high < frozen, got ",
        t.normal, "/", t.middle, "/", t.high, "/", t.frozen));
  }
  if (c.lag_threshold >= c.anr_threshold) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TraceConfig: lag_threshold (", absl::FormatDuration(c.lag_threshold),
        ") must be shorter than anr_threshold (", absl::FormatDuration(c.anr_threshold), ")"));
  }
  if (c.method_trace_enabled() && c.method_trace_buffer_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TraceConfig: method_trace_buffer_bytes must be at least 4096, got ",
        c.method_trace_buffer_bytes));
  }
  if (c.signal_anr && (c.signal_anr_signal <= 0 || c.signal_anr_signal >= NSIG ||
                       c.signal_anr_signal == SIGKILL || c.signal_anr_signal == SIGSTOP)) {
    return absl::InvalidArgumentError(
        absl::StrCat("TraceConfig: signal_anr_signal ", c.signal_anr_signal,
                     " cannot be caught"));
  }
  for (const std::string& scene : c.splash_scenes) {
    if (scene.empty()) return absl::InvalidArgumentError("TraceConfig: empty splash scene name");
  }
  return c;
}

}  // namespace matrix
