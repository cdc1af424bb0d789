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
#include "file_util.h"
#include "matrix/core/file_path.h"
#include "matrix/trace/proc_stats.h"

namespace matrix {
namespace {

using internal::ErrnoError;
using internal::OpenFileInDirectory;
using internal::OpenReportDirectory;
using internal::SymlinkError;
using internal::UniqueFd;

constexpr char kPrefix[] = "looper-";
constexpr char kSuffix[] = ".log";


bool IsBlockLogName(absl::string_view name) {
  return absl::StartsWith(name, kPrefix) && absl::EndsWith(name, kSuffix) &&
         name.size() > sizeof(kPrefix) - 1 + sizeof(kSuffix) - 1;
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
  // Opened (and re-created if it was deleted) for every file: no descriptor
  // stays open between blocks. Never a symbolic link (see file_util.h).
  absl::StatusOr<UniqueFd> dir = OpenReportDirectory(options_.directory);
  if (!dir.ok()) return dir.status();
  const std::string name = FileName(write_time, options_.time_zone);
  const std::string temp_name = absl::StrCat(".", name, ".", getpid(), ".tmp");
  const std::string temp = absl::StrCat(options_.directory, "/", temp_name);
  // O_EXCL: never an existing file, nor a link planted at this predictable
  // name. A leftover (a crashed writer with the same pid) is removed once;
  // unlink removes a link itself, not its target.
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL;
  absl::StatusOr<UniqueFd> fd = OpenFileInDirectory(dir->get(), temp_name, kFlags, temp);
  if (!fd.ok() && unlinkat(dir->get(), temp_name.c_str(), 0) == 0) {
    fd = OpenFileInDirectory(dir->get(), temp_name, kFlags, temp);
  }
  if (!fd.ok()) return fd.status();
  size_t written = 0;
  absl::Status status;
  if (const int err = internal::WriteFully(fd->get(), text, &written); err != 0) {
    status = ErrnoError("write " + temp, err);
  }
  if (close(fd->release()) != 0 && status.ok()) status = ErrnoError("close " + temp, errno);
  if (!status.ok()) {
    unlinkat(dir->get(), temp_name.c_str(), 0);
    return status;
  }
  // link() never replaces an existing file (nor follows a link there): a
  // second block in the same millisecond gets the next free "-N" name.
  const std::string stem = name.substr(0, name.size() - (sizeof(kSuffix) - 1));
  std::string path;
  for (int n = 0; n < 1000; ++n) {
    const std::string final_name = n == 0 ? name : absl::StrCat(stem, "-", n, kSuffix);
    path = absl::StrCat(options_.directory, "/", final_name);
    if (linkat(dir->get(), temp_name.c_str(), dir->get(), final_name.c_str(), 0) == 0) {
      unlinkat(dir->get(), temp_name.c_str(), 0);
      return path;
    }
    if (errno != EEXIST) break;
  }
  const int err = errno;
  unlinkat(dir->get(), temp_name.c_str(), 0);
  return ErrnoError("link " + path, err);
}

absl::StatusOr<std::vector<BlockLogWriter::Entry>> BlockLogWriter::ListLocked() const {
  std::vector<Entry> entries;
  // The report directory itself must not be a link (as in Write()).
  const int fd =
      open(options_.directory.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st;
    if (err == ENOENT) return entries;
    if (err == ELOOP || (err == ENOTDIR && lstat(options_.directory.c_str(), &st) == 0 &&
                         S_ISLNK(st.st_mode))) {
      return SymlinkError(options_.directory);
    }
    return ErrnoError("open " + options_.directory, err);
  }
  std::unique_ptr<DIR, int (*)(DIR*)> dir(fdopendir(fd), &closedir);
  if (dir == nullptr) {
    const int err = errno;
    close(fd);
    return ErrnoError("opendir " + options_.directory, err);
  }
  while (const dirent* e = readdir(dir.get())) {
    if (!IsBlockLogName(e->d_name)) continue;
    std::string path = absl::StrCat(options_.directory, "/", e->d_name);
    struct stat st;
    // Regular files only: a link named looper-*.log is not listed.
    if (fstatat(dirfd(dir.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
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
  if (DirName(path) != options_.directory || !IsBlockLogName(std::string(BaseName(path)))) {
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
