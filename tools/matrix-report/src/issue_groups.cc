#include "matrix/report/issue_groups.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace matrix::report {
namespace {

// Counts of names, most frequent first, then by name.
class Counter {
 public:
  void Add(const std::string& name) {
    if (!name.empty()) ++counts_[name];
  }
  std::vector<NameCount> Sorted() const {
    std::vector<NameCount> out;
    out.reserve(counts_.size());
    for (const auto& [name, count] : counts_) out.push_back({name, count});
    std::sort(out.begin(), out.end(), [](const NameCount& a, const NameCount& b) {
      return a.count != b.count ? a.count > b.count : a.name < b.name;
    });
    return out;
  }

 private:
  absl::flat_hash_map<std::string, int64_t> counts_;
};

}  // namespace

std::string IssueGroup::TagDetail() const {
  return detail.empty() ? tag : absl::StrCat(tag, "/", detail);
}

double Median(std::vector<double>& values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

std::vector<IssueGroup> GroupIssues(const std::vector<const IssueRecord*>& records) {
  std::vector<IssueGroup> groups;
  absl::flat_hash_map<std::tuple<std::string, std::string, std::string>, size_t> index;
  for (const IssueRecord* record : records) {
    auto [it, inserted] = index.try_emplace(
        std::make_tuple(record->tag(), record->detail, record->key), groups.size());
    if (inserted) {
      IssueGroup& group = groups.emplace_back();
      group.tag = record->tag();
      group.detail = record->detail;
      group.key = record->key;
      group.kind = record->kind;
      group.first_seen_ms = record->time_ms();
      group.last_seen_ms = record->time_ms();
    }
    IssueGroup& group = groups[it->second];
    ++group.count;
    group.first_seen_ms = std::min(group.first_seen_ms, record->time_ms());
    group.last_seen_ms = std::max(group.last_seen_ms, record->time_ms());
    group.issues.push_back(record);
  }

  for (IssueGroup& group : groups) {
    Counter scenes;
    Counter processes;
    std::vector<double> values;
    for (const IssueRecord* record : group.issues) {
      scenes.Add(record->scene);
      processes.Add(record->ProcessLabel());
      if (!record->metric.present()) continue;
      if (!group.metric.present()) {
        group.metric = record->metric;
        group.metric.value = 0;
      }
      // A group mixing report kinds (same tag, detail and key) compares only
      // the issues measured like its first one.
      if (record->metric.name != group.metric.name) continue;
      const double value = record->metric.value;
      if (values.empty() || group.metric.Worse(value, group.worst)) group.worst = value;
      values.push_back(value);
    }
    group.metric_count = static_cast<int64_t>(values.size());
    group.median = Median(values);
    group.scenes = scenes.Sorted();
    group.processes = processes.Sorted();
  }

  std::sort(groups.begin(), groups.end(), [](const IssueGroup& a, const IssueGroup& b) {
    if (a.count != b.count) return a.count > b.count;
    const bool a_has = a.metric_count > 0;
    const bool b_has = b.metric_count > 0;
    if (a_has != b_has) return a_has;
    if (a_has && b_has && a.metric.name == b.metric.name && a.worst != b.worst) {
      return a.metric.Worse(a.worst, b.worst);
    }
    if (a_has && b_has && a.metric.name != b.metric.name) {
      // Different measures (ms vs FPS) do not compare; keep kinds together.
      return a.metric.name < b.metric.name;
    }
    return std::tie(a.tag, a.detail, a.key) < std::tie(b.tag, b.detail, b.key);
  });
  return groups;
}

}  // namespace matrix::report
