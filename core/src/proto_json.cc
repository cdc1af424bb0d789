#include "matrix/core/proto_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <typeinfo>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "matrix/proto/issue.pb.h"

namespace matrix {
namespace {

// The schema of matrix's report messages (json_schema.inc, written at build
// time by core/tools/json_schema_gen.cc from the generated descriptors).
enum class JsonKind : uint8_t {
  kInt32, kInt64, kUInt32, kUInt64, kDouble, kBool, kEnum, kString, kMessage
};
struct JsonField {
  const char* name;
  uint32_t number;
  JsonKind kind;
  int ref;  // kMessage: index in kJsonMessages; kEnum: index in kJsonEnums.
  bool repeated;
  bool in_oneof;
};
struct JsonMessage {
  const std::type_info* type;
  const JsonField* fields;
  int field_count;
  bool supported;  // Every field, and every message it holds, is printed here.
};
struct JsonEnumValue {
  int number;
  const char* name;
};
struct JsonEnum {
  const JsonEnumValue* values;  // In declaration order.
  int count;
};

#include "json_schema.inc"

// The escape of code point `cp`, or "" when it is written as is: protobuf's
// JSON escaping (control characters, '"', '\\', '<', '>' and the invisible
// characters JavaScript mishandles).
std::string EscapeCodePoint(uint32_t cp) {
  constexpr char kHex[] = "0123456789abcdef";
  auto hex4 = [&](uint32_t u) {
    return std::string{'\\', 'u', kHex[(u >> 12) & 15], kHex[(u >> 8) & 15], kHex[(u >> 4) & 15],
                       kHex[u & 15]};
  };
  switch (cp) {
    case '\b': return "\\b";
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\f': return "\\f";
    case '\r': return "\\r";
    case '"': return "\\\"";
    case '\\': return "\\\\";
    default: break;
  }
  if (cp < 0x20 || cp == '<' || cp == '>' || (cp >= 0x7f && cp < 0xa0) || cp == 0xad ||
      cp == 0x6dd || cp == 0x70f || cp == 0x17b4 || cp == 0x17b5 || cp == 0xfeff ||
      (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x600 && cp <= 0x603) ||
      (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) ||
      (cp >= 0x2060 && cp <= 0x2064) || (cp >= 0x206a && cp <= 0x206f)) {
    return hex4(cp);
  }
  if (cp == 0xe0001 || (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0020 && cp <= 0xe007f)) {
    const uint32_t v = cp - 0x10000;
    return hex4(0xd800 + (v >> 10)) + hex4(0xdc00 + (v & 0x3ff));
  }
  return "";
}

// Appends `s` quoted. Bytes that are not UTF-8 are dropped: a bad lead
// byte alone, a broken sequence up to and with the byte that broke it, a
// sequence cut short at the end (as protobuf's printer does).
void AppendString(std::string_view s, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    uint32_t cp = static_cast<uint8_t>(s[i++]);
    int left = 0;
    bool ok = true;
    if (cp >= 0x80) {
      if (cp <= 0xbf || cp > 0xf7) {
        ok = false;
      } else if (cp <= 0xdf) {
        cp &= 0x1f, left = 1;
      } else if (cp <= 0xef) {
        cp &= 0x0f, left = 2;
      } else {
        cp &= 0x07, left = 3;
      }
    }
    while (ok && left > 0 && i < s.size()) {
      const uint32_t ch = static_cast<uint8_t>(s[i++]);
      --left;
      cp = (cp << 6) | (ch & 0x3f);
      if (ch < 0x80 || ch > 0xbf) ok = false;
    }
    if (!ok || left > 0 || (cp & 0xfffff800) == 0xd800 || cp > 0x10ffff) continue;
    const std::string escaped = EscapeCodePoint(cp);
    if (escaped.empty()) {
      out->append(s, start, i - start);
    } else {
      out->append(escaped);
    }
  }
  out->push_back('"');
}

// printf's %.<digits>g of `v` with '.' for the radix whatever the locale.
// (std::to_chars would do without the locale, but its tables would add
// libstdc++ pages to every monitored program.)
std::string FormatG(double v, int digits) {
  constexpr std::string_view kFloatChars = "0123456789+-eE";
  char buf[40];
  const int n = std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  std::string s(buf, n > 0 ? std::min<size_t>(n, sizeof buf - 1) : 0);
  const size_t radix = s.find_first_not_of(kFloatChars);
  if (radix == std::string::npos || s[radix] == '.') return s;
  size_t end = s.find_first_of(kFloatChars, radix + 1);  // Past a radix of several bytes.
  if (end == std::string::npos) end = s.size();
  return s.replace(radix, end - radix, ".");
}

// protobuf's SimpleDtoa: 15 significant digits, 17 when 15 do not read back
// as the same value; non-finite values as quoted strings.
void AppendDouble(double v, std::string* out) {
  if (std::isnan(v)) return out->append("\"NaN\""), void();
  if (std::isinf(v)) return out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\""), void();
  std::string s = FormatG(v, 15);
  double back = 0;
  if (!absl::SimpleAtod(s, &back) || back != v) s = FormatG(v, 17);
  out->append(s);
}

