// File: plugins/src/file_util.h (private)
//
// File helpers shared by the sinks that write reports to disk
// (JsonLinesIssueSink, BlockLogWriter). They never write through a symbolic
// link that they did not get from the user's configured path:
//
//   absl::StatusOr<internal::UniqueFd> dir = internal::OpenReportDirectory(path);
//   int fd = openat(dir->get(), "issues.jsonl", O_WRONLY | O_CREAT | O_NOFOLLOW ..., 0600);
//
// Thread safety: thread-safe (they touch only the file system and their
// arguments). They do file I/O: never call them on the looper thread.

#ifndef MATRIX_PLUGINS_SRC_FILE_UTIL_H_
#define MATRIX_PLUGINS_SRC_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace matrix::internal {

// An owned file descriptor, closed on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// `what: <strerror(err)>`: NotFound for ENOENT, Internal otherwise.
absl::Status ErrnoError(absl::string_view what, int err);

// FailedPrecondition "<path> is a symbolic link; matrix does not write
// reports through links".
absl::Status SymlinkError(absl::string_view path);

// OpenReportDirectory()
//
// mkdir -p `path`, then opens it (O_DIRECTORY | O_CLOEXEC) for openat() and
// friends. Walks the path one component at a time with openat():
//   - missing directories are created with mode 0700 (reports hold stacks and
//     scene names that may be private) and opened with O_NOFOLLOW;
//   - the last component, the report directory itself, is always opened with
//     O_NOFOLLOW: it must be a real directory, not a symbolic link;
//   - leading components that already exist are the caller's own path and are
//     followed, also when they are symbolic links (/var/tmp -> /private/...).
// Errors name the component: FailedPrecondition for a symbolic link (see
// SymlinkError()) or "<path> is not a directory", the errno otherwise.
absl::StatusOr<UniqueFd> OpenReportDirectory(const std::string& path);

// Opens `name` in the directory `dir_fd` with `flags` | O_NOFOLLOW |
// O_CLOEXEC (mode 0600 when created) and checks that it is a regular file
// with one link, owned by this process's effective user. An existing file
// readable or writable by others is set to 0600. `display_path` names it in
// errors (FailedPrecondition): SymlinkError() for a link, "has N hard
// links", "is owned by uid N".
absl::StatusOr<UniqueFd> OpenFileInDirectory(int dir_fd, const std::string& name, int flags,
                                             const std::string& display_path);

// Writes `data` to `fd`: one write() call, more only after a short write or
// EINTR. Returns 0, or the errno that stopped it; `*written` is how many bytes
// were written either way.
int WriteFully(int fd, absl::string_view data, size_t* written);

}  // namespace matrix::internal

#endif  // MATRIX_PLUGINS_SRC_FILE_UTIL_H_
