// File: matrix/report/issue_groups.h
//
// Groups issues the way BlockCanary users asked for: one group per tag +
// detail + key (the stack key for hangs and slow methods, the scene for FPS
// reports, "cold:<scene>" / "warm:<scene>" for startups), with how often it
// happened, when first and last, its worst and median metric (cost in ms;
// FPS for frame reports, where lower is worse) and the scenes it happened
// in.
//
//   std::vector<matrix::report::IssueGroup> groups = matrix::report::GroupIssues(selected);
//   for (const auto& g : groups) std::cout << g.count << " " << g.key << "\n";
//
// Order: most frequent first, then the worse worst metric, then tag,
// detail and key.
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_GROUPS_H_
#define MATRIX_REPORT_ISSUE_GROUPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "matrix/report/issue_record.h"

namespace matrix::report {

struct NameCount {
  std::string name;
  int64_t count = 0;

  friend bool operator==(const NameCount&, const NameCount&) = default;
};

struct IssueGroup {
  std::string tag;
  std::string detail;
  std::string key;
  // The report kind of the group's first issue ("anr", "frame", ...).
  std::string kind;
  int64_t count = 0;
  int64_t first_seen_ms = 0;
  int64_t last_seen_ms = 0;
  // Name, unit and direction of the metric; `value` unused. Absent when no
  // issue of the group has one.
  Metric metric;
  // How many issues had the metric, the worst of them and the median.
  int64_t metric_count = 0;
  double worst = 0;
  double median = 0;
  // Scenes and processes, most frequent first (then by name); issues
  // without a scene are not counted.
  std::vector<NameCount> scenes;
  std::vector<NameCount> processes;
  // The group's issues, in the order given to GroupIssues.
  std::vector<const IssueRecord*> issues;

  // "Trace_EvilMethod/ANR", or just the tag when there is no detail.
  std::string TagDetail() const;
};

// Groups `records` (for example SelectIssues' result). Records must outlive
// the groups.
std::vector<IssueGroup> GroupIssues(const std::vector<const IssueRecord*>& records);

// The median of `values` (the mean of the two middle values for an even
// count); 0 when empty. Reorders `values`.
double Median(std::vector<double>& values);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_GROUPS_H_
