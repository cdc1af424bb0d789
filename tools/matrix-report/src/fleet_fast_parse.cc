#include "internal/fleet_fast_parse.h"

#include <simdjson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bitset>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "google/protobuf/descriptor.h"
#include "internal/issue_metric.h"
#include "matrix/proto/issue.pb.h"

// FastIssueParser (internal/fleet_fast_parse.h): simdjson's DOM, checked
// against a table made once from the Issue descriptor by protobuf's strict
// JSON rules, the row's columns taken on the way.

namespace matrix::report::internal {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Fields and oneofs per message the seen-sets cover.
constexpr int kMaxFields = 128;

// The bytes at the start of `text` that are in whole runs of 16 with no
// byte below 0x20 and no backslash (0 without SSE2).
size_t CleanRun(absl::string_view text) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i top_control = _mm_set1_epi8(0x1F);
  for (; i + 16 <= text.size(); i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    // A byte is at most 0x1F when subtracting 0x1F (saturating) leaves 0.
    const __m128i control =
        _mm_cmpeq_epi8(_mm_subs_epu8(bytes, top_control), _mm_setzero_si128());
    const __m128i special = _mm_or_si128(control, _mm_cmpeq_epi8(bytes, backslash));
    if (_mm_movemask_epi8(special) != 0) break;
  }
#endif
  return i;
}

// Whether the raw line holds anything the strict path must judge: a control
// character (raw, or escaped as \u0000), or an escaped UTF-16 surrogate
// (simdjson and protobuf may treat a lone one differently).
bool NeedsStrictPath(absl::string_view line) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  size_t i = 0;
  while (i < line.size()) {
    i += CleanRun(line.substr(i));  // Sixteen bytes at a time.
    if (i == line.size()) break;
    if (i + 8 <= line.size()) {
      // Eight bytes at a time while none is below 0x20 or a backslash.
      uint64_t word = 0;
      std::memcpy(&word, line.data() + i, sizeof(word));
      const uint64_t control = (word - kOnes * 0x20) & ~word & kHigh;
      const uint64_t not_backslash = word ^ (kOnes * '\\');
      const uint64_t backslash = (not_backslash - kOnes) & ~not_backslash & kHigh;
      if ((control | backslash) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c < 0x20) return true;
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 < line.size() && line[i + 1] == 'u') {
      if (i + 5 >= line.size()) return true;
      uint32_t code = 0;
      for (size_t k = i + 2; k < i + 6; ++k) {
        const char h = line[k];
        const int digit = h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : -1;
        if (digit < 0) return true;
        code = code * 16 + static_cast<uint32_t>(digit);
      }
      if (code == 0 || (code >= 0xD800 && code <= 0xDFFF)) return true;
    }
    i += 2;  // The backslash and the escaped character.
  }
  return false;
}

// "0" or -?[1-9][0-9]*: an integer as protobuf's JSON form writes 64-bit
// ones.
bool IsDecimalInteger(std::string_view text) {
  if (text == "0") return true;
  size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  if (i >= text.size() || text[i] < '1' || text[i] > '9') return false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// An integer value (a JSON integer, or a decimal string) as int64 or uint64.
struct Integer {
  bool negative = false;
  uint64_t magnitude = 0;
};
bool ReadInteger(const element& value, Integer& out) {
  switch (value.type()) {
    case element_type::INT64: {
      const int64_t v = value.get_int64().value_unsafe();
      out.negative = v < 0;
      out.magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      return true;
    }
    case element_type::UINT64:
      out.negative = false;
      out.magnitude = value.get_uint64().value_unsafe();
      return true;
    case element_type::STRING: {
      const std::string_view text = value.get_string().value_unsafe();
      if (!IsDecimalInteger(text)) return false;
      out.negative = text[0] == '-';
      const std::string_view digits = out.negative ? text.substr(1) : text;
      return absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &out.magnitude);
    }
    default:
      return false;
  }
}

// The integer in [-(low_magnitude), high], as int64 (signed fields) or
// uint64.
bool InRange(const Integer& v, uint64_t low_magnitude, uint64_t high) {
  return v.negative ? v.magnitude <= low_magnitude : v.magnitude <= high;
}

