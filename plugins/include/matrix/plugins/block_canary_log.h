// File: matrix/plugins/block_canary_log.h
//
// BlockLogWriter is BlockCanary's LogWriter: one text file per block,
// <dir>/looper-yyyy-MM-dd_HH-mm-ss.SSS.log (the write time, local), in the
// layout of FormatBlockLog(); files older than the retention (2 days, as
// BlockCanary) are deleted, and beyond BlockCanary, only the newest
// `max_files` are kept. ReadBlockLog() reads one back.
//
//   matrix::BlockLogWriter writer({.directory = "/var/tmp/app/blockcanary"});
//   absl::StatusOr<std::string> path = writer.Write(info, absl::Now());
//   absl::StatusOr<int> deleted = writer.CleanObsolete(absl::Now());
//   for (const std::string& file : *writer.ListLogFiles()) {
//     absl::StatusOr<matrix::BlockInfo> block = matrix::ReadBlockLog(file);
//     if (!block.ok()) continue;  // Never deleted for being unreadable.
//   }
//
// Files appear whole: each is written under a hidden temporary name and
// linked into place, so a reader never sees half a file and two blocks
// written in the same millisecond get two files (the second is named
// looper-...-1.log). The directory is created 0700 and files 0600: blocks
// hold stacks and scene names that may be private. Only regular files named
// looper-*.log are listed or deleted (a symbolic link is not).
//
// No file stays open: each Write() opens the directory again, re-creating it
// if it was deleted. Nothing is written through a symbolic link: the
// directory itself must not be one (FailedPrecondition naming it; leading
// components that already exist may be), the temporary file is created with
// O_EXCL | O_NOFOLLOW, and link() never follows or replaces one.
//
// Thread safety: thread-safe; writes and deletes are serialized. Every method
// does file I/O: call it from the worker (or any non-looper) thread.

#ifndef MATRIX_PLUGINS_BLOCK_CANARY_LOG_H_
#define MATRIX_PLUGINS_BLOCK_CANARY_LOG_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/plugins/block_canary_info.h"

namespace matrix {

class BlockLogWriter {
 public:
  struct Options {
    std::string directory;
    absl::Duration retention = absl::Hours(48);
    int max_files = 500;
    absl::TimeZone time_zone = absl::LocalTimeZone();
  };

  explicit BlockLogWriter(Options options) : options_(std::move(options)) {}

  // The file name for a block written at `write_time`:
  // "looper-2025-11-21_10-00-01.626.log".
  static std::string FileName(absl::Time write_time, absl::TimeZone time_zone);

  // Write()
  //
  // Writes `info` (rendered with `write_time` in the header and the file
  // name), creating the directory if needed. Returns the file's path.
  absl::StatusOr<std::string> Write(const BlockInfo& info, absl::Time write_time)
      ABSL_LOCKS_EXCLUDED(mu_);

  // CleanObsolete()
  //
  // Deletes the block files last modified more than `retention` before
  // `now`, then the oldest beyond `max_files`. Returns how many it deleted.
  // A missing directory holds no files (0).
  absl::StatusOr<int> CleanObsolete(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // The block files, newest (last modified) first.
  absl::StatusOr<std::vector<std::string>> ListLogFiles() const ABSL_LOCKS_EXCLUDED(mu_);

  // Deletes one block file (it must be a looper-*.log in the directory), or
  // all of them.
  absl::Status Delete(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status DeleteAll() ABSL_LOCKS_EXCLUDED(mu_);

  const Options& options() const { return options_; }

 private:
  struct Entry {
    std::string path;
    absl::Time mtime;
  };
  absl::StatusOr<std::vector<Entry>> ListLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
};

// ReadBlockLog()
//
// Reads and parses one block file (see ParseBlockLog()); sets `log_file`.
// NotFound when it does not exist, InvalidArgument (naming the file) when it
// cannot be parsed.
absl::StatusOr<BlockInfo> ReadBlockLog(const std::string& path,
                                       absl::TimeZone time_zone = absl::LocalTimeZone());

}  // namespace matrix

#endif  // MATRIX_PLUGINS_BLOCK_CANARY_LOG_H_
