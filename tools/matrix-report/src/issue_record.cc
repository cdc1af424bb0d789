#include "matrix/report/issue_record.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/util/json_util.h"
#include "internal/issue_metric.h"
#include "matrix/core/proto_json.h"
#include "matrix/report/format_util.h"
#include "matrix/trace/frame_stats.h"

namespace matrix::report {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::Value;
using internal::kSceneFields;
using internal::MetricSpec;
using internal::MetricSpecFor;

// A singular field of `message` by proto name, or null.
const FieldDescriptor* Field(const Message& message, absl::string_view name) {
  const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(std::string(name));
  if (field == nullptr || field->is_repeated()) return nullptr;
  return field;
}

std::string StringField(const Message& message, absl::string_view name) {
  const FieldDescriptor* field = Field(message, name);
  if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_STRING) return "";
  return message.GetReflection()->GetString(message, field);
}

std::string EnumField(const Message& message, absl::string_view name) {
  const FieldDescriptor* field = Field(message, name);
  if (field == nullptr || field->cpp_type() != FieldDescriptor::CPPTYPE_ENUM) return "";
  const int number = message.GetReflection()->GetEnumValue(message, field);
  if (number == 0) return "";  // *_UNSPECIFIED: no detail.
  const auto* value = field->enum_type()->FindValueByNumber(number);
  return value != nullptr ? value->name() : absl::StrCat(number);
}

// A numeric field (any width) as a double.
bool NumberField(const Message& message, absl::string_view name, double* out) {
  const FieldDescriptor* field = Field(message, name);
  if (field == nullptr) return false;
  const Reflection* r = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      *out = r->GetDouble(message, field);
      return true;
    case FieldDescriptor::CPPTYPE_FLOAT:
      *out = r->GetFloat(message, field);
      return true;
    case FieldDescriptor::CPPTYPE_INT32:
      *out = r->GetInt32(message, field);
      return true;
    case FieldDescriptor::CPPTYPE_INT64:
      *out = static_cast<double>(r->GetInt64(message, field));
      return true;
    case FieldDescriptor::CPPTYPE_UINT32:
      *out = r->GetUInt32(message, field);
      return true;
    case FieldDescriptor::CPPTYPE_UINT64:
      *out = static_cast<double>(r->GetUInt64(message, field));
      return true;
    default:
      return false;
  }
}

// The same lookups in a JSON object of an unknown report kind.
const Value* StructField(const Value& object, absl::string_view name) {
  if (object.kind_case() != Value::kStructValue) return nullptr;
  const auto& fields = object.struct_value().fields();
  auto it = fields.find(std::string(name));
  return it == fields.end() ? nullptr : &it->second;
}

std::string StructString(const Value& object, absl::string_view name) {
  const Value* v = StructField(object, name);
  return v != nullptr && v->kind_case() == Value::kStringValue ? v->string_value() : "";
}

// Numbers arrive as JSON numbers, or as strings for 64-bit integers.
bool StructNumber(const Value& object, absl::string_view name, double* out) {
  const Value* v = StructField(object, name);
  if (v == nullptr) return false;
  if (v->kind_case() == Value::kNumberValue) {
    *out = v->number_value();
    return true;
  }
  return v->kind_case() == Value::kStringValue && absl::SimpleAtod(v->string_value(), out);
}

const google::protobuf::OneofDescriptor* ReportOneof() {
  static const google::protobuf::OneofDescriptor* const oneof =
      proto::Issue::descriptor()->FindOneofByName("report");
  return oneof;
}

bool IssueHasField(absl::string_view json_key) {
  const Descriptor* d = proto::Issue::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->name() == json_key || d->field(i)->json_name() == json_key) return true;
  }
  return false;
}

}  // namespace

std::string IssueRecord::TagDetail() const {
  return detail.empty() ? tag() : absl::StrCat(tag(), "/", detail);
}

std::string IssueRecord::ProcessLabel() const {
  if (process().empty()) return pid() != 0 ? absl::StrCat("pid ", pid()) : "";
  return pid() != 0 ? absl::StrCat(process(), " (pid ", pid(), ")") : process();
}

std::string IssueRecord::KindDetail() const {
  if (detail.empty()) return kind;
  // "anr" with detail "ANR" reads "ANR", not "anr ANR".
  if (absl::AsciiStrToLower(detail) == absl::AsciiStrToLower(kind)) return detail;
  return kind.empty() ? detail : absl::StrCat(kind, " ", detail);
}

const Message* IssueRecord::report() const {
  const FieldDescriptor* field =
      issue.GetReflection()->GetOneofFieldDescriptor(issue, ReportOneof());
  if (field == nullptr) return nullptr;
  return &issue.GetReflection()->GetMessage(issue, field);
}

const Value* IssueRecord::unknown_report() const {
  if (!kind_unknown_to_build) return nullptr;
  for (const auto& [name, value] : unknown_fields) {
    if (name == kind) return &value;
  }
  return nullptr;
}

