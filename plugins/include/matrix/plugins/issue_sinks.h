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
  static absl::StatusOr<std::shared_ptr<JsonLinesIssueSink>> Create(Options options);
  ~JsonLinesIssueSink() override;

  void OnReportIssue(const Issue& issue) override;
  // Appends one line; returns the error instead of logging it.
  absl::Status Append(const Issue& issue);

  std::string path() const { return PathFor(0); }
  // Issues that could not be written (logged once each).
  int64_t failed_writes() const;

 private:
  explicit JsonLinesIssueSink(Options options) : options_(std::move(options)) {}
  std::string PathFor(int index) const;
  absl::Status OpenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RotateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_ISSUE_SINKS_H_
