// File: tools/matrix-report/src/internal/fleet_fast_parse.h
//
// push's fast path for one JSON line (internal to matrix_report_lib;
// docs/fleet.md "Pushing"): simdjson parses the line, and the parsed
// document is checked against matrix.proto.Issue's descriptor, field by
// field, by the rules of protobuf's strict JSON parser. A line is taken only
// when it is certainly one the strict parse (ParseIssueLine's first try)
// accepts: every key a field of its message (proto or JSON name, once),
// every value of its field's JSON form (objects for messages, arrays for
// repeated fields, strings for strings and enum names this build knows,
// integers in range, or decimal strings in range for integer fields, numbers
// for floating point fields, true/false), at most one field of a oneof, a
// non-empty tag. The scalar fields of the issue and of its messages two
// levels down (what a fleet row and DeriveFields read: app, the report,
// frame.drop_level) are stored in the record; repeated fields are checked,
// not stored. Anything else (not JSON, unknown fields, null, NaN as a string,
// \u0000, lone surrogates, control characters, numbers out of range,
// duplicate keys, nesting deeper than kMaxDepth) is left to the strict path,
// which decides it exactly as before: Parse returns false and touches
// nothing the caller keeps.
//
//   FastIssueParser parser;
//   IssueRecord record;
//   if (!parser.Parse(line, record)) { /* ParseIssueLine(line, ...) */ }
//
// Thread safety: thread-compatible; one thread uses one parser (it keeps
// simdjson's buffers and a field index between lines).

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "matrix/report/issue_record.h"

namespace matrix::report::internal {

class FastIssueParser {
 public:
  // Objects nested deeper than this go to the strict path.
  static constexpr int kMaxDepth = 32;

  FastIssueParser();
  ~FastIssueParser();
  FastIssueParser(const FastIssueParser&) = delete;
  FastIssueParser& operator=(const FastIssueParser&) = delete;

  // Fills `record` (issue, kind, detail, key, scene, metric; its source is
  // left alone) from `line` and returns true when the line is certainly an
  // issue the strict parse accepts with the same stored fields; false
  // otherwise (`record` is then unspecified).
  bool Parse(absl::string_view line, IssueRecord& record);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_