void DeriveFields(IssueRecord& record) {
  record.kind.clear();
  record.kind_unknown_to_build = false;
  record.detail.clear();
  record.scene.clear();
  record.metric = Metric{};
  std::string stack_key;

  if (const Message* report = record.report(); report != nullptr) {
    record.kind =
        record.issue.GetReflection()->GetOneofFieldDescriptor(record.issue, ReportOneof())->name();
    record.detail = EnumField(*report, "detail");
    for (absl::string_view name : kSceneFields) {
      record.scene = StringField(*report, name);
      if (!record.scene.empty()) break;
    }
    stack_key = StringField(*report, "stack_key");
    const MetricSpec& spec = MetricSpecFor(record.kind);
    double count = 0;
    bool counted = spec.requires_field.empty() ||
                   (NumberField(*report, spec.requires_field, &count) &&
                    count >= spec.requires_at_least);
    if (record.kind == "frame" && counted) counted = HasFrameRate(record.issue.frame());
    if (double value = 0;
        counted && NumberField(*report, spec.field, &value) && std::isfinite(value)) {
      record.metric = {std::string(spec.field), std::string(spec.unit), value,
                       spec.higher_is_worse};
    }
  } else {
    for (const auto& [name, value] : record.unknown_fields) {
      if (value.kind_case() != Value::kStructValue) continue;
      record.kind = name;
      record.kind_unknown_to_build = true;
      record.detail = StructString(value, "detail");
      for (absl::string_view scene_field : kSceneFields) {
        record.scene = StructString(value, scene_field);
        if (!record.scene.empty()) break;
      }
      stack_key = StructString(value, "stack_key");
      const MetricSpec& spec = MetricSpecFor(record.kind);
      double count = 0;
      const bool counted = spec.requires_field.empty() ||
                           (StructNumber(value, spec.requires_field, &count) &&
                            count >= spec.requires_at_least);
      if (double number = 0;
          counted && StructNumber(value, spec.field, &number) && std::isfinite(number)) {
        record.metric = {std::string(spec.field), std::string(spec.unit), number,
                         spec.higher_is_worse};
      }
      break;
    }
  }

  record.key = record.issue.key();
  if (record.key.empty()) record.key = !stack_key.empty() ? stack_key : record.scene;
}

absl::StatusOr<IssueRecord> ParseIssueLine(absl::string_view line, SourceLocation source) {
  IssueRecord record;
  record.source = std::move(source);
  const google::protobuf::StringPiece input(line.data(), line.size());
  google::protobuf::util::JsonParseOptions strict;
  if (!google::protobuf::util::JsonStringToMessage(input, &record.issue, strict).ok()) {
    // Either not an Issue at all, or one from a newer matrix-cpp with fields
    // this build does not know: parse again without them, and keep the
    // unknown top-level ones (a new report kind) as JSON values.
    record.issue.Clear();
    google::protobuf::util::JsonParseOptions lenient;
    lenient.ignore_unknown_fields = true;
    const auto status = google::protobuf::util::JsonStringToMessage(input, &record.issue, lenient);
    if (!status.ok()) {
      // The parser's message may continue with the input and a caret on
      // further lines; one line is enough (and the input can be long).
      absl::string_view message(status.message().data(), status.message().size());
      message = message.substr(0, message.find('\n'));
      absl::ConsumePrefix(&message, ": ");
      return absl::InvalidArgumentError(absl::StrCat("not a JSON issue: ", message));
    }
    record.has_unknown_fields = true;
    google::protobuf::Struct object;
    if (google::protobuf::util::JsonStringToMessage(input, &object).ok()) {
      for (const auto& [name, value] : object.fields()) {
        if (!IssueHasField(name)) record.unknown_fields.emplace_back(name, value);
      }
      std::sort(record.unknown_fields.begin(), record.unknown_fields.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
    }
  }
  if (record.issue.tag().empty()) {
    return absl::InvalidArgumentError("not a matrix issue: no \"tag\"");
  }
  DeriveFields(record);
  return record;
}

IssueRecord RecordFromIssue(proto::Issue issue, SourceLocation source) {
  IssueRecord record;
  record.issue = std::move(issue);
  record.source = std::move(source);
  DeriveFields(record);
  return record;
}

std::string RecordToJson(const IssueRecord& record) {
  // The form the library writes (Issue::ToJson).
  std::string json = ProtoToJson(record.issue);
  if (json.size() < 2 || json.back() != '}') json = "{}";
  if (record.unknown_fields.empty()) return json;
  json.pop_back();  // The closing brace; fields are appended before it.
  bool first = json.size() == 1;
  for (const auto& [name, value] : record.unknown_fields) {
    std::string value_json;
    if (!google::protobuf::util::MessageToJsonString(value, &value_json).ok()) continue;
    absl::StrAppend(&json, first ? "" : ",", JsonQuote(name), ":", value_json);
    first = false;
  }
  json += '}';
  return json;
}

namespace internal {

const MetricSpec& MetricSpecFor(absl::string_view kind) {
  static constexpr MetricSpec kMetricSpecs[] = {
      {"frame", "fps", "fps", false, "frames",
       static_cast<double>(FrameStatsCollector::kMinFramesForRate)},
      {"startup", "startup_duration_ms", "ms", true},
  };
  static constexpr MetricSpec kDefaultMetric = {"", "cost_ms", "ms", true};
  for (const MetricSpec& spec : kMetricSpecs) {
    if (spec.kind == kind) return spec;
  }
  return kDefaultMetric;
}

}  // namespace internal
}  // namespace matrix::report
