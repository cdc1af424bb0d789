#include "matrix/plugins/issue_sinks.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/core/logging.h"
#include "file_util.h"

#include "matrix/trace/frame_stats.h"

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
                            " scene=%s fps=%s frames=%d dropped=%d levels(best/normal/middle/"
                            "high/frozen)=%d/%d/%d/%d/%d worst1s=%.1f%%",
                            f.scene(),
                            HasFrameRate(f) ? absl::StrFormat("%.1f", f.fps()) : "too-short",
                            f.frames(), f.dropped_frames(),
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

JsonLinesIssueSink::Kind JsonLinesIssueSink::KindOf(const proto::Issue& issue) {
  switch (issue.report_case()) {
    case proto::Issue::kFrame:
      return Kind::kFps;
    case proto::Issue::kAnr:
      return Kind::kHang;
    case proto::Issue::kEvilMethod:
      return issue.evil_method().detail() == proto::STARTUP ? Kind::kStartup : Kind::kSlowMethod;
    case proto::Issue::kStartup:
      return Kind::kStartup;
    case proto::Issue::kBlock:
      return Kind::kBlock;
    default:
      break;
  }
  // No report (or one this build does not know): by tag.
  if (issue.tag() == kTagFps) return Kind::kFps;
  if (issue.tag() == kTagStartup) return Kind::kStartup;
  if (issue.tag() == kTagBlockCanary) return Kind::kBlock;
  return Kind::kOther;
}

absl::string_view JsonLinesIssueSink::KindName(Kind kind) {
  switch (kind) {
    case Kind::kHang:
      return "hang";
    case Kind::kFps:
      return "fps";
    case Kind::kSlowMethod:
      return "slow_method";
    case Kind::kStartup:
      return "startup";
    case Kind::kBlock:
      return "block";
    case Kind::kOther:
      break;
  }
  return "other";
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
  if (absl::Status status = sink->OpenLocked(Kind::kHang); !status.ok()) return status;
  return sink;
}

JsonLinesIssueSink::~JsonLinesIssueSink() {
  absl::MutexLock lock(&mu_);
  for (int k = 0; k < kKindCount; ++k) CloseLocked(static_cast<Kind>(k));
  if (dir_fd_ >= 0) close(dir_fd_);
  dir_fd_ = -1;
}

std::string JsonLinesIssueSink::NameFor(Kind kind, int index) const {
  // Hangs keep the plain name (<name>.jsonl, <name>.1.jsonl): the file
  // readers look at first holds the reports that matter most.
  std::string stem = options_.name;
  if (kind != Kind::kHang) absl::StrAppend(&stem, ".", KindName(kind));
  if (index == 0) return absl::StrCat(stem, ".jsonl");
  return absl::StrCat(stem, ".", index, ".jsonl");
}

std::string JsonLinesIssueSink::PathFor(Kind kind, int index) const {
  return absl::StrCat(options_.directory, "/", NameFor(kind, index));
}

void JsonLinesIssueSink::CloseLocked(Kind kind) {
  KindFile& file = files_[static_cast<int>(kind)];
  if (file.fd >= 0) close(file.fd);
  file.fd = -1;
}

absl::Status JsonLinesIssueSink::OpenLocked(Kind kind) {
  CloseLocked(kind);
  // The directory is walked (and re-created) on every open: it may have been
  // deleted since the last one.
  absl::StatusOr<UniqueFd> dir = OpenReportDirectory(options_.directory);
  if (!dir.ok()) return dir.status();
  const std::string path = PathFor(kind, 0);
  absl::StatusOr<UniqueFd> file =
      OpenFileInDirectory(dir->get(), NameFor(kind, 0), O_RDWR | O_CREAT | O_APPEND, path);
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
  if (dir_fd_ >= 0) close(dir_fd_);
  dir_fd_ = dir->release();
  KindFile& kind_file = files_[static_cast<int>(kind)];
  kind_file.fd = file->release();
  kind_file.size = size;
  kind_file.dev = static_cast<uint64_t>(st.st_dev);
  kind_file.ino = static_cast<uint64_t>(st.st_ino);
  return absl::OkStatus();
}

bool JsonLinesIssueSink::FileReplacedLocked(Kind kind) const {
  const KindFile& file = files_[static_cast<int>(kind)];
  struct stat st;
  return lstat(PathFor(kind, 0).c_str(), &st) != 0 || static_cast<uint64_t>(st.st_dev) != file.dev ||
         static_cast<uint64_t>(st.st_ino) != file.ino;
}

