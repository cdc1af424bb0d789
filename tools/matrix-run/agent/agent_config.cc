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

// The variables that are a whole number of milliseconds, and those that are
// a switch (0 or 1), with the field each sets.
struct DurationVariable {
  const char* name;
  absl::Duration AgentConfig::*field;
};
constexpr DurationVariable kDurationVariables[] = {
    {"MATRIX_ANR_MS", &AgentConfig::anr_threshold},
    {"MATRIX_LAG_MS", &AgentConfig::lag_threshold},
    {"MATRIX_EVIL_MS", &AgentConfig::evil_threshold},
    {"MATRIX_FPS_SLICE_MS", &AgentConfig::fps_time_slice},
    {"MATRIX_TIMELINE_WINDOW_MS", &AgentConfig::timeline_window},
};
struct SwitchVariable {
  const char* name;
  bool AgentConfig::*field;
};
constexpr SwitchVariable kSwitchVariables[] = {
    {"MATRIX_AGENT_DISABLE", &AgentConfig::disabled},
    {"MATRIX_SLOW_STACKS", &AgentConfig::slow_stacks},
    {"MATRIX_SYMBOLIZE", &AgentConfig::symbolize},
    {"MATRIX_FRAMES", &AgentConfig::frames},
    {"MATRIX_AGENT_FOLLOW_EXEC", &AgentConfig::follow_exec},
};

absl::Status ReadDurationsAndSwitches(AgentConfig::GetEnv get_env, AgentConfig& c) {
  for (const DurationVariable& d : kDurationVariables) {
    if (const char* v = get_env(d.name)) {
      if (absl::Status s = ParseMs(d.name, v, &(c.*d.field)); !s.ok()) return s;
    }
  }
  for (const SwitchVariable& b : kSwitchVariables) {
    if (const char* v = get_env(b.name)) {
      if (absl::Status s = ParseBool(b.name, v, &(c.*b.field)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Where the reports go: MATRIX_REPORT_DIR, MATRIX_REPORT_NAME and
// MATRIX_RUN_PROCESSES.
absl::Status ReadReportFiles(AgentConfig::GetEnv get_env, AgentConfig& c) {
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
  return absl::OkStatus();
}

absl::Status ReadRefreshHz(AgentConfig::GetEnv get_env, AgentConfig& c) {
  const char* v = get_env("MATRIX_REFRESH_HZ");
  if (v == nullptr) return absl::OkStatus();
  double hz = 0;
  if (!absl::SimpleAtod(v, &hz) || !std::isfinite(hz) || hz < 1 || hz > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("MATRIX_REFRESH_HZ=", v, ": expected a rate in [1, 1000] Hz"));
  }
  c.refresh_hz = hz;
  c.refresh_hz_set = true;
  return absl::OkStatus();
}

// MATRIX_KEY_SKIP and MATRIX_KEY_PROGRAM: comma-separated module patterns.
void ReadKeyModules(AgentConfig::GetEnv get_env, AgentConfig& c) {
  for (auto [name, list] : {std::pair{"MATRIX_KEY_SKIP", &c.key_skip_modules},
                            std::pair{"MATRIX_KEY_PROGRAM", &c.key_program_modules}}) {
    const char* v = get_env(name);
    if (v == nullptr) continue;
    for (absl::string_view pattern : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
      list->emplace_back(absl::StripAsciiWhitespace(pattern));
    }
  }
}

absl::Status ReadTargetPid(AgentConfig::GetEnv get_env, AgentConfig& c) {
  const char* v = get_env("MATRIX_AGENT_PID");
  if (v == nullptr || *v == '\0') return absl::OkStatus();
  int pid = 0;
  if (!absl::SimpleAtoi(v, &pid) || pid <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("MATRIX_AGENT_PID=", v, ": expected a pid"));
  }
  c.target_pid = pid;
  return absl::OkStatus();
}

}  // namespace

std::string AgentConfig::ReportName(pid_t pid, const char* program) const {
  if (!report_name.empty() && (target_pid == 0 || target_pid == pid)) return report_name;
  return absl::StrCat(program, "-", pid);
}

absl::StatusOr<AgentConfig> AgentConfig::FromEnvironment(GetEnv get_env) {
  AgentConfig c;
  if (absl::Status s = ReadReportFiles(get_env, c); !s.ok()) return s;
  if (absl::Status s = ReadDurationsAndSwitches(get_env, c); !s.ok()) return s;
  if (absl::Status s = ReadRefreshHz(get_env, c); !s.ok()) return s;
  ReadKeyModules(get_env, c);
  if (absl::Status s = ReadTargetPid(get_env, c); !s.ok()) return s;
  // LAG is the lesser hang: never above the ANR threshold.
  const bool lag_set = get_env("MATRIX_LAG_MS") != nullptr;
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
