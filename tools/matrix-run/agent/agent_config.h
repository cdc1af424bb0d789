// File: tools/matrix-run/agent/agent_config.h
//
// The configuration of libmatrix-agent.so, read from the environment that
// matrix-run (or the user) sets. Parsed once, in the agent's constructor, so
// the interposed calls never parse or allocate.
//
//   absl::StatusOr<matrix::agent::AgentConfig> config =
//       matrix::agent::AgentConfig::FromEnvironment(getenv);
//
// Variables (docs/matrix-run.md):
//   MATRIX_REPORT_DIR          report directory (./matrix-reports)
//   MATRIX_REPORT_NAME         issue file name without .jsonl (<program>-<pid>)
//   MATRIX_ANR_MS              ANR threshold (5000)
//   MATRIX_LAG_MS              LAG threshold (2000, capped to the ANR threshold)
//   MATRIX_EVIL_MS             slow-dispatch (evil method) threshold (700)
//   MATRIX_SLOW_STACKS         1: stacks sampled across slow dispatches, 0: none (1)
//   MATRIX_FRAMES              1: frames from buffer swaps, 0: none (1)
//   MATRIX_FPS_SLICE_MS        frame time per FPS report (10000)
//   MATRIX_REFRESH_HZ          display refresh rate for dropped frames (60)
//   MATRIX_TIMELINE_WINDOW_MS  timeline before a hang's own span (5000)
//   MATRIX_KEY_SKIP            modules never a report's key, comma-separated
//                              (StackKeyRule::skip_modules)
//   MATRIX_KEY_PROGRAM         modules that are the program's own, comma-separated
//                              (StackKeyRule::program_modules)
//   MATRIX_SYMBOLIZE           0: frames recorded raw, named off the host (1)
//   MATRIX_AGENT_PID           only this pid is monitored (matrix-run sets it)
//   MATRIX_AGENT_FOLLOW_EXEC   1: also monitor programs exec'ed by children
//   MATRIX_AGENT_DISABLE       1: the agent does nothing
//
// Thread safety: a value type.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_AGENT_CONFIG_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_AGENT_CONFIG_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace matrix::agent {

struct AgentConfig {
  std::string report_dir = "./matrix-reports";
  // The launched program's report name (MATRIX_REPORT_NAME); see
  // ReportName(). Empty: <program>-<pid>.
  std::string report_name;
  // MATRIX_RUN_PROCESSES: a file each monitored process appends
  // "<report name> <pid>" to, so matrix-run summarizes every process of the
  // run (followed children included). Empty: none.
  std::string process_list;
  absl::Duration anr_threshold = absl::Seconds(5);
  absl::Duration lag_threshold = absl::Seconds(2);
  absl::Duration evil_threshold = absl::Milliseconds(700);
  bool slow_stacks = true;
  bool frames = true;
  bool symbolize = true;  // TraceConfig::symbolize.
  absl::Duration fps_time_slice = absl::Seconds(10);
  double refresh_hz = 60;
  bool refresh_hz_set = false;  // MATRIX_REFRESH_HZ given: it overrides the display's.
  absl::Duration timeline_window = absl::Seconds(5);
  std::vector<std::string> key_skip_modules;
  std::vector<std::string> key_program_modules;
  pid_t target_pid = 0;  // 0: any process.
  bool follow_exec = false;
  bool disabled = false;

  // Reads the variables above through `get_env` (getenv or a fake). Errors:
  // InvalidArgument naming the variable and its bad value.
  using GetEnv = const char* (*)(const char*);
  static absl::StatusOr<AgentConfig> FromEnvironment(GetEnv get_env);

  // The refresh rate for dropped frames, in millihertz: MATRIX_REFRESH_HZ when
  // given, else the display's (`display_millihertz`, 0 or less when unknown),
  // else refresh_hz (60 Hz). A display rate outside [1, 1000] Hz is ignored.
  int64_t RefreshMillihertz(int64_t display_millihertz) const;

  // The report file name (without ".jsonl") of process `pid` running
  // `program`: report_name for the launched program (target_pid, or any
  // process when there is none), else "<program>-<pid>": a followed child
  // never writes into its parent's file.
  std::string ReportName(pid_t pid, const char* program) const;

  // Whether a process with pid `pid` should be monitored.
  bool ShouldMonitor(pid_t pid) const {
    return !disabled && (target_pid == 0 || target_pid == pid || follow_exec);
  }
};

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_AGENT_CONFIG_H_
