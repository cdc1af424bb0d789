#include "matrix/report/text_render.h"


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
#include "internal/text_render_util.h"

namespace matrix::report {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::RepeatedPtrField;
using google::protobuf::Value;

using internal::AddField;
using internal::AddThreadStack;
using internal::CallTreeText;
using internal::CountList;
using internal::MetricLabel;
using internal::MetricValue;
using internal::Pad;
using internal::RenderAnr;
using internal::RenderBlock;
using internal::RenderEvilMethod;
using internal::RenderFrame;
using internal::RenderHeader;
using internal::RenderStartup;
using internal::StackFramesText;
using internal::ZoneName;
using internal::kMaxListed;

// One scalar field value as text (index -1 for a singular field).
std::string ScalarText(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return FormatNumber(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f), 3);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FormatNumber(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f), 3);
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number = rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f);
      const auto* value = f->enum_type()->FindValueByNumber(number);
      return value != nullptr ? value->name() : absl::StrCat(number);
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return TextEscape(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

bool IsDefaultScalar(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return r->GetInt32(m, f) == 0;
    case FieldDescriptor::CPPTYPE_INT64:
      return r->GetInt64(m, f) == 0;
    case FieldDescriptor::CPPTYPE_UINT32:
      return r->GetUInt32(m, f) == 0;
    case FieldDescriptor::CPPTYPE_UINT64:
      return r->GetUInt64(m, f) == 0;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return r->GetDouble(m, f) == 0;
    case FieldDescriptor::CPPTYPE_FLOAT:
      return r->GetFloat(m, f) == 0;
    case FieldDescriptor::CPPTYPE_BOOL:
      return !r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return r->GetEnumValue(m, f) == 0;
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(m, f).empty();
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return !r->HasField(m, f);
  }
  return true;
}

bool IsType(const FieldDescriptor* f, const Descriptor* type) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && f->message_type() == type;
}

void AddScalarLine(std::string& out, int indent, absl::string_view name, absl::string_view text) {
  const std::string continuation = "\n" + Pad(indent + 2);
  absl::StrAppend(&out, Pad(indent), name, ": ", absl::StrReplaceAll(text, {{"\n", continuation}}),
                  "\n");
}

bool IsScalar(const Value& v) {
  return v.kind_case() != Value::kStructValue && v.kind_case() != Value::kListValue;
}

std::string JsonScalarText(const Value& v) {
  switch (v.kind_case()) {
    case Value::kNullValue:
      return "null";
    case Value::kNumberValue:
      return FormatNumber(v.number_value(), 3);
    case Value::kStringValue:
      return TextEscape(v.string_value());
    case Value::kBoolValue:
      return v.bool_value() ? "true" : "false";
    default:
      return "";
  }
}

// An object with "function" and "module" strings: a stack frame.
bool LooksLikeFrame(const Value& v) {
  if (v.kind_case() != Value::kStructValue) return false;
  const auto& fields = v.struct_value().fields();
  auto function = fields.find("function");
  auto module = fields.find("module");
  return function != fields.end() && module != fields.end() &&
         function->second.kind_case() == Value::kStringValue &&
         module->second.kind_case() == Value::kStringValue;
}

void AddJsonFields(std::string& out, const google::protobuf::Struct& object, int indent);