// Where a value the row reads is kept while a line is walked: text (views
// into the line's parse) first, then numbers.
// kDetail is the enum value's name (empty for 0, as DeriveFields has it);
// kMetric and kRequires the report kind's MetricSpec field and
// requires_field; kFps to kDropFrozen Issue.frame's columns; kBlockStart and
// kBlockEnd Issue.block's id.
enum Slot : uint8_t {
  kTag, kKey, kProcess, kHostId, kHostName, kBuildId, kVersion, kDetail, kScene, kFirstScene,
  kStackKey, kTextSlots,
  kTimeMs = kTextSlots, kPid, kMetric, kRequires, kFps, kFrames, kDroppedFrames, kDropBest,
  kDropNormal, kDropMiddle, kDropHigh, kDropFrozen, kBlockStart, kBlockEnd, kSlots,
  kNoSlot = kSlots
};

// A number as the generated accessors return it: `i` for integer and bool
// fields, `d` as NumberField (issue_record.cc) reads any numeric field.
struct Number {
  int64_t i = 0;
  double d = 0;
};

// The values of one line, by slot (absent fields keep proto3's defaults).
struct Values {
  absl::string_view text[kTextSlots];
  Number numbers[kSlots - kTextSlots];
  int report = -1;  // Index of the set report kind in Schema::kinds.

  Number& number(Slot slot) { return numbers[slot - kTextSlots]; }
  void Clear() {
    for (absl::string_view& t : text) t = {};
    for (Number& n : numbers) n = {};
    report = -1;
  }
};

// A field's JSON form; kInt32 to kDouble are the numeric ones, kUndecidable
// (maps, bytes) is left to the strict path.
enum class Type : uint8_t {
  kString, kInt32, kInt64, kUInt32, kUInt64, kFloat, kDouble, kBool, kEnum, kMessage, kUndecidable
};

struct MessageSpec;

// An enum's value names, each with the name DeriveFields reports for its
// number (empty for 0).
struct EnumSpec {
  absl::flat_hash_map<std::string, std::string> detail_by_name;
};

struct FieldSpec {
  std::string name;  // The proto name.
  Type type = Type::kUndecidable;
  bool repeated = false;
  int index = 0;   // In its message (the seen-set's bit).
  int oneof = -1;  // A real oneof's index, or -1.
  const MessageSpec* message = nullptr;
  const EnumSpec* enums = nullptr;
  Slot slots[2] = {kNoSlot, kNoSlot};
  int report = -1;  // A member of Issue's `report` oneof: its kind's index.
};

struct MessageSpec {
  bool undecidable = false;  // Well-known types, too many fields.
  std::vector<FieldSpec> fields;                  // In field number order.
  absl::flat_hash_map<std::string, int> by_name;  // Proto and JSON names.

  // The field named `key`, looked for first among the three after `next`
  // (the printer writes fields in number order), else by hash.
  const FieldSpec* Find(std::string_view key, size_t& next) const {
    for (size_t i = next; i < fields.size() && i < next + 3; ++i) {
      if (fields[i].name == key) {
        next = i + 1;
        return &fields[i];
      }
    }
    auto it = by_name.find(absl::string_view(key.data(), key.size()));
    return it == by_name.end() ? nullptr : &fields[static_cast<size_t>(it->second)];
  }
};

// A member of Issue's `report` oneof, with what DeriveFields reads of it.
struct ReportKind {
  std::string name;
  const MetricSpec* metric = nullptr;
  bool has_metric = false;    // A numeric field named metric->field.
  bool has_requires = false;  // A numeric field named metric->requires_field.
  bool frame = false;         // Issue.frame, whose columns the row has.
  bool block = false;         // Issue.block, whose id is its own.
};

// The table the walk follows, made once from the descriptors: the messages
// whose values the row reads have specs of their own (their fields
// slotted); every other message type has one, for checking only.
class Schema {
 public:
  Schema() {
    // Fields DeriveFields uses only when a report has them.
    for (Slot slot : {kDetail, kScene, kFirstScene, kStackKey, kMetric, kRequires}) {
      found_[slot] = true;
    }
    issue_ = Compile(proto::Issue::descriptor(), Role::kIssue, -1);
    for (bool found : found_) usable_ = usable_ && found;
  }

  // False when Issue's fields are not what the row reads (then every line
  // goes to the strict path).
  bool usable() const { return usable_; }
  const MessageSpec& issue() const { return *issue_; }
  const ReportKind& kind(int index) const { return kinds_[static_cast<size_t>(index)]; }

 private:
  enum class Role { kCheck, kIssue, kApp, kReport, kDropLevel };

