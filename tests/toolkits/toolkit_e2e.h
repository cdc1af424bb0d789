// What the real-window toolkit tests (GTK 3, Qt 6, SDL2) share: the same
// plugin configuration on a foreign loop, and the same questions about the
// issues they collect.

#ifndef MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_
#define MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_

#include <algorithm>
#include <vector>

#include "absl/status/statusor.h"
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

}  // namespace e2e

#endif  // MATRIX_TESTS_TOOLKITS_TOOLKIT_E2E_H_
