// File: matrix/plugins/issue_sinks.h
//
// Ready-made PluginListeners that store issues:
//
//   LogIssueSink        one spdlog line per issue (through matrix::Logger()).
//   JsonLinesIssueSink  one JSON object per line (protobuf's JSON printer with
//                       proto field names), one set of files per kind of
//                       issue (retention by value, below). Each line is
//                       written with one append, whole or not at all; each
//                       kind's file rotates by size on its own. The directory
//                       is created 0700 and files 0600: reports hold stacks
//                       and scene names that may be private.
//
// Retention by value (JsonLinesIssueSink): issues are kept per kind, so that
// a flood of one kind (an hour of Trace_FPS, a storm of slow methods) never
// pushes another kind out of the files:
//
//   kind          issues                                  file
//   hang          Trace_EvilMethod ANR, LAG, LAG_*,       <name>.jsonl
//                 SIGNAL_ANR
//   fps           Trace_FPS                               <name>.fps.jsonl
//   slow_method   Trace_EvilMethod NORMAL                 <name>.slow_method.jsonl
//   startup       Trace_StartUp, Trace_EvilMethod STARTUP <name>.startup.jsonl
//   block         BlockCanary                             <name>.block.jsonl
//   other         any other tag                           <name>.other.jsonl
//
// Each kind rotates by size on its own (<name>[.<kind>].1.jsonl is its
// previous file, up to `max_files` kept), so when a kind has to make room it
// drops its own oldest issues, and only those. Dropped issues are counted per
// kind (dropped()); the first issue written after rotation dropped some, of
// whatever kind, carries the counts so far in `sink_dropped` (cumulative
// since Create(); matrix-report summary shows them).
// <name>.jsonl is created at once; other kinds' files when their first issue
// comes.
//
// File safety (JsonLinesIssueSink), for every file:
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
// `matrix-report` (tools/) reads these files (a directory: all of them).
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
#include "matrix/proto/issue.pb.h"

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
    // Rotate a kind's file when it would grow past this many bytes.
    int64_t max_file_bytes = int64_t{4} << 20;
    // Files kept per kind: the current one plus max_files - 1 rotated ones.
    int max_files = 5;
  };

  // The kinds issues are kept by (see the file comment).
  enum class Kind { kHang = 0, kFps, kSlowMethod, kStartup, kBlock, kOther };
  static constexpr int kKindCount = 6;
  // The kind `issue` is kept as.
  static Kind KindOf(const proto::Issue& issue);
  // "hang", "fps", "slow_method", "startup", "block", "other": the
  // SinkDrops field and the file infix.
  static absl::string_view KindName(Kind kind);

  // Creates the directory (0700) if needed and opens <name>.jsonl (0600).
  // FailedPrecondition (naming the path) when the report directory or the
  // file is a symbolic link, or not a directory / regular file.
  // Any thread.
  static absl::StatusOr<std::shared_ptr<JsonLinesIssueSink>> Create(Options options);
  ~JsonLinesIssueSink() override;

  // Appends; on failure counts the issue and logs the error. Any thread but
  // the looper (it does file I/O); Matrix calls it on its worker thread.
  void OnReportIssue(const Issue& issue) override;
  // Appends one line to the issue's kind's file; returns the error instead
  // of logging it (a warning for a re-created file is still logged). Same
  // threads as OnReportIssue().
  absl::Status Append(const Issue& issue) ABSL_LOCKS_EXCLUDED(mu_);

  // The current file of hangs, <dir>/<name>.jsonl. Any thread.
  std::string path() const { return PathFor(Kind::kHang, 0); }
  // The current file of `kind`, <dir>/<name>[.<kind>].jsonl. Any thread.
  std::string path(Kind kind) const { return PathFor(kind, 0); }
  // Issues that could not be written (logged once each). Any thread.
  int64_t failed_writes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Issues rotation dropped (whole lines of the files it deleted), per kind,
  // since Create(). Any thread.
  proto::SinkDrops dropped() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One kind's current file.
  struct KindFile {
    int fd = -1;  // O_APPEND; -1 until the kind's first issue or after an error.
    // The open file's identity, to notice it deleted or replaced.
    uint64_t dev = 0;
    uint64_t ino = 0;
    int64_t size = 0;
  };

  explicit JsonLinesIssueSink(Options options) : options_(std::move(options)) {}
  std::string NameFor(Kind kind, int index) const;
  std::string PathFor(Kind kind, int index) const;
  // (Re-)opens the report directory, then `kind`'s current file.
  absl::Status OpenLocked(Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CloseLocked(Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FileReplacedLocked(Kind kind) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status RotateLocked(Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the issues of `name` (in the report directory), about to be
  // deleted, as dropped.
  void CountDroppedLocked(Kind kind, const std::string& name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::SinkDrops DroppedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status AppendLocked(Kind kind, absl::string_view line, bool* replaced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  int dir_fd_ ABSL_GUARDED_BY(mu_) = -1;  // The report directory.
  KindFile files_[kKindCount] ABSL_GUARDED_BY(mu_);
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_[kKindCount] ABSL_GUARDED_BY(mu_) = {};
  // Rotation dropped issues since the last line that said so.
  bool drops_to_report_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_ISSUE_SINKS_H_