  const MessageSpec* Compile(const Descriptor* d, Role role, int kind) {
    if (role == Role::kCheck) {
      if (auto it = checked_.find(d); it != checked_.end()) return it->second;
    }
    MessageSpec& spec = messages_.emplace_back();
    if (role == Role::kCheck) checked_[d] = &spec;  // Before its fields: types may recurse.
    if (d->field_count() > kMaxFields || d->oneof_decl_count() > kMaxFields ||
        d->file()->package() == "google.protobuf") {
      spec.undecidable = true;
      return &spec;
    }
    std::vector<const FieldDescriptor*> by_number;
    for (int i = 0; i < d->field_count(); ++i) by_number.push_back(d->field(i));
    std::sort(by_number.begin(), by_number.end(),
              [](const FieldDescriptor* a, const FieldDescriptor* b) {
                return a->number() < b->number();
              });
    for (const FieldDescriptor* f : by_number) {
      FieldSpec field = Field(f, role, kind);
      const int at = static_cast<int>(spec.fields.size());
      spec.by_name.emplace(f->name(), at);
      spec.by_name.emplace(f->json_name(), at);
      spec.fields.push_back(std::move(field));
    }
    return &spec;
  }

  FieldSpec Field(const FieldDescriptor* f, Role role, int kind) {
    FieldSpec field;
    field.name = f->name();
    field.repeated = f->is_repeated();
    field.index = f->index();
    if (const auto* oneof = f->real_containing_oneof(); oneof != nullptr) {
      field.oneof = oneof->index();
    }
    field.type = TypeOf(f);
    if (field.type == Type::kEnum) field.enums = EnumOf(f->enum_type());
    if (field.type == Type::kMessage) {
      Role sub = Role::kCheck;
      int sub_kind = -1;
      if (field.repeated) {
        // Checked, never stored.
      } else if (role == Role::kIssue && f->name() == "app") {
        sub = Role::kApp;
      } else if (role == Role::kIssue && field.oneof >= 0 &&
                 f->containing_oneof()->name() == "report") {
        sub = Role::kReport;
        sub_kind = field.report = AddKind(f);
      } else if (role == Role::kReport && kinds_[static_cast<size_t>(kind)].frame &&
                 f->name() == "drop_level") {
        sub = Role::kDropLevel;
      }
      field.message = Compile(f->message_type(), sub, sub_kind);
    } else if (!field.repeated) {
      Slots(f, role, kind, field);
    }
    return field;
  }

