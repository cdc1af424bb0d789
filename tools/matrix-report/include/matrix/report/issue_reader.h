// File: matrix/report/issue_reader.h
//
// Reads JSON-lines issue files and BlockCanary block files: a file is read as
// given, a directory means every *.jsonl in it (not recursive), rotated files
// included, oldest first, then its BlockCanary looper-*.log files by name
// (their names are their write times). JsonLinesIssueSink keeps <name>.jsonl
// as the current file and <name>.1.jsonl, <name>.2.jsonl, ... as older ones
// (higher is older), so <name>.2.jsonl is read before <name>.1.jsonl before
// <name>.jsonl. It keeps hangs there and each other kind in files of its own
// (<name>.fps.jsonl, <name>.fps.1.jsonl, ...: issue_sinks.h), each such kind
// read as a sink of its own, so a directory reads them all.
//
// A file whose first non-blank character is '*' is a BlockCanary text file
// (BlockLogWriter, see matrix/plugins/block_canary_log.h); it becomes one
// record, the same one the BlockCanary JSON issue of that block gives (see
// RecordFromBlockLog()).
//
// A line that is not an issue is recorded in `malformed` with its file and
// line number and skipped; the rest of the file is still read. A writer
// killed mid-line leaves a torn line, to which the next writer's first line
// may be glued: that line is malformed, but an issue glued after the torn
// part is still read (with the torn line's number). Blank lines are ignored.
// An input that cannot be read is recorded in `errors`.
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
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

// The name used for standard input ("-" on the command line).
inline constexpr char kStdinName[] = "<stdin>";

struct MalformedLine {
  SourceLocation where;
  std::string reason;
};

struct ReadOptions {
  // The zone BlockCanary text files were written in: their dates are local
  // times without a year (the writer's zone, normally this machine's).
  absl::TimeZone block_log_time_zone = absl::LocalTimeZone();
};

struct ReadResult {
  // Every issue read, in read order (`sequence` 0, 1, ...).
  std::vector<IssueRecord> records;
  // The files read, in order.
  std::vector<std::string> files;
  // Non-blank lines seen, issues or not; a BlockCanary file counts as one.
  int64_t lines = 0;
  // Every malformed line (or BlockCanary file that cannot be parsed, line 0),
  // in read order, so the lines of one file are adjacent.
  std::vector<MalformedLine> malformed;
  // Inputs that could not be read, each a full message ("no such file: x").
  std::vector<std::string> errors;
  // Blocks read twice, as the BlockCanary issue of a JSON-lines file and as
  // its BlockCanary text file (same pid, start and end): the text file's copy
  // is left out of `records` and counted here.
  int64_t duplicate_blocks = 0;
};

// Orders issue files oldest first: files of one sink (same directory and
// name) as <name>.N.jsonl ... <name>.1.jsonl, <name>.jsonl; different sinks
// by path. "issues.jsonl" and "issues.3.jsonl" belong to sink "issues".
std::vector<std::string> OrderIssueFiles(std::vector<std::string> paths);

// The files an input names: a directory its *.jsonl files ordered by
// OrderIssueFiles, then its looper-*.log files (BlockCanary) by name; anything
// else (a file, a pipe) itself. Errors when the input does not exist or is a
// directory with neither.
absl::StatusOr<std::vector<std::string>> ExpandInput(const std::string& path);

// Reads `in` from `name`, appending to `result` (records, malformed, lines;
// `name` is added to `files`): a BlockCanary text file (first non-blank
// character '*') as one block, anything else as JSON lines, one issue each.
void ReadIssueStream(std::istream& in, const std::string& name, ReadResult& result,
                     const ReadOptions& options = {});

// RecordFromBlockLog()
//
// The record of one BlockCanary text file (`text`, read from `source.file`):
// the Issue BlockCanaryPlugin reports for the block, tag and plugin
// "BlockCanary", key and `block.key_stack_line` the key stack line with the
// default concern packages (any frame outside libc, the C++ runtime, the
// loader and matrix-cpp), `block.log_file` the file, `time_ms` the block's
// end, and process, pid and device from the file. The report time is not in
// the file, and neither is the device's app CPU. InvalidArgument when the
// text is not a block file.
absl::StatusOr<IssueRecord> RecordFromBlockLog(absl::string_view text, SourceLocation source,
                                               absl::TimeZone time_zone);

// Expands and reads every input in order; "-" reads `stdin_stream` (an error
// when null). A file named twice (directly or through a directory) is read
// once.
ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                           const ReadOptions& options = {});

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_READER_H_