void AddJsonList(std::string& out, absl::string_view name, const google::protobuf::ListValue& list,
                 int indent) {
  if (list.values().empty()) return;
  const bool all_scalars = std::all_of(list.values().begin(), list.values().end(), IsScalar);
  if (all_scalars) {
    std::vector<std::string> parts;
    for (const Value& v : list.values()) parts.push_back(JsonScalarText(v));
    AddScalarLine(out, indent, name, absl::StrJoin(parts, ", "));
    return;
  }
  absl::StrAppend(&out, Pad(indent), name, " (", list.values_size(), "):\n");
  int i = 0;
  for (const Value& v : list.values()) {
    if (LooksLikeFrame(v)) {
      const auto& fields = v.struct_value().fields();
      const std::string& function = fields.at("function").string_value();
      absl::StrAppend(&out, Pad(indent + 2), "#", i, "  ",
                      function.empty() ? "??" : TextEscape(function), "  (",
                      TextEscape(Basename(fields.at("module").string_value())), ")\n");
    } else if (v.kind_case() == Value::kStructValue) {
      absl::StrAppend(&out, Pad(indent + 2), "[", i, "]\n");
      AddJsonFields(out, v.struct_value(), indent + 4);
    } else if (v.kind_case() == Value::kListValue) {
      AddJsonList(out, absl::StrCat("[", i, "]"), v.list_value(), indent + 2);
    } else {
      absl::StrAppend(&out, Pad(indent + 2), "- ", JsonScalarText(v), "\n");
    }
    ++i;
  }
}

void AddJsonFields(std::string& out, const google::protobuf::Struct& object, int indent) {
  std::vector<const std::string*> names;
  for (const auto& [name, value] : object.fields()) names.push_back(&name);
  std::sort(names.begin(), names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (const std::string* name : names) {
    const Value& v = object.fields().at(*name);
    if (v.kind_case() == Value::kStructValue) {
      absl::StrAppend(&out, Pad(indent), TextEscape(*name), ":\n");
      AddJsonFields(out, v.struct_value(), indent + 2);
    } else if (v.kind_case() == Value::kListValue) {
      AddJsonList(out, TextEscape(*name), v.list_value(), indent);
    } else {
      AddScalarLine(out, indent, TextEscape(*name), JsonScalarText(v));
    }
  }
}

}  // namespace

std::string RenderStackFrames(const RepeatedPtrField<proto::StackFrame>& frames, int indent,
                              const RenderOptions& options) {
  return StackFramesText(frames, indent, options);
}

std::string RenderCallTree(const RepeatedPtrField<proto::MethodCall>& calls, int indent) {
  return CallTreeText(calls, indent);
}

std::string RenderMessageFields(const Message& message, int indent, const RenderOptions& options) {
  std::string out;
  const Descriptor* d = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      const int n = r->FieldSize(message, f);
      if (n == 0) continue;
      if (IsType(f, proto::StackFrame::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, " frames):\n");
        out += StackFramesText(r->GetRepeatedFieldRef<proto::StackFrame>(message, f), indent + 2,
                               options);
      } else if (IsType(f, proto::MethodCall::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (call tree, ms):\n");
        out += CallTreeText(r->GetRepeatedFieldRef<proto::MethodCall>(message, f), indent + 2);
      } else if (IsType(f, proto::ThreadStack::descriptor())) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, "):\n");
        for (int k = 0; k < n; ++k) {
          AddThreadStack(
              out, "thread",
              static_cast<const proto::ThreadStack&>(r->GetRepeatedMessage(message, f, k)),
              indent + 2, options);
        }
      } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        absl::StrAppend(&out, Pad(indent), f->name(), " (", n, "):\n");
        for (int k = 0; k < n; ++k) {
          absl::StrAppend(&out, Pad(indent + 2), "[", k, "]\n");
          out += RenderMessageFields(r->GetRepeatedMessage(message, f, k), indent + 4, options);
        }
      } else {
        std::vector<std::string> parts;
        for (int k = 0; k < n; ++k) parts.push_back(ScalarText(message, f, k));
        AddScalarLine(out, indent, f->name(), absl::StrJoin(parts, ", "));
      }
      continue;
    }
    if (IsDefaultScalar(message, f)) continue;
    if (IsType(f, proto::ThreadStack::descriptor())) {
      AddThreadStack(out, absl::StrCat(f->name(), ":"),
                     static_cast<const proto::ThreadStack&>(r->GetMessage(message, f)), indent,
                     options);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      absl::StrAppend(&out, Pad(indent), f->name(), ":\n");
      out += RenderMessageFields(r->GetMessage(message, f), indent + 2, options);
    } else {
      AddScalarLine(out, indent, f->name(), ScalarText(message, f, -1));
    }
  }
  return out;
}