  static Type TypeOf(const FieldDescriptor* f) {
    if (f->is_map()) return Type::kUndecidable;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: return Type::kMessage;
      case FieldDescriptor::CPPTYPE_STRING:
        return f->type() == FieldDescriptor::TYPE_BYTES ? Type::kUndecidable : Type::kString;
      case FieldDescriptor::CPPTYPE_INT32: return Type::kInt32;
      case FieldDescriptor::CPPTYPE_INT64: return Type::kInt64;
      case FieldDescriptor::CPPTYPE_UINT32: return Type::kUInt32;
      case FieldDescriptor::CPPTYPE_UINT64: return Type::kUInt64;
      case FieldDescriptor::CPPTYPE_FLOAT: return Type::kFloat;
      case FieldDescriptor::CPPTYPE_DOUBLE: return Type::kDouble;
      case FieldDescriptor::CPPTYPE_BOOL: return Type::kBool;
      case FieldDescriptor::CPPTYPE_ENUM: return Type::kEnum;
    }
    return Type::kUndecidable;
  }

  const EnumSpec* EnumOf(const EnumDescriptor* e) {
    std::unique_ptr<EnumSpec>& spec = enums_[e];
    if (spec == nullptr) {
      spec = std::make_unique<EnumSpec>();
      for (int i = 0; i < e->value_count(); ++i) {
        const int number = e->value(i)->number();
        spec->detail_by_name.emplace(e->value(i)->name(),
                                     number == 0 ? "" : e->FindValueByNumber(number)->name());
      }
    }
    return spec.get();
  }

  int AddKind(const FieldDescriptor* f) {
    ReportKind& kind = kinds_.emplace_back();
    kind.name = f->name();
    kind.metric = &MetricSpecFor(kind.name);
    // A frame report's metric must be its fps column (ReportColumns).
    kind.frame = kind.name == "frame";
    if (kind.frame && (kind.metric->unit != "fps" || kind.metric->field != "fps")) {
      usable_ = false;
    }
    kind.block = kind.name == "block";
    return static_cast<int>(kinds_.size()) - 1;
  }

  // The slots of a singular scalar field `f` of a message in `role`.
  void Slots(const FieldDescriptor* f, Role role, int kind, FieldSpec& field) {
    using CppType = FieldDescriptor::CppType;
    int slotted = 0;
    // A column the row takes from a generated accessor: it must be of that
    // type (else the schema is unusable).
    const auto column = [&](absl::string_view name, Slot slot, CppType type) {
      if (f->name() != name) return;
      found_[slot] = f->cpp_type() == type && field.type != Type::kUndecidable && slotted < 2;
      if (found_[slot]) field.slots[slotted++] = slot;
    };
    // A field DeriveFields looks up by name, used when it has the type.
    const auto derived = [&](absl::string_view name, Slot slot, bool type_ok) {
      if (f->name() != name || !type_ok || slotted >= 2) return false;
      field.slots[slotted++] = slot;
      return true;
    };
    const bool is_string = field.type == Type::kString;
    switch (role) {
      case Role::kIssue:
        column("tag", kTag, FieldDescriptor::CPPTYPE_STRING);
        column("key", kKey, FieldDescriptor::CPPTYPE_STRING);
        column("process", kProcess, FieldDescriptor::CPPTYPE_STRING);
        column("time_ms", kTimeMs, FieldDescriptor::CPPTYPE_INT64);
        column("pid", kPid, FieldDescriptor::CPPTYPE_INT32);
        break;
      case Role::kApp:
        column("host_id", kHostId, FieldDescriptor::CPPTYPE_STRING);
        column("host_name", kHostName, FieldDescriptor::CPPTYPE_STRING);
        column("build_id", kBuildId, FieldDescriptor::CPPTYPE_STRING);
        column("version", kVersion, FieldDescriptor::CPPTYPE_STRING);
        break;
      case Role::kReport: {
        ReportKind& k = kinds_[static_cast<size_t>(kind)];
        const bool numeric = field.type >= Type::kInt32 && field.type <= Type::kDouble;
        derived("detail", kDetail, field.type == Type::kEnum);
        derived(kSceneFields[0], kScene, is_string);
        derived(kSceneFields[1], kFirstScene, is_string);
        derived("stack_key", kStackKey, is_string);
        if (derived(k.metric->field, kMetric, numeric)) k.has_metric = true;
        if (!k.metric->requires_field.empty() &&
            derived(k.metric->requires_field, kRequires, numeric)) {
          k.has_requires = true;
        }
        if (k.frame) {
          column("fps", kFps, FieldDescriptor::CPPTYPE_DOUBLE);
          column("frames", kFrames, FieldDescriptor::CPPTYPE_INT64);
          column("dropped_frames", kDroppedFrames, FieldDescriptor::CPPTYPE_INT64);
        }
        if (k.block) {
          column("time_start_ms", kBlockStart, FieldDescriptor::CPPTYPE_INT64);
          column("time_end_ms", kBlockEnd, FieldDescriptor::CPPTYPE_INT64);
        }
        break;
      }
      case Role::kDropLevel:
        column("best", kDropBest, FieldDescriptor::CPPTYPE_INT64);
        column("normal", kDropNormal, FieldDescriptor::CPPTYPE_INT64);
        column("middle", kDropMiddle, FieldDescriptor::CPPTYPE_INT64);
        column("high", kDropHigh, FieldDescriptor::CPPTYPE_INT64);
        column("frozen", kDropFrozen, FieldDescriptor::CPPTYPE_INT64);
        break;
      case Role::kCheck:
        break;
    }
  }

  std::deque<MessageSpec> messages_;  // Stable addresses.
  std::unordered_map<const Descriptor*, const MessageSpec*> checked_;
  std::unordered_map<const EnumDescriptor*, std::unique_ptr<EnumSpec>> enums_;
  std::vector<ReportKind> kinds_;
  const MessageSpec* issue_ = nullptr;
  // The columns the row reads, each found with its type.
  bool found_[kSlots] = {};
  bool usable_ = true;
};

const Schema& TheSchema() {
  static const Schema* const schema = new Schema();
  return *schema;
}

}  // namespace

struct FastIssueParser::Impl {
  const Schema& schema = TheSchema();
  simdjson::dom::parser json;
  Values values;
  std::string issue_id;