void JsonLinesIssueSink::CountDroppedLocked(Kind kind, const std::string& name) {
  // Read through the report directory, never through a link; a file that is
  // not there (fewer files than max_files yet) drops nothing.
  const int fd = openat(dir_fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  int64_t issues = 0;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // Every line the sink wrote is an issue; blank lines are not.
    std::vector<char> buffer(size_t{64} << 10);  // The worker's stack may be small.
    char previous = '\n';
    for (ssize_t n; (n = read(fd, buffer.data(), buffer.size())) > 0;) {
      for (ssize_t i = 0; i < n; ++i) {
        if (previous == '\n' && buffer[i] != '\n') ++issues;
        previous = buffer[i];
      }
    }
  }
  close(fd);
  if (issues > 0) {
    dropped_[static_cast<int>(kind)] += issues;
    drops_to_report_ = true;
  }
}

absl::Status JsonLinesIssueSink::RotateLocked(Kind kind) {
  CloseLocked(kind);
  // <name>.(n-1) is dropped (its issues counted); <name>.k -> <name>.(k+1);
  // <name> -> <name>.1. Only this kind's files: a kind makes room by
  // dropping its own oldest issues. In the directory opened by OpenLocked();
  // rename and unlink act on a symbolic link itself, never on its target.
  const std::string oldest = NameFor(kind, options_.max_files - 1);
  CountDroppedLocked(kind, oldest);
  unlinkat(dir_fd_, oldest.c_str(), 0);
  for (int i = options_.max_files - 2; i >= 0; --i) {
    renameat(dir_fd_, NameFor(kind, i).c_str(), dir_fd_, NameFor(kind, i + 1).c_str());
  }
  return OpenLocked(kind);
}

absl::Status JsonLinesIssueSink::Append(const Issue& issue) {
  const Kind kind = KindOf(issue.proto());
  std::optional<proto::SinkDrops> drops;
  {
    absl::MutexLock lock(&mu_);
    if (drops_to_report_) {
      drops = DroppedLocked();
      drops_to_report_ = false;
    }
  }
  // The whole record in one buffer, for one write(). The first issue after
  // rotation dropped some says how many so far (a copy: the issue is the
  // caller's).
  std::string line;
  if (drops.has_value()) {
    Issue marked = issue;
    *marked.mutable_proto()->mutable_sink_dropped() = *std::move(drops);
    line = marked.ToJson();
  } else {
    line = issue.ToJson();
  }
  line.push_back('\n');
  bool replaced = false;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = AppendLocked(kind, line, &replaced);
    if (!status.ok() && drops.has_value()) drops_to_report_ = true;  // The next one, then.
  }
  if (replaced) {
    Logger()->warn("JsonLinesIssueSink: {} was removed or replaced (directory deleted?); "
                   "re-creating it",
                   PathFor(kind, 0));
  }
  return status;
}

absl::Status JsonLinesIssueSink::AppendLocked(Kind kind, absl::string_view line, bool* replaced) {
  KindFile& file = files_[static_cast<int>(kind)];
  // One lstat() per issue: the sink runs on the worker thread, never on the
  // looper thread. It finds the file deleted, or the directory with it, or
  // something else (a link) put in its place; the file is then re-opened.
  if (file.fd >= 0 && FileReplacedLocked(kind)) {
    *replaced = true;
    CloseLocked(kind);
  }
  if (file.fd < 0) {
    if (absl::Status status = OpenLocked(kind); !status.ok()) return status;
  }
  if (file.size > 0 && file.size + static_cast<int64_t>(line.size()) > options_.max_file_bytes) {
    if (absl::Status status = RotateLocked(kind); !status.ok()) return status;
  }
  // One write() on an O_APPEND descriptor: the line lands whole at the end.
  // Only a short write is continued; if the rest cannot be written (disk
  // full), the part written is cut back off, so no half line remains.
  size_t written = 0;
  const int err = WriteFully(file.fd, line, &written);
  if (err == 0) {
    file.size += static_cast<int64_t>(written);
    return absl::OkStatus();
  }
  if (written > 0) {
    const off_t end = lseek(file.fd, 0, SEEK_CUR);
    if (end < 0 || ftruncate(file.fd, end - static_cast<off_t>(written)) != 0) {
      return ErrnoError("truncating a partial line in " + PathFor(kind, 0), errno);
    }
  }
  return ErrnoError("appending to " + PathFor(kind, 0), err);
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

proto::SinkDrops JsonLinesIssueSink::dropped() const {
  absl::MutexLock lock(&mu_);
  return DroppedLocked();
}

proto::SinkDrops JsonLinesIssueSink::DroppedLocked() const {
  proto::SinkDrops drops;
  drops.set_hang(dropped_[static_cast<int>(Kind::kHang)]);
  drops.set_fps(dropped_[static_cast<int>(Kind::kFps)]);
  drops.set_slow_method(dropped_[static_cast<int>(Kind::kSlowMethod)]);
  drops.set_startup(dropped_[static_cast<int>(Kind::kStartup)]);
  drops.set_block(dropped_[static_cast<int>(Kind::kBlock)]);
  drops.set_other(dropped_[static_cast<int>(Kind::kOther)]);
  return drops;
}

}  // namespace matrix