std::string RenderJsonValue(const Value& value, int indent) {
  std::string out;
  if (value.kind_case() == Value::kStructValue) {
    AddJsonFields(out, value.struct_value(), indent);
  } else if (value.kind_case() == Value::kListValue) {
    AddJsonList(out, "values", value.list_value(), indent);
  } else {
    absl::StrAppend(&out, Pad(indent), JsonScalarText(value), "\n");
  }
  return out;
}

std::string RenderIssue(const IssueRecord& record, const RenderOptions& options) {
  std::string out;
  RenderHeader(out, record, options);
  const proto::Issue& issue = record.issue;
  switch (issue.report_case()) {
    case proto::Issue::kAnr:
      RenderAnr(out, issue.anr(), options);
      break;
    case proto::Issue::kEvilMethod:
      RenderEvilMethod(out, issue.evil_method(), options);
      break;
    case proto::Issue::kFrame:
      RenderFrame(out, issue.frame());
      break;
    case proto::Issue::kStartup:
      RenderStartup(out, issue.startup());
      break;
    case proto::Issue::kBlock:
      RenderBlock(out, issue.block(), options);
      break;
    default:
      if (const Message* report = record.report(); report != nullptr) {
        absl::StrAppend(&out, TextEscape(record.kind), ":\n");
        out += RenderMessageFields(*report, 2, options);
      } else if (record.unknown_fields.empty()) {
        out += "(no report)\n";
      }
      break;
  }
  // Fields this build does not know (a newer report kind): shown raw.
  for (const auto& [name, value] : record.unknown_fields) {
    absl::StrAppend(&out, TextEscape(name),
                    " (not known to this build of matrix-report; raw fields):\n");
    out += RenderJsonValue(value, 2);
  }
  return out;
}

std::string RenderGroups(const std::vector<IssueGroup>& groups, const RenderOptions& options) {
  int64_t issues = 0;
  for (const IssueGroup& g : groups) issues = SaturatingAdd(issues, g.count);
  std::string out = absl::StrCat(groups.size(), groups.size() == 1 ? " group" : " groups", " of ",
                                 issues, issues == 1 ? " issue" : " issues",
                                 " (by tag, detail and key; most frequent first)\n");
  int n = 0;
  for (const IssueGroup& g : groups) {
    absl::StrAppendFormat(&out, "\n#%d  %s  x%d\n", ++n, TextEscape(g.TagDetail()), g.count);
    AddField(out, "key", g.key.empty() ? "(none)" : TextEscape(g.key), 4);
    if (g.metric_count > 0) {
      std::string text = absl::StrCat("worst ", MetricValue(g.metric, g.worst), ", median ",
                                      MetricValue(g.metric, g.median));
      if (g.metric_count != g.count) absl::StrAppend(&text, " (of ", g.metric_count, " issues)");
      AddField(out, MetricLabel(g.metric), text, 4);
    }
    if (g.first_seen_ms == g.last_seen_ms) {
      AddField(out, "seen",
               absl::StrCat(FormatTimeMs(g.first_seen_ms, options.time_zone), " ",
                            ZoneName(g.first_seen_ms, options.time_zone)),
               4);
    } else {
      AddField(out, "first seen", FormatTimeMs(g.first_seen_ms, options.time_zone), 4);
      AddField(out, "last seen",
               absl::StrCat(FormatTimeMs(g.last_seen_ms, options.time_zone), " ",
                            ZoneName(g.last_seen_ms, options.time_zone), " (",
                            FormatDurationMs(DifferenceMs(g.last_seen_ms, g.first_seen_ms)),
                            " later)"),
               4);
    }
    if (!g.scenes.empty()) AddField(out, "scenes", CountList(g.scenes, 8), 4);
    if (!g.processes.empty()) AddField(out, "processes", CountList(g.processes), 4);
  }
  return out;
}

