// File: tools/matrix-report/src/internal/fleet_checkpoint.h
//
// push's checkpoints (internal to matrix_report_lib; docs/fleet.md): per
// report directory and server, how far each file (by device and inode) was
// acknowledged. A checkpoint lives in a directory someone else may own, so
// it is handled as untrusted:
//
// - LoadCheckpoint() reads only a regular file that is not a symbolic link
//   (opened with O_NOFOLLOW | O_NONBLOCK, then fstat), owned by the pushing
//   user or by the directory's owner, and at most kMaxCheckpointBytes long;
//   anything else is refused, unread, with an error naming it and why.
// - SaveCheckpoint() writes a new temporary file beside it, created
//   exclusively under a name of its own (mkostemp: never an existing file
//   or link, never another pusher's), and renames it over the checkpoint.
// - File names are written escaped (\\, and \xHH for control characters),
//   so a name cannot start a line of its own.
//
//   absl::StatusOr<Checkpoint> checkpoint = LoadCheckpoint(path);
//   (*checkpoint)[id] = mark;
//   absl::Status saved = SaveCheckpoint(path, *checkpoint);
//
// Thread safety: functions without shared state; thread-safe.

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_CHECKPOINT_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_CHECKPOINT_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "internal/bounded_read.h"

namespace matrix::report::internal {

struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator<(const FileId& o) const { return std::tie(dev, ino) < std::tie(o.dev, o.ino); }
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

struct Mark {
  int64_t offset = 0;  // Bytes sent (whole lines).
  int64_t line = 0;    // Lines before `offset`.
  // A hash of the file's first min(offset, kHeadBytes) bytes: an inode
  // reused by a new file (the old one deleted by rotation) does not match.
  uint64_t head = 0;
  std::string path;
};

using Checkpoint = std::map<FileId, Mark>;

// The bytes of a file's start that HeadHash() covers.
inline constexpr size_t kHeadBytes = 256;

// A checkpoint larger than this is refused (one line per file: far more
// than any report directory needs).
inline constexpr int64_t kMaxCheckpointBytes = int64_t{16} << 20;

// FNV-1a, 64 bits, from `hash`.
uint64_t Fnv1a(absl::string_view text, uint64_t hash);

// The hash of the first min(offset, kHeadBytes) bytes of `head_bytes`.
uint64_t HeadHash(absl::string_view head_bytes, int64_t offset);

// The checkpoint at `path`: empty when there is none; FailedPrecondition
// (naming the file and why) when it is refused, see above.
absl::StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// Writes `checkpoint` to `path` through a new temporary file and rename().
absl::Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// Creates a new, empty temporary file beside `path`
// (`<path>.tmp.XXXXXX`, O_EXCL), returning it open for writing and its
// name in `name`. Each call gets a name of its own.
absl::StatusOr<ScopedFd> CreateTempBeside(const std::string& path, std::string& name);

// `path` with '\\' and control characters escaped, and back. Unescape
// fails on a malformed escape.
std::string EscapeCheckpointPath(absl::string_view path);
bool UnescapeCheckpointPath(absl::string_view escaped, std::string& path);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_CHECKPOINT_H_
