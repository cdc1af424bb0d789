// What the real-window toolkit tests (GTK 3, Qt 6, SDL2) share: the same
// plugin configuration on a foreign loop, the same questions about the
// issues they collect, and their FPS reports added up.

#ifndef MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_
#define MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/core/issue.h"
#include "matrix/plugins/trace_config.h"

namespace e2e {

// FPS over `fps_time_slice`, ANR at 1 s (LAG 500 ms), slow methods over
// 200 ms, on a foreign loop without matrix's Choreographer.
inline absl::StatusOr<matrix::TraceConfig> ToolkitTraceConfig(absl::Duration fps_time_slice) {
  return matrix::TraceConfig::Builder()
      .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
      .UseChoreographer(false)
      .EnableFps(true)
      .SetFpsTimeSlice(fps_time_slice)
      .EnableAnrTrace(true)
      .SetLagThreshold(absl::Milliseconds(500))
      .SetAnrThreshold(absl::Seconds(1))
      .EnableEvilMethodTrace(true)
      .SetEvilThreshold(absl::Milliseconds(200))
      .Build();
}

inline bool IsFps(const matrix::Issue& i) { return i.proto().has_frame(); }
inline bool IsAnr(const matrix::Issue& i) {
  return i.proto().has_anr() && i.proto().anr().detail() == matrix::proto::ANR;
}
inline bool IsSlowMethod(const matrix::Issue& i) { return i.proto().has_evil_method(); }

template <typename Pred>
bool HasIssue(const std::vector<matrix::Issue>& issues, Pred pred) {
  return std::any_of(issues.begin(), issues.end(), pred);
}

// The ANR whose main-thread stack names `function` (the first, when under
// load another dispatch, e.g. the first map or draw, also crossed the
// threshold), or null. `seen` gets every ANR (cost, capture time, delay,
// key, capture error and frames), so a failure tells which case it was: no
// ANR for the hang, a failed capture, or a stack of something else.
inline const matrix::Issue* FindAnrNaming(const std::vector<matrix::Issue>& issues,
                                          absl::string_view function, std::string* seen) {
  const matrix::Issue* found = nullptr;
  for (const matrix::Issue& issue : issues) {
    if (!IsAnr(issue)) continue;
    const matrix::proto::AnrReport& report = issue.proto().anr();
    absl::StrAppend(seen, "ANR cost_ms=", report.cost_ms(),
                    " captured_at_ms=", report.thread_stack().captured_at_ms(),
                    " delay_ms=", report.detection_delay_ms(), " key=", report.stack_key(),
                    " error=", report.thread_stack().error(), "\n");
    bool named = false;
    for (const auto& frame : report.thread_stack().frames()) {
      absl::StrAppend(seen, "  ", frame.function(), "\n");
      named |= absl::StrContains(frame.function(), function);
    }
    if (named && found == nullptr) found = &issue;
  }
  return found;
}

// The stack keys of every slow-method issue.
inline std::vector<std::string> SlowMethodKeys(const std::vector<matrix::Issue>& issues) {
  std::vector<std::string> keys;
  for (const matrix::Issue& issue : issues) {
    if (IsSlowMethod(issue)) keys.push_back(issue.proto().evil_method().stack_key());
  }
  return keys;
}

// Every FPS report among the issues, added up.
struct FpsTotals {
  int64_t frames = 0;
  int64_t dropped = 0;       // Vsyncs missed by every frame.
  int64_t slow_frames = 0;   // Frames that missed 3 or more (NORMAL and worse).
  int64_t slow_dropped = 0;  // The vsyncs those missed.
  // Each phase's total (a report's mean times its frames).
  double input_ms = 0, animation_ms = 0, traversal_ms = 0, commit_ms = 0;
  std::set<std::string> scenes;  // What the reports name.
  std::set<double> refresh_rates;
};

inline FpsTotals SumFps(const std::vector<matrix::Issue>& issues) {
  FpsTotals t;
  for (const matrix::Issue& issue : issues) {
    if (!IsFps(issue)) continue;
    const matrix::proto::FrameReport& fps = issue.proto().frame();
    const double n = static_cast<double>(fps.frames());
    t.frames += fps.frames();
    t.dropped += fps.dropped_frames();
    t.slow_frames += fps.drop_level().normal() + fps.drop_level().middle() +
                     fps.drop_level().high() + fps.drop_level().frozen();
    t.slow_dropped += fps.drop_sum().normal() + fps.drop_sum().middle() +
                      fps.drop_sum().high() + fps.drop_sum().frozen();
    t.input_ms += fps.input_ms() * n;
    t.animation_ms += fps.animation_ms() * n;
    t.traversal_ms += fps.traversal_ms() * n;
    t.commit_ms += fps.commit_ms() * n;
    t.scenes.insert(fps.scene());
    t.refresh_rates.insert(fps.refresh_rate());
  }
  return t;
}

}  // namespace e2e

#endif  // MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_