// One field of a serialized message: its number, wire type and value (the
// varint or the 64 bits, or the bytes of a length-delimited field).
struct WireField {
  uint32_t number = 0;
  int wire_type = 0;
  uint64_t bits = 0;
  std::string_view bytes;
};

bool ReadVarint(std::string_view* in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    *v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Reads the next field of `in`; false at the end or on bytes it cannot read.
bool ReadField(std::string_view* in, WireField* f) {
  uint64_t tag = 0;
  if (in->empty() || !ReadVarint(in, &tag)) return false;
  f->number = static_cast<uint32_t>(tag >> 3);
  f->wire_type = static_cast<int>(tag & 7);
  switch (f->wire_type) {
    case 0:
      return ReadVarint(in, &f->bits);
    case 1:
    case 5: {
      const size_t n = f->wire_type == 1 ? 8 : 4;
      if (in->size() < n) return false;
      f->bits = 0;
      std::memcpy(&f->bits, in->data(), n);  // Little-endian, as x86-64 and arm64 are.
      in->remove_prefix(n);
      return true;
    }
    case 2: {
      uint64_t size = 0;
      if (!ReadVarint(in, &size) || size > in->size()) return false;
      f->bytes = in->substr(0, size);
      in->remove_prefix(size);
      return true;
    }
    default:
      return false;
  }
}

bool PrintMessage(const JsonMessage& m, std::string_view bytes, std::string* out);

// One value of field `f`; `w` null for the default of an unset field.
bool PrintValue(const JsonField& f, const WireField* w, std::string* out) {
  const uint64_t bits = w != nullptr ? w->bits : 0;
  switch (f.kind) {
    case JsonKind::kInt32: absl::StrAppend(out, static_cast<int32_t>(bits)); return true;
    case JsonKind::kUInt32: absl::StrAppend(out, static_cast<uint32_t>(bits)); return true;
    case JsonKind::kInt64: absl::StrAppend(out, "\"", static_cast<int64_t>(bits), "\""); return true;
    case JsonKind::kUInt64: absl::StrAppend(out, "\"", bits, "\""); return true;
    case JsonKind::kBool: out->append(bits != 0 ? "true" : "false"); return true;
    case JsonKind::kDouble: {
      double v = 0;
      std::memcpy(&v, &bits, sizeof v);
      AppendDouble(v, out);
      return true;
    }
    case JsonKind::kEnum: {
      const JsonEnum& e = kJsonEnums[f.ref];
      const int number = static_cast<int32_t>(bits);
      for (int i = 0; i < e.count; ++i) {
        if (w == nullptr || e.values[i].number == number) {  // Unset: the first value.
          AppendString(e.values[i].name, out);
          return true;
        }
      }
      absl::StrAppend(out, number);  // A value this build's enum does not name.
      return true;
    }
    case JsonKind::kString:
      AppendString(w != nullptr ? w->bytes : std::string_view(), out);
      return true;
    case JsonKind::kMessage:
      return PrintMessage(kJsonMessages[f.ref], w->bytes, out);
  }
  return false;
}

// The fields in declaration order, as protobuf's printer writes them with
// default primitives printed: repeated ones always (empty as []), messages
// and oneof members when set, other primitives always.
bool PrintMessage(const JsonMessage& m, std::string_view bytes, std::string* out) {
  out->push_back('{');
  bool first = true;
  for (int i = 0; i < m.field_count; ++i) {
    const JsonField& f = m.fields[i];
    WireField w;
    WireField last;
    bool seen = false;
    std::string list;
    for (std::string_view in = bytes; ReadField(&in, &w);) {
      if (w.number != f.number) continue;
      if (f.repeated) {
        if (seen) list.push_back(',');
        if (!PrintValue(f, &w, &list)) return false;
      }
      last = w;
      seen = true;
    }
    if (!f.repeated && !seen && (f.kind == JsonKind::kMessage || f.in_oneof)) continue;
    absl::StrAppend(out, first ? "\"" : ",\"", f.name, "\":");
    first = false;
    if (f.repeated) {
      absl::StrAppend(out, "[", list, "]");
    } else if (!PrintValue(f, seen ? &last : nullptr, out)) {
      return false;
    }
  }
  out->push_back('}');
  return true;
}

const JsonMessage* FindSchema(const google::protobuf::Message& message) {
  for (const JsonMessage& m : kJsonMessages) {
    if (*m.type == typeid(message)) return m.supported ? &m : nullptr;
  }
  return nullptr;
}

}  // namespace

std::string ProtoToJson(const google::protobuf::Message& message) {
  std::string json;
  if (const JsonMessage* schema = FindSchema(message)) {
    if (PrintMessage(*schema, message.SerializeAsString(), &json)) return json;
    json.clear();
  }
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  return json;
}

}  // namespace matrix
