#include "matrix/plugins/issue_sinks.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/core/logging.h"
#include "file_util.h"

namespace matrix {
namespace {

using internal::ErrnoError;
using internal::OpenFileInDirectory;
using internal::OpenReportDirectory;
using internal::UniqueFd;
using internal::WriteFully;

}  // namespace

std::string SummarizeIssue(const Issue& issue) {
  const proto::Issue& p = issue.proto();
  std::string out = p.tag();
  switch (p.report_case()) {
    case proto::Issue::kFrame: {
      const proto::FrameReport& f = p.frame();
      absl::StrAppendFormat(&out,
                            " scene=%s fps=%.1f frames=%d dropped=%d levels(best/normal/middle/"
                            "high/frozen)=%d/%d/%d/%d/%d worst1s=%.1f%%",
                            f.scene(), f.fps(), f.frames(), f.dropped_frames(),
                            f.drop_level().best(), f.drop_level().normal(),
                            f.drop_level().middle(), f.drop_level().high(),
                            f.drop_level().frozen(), f.worst_dropped_percent());
      break;
    }
    case proto::Issue::kEvilMethod: {
      const proto::EvilMethodReport& e = p.evil_method();
      absl::StrAppendFormat(&out, " %s %.0fms scene=%s key=%s", proto::Detail_Name(e.detail()),
                            e.cost_ms(), e.scene(), e.stack_key());
      break;
    }
    case proto::Issue::kAnr: {
      const proto::AnrReport& a = p.anr();
      absl::StrAppendFormat(&out, " %s %.0fms scene=%s key=%s", proto::Detail_Name(a.detail()),
                            a.cost_ms(), a.scene(),
                            a.stack_key().empty() ? std::string(issue.key()) : a.stack_key());
      break;
    }
    case proto::Issue::kStartup: {
      const proto::StartupReport& s = p.startup();
      absl::StrAppendFormat(&out, " %s %.0fms first_scene=%s",
                            s.is_warm_start_up() ? "warm" : "cold", s.startup_duration_ms(),
                            s.first_scene());
      break;
    }
    case proto::Issue::kBlock: {
      const proto::BlockReport& b = p.block();
      absl::StrAppendFormat(&out, " blocked %dms key=%s samples=%d cpu_busy=%s%s%s",
                            b.cost_ms(), b.key_stack_line(), b.samples_size(),
                            b.cpu_busy() ? "true" : "false", b.log_file().empty() ? "" : " file=",
                            b.log_file());
      break;
    }
    default:
      if (!issue.key().empty()) absl::StrAppend(&out, " key=", issue.key());
      break;
  }
  return out;
}

void LogIssueSink::OnReportIssue(const Issue& issue) {
  Logger()->warn("{}", SummarizeIssue(issue));
}

absl::StatusOr<std::shared_ptr<JsonLinesIssueSink>> JsonLinesIssueSink::Create(Options options) {
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError("JsonLinesIssueSink: name must be a plain file name");
  }
  if (options.max_file_bytes < 1024) {
    return absl::InvalidArgumentError("JsonLinesIssueSink: max_file_bytes must be >= 1024");
  }
  if (options.max_files < 1) {
    return absl::InvalidArgumentError("JsonLinesIssueSink: max_files must be >= 1");
  }
  std::shared_ptr<JsonLinesIssueSink> sink(new JsonLinesIssueSink(std::move(options)));
  absl::MutexLock lock(&sink->mu_);
  if (absl::Status status = sink->OpenLocked(); !status.ok()) return status;
  return sink;
}

JsonLinesIssueSink::~JsonLinesIssueSink() {
  absl::MutexLock lock(&mu_);
  CloseLocked();
}

std::string JsonLinesIssueSink::NameFor(int index) const {
  if (index == 0) return absl::StrCat(options_.name, ".jsonl");
  return absl::StrCat(options_.name, ".", index, ".jsonl");
}

std::string JsonLinesIssueSink::PathFor(int index) const {
  return absl::StrCat(options_.directory, "/", NameFor(index));
}

void JsonLinesIssueSink::CloseLocked() {
  if (fd_ >= 0) close(fd_);
  if (dir_fd_ >= 0) close(dir_fd_);
  fd_ = -1;
  dir_fd_ = -1;
}

