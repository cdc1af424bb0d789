// File: tools/matrix-report/src/internal/issue_metric.h
//
// The main metric of each report kind and the fields holding its scene
// (internal to matrix_report_lib): what DeriveFields (issue_record.cc) looks
// up by name in a report, shared with push's fast path
// (fleet_fast_parse.cc), which must find the same fields without a parsed
// message.
//
//   const MetricSpec& spec = MetricSpecFor("frame");  // fps, over >= 10 frames
//
// Thread safety: constants and a pure function.

#ifndef MATRIX_REPORT_SRC_INTERNAL_ISSUE_METRIC_H_
#define MATRIX_REPORT_SRC_INTERNAL_ISSUE_METRIC_H_

#include "absl/strings/string_view.h"

namespace matrix::report::internal {

// The main metric of a report kind; kinds not listed use `cost_ms` when
// they have one (hangs, slow methods, BlockCanary blocks, kinds added later).
struct MetricSpec {
  absl::string_view kind;
  absl::string_view field;
  absl::string_view unit;
  bool higher_is_worse;
  // When set, the metric exists only if this field is at least
  // `requires_at_least`: a frame report over too few frames has no FPS.
  absl::string_view requires_field = "";
  double requires_at_least = 0;
};

// The spec of `kind` (the default one, cost_ms in ms, for kinds not listed).
const MetricSpec& MetricSpecFor(absl::string_view kind);

// Fields holding the scene, in the order they are tried.
inline constexpr absl::string_view kSceneFields[] = {"scene", "first_scene"};

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_ISSUE_METRIC_H_
