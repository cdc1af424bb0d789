#include "internal/fleet_fast_parse.h"

#include <simdjson.h>

#include <algorithm>
#include <bitset>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

// FastIssueParser (internal/fleet_fast_parse.h): simdjson's DOM, checked
// against the Issue descriptor by protobuf's strict JSON rules.

namespace matrix::report::internal {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using simdjson::dom::element;
using simdjson::dom::element_type;

// Messages more than this many levels below the issue are checked only.
constexpr int kStoredDepth = 2;
// Fields and oneofs per message the seen-sets cover.
constexpr int kMaxFields = 128;

// Whether the raw line holds anything the strict path must judge: a control
// character (raw, or escaped as \u0000), or an escaped UTF-16 surrogate
// (simdjson and protobuf may treat a lone one differently).
bool NeedsStrictPath(absl::string_view line) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  size_t i = 0;
  while (i < line.size()) {
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

}  // namespace

struct FastIssueParser::Impl {
  simdjson::dom::parser json;
  // A message type's fields by proto name and JSON name, and in field
  // number order (the order protobuf's printer writes them in: the next key
  // is most often the next field, found without hashing).
  struct FieldIndex {
    absl::flat_hash_map<std::string, const FieldDescriptor*> by_name;
    std::vector<const FieldDescriptor*> by_number;

    const FieldDescriptor* Find(std::string_view key, size_t& next) const {
      for (size_t i = next; i < by_number.size() && i < next + 3; ++i) {
        if (by_number[i]->name() == key) {
          next = i + 1;
          return by_number[i];
        }
      }
      auto it = by_name.find(absl::string_view(key.data(), key.size()));
      return it == by_name.end() ? nullptr : it->second;
    }
  };
  // By message type (an unordered_map: an index stays where it is while a
  // nested message adds its own).
  std::unordered_map<const Descriptor*, FieldIndex> fields;

  const FieldIndex& IndexOf(const Descriptor* d) {
    auto [it, inserted] = fields.try_emplace(d);
    if (inserted) {
      for (int i = 0; i < d->field_count(); ++i) {
        const FieldDescriptor* f = d->field(i);
        it->second.by_name.emplace(f->name(), f);
        it->second.by_name.emplace(f->json_name(), f);
        it->second.by_number.push_back(f);
      }
      std::sort(it->second.by_number.begin(), it->second.by_number.end(),
                [](const FieldDescriptor* a, const FieldDescriptor* b) {
                  return a->number() < b->number();
                });
    }
    return it->second;
  }

  // Checks (and with `msg`, stores) one JSON object as a message of type
  // `d`, `depth` levels below the issue.
  bool Object(const element& value, const Descriptor* d, Message* msg, int depth) {
    if (value.type() != element_type::OBJECT || depth > kMaxDepth) return false;
    if (d->field_count() > kMaxFields || d->oneof_decl_count() > kMaxFields) return false;
    if (d->file()->package() == "google.protobuf") return false;  // Well-known JSON forms.
    const FieldIndex& index = IndexOf(d);
    std::bitset<kMaxFields> seen;
    std::bitset<kMaxFields> oneofs;
    size_t next = 0;
    simdjson::dom::object object;
    if (value.get_object().get(object) != simdjson::SUCCESS) return false;
    for (const simdjson::dom::key_value_pair field : object) {
      const FieldDescriptor* f = index.Find(field.key, next);
      if (f == nullptr) return false;  // Unknown: the strict parse fails.
      if (seen.test(static_cast<size_t>(f->index()))) return false;
      seen.set(static_cast<size_t>(f->index()));
      if (const auto* oneof = f->real_containing_oneof(); oneof != nullptr) {
        if (oneofs.test(static_cast<size_t>(oneof->index()))) return false;
        oneofs.set(static_cast<size_t>(oneof->index()));
      }
      if (f->is_map()) return false;
      if (f->is_repeated()) {
        simdjson::dom::array items;
        if (field.value.get_array().get(items) != simdjson::SUCCESS) return false;
        for (const element item : items) {
          if (!Value(item, f, nullptr, depth)) return false;
        }
      } else if (!Value(field.value, f, msg, depth)) {
        return false;
      }
    }
    return true;
  }

