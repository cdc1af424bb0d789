#include "matrix/report/issue_filter.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace matrix::report {
namespace {

template <typename Pred>
bool AnyOf(const std::vector<std::string>& values, Pred pred) {
  return values.empty() || std::any_of(values.begin(), values.end(), pred);
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

}  // namespace

bool IssueFilter::Matches(const IssueRecord& record) const {
  if (since_ms.has_value() && record.time_ms() < *since_ms) return false;
  if (until_ms.has_value() && record.time_ms() >= *until_ms) return false;
  return AnyOf(tags,
               [&](const std::string& t) { return absl::EqualsIgnoreCase(t, record.tag()); }) &&
         AnyOf(details,
               [&](const std::string& d) {
                 return absl::EqualsIgnoreCase(d, record.detail) ||
                        (record.detail.empty() && absl::EqualsIgnoreCase(d, "none"));
               }) &&
         AnyOf(keys, [&](const std::string& k) { return absl::StrContains(record.key, k); }) &&
         AnyOf(scenes, [&](const std::string& s) { return s == record.scene; }) &&
         AnyOf(processes, [&](const std::string& p) {
           int32_t pid = 0;
           return p == record.process() ||
                  (AllDigits(p) && absl::SimpleAtoi(p, &pid) && pid == record.pid());
         });
}

bool IssueFilter::empty() const {
  return tags.empty() && details.empty() && keys.empty() && scenes.empty() && processes.empty() &&
         !since_ms.has_value() && !until_ms.has_value();
}

std::vector<const IssueRecord*> SelectIssues(const std::vector<IssueRecord>& records,
                                             const IssueFilter& filter) {
  std::vector<const IssueRecord*> selected;
  for (const IssueRecord& record : records) {
    if (filter.Matches(record)) selected.push_back(&record);
  }
  std::stable_sort(selected.begin(), selected.end(),
                   [](const IssueRecord* a, const IssueRecord* b) {
                     if (a->time_ms() != b->time_ms()) return a->time_ms() < b->time_ms();
                     return a->sequence < b->sequence;
                   });
  return selected;
}

absl::StatusOr<int64_t> ParseTimeSpec(absl::string_view spec, absl::Time now, absl::TimeZone tz) {
  spec = absl::StripAsciiWhitespace(spec);
  if (spec.empty()) return absl::InvalidArgumentError("empty time");
  if (spec == "now") return absl::ToUnixMillis(now);
  if (AllDigits(spec)) {
    int64_t ms = 0;
    if (!absl::SimpleAtoi(spec, &ms)) {
      return absl::InvalidArgumentError(absl::StrCat("time out of range: ", spec));
    }
    return ms;
  }
  // "3d": absl::ParseDuration has no day unit.
  if (spec.size() > 1 && spec.back() == 'd' && AllDigits(spec.substr(0, spec.size() - 1))) {
    int64_t days = 0;
    if (absl::SimpleAtoi(spec.substr(0, spec.size() - 1), &days) && days <= 365 * 1000) {
      return absl::ToUnixMillis(now - absl::Hours(24 * days));
    }
  }
  if (absl::Duration ago; absl::ParseDuration(spec, &ago)) {
    if (ago < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("negative duration: ", spec));
    }
    return absl::ToUnixMillis(now - ago);
  }
  const std::string text(spec);
  absl::Time time;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, text, &time, &error)) return absl::ToUnixMillis(time);
  static constexpr const char* kLocalFormats[] = {
      "%Y-%m-%d %H:%M:%E*S",
      "%Y-%m-%d%ET%H:%M:%E*S",
      "%Y-%m-%d %H:%M",
      "%Y-%m-%d%ET%H:%M",
      "%Y-%m-%d",
  };
  for (const char* format : kLocalFormats) {
    if (absl::ParseTime(format, text, tz, &time, &error)) return absl::ToUnixMillis(time);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot read time \"", spec,
      "\": use 2025-11-21T10:00:00Z, \"2025-11-21 10:00\", 2025-11-21, ms since the epoch, "
      "or a duration before now such as 30m, 2h, 3d"));
}

}  // namespace matrix::report
