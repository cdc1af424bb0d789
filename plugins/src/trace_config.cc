#include "matrix/plugins/trace_config.h"

#include <csignal>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace matrix {
namespace {

// Collects every problem, so that one Build() names them all.
class Problems {
 public:
  void Add(std::string problem) { problems_.push_back(std::move(problem)); }
  void RequirePositive(const char* name, absl::Duration d) {
    if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
      Add(absl::StrCat(name, " must be a positive, finite duration, got ",
                       absl::FormatDuration(d)));
    }
  }
  absl::Status ToStatus() const {
    if (problems_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("TraceConfig: ", absl::StrJoin(problems_, "; ")));
  }

 private:
  std::vector<std::string> problems_;
};

// Signals the kernel sends for a fault in the program itself (or that abort(),
// debuggers and seccomp use). A dump handler on one of them would swallow a
// real crash, or take it for a dump request.
bool IsSynchronousFaultSignal(int signo) {
  switch (signo) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGABRT:
    case SIGSYS:
      return true;
    default:
      return false;
  }
}

// Signals a signal-ANR dump may take: none has a default action the program
// relies on (SIGQUIT's core dump is what the dump replaces; SIGUSR1/2 and the
// real-time signals are for the program to assign). The stack capturer's
// signal is taken.
bool IsAllowedDumpSignal(int signo) {
  if (signo == SIGQUIT || signo == SIGUSR1 || signo == SIGUSR2) return true;
  return signo >= SIGRTMIN && signo <= SIGRTMAX && signo != SIGRTMIN + 5;
}

}  // namespace

absl::StatusOr<TraceConfig> TraceConfig::Builder::Build() const {
  if (absl::Status status = c_.Validate(); !status.ok()) return status;
  return c_;
}