namespace {

// "4120 fps, 3 slow_method (rotated out by their own kind)", or "".
std::string SinkDropsText(const absl::flat_hash_map<std::string, proto::SinkDrops>& by_process) {
  proto::SinkDrops total;
  for (const auto& [process, d] : by_process) {
    total.set_hang(SaturatingAdd(total.hang(), d.hang()));
    total.set_fps(SaturatingAdd(total.fps(), d.fps()));
    total.set_slow_method(SaturatingAdd(total.slow_method(), d.slow_method()));
    total.set_startup(SaturatingAdd(total.startup(), d.startup()));
    total.set_block(SaturatingAdd(total.block(), d.block()));
    total.set_other(SaturatingAdd(total.other(), d.other()));
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"fps", total.fps()},
                                {"hang", total.hang()},
                                {"slow_method", total.slow_method()},
                                {"startup", total.startup()},
                                {"block", total.block()},
                                {"other", total.other()}}) {
    if (n > 0) parts.push_back(absl::StrCat(n, " ", name));
  }
  if (parts.empty()) return "";
  return absl::StrCat(absl::StrJoin(parts, ", "),
                      " (oldest issues rotated out of the sink's files by their own kind)");
}

}  // namespace

// One row per tag/detail: issues, distinct keys, worst and median metric.
struct IssueSummary::Row {
  std::string name;
  int64_t issues = 0;
  absl::flat_hash_set<std::string> keys;
  MetricStats metric;
};

IssueSummary::IssueSummary() = default;
IssueSummary::~IssueSummary() = default;

void IssueSummary::AddRead(const IssueRecord& r) {
  ++total_;
  if (!r.issue.has_sink_dropped()) return;
  // Each line carries its sink's counts so far (SinkDrops, cumulative), so
  // the largest per process is its total.
  const proto::SinkDrops& d = r.issue.sink_dropped();
  proto::SinkDrops& max = drops_by_process_[absl::StrCat(r.process(), "/", r.pid())];
  max.set_hang(std::max(max.hang(), d.hang()));
  max.set_fps(std::max(max.fps(), d.fps()));
  max.set_slow_method(std::max(max.slow_method(), d.slow_method()));
  max.set_startup(std::max(max.startup(), d.startup()));
  max.set_block(std::max(max.block(), d.block()));
  max.set_other(std::max(max.other(), d.other()));
}

void IssueSummary::AddSelected(const IssueRecord& r, IssueOrder order) {
  if (selected_ == 0) first_ms_ = last_ms_ = r.time_ms();
  ++selected_;
  if (r.has_unknown_fields) ++with_unknown_;
  if (r.kind_unknown_to_build) unknown_kinds_.Add(r.kind);
  first_ms_ = std::min(first_ms_, r.time_ms());
  last_ms_ = std::max(last_ms_, r.time_ms());
  processes_.Add(r.ProcessLabel());
  scenes_.Add(r.scene);
  std::string name = r.TagDetail();
  auto [it, inserted] = row_index_.try_emplace(name, rows_.size());
  if (inserted) {
    rows_.push_back(std::make_unique<Row>());
    rows_.back()->name = std::move(name);
  }
  Row& row = *rows_[it->second];
  ++row.issues;
  row.keys.insert(r.key);
  row.metric.Add(r.metric, order);
}

