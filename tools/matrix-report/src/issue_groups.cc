#include "matrix/report/issue_groups.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace matrix::report {

void NameCounter::Add(const std::string& name) {
  if (!name.empty()) ++counts_[name];
}

std::vector<NameCount> NameCounter::Sorted() const {
  std::vector<NameCount> out;
  out.reserve(counts_.size());
  for (const auto& [name, count] : counts_) out.push_back({name, count});
  std::sort(out.begin(), out.end(), [](const NameCount& a, const NameCount& b) {
    return a.count != b.count ? a.count > b.count : a.name < b.name;
  });
  return out;
}

void MetricStats::Add(const Metric& metric, IssueOrder order) {
  if (!metric.present()) return;
  auto it = std::find_if(measures_.begin(), measures_.end(),
                         [&](const Measure& m) { return m.metric.name == metric.name; });
  if (it == measures_.end()) {
    it = measures_.emplace(measures_.end());
    it->metric = metric;
    it->metric.value = 0;
    it->first = order;
  } else if (order < it->first) {
    // Unit and direction as the first issue measured so gives them.
    it->metric = metric;
    it->metric.value = 0;
    it->first = order;
  }
  if (it->count == 0 || it->metric.Worse(metric.value, it->worst)) it->worst = metric.value;
  ++it->count;
  ++it->values[metric.value];
}

const MetricStats::Measure* MetricStats::Chosen() const {
  const Measure* chosen = nullptr;
  for (const Measure& m : measures_) {
    if (chosen == nullptr || m.first < chosen->first) chosen = &m;
  }
  return chosen;
}

Metric MetricStats::metric() const {
  const Measure* m = Chosen();
  return m == nullptr ? Metric() : m->metric;
}

int64_t MetricStats::count() const {
  const Measure* m = Chosen();
  return m == nullptr ? 0 : m->count;
}

double MetricStats::worst() const {
  const Measure* m = Chosen();
  return m == nullptr ? 0 : m->worst;
}

double MetricStats::median() const {
  const Measure* m = Chosen();
  if (m == nullptr) return 0;
  // As Median(): the value at index count / 2 in sorted order, or for an
  // even count the mean of it and the one before.
  const int64_t mid = m->count / 2;
  double lower = 0;
  int64_t seen = 0;
  for (const auto& [value, n] : m->values) {
    if (seen + n > mid) {
      if (m->count % 2 == 1 || seen < mid) return value;  // Both middles are `value`.
      return lower + (value - lower) / 2;
    }
    seen += n;
    lower = value;
  }
  return 0;  // Not reached: the counts add up to `count`.
}

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

// One group while it is built.
struct IssueGrouper::Builder {
  IssueGroup group;
  IssueOrder first;
  NameCounter scenes;
  NameCounter processes;
  MetricStats metric;
  std::vector<std::pair<IssueOrder, IssueSource>> sources;
  std::vector<std::pair<IssueOrder, const IssueRecord*>> issues;
};

IssueGrouper::IssueGrouper(bool keep_sources) : keep_sources_(keep_sources) {}
IssueGrouper::~IssueGrouper() = default;

void IssueGrouper::Add(const IssueRecord& record, IssueOrder order, const IssueRecord* keep) {
  auto [it, inserted] = index_.try_emplace(
      std::make_tuple(record.tag(), record.detail, record.key), builders_.size());
  if (inserted) {
    Builder& b = *builders_.emplace_back(std::make_unique<Builder>());
    b.group.tag = record.tag();
    b.group.detail = record.detail;
    b.group.key = record.key;
    b.group.kind = record.kind;
    b.group.first_seen_ms = record.time_ms();
    b.group.last_seen_ms = record.time_ms();
    b.first = order;
  }
  Builder& b = *builders_[it->second];
  if (order < b.first) {
    b.first = order;
    b.group.kind = record.kind;
  }
  ++b.group.count;
  b.group.first_seen_ms = std::min(b.group.first_seen_ms, record.time_ms());
  b.group.last_seen_ms = std::max(b.group.last_seen_ms, record.time_ms());
  b.scenes.Add(record.scene);
  b.processes.Add(record.ProcessLabel());
  b.metric.Add(record.metric, order);
  if (keep_sources_) {
    if (file_ == nullptr || *file_ != record.source.file) {
      file_ = std::make_shared<const std::string>(record.source.file);
    }
    b.sources.push_back({order, {file_, record.source.line}});
  }
  if (keep != nullptr) b.issues.push_back({order, keep});
}

std::vector<IssueGroup> IssueGrouper::Finish() && {
  auto by_order = [](const auto& a, const auto& b) { return a.first < b.first; };
  std::vector<IssueGroup> groups;
  groups.reserve(builders_.size());
  for (std::unique_ptr<Builder>& b : builders_) {
    IssueGroup& group = groups.emplace_back(std::move(b->group));
    group.metric = b->metric.metric();
    group.metric_count = b->metric.count();
    group.worst = b->metric.worst();
    group.median = b->metric.median();
    group.scenes = b->scenes.Sorted();
    group.processes = b->processes.Sorted();
    std::sort(b->sources.begin(), b->sources.end(), by_order);
    for (auto& [order, source] : b->sources) group.sources.push_back(std::move(source));
    std::sort(b->issues.begin(), b->issues.end(), by_order);
    for (const auto& [order, issue] : b->issues) group.issues.push_back(issue);
    b.reset();
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

std::vector<IssueGroup> GroupIssues(const std::vector<const IssueRecord*>& records) {
  IssueGrouper grouper(/*keep_sources=*/true);
  for (size_t i = 0; i < records.size(); ++i) {
    grouper.Add(*records[i], {0, static_cast<int64_t>(i)}, records[i]);
  }
  return std::move(grouper).Finish();
}

}  // namespace matrix::report
