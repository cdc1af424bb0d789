#include "matrix/plugins/issue_sinks.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/core/logging.h"

namespace matrix {
namespace {

absl::Status ErrnoError(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(err)));
}

// mkdir -p with mode 0700 for the directories it creates.
absl::Status MakeDirectories(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory");
  std::string prefix;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    prefix = path.substr(0, pos);
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
  if (absl::Status status = MakeDirectories(options.directory); !status.ok()) return status;
  std::shared_ptr<JsonLinesIssueSink> sink(new JsonLinesIssueSink(std::move(options)));
  absl::MutexLock lock(&sink->mu_);
  if (absl::Status status = sink->OpenLocked(); !status.ok()) return status;
  return sink;
}

JsonLinesIssueSink::~JsonLinesIssueSink() {
  absl::MutexLock lock(&mu_);
  if (fd_ >= 0) close(fd_);
}

std::string JsonLinesIssueSink::PathFor(int index) const {
  if (index == 0) return absl::StrCat(options_.directory, "/", options_.name, ".jsonl");
  return absl::StrCat(options_.directory, "/", options_.name, ".", index, ".jsonl");
}

absl::Status JsonLinesIssueSink::OpenLocked() {
  const std::string path = PathFor(0);
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd_ < 0) return ErrnoError("open " + path, errno);
  struct stat st;
  if (fstat(fd_, &st) != 0) return ErrnoError("fstat " + path, errno);
  size_ = st.st_size;
  return absl::OkStatus();
}

absl::Status JsonLinesIssueSink::RotateLocked() {
  close(fd_);
  fd_ = -1;
  // issues.(n-1) is dropped; issues.k -> issues.(k+1); issues -> issues.1.
  unlink(PathFor(options_.max_files - 1).c_str());
  for (int i = options_.max_files - 2; i >= 0; --i) {
    rename(PathFor(i).c_str(), PathFor(i + 1).c_str());
  }
  if (options_.max_files == 1) unlink(PathFor(0).c_str());
  return OpenLocked();
}

absl::Status JsonLinesIssueSink::Append(const Issue& issue) {
  const std::string line = issue.ToJson() + "\n";
  absl::MutexLock lock(&mu_);
  if (fd_ < 0) {
    if (absl::Status status = OpenLocked(); !status.ok()) return status;
  }
  if (size_ > 0 && size_ + static_cast<int64_t>(line.size()) > options_.max_file_bytes) {
    if (absl::Status status = RotateLocked(); !status.ok()) return status;
  }
  // One write() on an O_APPEND descriptor: the line lands whole at the end.
  // A short write (disk full) is cut back off, so no half line remains.
  const ssize_t written = write(fd_, line.data(), line.size());
  if (written == static_cast<ssize_t>(line.size())) {
    size_ += written;
    return absl::OkStatus();
  }
  const int err = written < 0 ? errno : ENOSPC;
  if (written > 0 && ftruncate(fd_, size_) != 0) {
    return ErrnoError("truncating a partial line in " + PathFor(0), errno);
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