std::string IssueSummary::Render(const ReadStats& stats, bool filtered,
                                 const RenderOptions& options) const {
  std::string out;
  std::vector<std::string> listed;
  for (size_t i = 0; i < stats.files.size() && i < kMaxListed; ++i) {
    listed.push_back(TextEscape(stats.files[i]));
  }
  std::string files = absl::StrJoin(listed, ", ");
  if (stats.files.size() > kMaxListed)
    absl::StrAppend(&files, " and ", stats.files.size() - kMaxListed, " more");
  std::string issues = filtered ? absl::StrCat(selected_, " of ", total_, " match the filters")
                                : absl::StrCat(total_);
  absl::StrAppend(&issues, " (", stats.files.size(), stats.files.size() == 1 ? " file" : " files",
                  stats.files.empty() ? "" : ": ", files, ")");
  AddField(out, "issues", issues);
  std::string lines =
      absl::StrCat(stats.lines, " read, ", stats.malformed_lines, " malformed");
  if (stats.malformed_lines > 0) absl::StrAppend(&lines, " (skipped; see stderr)");
  AddField(out, "lines", lines);
  if (!stats.errors.empty()) {
    AddField(out, "unreadable",
             absl::StrCat(stats.errors.size(), stats.errors.size() == 1 ? " input" : " inputs",
                          " (listed on stderr)"));
  }
  if (with_unknown_ > 0) {
    std::string text =
        absl::StrCat(with_unknown_, with_unknown_ == 1 ? " issue has" : " issues have",
                     " fields this build does not know");
    if (std::vector<NameCount> kinds = unknown_kinds_.Sorted(); !kinds.empty()) {
      absl::StrAppend(&text, "; report kinds: ", CountList(kinds),
                      " (grouped by their key, shown as raw fields)");
    }
    AddField(out, "unknown", text);
  }
  if (std::string dropped = SinkDropsText(drops_by_process_); !dropped.empty()) {
    AddField(out, "dropped", dropped);
  }
  if (selected_ == 0) return out;

  AddField(out, "time",
           absl::StrCat(FormatTimeMs(first_ms_, options.time_zone), " .. ",
                        FormatTimeMs(last_ms_, options.time_zone), " ",
                        ZoneName(last_ms_, options.time_zone), " (",
                        FormatDurationMs(DifferenceMs(last_ms_, first_ms_)), ")"));
  if (std::vector<NameCount> counts = processes_.Sorted(); !counts.empty()) {
    AddField(out, "processes", CountList(counts));
  }
  if (std::vector<NameCount> counts = scenes_.Sorted(); !counts.empty()) {
    AddField(out, "scenes", CountList(counts, 8));
  }

  std::vector<const Row*> rows;
  rows.reserve(rows_.size());
  for (const std::unique_ptr<Row>& row : rows_) rows.push_back(row.get());
  std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) {
    return a->issues != b->issues ? a->issues > b->issues : a->name < b->name;
  });
  std::vector<std::string> names;
  names.reserve(rows.size());
  size_t width = 10;
  for (const Row* row : rows) {
    names.push_back(TextEscape(row->name));
    width = std::max(width, names.back().size());
  }
  absl::StrAppendFormat(&out, "\n%-*s  %6s  %6s  %-12s  %s\n", static_cast<int>(width),
                        "tag/detail", "issues", "groups", "worst", "median");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row* row = rows[i];
    std::string worst = "-";
    std::string median = "-";
    if (row->metric.count() > 0) {
      worst = MetricValue(row->metric.metric(), row->metric.worst());
      median = MetricValue(row->metric.metric(), row->metric.median());
    }
    absl::StrAppendFormat(&out, "%-*s  %6d  %6d  %-12s  %s\n", static_cast<int>(width),
                          names[i], row->issues, row->keys.size(), worst, median);
  }
  return out;
}

std::string RenderSummary(const ReadResult& read, const std::vector<const IssueRecord*>& selected,
                          bool filtered, const RenderOptions& options) {
  IssueSummary summary;
  for (const IssueRecord& r : read.records) summary.AddRead(r);
  for (size_t i = 0; i < selected.size(); ++i) {
    summary.AddSelected(*selected[i], {0, static_cast<int64_t>(i)});
  }
  // A ReadResult lists its malformed lines.
  ReadStats stats = read;
  stats.malformed_lines = static_cast<int64_t>(read.malformed.size());
  return summary.Render(stats, filtered, options);
}

}  // namespace matrix::report