namespace {

// The durations: each positive, the sampling periods within their bounds.
void CheckDurations(const TraceConfig& c, Problems& problems) {
  problems.RequirePositive("evil_threshold", c.evil_threshold);
  problems.RequirePositive("anr_threshold", c.anr_threshold);
  problems.RequirePositive("lag_threshold", c.lag_threshold);
  problems.RequirePositive("idle_handler_threshold", c.idle_handler_threshold);
  problems.RequirePositive("touch_event_threshold", c.touch_event_threshold);
  problems.RequirePositive("cold_startup_threshold", c.cold_startup_threshold);
  problems.RequirePositive("warm_startup_threshold", c.warm_startup_threshold);
  if (c.fps_time_slice < TraceConfig::kMinFpsTimeSlice ||
      c.fps_time_slice == absl::InfiniteDuration()) {
    problems.Add(absl::StrCat("fps_time_slice must be a finite duration of at least ",
                              absl::FormatDuration(TraceConfig::kMinFpsTimeSlice), ", got ",
                              absl::FormatDuration(c.fps_time_slice)));
  }
  if (c.cpu_sample_period == absl::InfiniteDuration() ||
      c.cpu_sample_period < TraceConfig::kMinCpuSamplePeriod) {
    problems.Add(absl::StrCat("cpu_sample_period must be a finite duration of at least ",
                              absl::FormatDuration(TraceConfig::kMinCpuSamplePeriod), ", got ",
                              absl::FormatDuration(c.cpu_sample_period)));
  }

  if (c.evil_method_stacks &&
      (c.evil_method_sample_interval < TraceConfig::kMinEvilMethodSampleInterval ||
       c.evil_method_sample_interval > c.evil_threshold)) {
    problems.Add(absl::StrCat("evil_method_sample_interval must be at least ",
                              absl::FormatDuration(TraceConfig::kMinEvilMethodSampleInterval),
                              " and at most evil_threshold (",
                              absl::FormatDuration(c.evil_threshold), "), got ",
                              absl::FormatDuration(c.evil_method_sample_interval)));
  }
}

// How the thresholds relate: the drop levels in order, a LAG before an ANR.
void CheckThresholds(const TraceConfig& c, Problems& problems) {
  const DropThresholds& t = c.drop_thresholds;
  if (!(0 < t.normal && t.normal < t.middle && t.middle < t.high && t.high < t.frozen)) {
    problems.Add(absl::StrCat(
        "drop thresholds must satisfy 0 < normal < middle < high < frozen, got ", t.normal, "/",
        t.middle, "/", t.high, "/", t.frozen));
  }
  if (c.lag_threshold >= c.anr_threshold) {
    problems.Add(absl::StrCat("lag_threshold (", absl::FormatDuration(c.lag_threshold),
                              ") must be shorter than anr_threshold (",
                              absl::FormatDuration(c.anr_threshold), ")"));
  }
}

// The method-trace buffer and the flight recorder's sizes.
void CheckBuffers(const TraceConfig& c, Problems& problems) {
  if (c.method_trace_enabled() && c.method_trace_buffer_bytes != 0 &&
      (c.method_trace_buffer_bytes < TraceConfig::kMinMethodTraceBufferBytes ||
       c.method_trace_buffer_bytes > TraceConfig::kMaxMethodTraceBufferBytes)) {
    problems.Add(absl::StrCat("method_trace_buffer_bytes must be 0 (no ring of its own) or in [",
                              TraceConfig::kMinMethodTraceBufferBytes, ", ",
                              TraceConfig::kMaxMethodTraceBufferBytes, "] (4 KiB to 1 GiB), got ",
                              c.method_trace_buffer_bytes));
  }
  if (c.timeline_capacity != 0 && (c.timeline_capacity < TraceConfig::kMinTimelineCapacity ||
                                   c.timeline_capacity > TraceConfig::kMaxTimelineCapacity)) {
    problems.Add(absl::StrCat(
        "timeline_capacity must be 0 (off) or in [", TraceConfig::kMinTimelineCapacity, ", ",
        TraceConfig::kMaxTimelineCapacity, "] events, got ", c.timeline_capacity));
  }
  if (c.timeline_capacity != 0) problems.RequirePositive("timeline_window", c.timeline_window);
  if (c.timeline_max_bytes != 0 && c.timeline_max_bytes < TraceConfig::kMinTimelineMaxBytes) {
    problems.Add(absl::StrCat("timeline_max_bytes must be 0 (no limit) or at least ",
                              TraceConfig::kMinTimelineMaxBytes, ", got ", c.timeline_max_bytes));
  }
}

// The signal that asks for a dump: one that can be caught, no fault signal,
// none whose default meaning the program relies on.
void CheckSignalAnrSignal(int signo, Problems& problems) {
  if (signo <= 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP) {
    problems.Add(absl::StrCat("signal_anr_signal ", signo, " cannot be caught"));
  } else if (IsSynchronousFaultSignal(signo)) {
    problems.Add(absl::StrCat("signal_anr_signal ", signo, " (SIG", sigabbrev_np(signo),
                              ") is a fault signal: a crash would be taken for a dump "
                              "request"));
  } else if (!IsAllowedDumpSignal(signo)) {
    problems.Add(absl::StrCat("signal_anr_signal ", signo, " (SIG", sigabbrev_np(signo),
                              ") has a default meaning the program relies on; use SIGQUIT, "
                              "SIGUSR1, SIGUSR2 or a real-time signal other than SIGRTMIN+5"));
  }
}

}  // namespace

absl::Status TraceConfig::Validate() const {
  const TraceConfig& c = *this;
  Problems problems;
  CheckDurations(c, problems);
  CheckThresholds(c, problems);
  CheckBuffers(c, problems);
  if (c.signal_anr) CheckSignalAnrSignal(c.signal_anr_signal, problems);
  if (absl::Status rule = c.stack_key_rule.Validate(); !rule.ok()) {
    problems.Add(std::string(rule.message()));
  }
  for (const std::string& scene : c.splash_scenes) {
    if (scene.empty()) {
      problems.Add("empty splash scene name");
      break;
    }
  }
  return problems.ToStatus();
}

}  // namespace matrix
