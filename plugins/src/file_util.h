// File: plugins/src/file_util.h (private)
//
// File helpers shared by the sinks that write reports to disk.
//
// Thread safety: thread-safe (they touch only the file system).

#ifndef MATRIX_PLUGINS_SRC_FILE_UTIL_H_
#define MATRIX_PLUGINS_SRC_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace matrix::internal {

// `what: <strerror(err)>`: NotFound for ENOENT, Internal otherwise.
absl::Status ErrnoError(absl::string_view what, int err);

// mkdir -p: creates the missing directories of `path` with mode 0700 (reports
// hold stacks and scene names that may be private). FailedPrecondition if
// `path` exists and is not a directory.
absl::Status MakeDirectories(const std::string& path);

}  // namespace matrix::internal

#endif  // MATRIX_PLUGINS_SRC_FILE_UTIL_H_
