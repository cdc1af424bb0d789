#include "internal/fleet_checkpoint.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "matrix/core/file_path.h"

namespace matrix::report::internal {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError(std::strerror(n < 0 ? errno : EIO));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t Fnv1a(absl::string_view text, uint64_t hash) {
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

uint64_t HeadHash(absl::string_view head_bytes, int64_t offset) {
  return Fnv1a(head_bytes.substr(0, std::min<size_t>(static_cast<size_t>(offset), kHeadBytes)),
               0xcbf29ce484222325ULL);
}

std::string EscapeCheckpointPath(absl::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out;
}

bool UnescapeCheckpointPath(absl::string_view escaped, std::string& path) {
  path.clear();
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] != '\\') {
      path += escaped[i];
      continue;
    }
    if (i + 1 < escaped.size() && escaped[i + 1] == '\\') {
      path += '\\';
      ++i;
      continue;
    }
    if (i + 3 < escaped.size() && escaped[i + 1] == 'x' && HexDigit(escaped[i + 2]) >= 0 &&
        HexDigit(escaped[i + 3]) >= 0) {
      path += static_cast<char>(HexDigit(escaped[i + 2]) * 16 + HexDigit(escaped[i + 3]));
      i += 3;
      continue;
    }
    return false;
  }
  return true;
}

absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path) {
  absl::StatusOr<RegularFile> file = OpenRegularFile(path, /*follow_symlinks=*/false);
  if (absl::IsNotFound(file.status())) return Checkpoint{};
  if (!file.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint refused: ", file.status().message()));
  }
  const uid_t owner = file->st.st_uid;
  if (owner != ::geteuid()) {
    struct stat dir {};
    const std::string directory(DirName(path));
    if (::stat(directory.c_str(), &dir) != 0 || dir.st_uid != owner) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint refused: ", path, ": owned by user ", owner,
          ", neither the pushing user (", ::geteuid(), ") nor the owner of ", directory,
          "; remove it or push as its owner"));
    }
  }
  if (file->st.st_size > kMaxCheckpointBytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint refused: ", path, ": ", file->st.st_size, " bytes, more than a checkpoint's ",
        kMaxCheckpointBytes));
  }
  std::string text;
  text.resize(static_cast<size_t>(file->st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(file->fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read the checkpoint ", path, ": ", std::strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  Checkpoint checkpoint;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 5));
    if (parts.size() != 6) continue;
    FileId id;
    Mark mark;
    if (!absl::SimpleAtoi(parts[0], &id.dev) || !absl::SimpleAtoi(parts[1], &id.ino) ||
        !absl::SimpleAtoi(parts[2], &mark.offset) || !absl::SimpleAtoi(parts[3], &mark.line) ||
        !absl::SimpleHexAtoi(parts[4], &mark.head) || mark.offset < 0 || mark.line < 0 ||
        !UnescapeCheckpointPath(parts[5], mark.path)) {
      continue;
    }
    checkpoint[id] = std::move(mark);
  }
  return checkpoint;
}

absl::StatusOr<ScopedFd> CreateTempBeside(const std::string& path, std::string& name) {
  std::string pattern = absl::StrCat(path, ".tmp.XXXXXX");
  ScopedFd fd(::mkostemp(pattern.data(), O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot create a temporary file beside ", path, ": ",
                                            std::strerror(errno)));
  }
  name = std::move(pattern);
  return fd;
}

absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  std::string text;
  for (const auto& [id, mark] : checkpoint) {
    absl::StrAppendFormat(&text, "%d %d %d %d %016x %s\n", id.dev, id.ino, mark.offset,
                          mark.line, mark.head, EscapeCheckpointPath(mark.path));
  }
  std::string tmp;
  absl::StatusOr<ScopedFd> fd = CreateTempBeside(path, tmp);
  if (!fd.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot write the checkpoint ", path, ": ", fd.status().message()));
  }
  absl::Status written = WriteAll(fd->get(), text);
  if (written.ok() && ::close(fd->release()) != 0) {
    written = absl::InternalError(std::strerror(errno));
  }
  if (written.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    written = absl::InternalError(std::strerror(errno));
  }
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write the checkpoint ", path, ": ", written.message()));
  }
  return absl::OkStatus();
}

}  // namespace matrix::report::internal
