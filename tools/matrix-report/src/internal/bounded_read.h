// File: tools/matrix-report/src/internal/bounded_read.h
//
// Reading report files without trusting them (internal to
// matrix_report_lib): OpenRegularFile() opens a path only when it is a
// regular file (never blocking on a FIFO; optionally never through a
// symbolic link), FdStreamBuf reads an open descriptor as a stream and keeps
// the read error, and ReadLineBounded() reads one line in bounded memory: a
// line longer than the cap is consumed to its newline and dropped.
//
//   absl::StatusOr<RegularFile> file = OpenRegularFile(path, /*follow_symlinks=*/true);
//   FdStreamBuf buffer(file->fd.get());
//   std::istream in(&buffer);
//   std::string line;
//   for (LineRead read; (read = ReadLineBounded(in, kMaxIssueLineBytes, line)).got;) Use(line);
//
// Thread safety: thread-compatible; one thread uses one stream.

#ifndef MATRIX_REPORT_SRC_INTERNAL_BOUNDED_READ_H_
#define MATRIX_REPORT_SRC_INTERNAL_BOUNDED_READ_H_

#include <sys/stat.h>

#include <cstdint>
#include <istream>
#include <streambuf>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace matrix::report::internal {

// An owned file descriptor, closed by the destructor.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept;
  ~ScopedFd();
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

struct RegularFile {
  ScopedFd fd;
  struct stat st {};
};

// What a file is when it is not a regular one: "a FIFO", "a character
// device", "a directory", ...
const char* FileKind(mode_t mode);

// Opens `path` read-only when it is a regular file. The open does not block
// (O_NONBLOCK, cleared after the check), so a FIFO is refused instead of
// waited on; without `follow_symlinks` a symbolic link is refused too
// (O_NOFOLLOW). Errors name the path: NotFound when it does not exist,
// FailedPrecondition when it is not a regular file or is a link.
absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path, bool follow_symlinks);

// A read-only stream buffer over a descriptor it does not own. A failed
// read() ends the stream; error() is its errno then (0 otherwise).
class FdStreamBuf : public std::streambuf {
 public:
  explicit FdStreamBuf(int fd) : fd_(fd) {}
  int error() const { return error_; }
  // The bytes read from the descriptor and not yet taken, reading more when
  // none are left; empty at the end (or after an error).
  absl::string_view Buffered();
  // Takes the first `n` of Buffered()'s bytes.
  void Take(size_t n) { gbump(static_cast<int>(n)); }

 protected:
  int_type underflow() override;

 private:
  int fd_;
  int error_ = 0;
  char buffer_[1 << 16];
};

struct LineRead {
  bool got = false;         // False at the end of the input (nothing read).
  bool terminated = false;  // The line ended with '\n' (not the input's end).
  bool too_long = false;    // Longer than the cap: consumed and dropped.
  int64_t bytes = 0;        // Bytes consumed, the newline included.
};

// Reads the next line of `in` into `line`, without its '\n'. A line of more
// than `max_bytes` bytes is read to its end in bounded memory and dropped
// (`line` empty, `too_long` set).
LineRead ReadLineBounded(std::istream& in, size_t max_bytes, std::string& line);
// The same from a descriptor's buffer, a buffered block at a time (memchr
// for the newline rather than a call per byte).
LineRead ReadLineBounded(FdStreamBuf& buffer, size_t max_bytes, std::string& line);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_BOUNDED_READ_H_
