#include "internal/bounded_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace matrix::report::internal {

ScopedFd& ScopedFd::operator=(ScopedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0) ::close(fd_);
}

const char* FileKind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "of an unknown type";
}

absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path, bool follow_symlinks) {
  const int flags =
      O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (follow_symlinks ? 0 : O_NOFOLLOW);
  RegularFile file;
  file.fd = ScopedFd(::open(path.c_str(), flags));
  if (file.fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (error == ELOOP && !follow_symlinks) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": a symbolic link, not a regular file"));
    }
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", std::strerror(error)));
  }
  if (::fstat(file.fd.get(), &file.st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(file.st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a regular file (", FileKind(file.st.st_mode), ")"));
  }
  // Reads block again (a regular file's never wait anyway).
  const int status = ::fcntl(file.fd.get(), F_GETFL);
  if (status >= 0) (void)::fcntl(file.fd.get(), F_SETFL, status & ~O_NONBLOCK);
  return file;
}

FdStreamBuf::int_type FdStreamBuf::underflow() {
  if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
  if (error_ != 0) return traits_type::eof();
  ssize_t n = 0;
  do {
    n = ::read(fd_, buffer_, sizeof(buffer_));
  } while (n < 0 && errno == EINTR);
  if (n < 0) error_ = errno;
  if (n <= 0) return traits_type::eof();
  setg(buffer_, buffer_, buffer_ + n);
  return traits_type::to_int_type(*gptr());
}

LineRead ReadLineBounded(std::istream& in, size_t max_bytes, std::string& line) {
  LineRead read;
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  if (buffer == nullptr) {
    in.setstate(std::ios::badbit);
    return read;
  }
  while (true) {
    const std::streambuf::int_type c = buffer->sbumpc();
    if (std::streambuf::traits_type::eq_int_type(c, std::streambuf::traits_type::eof())) {
      in.setstate(read.got ? std::ios::eofbit : std::ios::eofbit | std::ios::failbit);
      return read;
    }
    read.got = true;
    ++read.bytes;
    const char ch = std::streambuf::traits_type::to_char_type(c);
    if (ch == '\n') {
      read.terminated = true;
      return read;
    }
    if (read.too_long) continue;
    if (line.size() >= max_bytes) {
      read.too_long = true;
      std::string().swap(line);
      continue;
    }
    line.push_back(ch);
  }
}

absl::string_view FdStreamBuf::Buffered() {
  if (gptr() == egptr() && traits_type::eq_int_type(underflow(), traits_type::eof())) return {};
  return absl::string_view(gptr(), static_cast<size_t>(egptr() - gptr()));
}

LineRead ReadLineBounded(FdStreamBuf& buffer, size_t max_bytes, std::string& line) {
  LineRead read;
  line.clear();
  while (true) {
    const absl::string_view chunk = buffer.Buffered();
    if (chunk.empty()) return read;
    read.got = true;
    const char* newline = static_cast<const char*>(std::memchr(chunk.data(), '\n', chunk.size()));
    const size_t take =
        newline != nullptr ? static_cast<size_t>(newline - chunk.data()) : chunk.size();
    if (!read.too_long && line.size() + take > max_bytes) {
      read.too_long = true;
      std::string().swap(line);
    }
    if (!read.too_long) line.append(chunk.data(), take);
    const size_t consumed = take + (newline != nullptr ? 1 : 0);
    buffer.Take(consumed);
    read.bytes += static_cast<int64_t>(consumed);
    if (newline != nullptr) {
      read.terminated = true;
      return read;
    }
  }
}

}  // namespace matrix::report::internal
