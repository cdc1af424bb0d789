// File: matrix/report/issue_reader.h
//
// Reads JSON-lines issue files: a file is read as given, a directory means
// every *.jsonl in it (not recursive), rotated files included, oldest first:
// JsonLinesIssueSink keeps <name>.jsonl as the current file and
// <name>.1.jsonl, <name>.2.jsonl, ... as older ones (higher is older), so
// <name>.2.jsonl is read before <name>.1.jsonl before <name>.jsonl.
//
// A line that is not an issue is recorded in `malformed` with its file and
// line number and skipped; the rest of the file is still read. Blank lines
// are ignored. An input that cannot be read is recorded in `errors`.
//
//   matrix::report::ReadResult result =
//       matrix::report::ReadIssueInputs({"./matrix-reports"}, &std::cin);
//   for (const auto& bad : result.malformed) {
//     std::cerr << bad.where.file << ":" << bad.where.line << ": " << bad.reason << "\n";
//   }
//   for (const auto& record : result.records) Use(record);
//
// Thread safety: functions without shared state; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_READER_H_
#define MATRIX_REPORT_ISSUE_READER_H_

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

// The name used for standard input ("-" on the command line).
inline constexpr char kStdinName[] = "<stdin>";

struct MalformedLine {
  SourceLocation where;
  std::string reason;
};

struct ReadResult {
  // Every issue read, in read order (`sequence` 0, 1, ...).
  std::vector<IssueRecord> records;
  // The files read, in order.
  std::vector<std::string> files;
  // Non-blank lines seen, issues or not.
  int64_t lines = 0;
  std::vector<MalformedLine> malformed;
  // Inputs that could not be read, each a full message ("no such file: x").
  std::vector<std::string> errors;
};

// Orders issue files oldest first: files of one sink (same directory and
// name) as <name>.N.jsonl ... <name>.1.jsonl, <name>.jsonl; different sinks
// by path. "issues.jsonl" and "issues.3.jsonl" belong to sink "issues".
std::vector<std::string> OrderIssueFiles(std::vector<std::string> paths);

// The files an input names: a directory its *.jsonl files ordered by
// OrderIssueFiles, anything else (a file, a pipe) itself. Errors when the
// input does not exist or is a directory without *.jsonl files.
absl::StatusOr<std::vector<std::string>> ExpandInput(const std::string& path);

// Parses each line of `in` as an issue from `name`, appending to `result`
// (records, malformed, lines; `name` is added to `files`).
void ReadIssueStream(std::istream& in, const std::string& name, ReadResult& result);

// Expands and reads every input in order; "-" reads `stdin_stream` (an error
// when null). A file named twice (directly or through a directory) is read
// once.
ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_READER_H_
