#include "file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace matrix::internal {
namespace {

// The error for openat() of `name` under `parent_fd` (shown as `path`)
// failing with `err`: says "symbolic link" or "not a directory" plainly.
absl::Status OpenError(int parent_fd, const std::string& name, const std::string& path,
                       int err) {
  struct stat st;
  if ((err == ELOOP || err == ENOTDIR) &&
      fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return SymlinkError(path);
    if (err == ENOTDIR && !S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is not a directory"));
    }
  }
  return ErrnoError("open " + path, err);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status ErrnoError(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

absl::Status SymlinkError(absl::string_view path) {
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is a symbolic link; matrix does not write reports through links"));
}

absl::StatusOr<UniqueFd> OpenReportDirectory(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  UniqueFd current;
  if (path[0] == '/') {
    current.reset(open("/", kFlags));
    if (!current.valid()) return ErrnoError("open /", errno);
  } else {
    current.reset(open(".", kFlags));
    if (!current.valid()) return ErrnoError("open .", errno);
  }
  size_t begin = 0;
  while (begin < path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    const std::string name = path.substr(begin, end - begin);
    const std::string prefix = path.substr(0, end);
    size_t next = end;
    while (next < path.size() && path[next] == '/') ++next;
    const bool last = next >= path.size();
    begin = next;
    if (name.empty() || (name == "." && !last)) continue;

    int fd = openat(current.get(), name.c_str(), kFlags | (last ? O_NOFOLLOW : 0));
    if (fd < 0 && errno == ENOENT) {
      if (mkdirat(current.get(), name.c_str(), 0700) != 0 && errno != EEXIST) {
        return ErrnoError("mkdir " + prefix, errno);
      }
      // Made by us (or, racing, by someone else): never followed if a link.
      fd = openat(current.get(), name.c_str(), kFlags | O_NOFOLLOW);
    }
    if (fd < 0) return OpenError(current.get(), name, prefix, errno);
    current.reset(fd);
  }
  return current;
}

absl::StatusOr<UniqueFd> OpenFileInDirectory(int dir_fd, const std::string& name, int flags,
                                             const std::string& display_path) {
  UniqueFd fd(openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    const int err = errno;
    struct stat st;
    if (err == ELOOP && fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode)) {
      return SymlinkError(display_path);
    }
    return ErrnoError("open " + display_path, err);
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoError("fstat " + display_path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(display_path, " is not a regular file"));
  }
  // A hard link planted to another file would have the reports written into
  // it (and its mode changed); a file of another user's is not ours to fill.
  if (st.st_nlink > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        display_path, " has ", st.st_nlink, " hard links; matrix writes reports only to a file "
        "with one link"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        display_path, " is owned by uid ", st.st_uid, ", not by this process (uid ", geteuid(),
        "); matrix does not write reports into another user's file"));
  }
  if ((st.st_mode & 077) != 0 && fchmod(fd.get(), 0600) != 0) {
    return ErrnoError("chmod 0600 " + display_path, errno);
  }
  return fd;
}

int WriteFully(int fd, absl::string_view data, size_t* written) {
  *written = 0;
  while (*written < data.size()) {
    const ssize_t n = write(fd, data.data() + *written, data.size() - *written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    *written += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace matrix::internal
