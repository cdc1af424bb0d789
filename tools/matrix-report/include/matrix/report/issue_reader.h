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
// A line that is not an issue is skipped and counted with its file and line
// number (ReadStats::malformed_files keeps each file's count and first;
// ReadResult::malformed lists them all); the rest of the file is still read. A writer
// killed mid-line leaves a torn line, to which the next writer's first line
// may be glued: that line is malformed, but an issue glued after the torn
// part is still read (with the torn line's number). Blank lines are ignored.
// An input that cannot be read is recorded in `errors`.
//
// Two ways to read: ForEachIssue() streams, calling back with one issue at a
// time and keeping none, so its memory does not grow with the input
// (summary, group and export use it); ReadIssueInputs() keeps every record
// (show, html and timeline, which need them all at once).
//
//   matrix::report::ReadStats stats = matrix::report::ForEachIssue(
//       {"./matrix-reports"}, &std::cin, {}, [&](const IssueRecord& record) { Fold(record); });
//   for (const auto& bad : stats.malformed_files) {
//     std::cerr << bad.first.where.file << ": " << bad.count << " malformed\n";
//   }
//
//   matrix::report::ReadResult result =
//       matrix::report::ReadIssueInputs({"./matrix-reports"}, &std::cin);
//   for (const auto& record : result.records) Use(record);
//
// Thread safety: functions without shared state; thread-compatible.

#ifndef MATRIX_REPORT_ISSUE_READER_H_
#define MATRIX_REPORT_ISSUE_READER_H_

#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "matrix/report/issue_filter.h"
#include "matrix/report/issue_record.h"

namespace matrix::report {

// The name used for standard input ("-" on the command line).
inline constexpr char kStdinName[] = "<stdin>";

// The longest line read (a BlockCanary text file counts as one line): a
// longer one is read to its end in bounded memory, skipped and counted as
// malformed with the reason kLineTooLong. An issue line is a few KiB.
inline constexpr int64_t kMaxIssueLineBytes = int64_t{16} << 20;
inline constexpr char kLineTooLong[] = "longer than 16 MiB, the longest line read";

struct MalformedLine {
  SourceLocation where;
  std::string reason;
};

struct ReadOptions {
  // The zone BlockCanary text files were written in: their dates are local
  // times without a year (the writer's zone, normally this machine's).
  absl::TimeZone block_log_time_zone = absl::LocalTimeZone();
};

// The malformed lines of one file: how many, and the first.
struct MalformedFile {
  MalformedLine first;
  int64_t count = 0;
};

// What a read saw besides the issues: a streaming read keeps only this, which
// grows with the number of files, not of lines.
struct ReadStats {
  // The files read, in order.
  std::vector<std::string> files;
  // Non-blank lines seen, issues or not; a BlockCanary file counts as one.
  int64_t lines = 0;
  // Malformed lines (or BlockCanary files that cannot be parsed, line 0),
  // per file in read order, and their total.
  std::vector<MalformedFile> malformed_files;
  int64_t malformed_lines = 0;
  // Inputs that could not be read, each a full message ("no such file: x").
  std::vector<std::string> errors;
  // Blocks read twice, as the BlockCanary issue of a JSON-lines file and as
  // its BlockCanary text file (same pid, start and end): the text file's copy
  // is left out and counted here.
  int64_t duplicate_blocks = 0;
};

struct ReadResult : ReadStats {
  // Every issue read, in read order (`sequence` 0, 1, ...).
  std::vector<IssueRecord> records;
  // Every malformed line, in read order, so the lines of one file are
  // adjacent.
  std::vector<MalformedLine> malformed;
};

// Called with each malformed line as it is read.
using MalformedCallback = std::function<void(const MalformedLine&)>;

// IssueStreamReader
//
// Reads one input's issues one at a time: a BlockCanary text file (first
// non-blank character '*') as one block, anything else as JSON lines, one
// issue each (torn lines as described above). Records are numbered
// `sequence` 0, 1, ... within the input.
//
//   std::ifstream in(path);
//   IssueStreamReader reader(in, path, {}, &stats);
//   IssueRecord record;
//   while (reader.Next(record)) Fold(record);
class IssueStreamReader {
 public:
  // `in` must outlive the reader. `stats` (may be null) gets `name` in
  // `files`, and the lines, malformed lines and read error seen;
  // `on_malformed` (may be empty) gets each malformed line.
  IssueStreamReader(std::istream& in, std::string name, const ReadOptions& options,
                    ReadStats* stats, MalformedCallback on_malformed = nullptr);

  IssueStreamReader(const IssueStreamReader&) = delete;
  IssueStreamReader& operator=(const IssueStreamReader&) = delete;

