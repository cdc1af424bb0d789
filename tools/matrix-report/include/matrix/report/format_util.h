// File: matrix/report/format_util.h
//
// Small text helpers shared by matrix-report's renderers and exporters:
// strings of reports made safe for a terminal, JSON string quoting, CSV
// fields (RFC 4180), times and durations.
//
//   out += matrix::report::TextEscape(key);        // app::Draw()\x1b[2J
//   out += matrix::report::JsonQuote(key);         // "\"app::Draw()\""
//   out += matrix::report::CsvField("a,b");        // "\"a,b\""
//   out += matrix::report::FormatTimeMs(ms, tz);   // "2025-11-21 10:00:01.123"
//
// Thread safety: pure functions; thread-safe.

#ifndef MATRIX_REPORT_FORMAT_UTIL_H_
#define MATRIX_REPORT_FORMAT_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace matrix::report {

// `s`, a string of a report (a key, name, stack frame, file, scene, process,
// version...), as the text views print it: one line that sends a terminal
// nothing but text, as `ls` and `git` print file names. Printed as: a
// backslash \\; LF, CR and tab \n, \r and \t; the other C0 controls and DEL
// \xNN (ESC is \x1b); the bytes of the C1 controls (U+0080 to U+009F) and
// every byte that is not part of valid UTF-8 \xNN too (U+009B is \xc2\x9b).
// Other UTF-8 passes through. HTML has its own escaping (HtmlEscape).
std::string TextEscape(absl::string_view s);

// `s` as a JSON string literal, quotes included. Control characters are
// escaped; bytes >= 0x80 pass through (the input is UTF-8 from protobuf).
std::string JsonQuote(absl::string_view s);

// `s` as one CSV field (RFC 4180): quoted when it holds a comma, quote, CR,
// LF or leading/trailing space, with inner quotes doubled.
std::string CsvField(absl::string_view s);

// Milliseconds since the Unix epoch as "YYYY-MM-DD HH:MM:SS.mmm" in `tz`.
std::string FormatTimeMs(int64_t time_ms, absl::TimeZone tz);
// The same in RFC 3339 form with the zone's offset:
// "2025-11-21T10:00:01.123+00:00".
std::string FormatTimeMsRfc3339(int64_t time_ms, absl::TimeZone tz);

// A duration in ms for people: "812.4 ms", "2.60 s", "3 min 12 s".
std::string FormatDurationMs(double ms);

// later - earlier in milliseconds, computed in double: no signed overflow
// for any two int64 times (a corrupt file may hold both ends of the range).
inline double DifferenceMs(int64_t later, int64_t earlier) {
  return static_cast<double>(later) - static_cast<double>(earlier);
}

// a + b and a - b, saturated to the int64 range instead of overflowing.
// Every sum of numbers from reports uses them (frames per drop level, dropped
// issues, issues per group): a hostile or corrupt report saturates a sum at
// 9223372036854775807, it never wraps to a negative count.
int64_t SaturatingAdd(int64_t a, int64_t b);
int64_t SaturatingSub(int64_t a, int64_t b);
// `value` truncated to an int64, saturated to the int64 range (0 for NaN):
// a sum ClickHouse computed in Float64 converts without overflow.
int64_t SaturatingInt64(double value);

// `value` with `precision` decimals ("%.*f"): 812.25 -> "812.2" (precision
// 1). At kFixedLimit and beyond (a corrupt or hostile report), with an
// exponent and 6 significant digits instead ("%.6g"): 1.7e308 -> "1.7e+308",
// not 309 digits. Every number the views print with decimals goes through it.
inline constexpr double kFixedLimit = 1e15;
std::string FormatFixed(double value, int precision);

// A number with at most `precision` decimals and no trailing zeros:
// 60 -> "60", 52.44 -> "52.4" (precision 1), 1e-9 -> "0". From 1e21 on, as
// JavaScript prints numbers: the shortest form that reads back the same, with
// an exponent ("1e+300", not 301 digits). Microseconds since the epoch keep
// every digit.
std::string FormatNumber(double value, int precision);

// FormatNumber(value, 3) as a JSON value: "null" when not finite (JSON has no
// NaN or infinity). The HTML page's data and its trace events use it.
std::string JsonNumber(double value);

// The last path component: "/usr/lib/libfoo.so" -> "libfoo.so" (matrix::BaseName
// on Abseil's string_view, which Debian's Abseil keeps apart from std's).
absl::string_view Basename(absl::string_view path);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_FORMAT_UTIL_H_
