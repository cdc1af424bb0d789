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
// IssueGrouper builds the same groups one issue at a time, keeping per group
// what it shows and not its issues, so a streaming read groups a file of any
// size (GroupIssues uses it too).
//
// Order: most frequent first, then the worse worst metric, then tag,
// detail and key.
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_GROUPS_H_
#define MATRIX_REPORT_ISSUE_GROUPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

struct NameCount {
  std::string name;
  int64_t count = 0;

  friend bool operator==(const NameCount&, const NameCount&) = default;
};

// Counts of names; empty names are not counted.
class NameCounter {
 public:
  void Add(const std::string& name);
  // Most frequent first, then by name.
  std::vector<NameCount> Sorted() const;

 private:
  absl::flat_hash_map<std::string, int64_t> counts_;
};

// An issue's place in the order the views follow, smaller first: for a read,
// {time_ms, sequence} (SelectIssues' order); for a given list, {0, index}.
using IssueOrder = std::pair<int64_t, int64_t>;

// MetricStats
//
// The worst and median metric of issues added in any order, as if added in
// IssueOrder: the metric is the first issue's that has one, and issues
// measured otherwise (a group mixing report kinds) are left out. Keeps a
// count per distinct value, which the exact median needs, not the issues.
class MetricStats {
 public:
  void Add(const Metric& metric, IssueOrder order);

  // Name, unit and direction of the metric (`value` 0); absent when no issue
  // had one.
  Metric metric() const;
  // How many issues had the metric, the worst of them and the median.
  int64_t count() const;
  double worst() const;
  double median() const;

 private:
  struct Measure {
    Metric metric;
    IssueOrder first;
    int64_t count = 0;
    double worst = 0;
    absl::btree_map<double, int64_t> values;
  };
  const Measure* Chosen() const;

  // One per metric name seen: there are few report kinds.
  std::vector<Measure> measures_;
};

// Where a group's issue came from: a file (shared by its issues) and line.
struct IssueSource {
  std::shared_ptr<const std::string> file;
  int64_t line = 0;
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
  // Where each issue came from, in order; only when the grouper keeps
  // sources (export --grouped --format=json lists them).
  std::vector<IssueSource> sources;
  // The group's issues, in order; only those given to Add() to keep
  // (GroupIssues gives them all).
  std::vector<const IssueRecord*> issues;

  // "Trace_EvilMethod/ANR", or just the tag when there is no detail.
  std::string TagDetail() const;
};

// IssueGrouper
//
// Groups issues added one at a time, in any order: a group's kind, metric,
// sources and issues follow IssueOrder. Memory grows with the number of
// groups (and their distinct scenes, processes and metric values), and with
// the issues only for the sources and issues asked for.
//
//   IssueGrouper grouper;
//   ForEachIssue(inputs, ..., [&](IssueRecord& r) { grouper.Add(r, {r.time_ms(), r.sequence}); });
//   std::vector<IssueGroup> groups = std::move(grouper).Finish();
class IssueGrouper {
 public:
  // `keep_sources`: fill IssueGroup::sources.
  explicit IssueGrouper(bool keep_sources = false);
  ~IssueGrouper();

  // Adds `record` at `order`; `keep` (may be null) goes to the group's
  // `issues` and must outlive the groups.
  void Add(const IssueRecord& record, IssueOrder order, const IssueRecord* keep = nullptr);

  // The groups, sorted.
  std::vector<IssueGroup> Finish() &&;

 private:
  struct Builder;

  const bool keep_sources_;
  std::vector<std::unique_ptr<Builder>> builders_;
  absl::flat_hash_map<std::tuple<std::string, std::string, std::string>, size_t> index_;
  // The last file name seen, shared by the sources of its issues.
  std::shared_ptr<const std::string> file_;
};

// Groups `records` (for example SelectIssues' result), in their order, with
// their issues and sources. Records must outlive the groups.
std::vector<IssueGroup> GroupIssues(const std::vector<const IssueRecord*>& records);

// The median of `values` (the mean of the two middle values for an even
// count); 0 when empty. Reorders `values`.
double Median(std::vector<double>& values);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_GROUPS_H_
