// File: tools/matrix-report/src/internal/fleet_fast_parse.h
//
// push's fast path for one JSON line (internal to matrix_report_lib;
// docs/fleet.md "Pushing"): simdjson parses the line, and the parsed
// document is checked, field by field, against a table made once from
// matrix.proto.Issue's descriptor, by the rules of protobuf's strict JSON
// parser; the columns of the fleet row are taken from simdjson's values as
// the walk passes them, with no protobuf message and no reflection. A line
// is taken only when it is certainly one the strict parse (ParseIssueLine's
// first try) accepts: every key a field of its message (proto or JSON name,
// once), every value of its field's JSON form (objects for messages, arrays
// for repeated fields, strings for strings and enum names this build knows,
// integers in range, or decimal strings in range for integer fields,
// numbers for floating point fields, true/false), at most one field of a
// oneof, a non-empty tag. Anything else (not JSON, unknown fields, null, NaN
// as a string, \u0000, lone surrogates, control characters, numbers out of
// range, duplicate keys, nesting deeper than kMaxDepth) is left to the
// strict path, which decides it exactly as before: ParseRow returns false.
// A row it makes is the one MakeFleetRow makes of the strict parse's record
// with the line as its report, column for column.
//
//   FastIssueParser parser;
//   FleetRowView row;
//   if (parser.ParseRow(line, fallback_host_id, row)) {
//     AppendFleetRowBinary(row, rows);  // Before the next ParseRow.
//   } else { /* ParseIssueLine(line, ...) */ }
//
// Thread safety: thread-compatible; one thread uses one parser (it keeps
// simdjson's buffers, and the row's text points into them until the next
// line).

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_

#include <memory>

#include "absl/strings/string_view.h"
#include "internal/fleet_row_view.h"

namespace matrix::report::internal {

class FastIssueParser {
 public:
  // Objects nested deeper than this go to the strict path.
  static constexpr int kMaxDepth = 32;

  FastIssueParser();
  ~FastIssueParser();
  FastIssueParser(const FastIssueParser&) = delete;
  FastIssueParser& operator=(const FastIssueParser&) = delete;

  // Fills `row` (every column; `report` is `line`, quality 1: a JSON-lines
  // issue) and returns true when `line` is certainly an issue the strict
  // parse accepts; false otherwise (`row` is then unspecified). The row's
  // text is valid until the next call and while `line` and
  // `fallback_host_id` are (used when the issue carries no host id). With
  // `line_id` false, the id of an issue whose id is of its line (all but
  // blocks) is left empty, for the caller to compute with IssueIdsInto.
  bool ParseRow(absl::string_view line, absl::string_view fallback_host_id, FleetRowView& row,
                bool line_id = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_FAST_PARSE_H_
