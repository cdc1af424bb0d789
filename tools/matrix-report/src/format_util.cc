#include "matrix/report/format_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "matrix/core/file_path.h"

namespace matrix::report {
namespace {

// The length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF) that starts `s`, or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto in = [&](size_t i, unsigned char lo, unsigned char hi) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return in(1, 0x80, 0xbf) ? 2 : 0;
  if (lead >= 0xe0 && lead <= 0xef) {
    const unsigned char lo = lead == 0xe0 ? 0xa0 : 0x80;
    const unsigned char hi = lead == 0xed ? 0x9f : 0xbf;
    return in(1, lo, hi) && in(2, 0x80, 0xbf) ? 3 : 0;
  }
  if (lead >= 0xf0 && lead <= 0xf4) {
    const unsigned char lo = lead == 0xf0 ? 0x90 : 0x80;
    const unsigned char hi = lead == 0xf4 ? 0x8f : 0xbf;
    return in(1, lo, hi) && in(2, 0x80, 0xbf) && in(3, 0x80, 0xbf) ? 4 : 0;
  }
  return 0;
}

}  // namespace

std::string TextEscape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '\\') out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          absl::StrAppendFormat(&out, "\\x%02x", c);
      }
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(s.substr(i));
    // U+0080..U+009F (C1 controls: U+009B is a CSI to some terminals).
    const bool c1 = c == 0xc2 && length == 2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
    if (length == 0 || c1) {
      for (size_t end = i + std::max<size_t>(length, 1); i < end; ++i) {
        absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(s[i]));
      }
      continue;
    }
    out.append(s.data() + i, length);
    i += length;
  }
  return out;
}

std::string JsonQuote(absl::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string CsvField(absl::string_view s) {
  const bool needs_quotes = s.find_first_of(",\"\r\n") != absl::string_view::npos ||
                            (!s.empty() && (s.front() == ' ' || s.back() == ' '));
  if (!needs_quotes) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string FormatTimeMs(int64_t time_ms, absl::TimeZone tz) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixMillis(time_ms), tz);
}

std::string FormatTimeMsRfc3339(int64_t time_ms, absl::TimeZone tz) {
  return absl::FormatTime("%Y-%m-%d%ET%H:%M:%E3S%Ez", absl::FromUnixMillis(time_ms), tz);
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t difference = 0;
  if (!__builtin_sub_overflow(a, b, &difference)) return difference;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

int64_t SaturatingInt64(double value) {
  if (std::isnan(value)) return 0;
  // 2^63: the first double beyond int64's largest.
  if (value >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (value <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

std::string FormatDurationMs(double ms) {
  // Beyond a million years (a corrupt file): the number as it is; the
  // whole-second arithmetic below would not fit an int64.
  if (!std::isfinite(ms) || std::fabs(ms) >= 3.2e16) return absl::StrFormat("%.6g ms", ms);
  // One sign in front: "-1 min 20 s", not "-1 min -20 s".
  if (ms <= -1000) return "-" + FormatDurationMs(-ms);
  if (std::fabs(ms) < 1000) return absl::StrFormat("%.1f ms", ms);
  if (std::fabs(ms) < 60'000) return absl::StrFormat("%.2f s", ms / 1000);
  const int64_t total_s = static_cast<int64_t>(std::llround(ms / 1000));
  if (total_s < 3600) return absl::StrFormat("%d min %d s", total_s / 60, total_s % 60);
  if (total_s < 86400) {
    return absl::StrFormat("%d h %d min", total_s / 3600, (total_s % 3600) / 60);
  }
  return absl::StrFormat("%d d %d h", total_s / 86400, (total_s % 86400) / 3600);
}

std::string FormatFixed(double value, int precision) {
  if (std::fabs(value) >= kFixedLimit) return absl::StrFormat("%.6g", value);
  return absl::StrFormat("%.*f", precision, value);
}

std::string FormatNumber(double value, int precision) {
  if (!std::isfinite(value)) return absl::StrCat(value);
  if (std::fabs(value) >= 1e21) {
    char text[32];
    const std::to_chars_result end = std::to_chars(text, text + sizeof(text), value);
    return std::string(text, end.ptr);
  }
  std::string s = absl::StrFormat("%.*f", precision, value);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

std::string JsonNumber(double value) {
  return std::isfinite(value) ? FormatNumber(value, 3) : "null";
}

absl::string_view Basename(absl::string_view path) {
  const std::string_view base = matrix::BaseName(std::string_view(path.data(), path.size()));
  return absl::string_view(base.data(), base.size());
}

}  // namespace matrix::report
