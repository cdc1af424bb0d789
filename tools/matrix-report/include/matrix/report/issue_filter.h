// File: matrix/report/issue_filter.h
//
// Selects issues for every matrix-report command (--tag, --detail, --key,
// --scene, --process, --since, --until). Each criterion given more than once
// matches any of its values; different criteria must all match.
//
//   matrix::report::IssueFilter filter;
//   filter.tags = {"Trace_EvilMethod"};
//   filter.keys = {"Decode"};                            // substring of the key
//   absl::StatusOr<int64_t> since = matrix::report::ParseTimeSpec("2h", absl::Now(),
//                                                                  absl::UTCTimeZone());
//   filter.since_ms = *since;
//   std::vector<const IssueRecord*> selected = SelectIssues(result.records, filter);
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_FILTER_H_
#define MATRIX_REPORT_ISSUE_FILTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

struct IssueFilter {
  // Tag, exact but case-insensitive ("trace_fps" matches Trace_FPS).
  std::vector<std::string> tags;
  // Detail, exact but case-insensitive ("anr"); "none" selects issues
  // without a detail (frame and startup reports).
  std::vector<std::string> details;
  // Substring of the grouping key, case-sensitive.
  std::vector<std::string> keys;
  // Scene, exact.
  std::vector<std::string> scenes;
  // Process name, exact, or a pid.
  std::vector<std::string> processes;
  // Report time in ms since the Unix epoch: since is inclusive, until
  // exclusive.
  std::optional<int64_t> since_ms;
  std::optional<int64_t> until_ms;

  bool Matches(const IssueRecord& record) const;
  bool empty() const;
};

// The records `filter` matches, ordered by report time (read order among
// equal times).
std::vector<const IssueRecord*> SelectIssues(const std::vector<IssueRecord>& records,
                                             const IssueFilter& filter);

// A time for --since/--until, as ms since the Unix epoch:
//   "2025-11-21T10:00:00Z", "2025-11-21T18:00:00+08:00"  RFC 3339
//   "2025-11-21 10:00[:00[.123]]", "2025-11-21T10:00"   in `tz`
//   "2025-11-21"                                        midnight in `tz`
//   "1763719200123"                                     ms since the epoch
//   "90s", "30m", "2h", "1h30m", "3d"                   that long before `now`
//   "now"
absl::StatusOr<int64_t> ParseTimeSpec(absl::string_view spec, absl::Time now, absl::TimeZone tz);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_FILTER_H_
