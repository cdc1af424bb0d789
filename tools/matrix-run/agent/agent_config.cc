#include "agent_config.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace matrix::agent {
namespace {

// A positive whole number of milliseconds, or an error naming `name`.
absl::Status ParseMs(const char* name, const char* value, absl::Duration* out) {
  int64_t ms = 0;
  if (!absl::SimpleAtoi(value, &ms) || ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", value, ": expected a positive number of milliseconds"));
  }
  *out = absl::Milliseconds(ms);
  return absl::OkStatus();
}

absl::Status ParseBool(const char* name, const char* value, bool* out) {
  const std::string v = value;
  if (v == "1" || v == "true" || v == "yes") {
    *out = true;
  } else if (v == "0" || v == "false" || v == "no" || v.empty()) {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", value, ": expected 0 or 1"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string AgentConfig::ReportName(pid_t pid, const char* program) const {
  if (!report_name.empty() && (target_pid == 0 || target_pid == pid)) return report_name;
  return absl::StrCat(program, "-", pid);
}

absl::StatusOr<AgentConfig> AgentConfig::FromEnvironment(GetEnv get_env) {
  AgentConfig c;
  if (const char* v = get_env("MATRIX_AGENT_DISABLE")) {
    if (absl::Status s = ParseBool("MATRIX_AGENT_DISABLE", v, &c.disabled); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_REPORT_DIR"); v != nullptr && *v != '\0') c.report_dir = v;
  if (const char* v = get_env("MATRIX_REPORT_NAME"); v != nullptr && *v != '\0') {
    c.report_name = v;
    if (c.report_name.find('/') != std::string::npos || c.report_name[0] == '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("MATRIX_REPORT_NAME=", v, ": a file name without '/' or a leading '.'"));
    }
  }
  if (const char* v = get_env("MATRIX_RUN_PROCESSES"); v != nullptr && *v != '\0') {
    c.process_list = v;
  }
  bool lag_set = false;
  if (const char* v = get_env("MATRIX_ANR_MS")) {
    if (absl::Status s = ParseMs("MATRIX_ANR_MS", v, &c.anr_threshold); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_LAG_MS")) {
    if (absl::Status s = ParseMs("MATRIX_LAG_MS", v, &c.lag_threshold); !s.ok()) return s;
    lag_set = true;
  }
  if (const char* v = get_env("MATRIX_EVIL_MS")) {
    if (absl::Status s = ParseMs("MATRIX_EVIL_MS", v, &c.evil_threshold); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_SLOW_STACKS")) {
    if (absl::Status s = ParseBool("MATRIX_SLOW_STACKS", v, &c.slow_stacks); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_SYMBOLIZE")) {
    if (absl::Status s = ParseBool("MATRIX_SYMBOLIZE", v, &c.symbolize); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_FRAMES")) {
    if (absl::Status s = ParseBool("MATRIX_FRAMES", v, &c.frames); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_FPS_SLICE_MS")) {
    if (absl::Status s = ParseMs("MATRIX_FPS_SLICE_MS", v, &c.fps_time_slice); !s.ok()) return s;
  }
  if (const char* v = get_env("MATRIX_TIMELINE_WINDOW_MS")) {
    if (absl::Status s = ParseMs("MATRIX_TIMELINE_WINDOW_MS", v, &c.timeline_window); !s.ok()) {
      return s;
    }
  }
  if (const char* v = get_env("MATRIX_REFRESH_HZ")) {
    double hz = 0;
    if (!absl::SimpleAtod(v, &hz) || !std::isfinite(hz) || hz < 1 || hz > 1000) {
      return absl::InvalidArgumentError(
          absl::StrCat("MATRIX_REFRESH_HZ=", v, ": expected a rate in [1, 1000] Hz"));
    }
    c.refresh_hz = hz;
    c.refresh_hz_set = true;
  }
  for (auto [name, list] : {std::pair{"MATRIX_KEY_SKIP", &c.key_skip_modules},
                            std::pair{"MATRIX_KEY_PROGRAM", &c.key_program_modules}}) {
    const char* v = get_env(name);
    if (v == nullptr) continue;
    for (absl::string_view pattern : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
      list->emplace_back(absl::StripAsciiWhitespace(pattern));
    }
  }
  if (const char* v = get_env("MATRIX_AGENT_PID"); v != nullptr && *v != '\0') {
    int pid = 0;
    if (!absl::SimpleAtoi(v, &pid) || pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("MATRIX_AGENT_PID=", v, ": expected a pid"));
    }
    c.target_pid = pid;
  }
  if (const char* v = get_env("MATRIX_AGENT_FOLLOW_EXEC")) {
    if (absl::Status s = ParseBool("MATRIX_AGENT_FOLLOW_EXEC", v, &c.follow_exec); !s.ok()) {
      return s;
    }
  }
  // LAG is the lesser hang: never above the ANR threshold.
  if (!lag_set && c.lag_threshold > c.anr_threshold) c.lag_threshold = c.anr_threshold / 2;
  if (c.lag_threshold > c.anr_threshold) {
    return absl::InvalidArgumentError("MATRIX_LAG_MS is above MATRIX_ANR_MS");
  }
  return c;
}

int64_t AgentConfig::RefreshMillihertz(int64_t display_millihertz) const {
  if (!refresh_hz_set && display_millihertz >= 1'000 && display_millihertz <= 1'000'000) {
    return display_millihertz;
  }
  return std::llround(refresh_hz * 1000.0);
}

}  // namespace matrix::agent
