#include "matrix/plugins/block_canary_log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "matrix/trace/proc_stats.h"

namespace matrix {
namespace {

constexpr char kPrefix[] = "looper-";
constexpr char kSuffix[] = ".log";

absl::Status ErrnoError(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

bool IsBlockLogName(absl::string_view name) {
  return absl::StartsWith(name, kPrefix) && absl::EndsWith(name, kSuffix) &&
         name.size() > sizeof(kPrefix) - 1 + sizeof(kSuffix) - 1;
}

// mkdir -p, creating missing directories 0700.
absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty block log directory");
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (prefix.empty()) continue;
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoError("mkdir " + prefix, errno);
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoError("stat " + path, errno);
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(path + " is not a directory");
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

std::string BlockLogWriter::FileName(absl::Time write_time, absl::TimeZone time_zone) {
  // LogWriter's FILE_NAME_FORMATTER "yyyy-MM-dd_HH-mm-ss.SSS".
  return absl::StrCat(kPrefix, absl::FormatTime("%Y-%m-%d_%H-%M-%E3S", write_time, time_zone),
                      kSuffix);
}

absl::StatusOr<std::string> BlockLogWriter::Write(const BlockInfo& info, absl::Time write_time) {
  const std::string text = FormatBlockLog(info, write_time, options_.time_zone);
  absl::MutexLock lock(&mu_);
  if (absl::Status status = MakeDirectories(options_.directory); !status.ok()) return status;
  const std::string name = FileName(write_time, options_.time_zone);
  const std::string temp =
      absl::StrCat(options_.directory, "/.", name, ".", getpid(), ".tmp");
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("open " + temp, errno);
  absl::Status status = WriteAll(fd, text, temp);
  if (close(fd) != 0 && status.ok()) status = ErrnoError("close " + temp, errno);
  if (!status.ok()) {
    unlink(temp.c_str());
    return status;
  }
  // link() never replaces an existing file: a second block in the same
  // millisecond gets the next free "-N" name.
  const std::string stem = name.substr(0, name.size() - (sizeof(kSuffix) - 1));
  std::string path;
  for (int n = 0; n < 1000; ++n) {
    path = n == 0 ? absl::StrCat(options_.directory, "/", name)
                  : absl::StrCat(options_.directory, "/", stem, "-", n, kSuffix);
    if (link(temp.c_str(), path.c_str()) == 0) {
      unlink(temp.c_str());
      return path;
    }
    if (errno != EEXIST) break;
  }
  const int err = errno;
  unlink(temp.c_str());
  return ErrnoError("link " + path, err);
}

absl::StatusOr<std::vector<BlockLogWriter::Entry>> BlockLogWriter::ListLocked() const {
  std::vector<Entry> entries;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(options_.directory.c_str()), &closedir);
  if (dir == nullptr) {
    if (errno == ENOENT) return entries;
    return ErrnoError("opendir " + options_.directory, errno);
  }
  while (const dirent* e = readdir(dir.get())) {
    if (!IsBlockLogName(e->d_name)) continue;
    std::string path = absl::StrCat(options_.directory, "/", e->d_name);
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    entries.push_back(Entry{std::move(path), absl::TimeFromTimespec(st.st_mtim)});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.mtime != b.mtime) return a.mtime > b.mtime;
    return a.path > b.path;
  });
  return entries;
}

absl::StatusOr<std::vector<std::string>> BlockLogWriter::ListLogFiles() const {
  absl::ReaderMutexLock lock(&mu_);
  absl::StatusOr<std::vector<Entry>> entries = ListLocked();
  if (!entries.ok()) return entries.status();
  std::vector<std::string> paths;
  paths.reserve(entries->size());
  for (Entry& e : *entries) paths.push_back(std::move(e.path));
  return paths;
}

absl::StatusOr<int> BlockLogWriter::CleanObsolete(absl::Time now) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<Entry>> entries = ListLocked();
  if (!entries.ok()) return entries.status();
  int deleted = 0;
  int kept = 0;
  absl::Status status;
  for (const Entry& e : *entries) {  // Newest first.
    const bool obsolete = now - e.mtime > options_.retention;
    if (!obsolete && kept < options_.max_files) {
      ++kept;
      continue;
    }
    if (unlink(e.path.c_str()) == 0) {
      ++deleted;
    } else if (errno != ENOENT) {
      status.Update(ErrnoError("unlink " + e.path, errno));
    }
  }
  if (!status.ok()) return status;
  return deleted;
}

absl::Status BlockLogWriter::Delete(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (dir != options_.directory || !IsBlockLogName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a block file of ", options_.directory));
  }
  absl::MutexLock lock(&mu_);
  if (unlink(path.c_str()) != 0) return ErrnoError("unlink " + path, errno);
  return absl::OkStatus();
}

absl::Status BlockLogWriter::DeleteAll() {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<Entry>> entries = ListLocked();
  if (!entries.ok()) return entries.status();
  absl::Status status;
  for (const Entry& e : *entries) {
    if (unlink(e.path.c_str()) != 0 && errno != ENOENT) {
      status.Update(ErrnoError("unlink " + e.path, errno));
    }
  }
  return status;
}

absl::StatusOr<BlockInfo> ReadBlockLog(const std::string& path, absl::TimeZone time_zone) {
  absl::StatusOr<std::string> text = internal::ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<BlockInfo> info = ParseBlockLog(*text, time_zone);
  if (!info.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", info.status().message()));
  }
  info->log_file = path;
  return info;
}

}  // namespace matrix
