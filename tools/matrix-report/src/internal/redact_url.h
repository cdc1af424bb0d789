// File: tools/matrix-report/src/internal/redact_url.h
//
// RedactUrl: a server URL as matrix-report shows it, in messages, progress
// lines and reports, without its password. push, fleet, html and symbolize
// take ClickHouse and debuginfod URLs that may carry credentials
// (http://user:password@host:8123, ?password=...); the requests use the URL
// as given, and everything printed uses RedactUrl's.
//
//   RedactUrl("http://app:s3cret@ch1:8123/")  // "http://app:***@ch1:8123/"
//   RedactUrl("http://ch1:8123/?user=app&password=s3cret")
//                                           // "http://ch1:8123/?user=app&password=***"
//
// Thread safety: a pure function; thread-safe.

#ifndef MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_REDACT_URL_H_
#define MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_REDACT_URL_H_

#include <string>

#include "absl/strings/string_view.h"

namespace matrix::report::internal {

// `url` with every password replaced by "***": the part of the userinfo after
// its first ':' (user:password@, up to the authority's last '@', so a
// password holding an unescaped '@' or '/' is hidden whole), and the value of
// each `password` query parameter (any case). The user name, host, port,
// path and other parameters stay, so the message still names the server. A
// text without "://" is read as an authority and path; a text with nothing
// to hide comes back unchanged.
std::string RedactUrl(absl::string_view url);

}  // namespace matrix::report::internal

#endif  // MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_REDACT_URL_H_
