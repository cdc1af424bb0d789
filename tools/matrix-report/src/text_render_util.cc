#include "internal/text_render_util.h"

// matrix-report's text renderer: the shared pieces (internal/text_render_util.h).

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/format_util.h"

namespace matrix::report::internal {

using google::protobuf::RepeatedPtrField;

std::string Pad(int indent) { return std::string(static_cast<size_t>(std::max(indent, 0)), ' '); }

// "label      value" with continuation lines of `value` aligned under it.
void AddField(std::string& out, absl::string_view label, absl::string_view value, int indent) {
  const std::string continuation = "\n" + Pad(indent + kLabelWidth + 1);
  absl::StrAppendFormat(&out, "%s%-*s %s\n", Pad(indent), kLabelWidth, label,
                        absl::StrReplaceAll(value, {{"\n", continuation}}));
}

std::string Ms(double ms) { return absl::StrCat(FormatFixed(ms, 1), " ms"); }

std::string MetricValue(const Metric& metric, double value) {
  if (metric.unit == "ms") return Ms(value);
  return absl::StrCat(FormatFixed(value, 1), metric.unit.empty() ? "" : " ", metric.unit);
}

// The metric's last word: "cost_ms" -> "cost", "startup_duration_ms" ->
// "duration", "fps" -> "fps".
std::string MetricLabel(const Metric& metric) {
  absl::string_view name = metric.name;
  if (absl::EndsWith(name, "_ms")) name.remove_suffix(3);
  if (const size_t underscore = name.rfind('_'); underscore != absl::string_view::npos) {
    name.remove_prefix(underscore + 1);
  }
  return std::string(name);
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

std::string Percent(double p) { return absl::StrCat(FormatFixed(p, 1), "%"); }

std::string GiB(double bytes) {
  return absl::StrCat(FormatFixed(bytes / (1024.0 * 1024 * 1024), 1), " GiB");
}

std::string ZoneName(int64_t time_ms, absl::TimeZone tz) {
  return absl::FormatTime("%Z", absl::FromUnixMillis(time_ms), tz);
}

// "a: 3, b: 2, c: 1 and 4 more".
std::string CountList(const std::vector<NameCount>& counts, size_t max_listed) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < counts.size() && i < max_listed; ++i) {
    parts.push_back(absl::StrCat(TextEscape(counts[i].name), ": ", counts[i].count));
  }
  std::string out = absl::StrJoin(parts, ", ");
  if (counts.size() > max_listed)
    absl::StrAppend(&out, " and ", counts.size() - max_listed, " more");
  return out;
}
std::string ThreadStackTitle(const proto::ThreadStack& stack) {
  std::string title = absl::StrCat("tid ", stack.tid());
  if (!stack.thread_name().empty()) {
    absl::StrAppend(&title, " (", TextEscape(stack.thread_name()), ")");
  }
  if (stack.captured_at_ms() != 0) {
    absl::StrAppend(&title, ", captured at ", Ms(stack.captured_at_ms()));
  }
  return title;
}

void AddThreadStack(std::string& out, absl::string_view label, const proto::ThreadStack& stack,
                    int indent, const RenderOptions& options) {
  absl::StrAppend(&out, Pad(indent), label, " ", ThreadStackTitle(stack), ":\n");
  if (!stack.error().empty())
    absl::StrAppend(&out, Pad(indent + 2), "capture error: ", TextEscape(stack.error()), "\n");
  if (stack.frames().empty()) {
    absl::StrAppend(&out, Pad(indent + 2), "(no frames)\n");
  } else {
    out += StackFramesText(stack.frames(), indent + 2, options);
  }
}

void AddCallTree(std::string& out, const RepeatedPtrField<proto::MethodCall>& calls,
                 bool truncated) {
  if (calls.empty()) return;
  absl::StrAppend(&out, "call tree (ms, pre-order",
                  truncated ? "; the trace buffer had wrapped, "
                              "the oldest calls are missing"
                            : "",
                  "):\n");
  out += CallTreeText(calls, 2);
}

std::string QueueCostsText(const proto::QueueCosts& q) {
  return absl::StrCat("input ", Ms(q.input_ms()), ", animation ", Ms(q.animation_ms()),
                      ", traversal ", Ms(q.traversal_ms()), ", commit ", Ms(q.commit_ms()));
}

std::string MessageText(const proto::MessageInfo& m) {
  std::vector<std::string> parts;
  if (!m.target().empty()) parts.push_back(TextEscape(m.target()));
  if (!m.callback().empty()) parts.push_back(absl::StrCat("callback ", TextEscape(m.callback())));
  parts.push_back(absl::StrCat("what ", m.what()));
  return absl::StrJoin(parts, ", ");
}

std::string CpuUsageText(double usage) {
  return usage < 0 ? "not sampled (dispatch too short)" : Percent(usage);
}

}  // namespace matrix::report::internal