  // Checks one JSON object as a message of `spec`, `depth` levels below the
  // issue, and keeps its slotted values in `out` (null: checks only).
  bool Object(const element& value, const MessageSpec& spec, Values* out, int depth) {
    if (value.type() != element_type::OBJECT || depth > kMaxDepth || spec.undecidable) {
      return false;
    }
    std::bitset<kMaxFields> seen;
    std::bitset<kMaxFields> oneofs;
    size_t next = 0;
    simdjson::dom::object object;
    if (value.get_object().get(object) != simdjson::SUCCESS) return false;
    for (const simdjson::dom::key_value_pair field : object) {
      const FieldSpec* f = spec.Find(field.key, next);
      if (f == nullptr) return false;  // Unknown: the strict parse fails.
      if (seen.test(static_cast<size_t>(f->index))) return false;
      seen.set(static_cast<size_t>(f->index));
      if (f->oneof >= 0) {
        if (oneofs.test(static_cast<size_t>(f->oneof))) return false;
        oneofs.set(static_cast<size_t>(f->oneof));
      }
      if (f->repeated) {
        simdjson::dom::array items;
        if (field.value.get_array().get(items) != simdjson::SUCCESS) return false;
        for (const element item : items) {
          if (!Value(item, *f, nullptr, depth)) return false;
        }
      } else if (!Value(field.value, *f, out, depth)) {
        return false;
      }
    }
    return true;
  }

  // One value of field `f` (a singular field, or an element of a repeated
  // one with `out` null).
  bool Value(const element& value, const FieldSpec& f, Values* out, int depth) {
    Integer n;
    Number number;
    switch (f.type) {
      case Type::kMessage:
        if (out != nullptr && f.report >= 0) out->report = f.report;
        return Object(value, *f.message, out, depth + 1);
      case Type::kString:
        if (value.type() != element_type::STRING) return false;
        if (out != nullptr) {
          const std::string_view text = value.get_string().value_unsafe();
          Keep(f, absl::string_view(text.data(), text.size()), *out);
        }
        return true;
      case Type::kEnum: {
        if (value.type() != element_type::STRING) return false;
        const std::string_view name = value.get_string().value_unsafe();
        auto it = f.enums->detail_by_name.find(absl::string_view(name.data(), name.size()));
        if (it == f.enums->detail_by_name.end()) return false;
        if (out != nullptr) Keep(f, it->second, *out);
        return true;
      }
      case Type::kInt32:
        if (!ReadInteger(value, n) || !InRange(n, uint64_t{1} << 31, (uint64_t{1} << 31) - 1)) {
          return false;
        }
        number.i = n.negative ? static_cast<int32_t>(0 - n.magnitude)
                              : static_cast<int32_t>(n.magnitude);
        number.d = static_cast<double>(number.i);
        break;
      case Type::kInt64:
        if (!ReadInteger(value, n) || !InRange(n, uint64_t{1} << 63, (uint64_t{1} << 63) - 1)) {
          return false;
        }
        number.i = n.negative ? static_cast<int64_t>(0 - n.magnitude)
                              : static_cast<int64_t>(n.magnitude);
        number.d = static_cast<double>(number.i);
        break;
      case Type::kUInt32:
        if (!ReadInteger(value, n) || !InRange(n, 0, 0xFFFFFFFFu)) return false;
        number.i = static_cast<int64_t>(n.magnitude);
        number.d = static_cast<double>(n.magnitude);
        break;
      case Type::kUInt64:
        if (!ReadInteger(value, n) || n.negative) return false;
        number.i = static_cast<int64_t>(n.magnitude);
        number.d = static_cast<double>(n.magnitude);
        break;
      case Type::kFloat:
      case Type::kDouble:
        if (!Floating(value, f.type == Type::kFloat, number.d)) return false;
        break;
      case Type::kBool:
        if (value.type() != element_type::BOOL) return false;
        number.i = value.get_bool().value_unsafe() ? 1 : 0;
        number.d = static_cast<double>(number.i);
        break;
      case Type::kUndecidable:
        return false;
    }
    if (out != nullptr) {
      for (Slot slot : f.slots) {
        if (slot != kNoSlot) out->number(slot) = number;
      }
    }
    return true;
  }

  static void Keep(const FieldSpec& f, absl::string_view text, Values& out) {
    for (Slot slot : f.slots) {
      if (slot < kTextSlots) out.text[slot] = text;
    }
  }

