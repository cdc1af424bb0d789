// File: matrix/plugins/issue_sinks.h
//
// Ready-made PluginListeners that store issues:
//
//   LogIssueSink        one spdlog line per issue (through matrix::Logger()).
//   JsonLinesIssueSink  one JSON object per line (protobuf's JSON printer with
//                       proto field names) appended to <dir>/<name>.jsonl.
//                       Each line is written with one append, whole or not at
//                       all; the file rotates by size (<name>.1.jsonl is the
//                       previous file, up to `max_files` kept). The directory
//                       is created 0700 and files 0600: reports hold stacks
//                       and scene names that may be private.
//
// File safety (JsonLinesIssueSink):
//   - It never writes through a symbolic link: the file is opened with
//     O_NOFOLLOW | O_CLOEXEC inside the report directory, which is opened
//     with O_NOFOLLOW too (it must be a real directory); directories the sink
//     creates are never followed if a link appears there. Leading components
//     of `directory` that already exist are the caller's path and may be links.
//   - Before each issue it lstat()s the file (one syscall; sinks run on the
//     worker thread): if the file or its directory was deleted or replaced, it
//     logs one warning, re-creates them and writes on. If that fails, the
//     issue is counted in failed_writes() and the error is logged.
//   - A file that does not end in '\n' (a writer killed mid-line) gets a '\n'
//     before the first new line: only the torn line is lost.
//
//   auto sink = matrix::JsonLinesIssueSink::Create({.directory = "./matrix-reports"});
//   if (!sink.ok()) { ... }
//   builder.AddPluginListener(*sink);
//
// `matrix-report` (tools/) reads these files.
//
// Thread safety: thread-safe.

#ifndef MATRIX_PLUGINS_ISSUE_SINKS_H_
#define MATRIX_PLUGINS_ISSUE_SINKS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/plugin.h"

namespace matrix {

// A one-line human summary of an issue, e.g.
// "Trace_EvilMethod ANR 5012ms scene=Gallery key=app::Decode(Image const&)".
std::string SummarizeIssue(const Issue& issue);

class LogIssueSink : public PluginListener {
 public:
  void OnReportIssue(const Issue& issue) override;
};

class JsonLinesIssueSink : public PluginListener {
 public:
  struct Options {
    std::string directory = "./matrix-reports";
    std::string name = "issues";
    // Rotate when the file would grow past this many bytes.
    int64_t max_file_bytes = int64_t{4} << 20;
    // Files kept: the current one plus max_files - 1 rotated ones.
    int max_files = 5;
  };

  // Creates the directory (0700) if needed and opens the file (0600).
  // FailedPrecondition (naming the path) when the report directory or the
  // file is a symbolic link, or not a directory / regular file.
  // Any thread.
  static absl::StatusOr<std::shared_ptr<JsonLinesIssueSink>> Create(Options options);
  ~JsonLinesIssueSink() override;

  // Appends; on failure counts the issue and logs the error. Any thread but
  // the looper (it does file I/O); Matrix calls it on its worker thread.
  void OnReportIssue(const Issue& issue) override;
  // Appends one line; returns the error instead of logging it (a warning for
  // a re-created file is still logged). Same threads as OnReportIssue().
  absl::Status Append(const Issue& issue) ABSL_LOCKS_EXCLUDED(mu_);

  // Any thread.
  std::string path() const { return PathFor(0); }
  // Issues that could not be written (logged once each). Any thread.
  int64_t failed_writes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  explicit JsonLinesIssueSink(Options options) : options_(std::move(options)) {}
  std::string NameFor(int index) const;
  std::string PathFor(int index) const;
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FileReplacedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status RotateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AppendLocked(absl::string_view line, bool* replaced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int dir_fd_ ABSL_GUARDED_BY(mu_) = -1;  // The report directory.
  int fd_ ABSL_GUARDED_BY(mu_) = -1;      // The current file, O_APPEND.
  // The open file's identity, to notice it deleted or replaced.
  uint64_t file_dev_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t file_ino_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_ISSUE_SINKS_H_