  // One value of field `f` (a singular field, or an element of a repeated
  // one with `msg` null).
  bool Value(const element& value, const FieldDescriptor* f, Message* msg, int depth) {
    const google::protobuf::Reflection* r = msg != nullptr ? msg->GetReflection() : nullptr;
    Integer n;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        Message* sub = msg != nullptr && depth < kStoredDepth ? r->MutableMessage(msg, f) : nullptr;
        return Object(value, f->message_type(), sub, depth + 1);
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        if (f->type() == FieldDescriptor::TYPE_BYTES || value.type() != element_type::STRING) {
          return false;
        }
        if (r != nullptr) r->SetString(msg, f, std::string(value.get_string().value_unsafe()));
        return true;
      }
      case FieldDescriptor::CPPTYPE_INT32:
        if (!ReadInteger(value, n) || !InRange(n, uint64_t{1} << 31, (uint64_t{1} << 31) - 1)) {
          return false;
        }
        if (r != nullptr) {
          r->SetInt32(msg, f,
                      n.negative ? static_cast<int32_t>(0 - n.magnitude)
                                 : static_cast<int32_t>(n.magnitude));
        }
        return true;
      case FieldDescriptor::CPPTYPE_INT64:
        if (!ReadInteger(value, n) || !InRange(n, uint64_t{1} << 63, (uint64_t{1} << 63) - 1)) {
          return false;
        }
        if (r != nullptr) {
          r->SetInt64(msg, f,
                      n.negative ? static_cast<int64_t>(0 - n.magnitude)
                                 : static_cast<int64_t>(n.magnitude));
        }
        return true;
      case FieldDescriptor::CPPTYPE_UINT32:
        if (!ReadInteger(value, n) || !InRange(n, 0, 0xFFFFFFFFu)) return false;
        if (r != nullptr) r->SetUInt32(msg, f, static_cast<uint32_t>(n.magnitude));
        return true;
      case FieldDescriptor::CPPTYPE_UINT64:
        if (!ReadInteger(value, n) || !InRange(n, 0, std::numeric_limits<uint64_t>::max())) {
          return false;
        }
        if (r != nullptr) r->SetUInt64(msg, f, n.magnitude);
        return true;
      case FieldDescriptor::CPPTYPE_DOUBLE:
      case FieldDescriptor::CPPTYPE_FLOAT:
        return Floating(value, f, msg, r);
      case FieldDescriptor::CPPTYPE_BOOL:
        if (value.type() != element_type::BOOL) return false;
        if (r != nullptr) r->SetBool(msg, f, value.get_bool().value_unsafe());
        return true;
      case FieldDescriptor::CPPTYPE_ENUM: {
        if (value.type() != element_type::STRING) return false;
        const std::string_view name = value.get_string().value_unsafe();
        const auto* known = f->enum_type()->FindValueByName(std::string(name));
        if (known == nullptr) return false;
        if (r != nullptr) r->SetEnumValue(msg, f, known->number());
        return true;
      }
    }
    return false;
  }

  // A JSON number into a double or float field ("NaN" and "Infinity" as
  // strings go to the strict path).
  static bool Floating(const element& value, const FieldDescriptor* f, Message* msg,
                       const google::protobuf::Reflection* r) {
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
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
      if (!(v >= -FLT_MAX && v <= FLT_MAX)) return false;
      if (r != nullptr) r->SetFloat(msg, f, static_cast<float>(v));
    } else if (r != nullptr) {
      r->SetDouble(msg, f, v);
    }
    return true;
  }
};

FastIssueParser::FastIssueParser() : impl_(std::make_unique<Impl>()) {}
FastIssueParser::~FastIssueParser() = default;

bool FastIssueParser::Parse(absl::string_view line, IssueRecord& record) {
  if (line.empty() || line.front() != '{' || NeedsStrictPath(line)) return false;
  element doc;
  if (impl_->json.parse(line.data(), line.size(), /*realloc_if_needed=*/true).get(doc) !=
      simdjson::SUCCESS) {
    return false;
  }
  record.issue.Clear();
  record.unknown_fields.clear();
  record.has_unknown_fields = false;
  if (!impl_->Object(doc, proto::Issue::descriptor(), &record.issue, 0)) return false;
  if (record.issue.tag().empty()) return false;  // "not a matrix issue": the strict path says so.
  DeriveFields(record);
  return true;
}

}  // namespace matrix::report::internal