absl::Status JsonLinesIssueSink::OpenLocked() {
  CloseLocked();
  // The directory is walked (and re-created) on every open: it may have been
  // deleted since the last one.
  absl::StatusOr<UniqueFd> dir = OpenReportDirectory(options_.directory);
  if (!dir.ok()) return dir.status();
  const std::string path = PathFor(0);
  absl::StatusOr<UniqueFd> file =
      OpenFileInDirectory(dir->get(), NameFor(0), O_RDWR | O_CREAT | O_APPEND, path);
  if (!file.ok()) return file.status();
  struct stat st;
  if (fstat(file->get(), &st) != 0) return ErrnoError("fstat " + path, errno);
  int64_t size = st.st_size;
  // A writer killed in the middle of a line left a fragment: start on a
  // fresh line, so that only the fragment is lost and not the next issue too.
  if (size > 0) {
    char last = '\n';
    const ssize_t n = pread(file->get(), &last, 1, size - 1);
    if (n < 0) return ErrnoError("read " + path, errno);
    if (n == 1 && last != '\n') {
      size_t written = 0;
      if (const int err = WriteFully(file->get(), "\n", &written); err != 0) {
        return ErrnoError("appending to " + path, err);
      }
      ++size;
    }
  }
  dir_fd_ = dir->release();
  fd_ = file->release();
  size_ = size;
  file_dev_ = static_cast<uint64_t>(st.st_dev);
  file_ino_ = static_cast<uint64_t>(st.st_ino);
  return absl::OkStatus();
}

bool JsonLinesIssueSink::FileReplacedLocked() const {
  struct stat st;
  return lstat(PathFor(0).c_str(), &st) != 0 || static_cast<uint64_t>(st.st_dev) != file_dev_ ||
         static_cast<uint64_t>(st.st_ino) != file_ino_;
}

absl::Status JsonLinesIssueSink::RotateLocked() {
  close(fd_);
  fd_ = -1;
  // issues.(n-1) is dropped; issues.k -> issues.(k+1); issues -> issues.1.
  // In the directory opened by OpenLocked(); rename and unlink act on a
  // symbolic link itself, never on its target.
  unlinkat(dir_fd_, NameFor(options_.max_files - 1).c_str(), 0);
  for (int i = options_.max_files - 2; i >= 0; --i) {
    renameat(dir_fd_, NameFor(i).c_str(), dir_fd_, NameFor(i + 1).c_str());
  }
  if (options_.max_files == 1) unlinkat(dir_fd_, NameFor(0).c_str(), 0);
  return OpenLocked();
}

absl::Status JsonLinesIssueSink::Append(const Issue& issue) {
  // The whole record in one buffer, for one write().
  std::string line = issue.ToJson();
  line.push_back('\n');
  bool replaced = false;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = AppendLocked(line, &replaced);
  }
  if (replaced) {
    Logger()->warn("JsonLinesIssueSink: {} was removed or replaced (directory deleted?); "
                   "re-creating it",
                   PathFor(0));
  }
  return status;
}

absl::Status JsonLinesIssueSink::AppendLocked(absl::string_view line, bool* replaced) {
  // One lstat() per issue: the sink runs on the worker thread, never on the
  // looper thread. It finds the file deleted, or the directory with it, or
  // something else (a link) put in its place; the file is then re-opened.
  if (fd_ >= 0 && FileReplacedLocked()) {
    *replaced = true;
    CloseLocked();
  }
  if (fd_ < 0) {
    if (absl::Status status = OpenLocked(); !status.ok()) return status;
  }
  if (size_ > 0 && size_ + static_cast<int64_t>(line.size()) > options_.max_file_bytes) {
    if (absl::Status status = RotateLocked(); !status.ok()) return status;
  }
  // One write() on an O_APPEND descriptor: the line lands whole at the end.
  // Only a short write is continued; if the rest cannot be written (disk
  // full), the part written is cut back off, so no half line remains.
  size_t written = 0;
  const int err = WriteFully(fd_, line, &written);
  if (err == 0) {
    size_ += static_cast<int64_t>(written);
    return absl::OkStatus();
  }
  if (written > 0) {
    const off_t end = lseek(fd_, 0, SEEK_CUR);
    if (end < 0 || ftruncate(fd_, end - static_cast<off_t>(written)) != 0) {
      return ErrnoError("truncating a partial line in " + PathFor(0), errno);
    }
  }
  return ErrnoError("appending to " + PathFor(0), err);
}

void JsonLinesIssueSink::OnReportIssue(const Issue& issue) {
  if (absl::Status status = Append(issue); !status.ok()) {
    {
      absl::MutexLock lock(&mu_);
      ++failed_;
    }
    Logger()->error("JsonLinesIssueSink: {}", std::string(status.message()));
  }
}

int64_t JsonLinesIssueSink::failed_writes() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace matrix