  // A JSON number into a double or float field, as the field then reads
  // ("NaN" and "Infinity" as strings go to the strict path).
  static bool Floating(const element& value, bool is_float, double& out) {
    double v = 0;
    switch (value.type()) {
      case element_type::DOUBLE:
        v = value.get_double().value_unsafe();
        break;
      case element_type::INT64:
        v = static_cast<double>(value.get_int64().value_unsafe());
        break;
      case element_type::UINT64:
        v = static_cast<double>(value.get_uint64().value_unsafe());
        break;
      default:
        return false;
    }
    if (is_float) {
      if (!(v >= -FLT_MAX && v <= FLT_MAX)) return false;
      v = static_cast<double>(static_cast<float>(v));
    }
    out = v;
    return true;
  }

  // The report's columns (DeriveFields' kind, detail, scene, key and
  // metric; MakeFleetRow's frame columns), from the walked values.
  void ReportColumns(FleetRowView& row) {
    Values& v = values;
    row.kind = row.detail = row.scene = {};
    row.cost_ms = row.fps = 0;
    row.frames = row.dropped_frames = 0;
    std::fill(std::begin(row.drop_level), std::end(row.drop_level), 0);
    absl::string_view stack_key;
    if (v.report >= 0) {
      const ReportKind& kind = schema.kind(v.report);
      row.kind = kind.name;
      row.detail = v.text[kDetail];
      row.scene = !v.text[kScene].empty() ? v.text[kScene] : v.text[kFirstScene];
      stack_key = v.text[kStackKey];
      // A frame report's fps column is its fps field (MakeFleetRow), which
      // is also its metric: whether it counts as one (HasFrameRate) does not
      // change the row (Schema makes sure of the unit).
      const MetricSpec& spec = *kind.metric;
      const bool counted =
          spec.requires_field.empty() ||
          (kind.has_requires && v.number(kRequires).d >= spec.requires_at_least);
      const double metric = v.number(kMetric).d;
      if (counted && kind.has_metric && std::isfinite(metric) && !kind.frame) {
        (spec.unit == "fps" ? row.fps : row.cost_ms) = metric;
      }
      if (kind.frame) {
        row.fps = v.number(kFps).d;
        row.frames = v.number(kFrames).i;
        row.dropped_frames = v.number(kDroppedFrames).i;
        for (int level = 0; level < 5; ++level) {
          row.drop_level[level] = v.number(static_cast<Slot>(kDropBest + level)).i;
        }
      }
    }
    row.key = !v.text[kKey].empty()  ? v.text[kKey]
              : !stack_key.empty()   ? stack_key
                                     : row.scene;
  }
};

FastIssueParser::FastIssueParser() : impl_(std::make_unique<Impl>()) {}
FastIssueParser::~FastIssueParser() = default;

bool FastIssueParser::ParseRow(absl::string_view line, absl::string_view fallback_host_id,
                               FleetRowView& row, bool line_id) {
  Impl& impl = *impl_;
  if (!impl.schema.usable() || line.empty() || line.front() != '{' || NeedsStrictPath(line)) {
    return false;
  }
  element doc;
  if (impl.json.parse(line.data(), line.size(), /*realloc_if_needed=*/true).get(doc) !=
      simdjson::SUCCESS) {
    return false;
  }
  Values& v = impl.values;
  v.Clear();
  if (!impl.Object(doc, impl.schema.issue(), &v, 0)) return false;
  if (v.text[kTag].empty()) return false;  // "not a matrix issue": the strict path says so.
  row.time_ms = v.number(kTimeMs).i;
  row.host_id = !v.text[kHostId].empty() ? v.text[kHostId] : fallback_host_id;
  row.host_name = v.text[kHostName];
  row.process = v.text[kProcess];
  row.pid = static_cast<int32_t>(v.number(kPid).i);
  row.build_id = v.text[kBuildId];
  row.version = v.text[kVersion];
  row.tag = v.text[kTag];
  impl.ReportColumns(row);
  row.report = line;
  row.quality = 1;
  if (v.report >= 0 && impl.schema.kind(v.report).block) {
    BlockIdInto(row.host_id, row.pid, v.number(kBlockStart).i, v.number(kBlockEnd).i,
                impl.issue_id);
  } else if (line_id) {
    IssueIdInto(row.host_id, line, impl.issue_id);
  } else {
    impl.issue_id.clear();
  }
  row.issue_id = impl.issue_id;
  return true;
}

}  // namespace matrix::report::internal