  // Reads the next issue into `record`; false at the end of the input.
  bool Next(IssueRecord& record);

 private:
  bool ReadBlockLog(IssueRecord& record);
  void Malformed(int64_t line, absl::string_view reason);

  std::istream& in_;
  const std::string name_;
  const ReadOptions options_;
  ReadStats* const stats_;
  const MalformedCallback on_malformed_;
  bool started_ = false;
  bool done_ = false;
  int64_t number_ = 0;
  int64_t sequence_ = 0;
  std::string line_;
};

// Orders issue files oldest first: files of one sink (same directory and
// name) as <name>.N.jsonl ... <name>.1.jsonl, <name>.jsonl; different sinks
// by path. "issues.jsonl" and "issues.3.jsonl" belong to sink "issues".
std::vector<std::string> OrderIssueFiles(std::vector<std::string> paths);

// The files an input names: a directory its *.jsonl files ordered by
// OrderIssueFiles, then its looper-*.log files (BlockCanary) by name; anything
// else (a file, a pipe) itself. Errors when the input does not exist or is a
// directory with neither. A directory's entries with those names that are
// not regular files (FIFOs, devices, dangling links) are left out; with
// `not_regular`, a message naming each is added to it.
absl::StatusOr<std::vector<std::string>> ExpandInput(
    const std::string& path, std::vector<std::string>* not_regular = nullptr);

// Reads `in` from `name`, appending to `result` (records, malformed, lines;
// `name` is added to `files`) with IssueStreamReader.
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

// ForEachIssue()
//
// Expands and reads every input in order, calling `visit` with each issue
// (`sequence` 0, 1, ... in read order; `visit` may move it away) and
// keeping none; "-" reads
// `stdin_stream` (an error when null). A file named twice (directly or
// through a directory) is read once. Returns what was read besides the
// issues; `on_malformed` (may be empty) gets each malformed line.
//
// A block in both a JSON-lines file and its BlockCanary text file is read
// once, from the JSON-lines file, wherever the two come in the read order:
// the text files' blocks are identified first (they are small files) and,
// only when there are some, the JSON-lines files are scanned for those
// blocks before the read. Standard input and pipes can be read only once, so
// they are not scanned: their JSON-lines blocks leave out only text files
// read after them, and a text file read from one is always kept.
ReadStats ForEachIssue(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                       const ReadOptions& options,
                       absl::FunctionRef<void(IssueRecord&)> visit,
                       const MalformedCallback& on_malformed = nullptr);

// Reads like ForEachIssue() and keeps every record.
ReadResult ReadIssueInputs(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                           const ReadOptions& options = {});

// IssuesByTime
//
// The issues `filter` selects, in SelectIssues()' order (report time, then
// read order), without holding them all: a sink appends issues as they are
// reported, so each of its files is in time order, and the files are read
// side by side and merged, one issue held per file. Scan() reads every input
// once (ForEachIssue(): counting, and checking each file's order); ForEach()
// reads the files again and merges them. A file whose issues go back in time
// (the clock was set back) is held in memory and sorted, and so are standard
// input and pipes, which cannot be read twice.
//
//   IssuesByTime issues = IssuesByTime::Scan(inputs, &std::cin, {}, filter);
//   Report(issues.stats());
//   issues.ForEach([&](const IssueRecord& record) { Write(record); });
class IssuesByTime {
 public:
  static IssuesByTime Scan(const std::vector<std::string>& inputs, std::istream* stdin_stream,
                           const ReadOptions& options, const IssueFilter& filter);

  IssuesByTime(IssuesByTime&&) noexcept;
  IssuesByTime& operator=(IssuesByTime&&) noexcept;
  ~IssuesByTime();

  // What Scan() read.
  const ReadStats& stats() const { return stats_; }
  // How many issues the filter selects.
  int64_t selected() const { return selected_; }
  // Reads now and holds in memory the selected issues of the input file that
  // is `path`, if any: an export about to overwrite one of its inputs (say
  // `-o reports/anr.jsonl reports/`) still writes what Scan() read.
  void HoldFile(const std::string& path);
  // Calls `visit` with each selected issue, in time order. Call once.
  void ForEach(absl::FunctionRef<void(const IssueRecord&)> visit);

 private:
  // A file holding selected issues, in read order.
  struct File;

  // Reads `file`'s selected issues into File::held, in time order.
  void Hold(File& file);

  IssuesByTime(const ReadOptions& options, const IssueFilter& filter);

  ReadOptions options_;
  IssueFilter filter_;
  ReadStats stats_;
  int64_t selected_ = 0;
  std::vector<std::unique_ptr<File>> files_;
};

}  // namespace matrix::report

#endif  // MATRIX_REPORT_ISSUE_READER_H_
