#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "internal/bounded_read.h"
#include "internal/fleet_checkpoint.h"
#include "internal/fleet_fast_parse.h"
#include "internal/fleet_row_view.h"
#include "internal/fleet_send.h"
#include "matrix/core/app_identity.h"
#include "matrix/report/fleet.h"

// FleetPusher's push loop: report files into ClickHouse, past their
// checkpoints (fleet.h, docs/fleet.md). It expands the inputs, reads each
// file from its checkpoint's mark, parses its lines (on several threads) into
// rows, and fills batches with the rows and the marks they advance. The rows
// are made in fleet_rows.cc, the checkpoint files handled in
// fleet_checkpoint.cc, JSON lines parsed by fleet_fast_parse.cc (or, when it
// cannot decide, by ParseIssueLine). Each full batch is handed to a thread of
// its own while the next one is read (Flush; at most kBatchesInFlight), which
// sorts it (and, with shards, splits it by shard), sends it once the batch
// before is acknowledged, and saves its checkpoints once the server has its
// rows (fleet_send.cc, internal/fleet_send.h). Where each shard's rows go is
// checked and set by UseShards (fleet_placement.cc).

namespace matrix::report {

using internal::Checkpoint;
using internal::FileId;
using internal::HeadHash;
using internal::kHeadBytes;
using internal::LoadCheckpoint;
using internal::Mark;

namespace {

// The first `kHeadBytes` of the open file.
std::string ReadHead(int fd) {
  std::string head(kHeadBytes, '\0');
  ssize_t n = 0;
  do {
    n = ::pread(fd, head.data(), head.size(), 0);
  } while (n < 0 && errno == EINTR);
  head.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return head;
}

// Whether the open file's first non-blank character is '*' (a BlockCanary
// text file). Reads from the start in bounded memory.
bool IsBlockLog(int fd) {
  char buffer[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    for (ssize_t i = 0; i < n; ++i) {
      if (!std::isspace(static_cast<unsigned char>(buffer[i]))) return buffer[i] == '*';
    }
    at += n;
  }
}

std::string DirectoryOf(const std::string& file) {
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return file.substr(0, slash);
}

// Appends `row` to `rows` (AppendFleetRowBinary), `last_row_at` its offset
// there, and counts it in `count`.
void AddRow(const FleetRow& row, std::string& rows, size_t& last_row_at, int64_t& count) {
  last_row_at = rows.size();
  AppendFleetRowBinary(row, rows);
  ++count;
}

// Threads kept for a push that run the parts of a job with the calling
// thread (ParseSegment's parts), so that no thread is started per segment.
// Thread safety: Run from one thread at a time.
class PartPool {
 public:
  PartPool() = default;
  PartPool(const PartPool&) = delete;
  PartPool& operator=(const PartPool&) = delete;
  ~PartPool() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& thread : threads_) thread.join();
  }

  // Runs job(0) here and job(1) .. job(parts - 1) on the pool's threads;
  // returns when every part is done.
  void Run(size_t parts, const std::function<void(size_t)>& job) {
    while (threads_.size() + 1 < parts) threads_.emplace_back([this] { Work(); });
    {
      absl::MutexLock lock(&mu_);
      job_ = &job;
      next_ = 1;
      parts_ = parts;
      running_ = 0;
    }
    job(0);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &PartPool::AllDone));
    job_ = nullptr;
  }

 private:
  bool AllDone() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return next_ >= parts_ && running_ == 0;
  }
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (job_ != nullptr && next_ < parts_);
  }

  void Work() {
    absl::MutexLock lock(&mu_);
    while (true) {
      mu_.Await(absl::Condition(this, &PartPool::HasWork));
      if (stop_) return;
      const size_t part = next_++;
      const std::function<void(size_t)>* job = job_;
      ++running_;
      mu_.Unlock();
      (*job)(part);
      mu_.Lock();
      --running_;
    }
  }

  absl::Mutex mu_;
  const std::function<void(size_t)>* job_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t parts_ ABSL_GUARDED_BY(mu_) = 0;
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// Lines per part below which a segment is not split further.
constexpr size_t kMinLinesPerPart = 64;
// Bytes of lines read ahead before they are parsed (one longer line is read
// whole).
constexpr size_t kSegmentBytes = 2 << 20;
// Batches handed to sending threads and not yet awaited: one being sent,
// the next ones sorted (and split by shard) meanwhile, so that the servers
// do not wait for them, and sent to a shard that acknowledged its part of
// the one before while a slower shard still takes its own.
constexpr size_t kBatchesInFlight = 3;

}  // namespace

struct FleetPusher::LineParser {
  internal::FastIssueParser fast;
  internal::FleetRowView row;  // The fast path's, into `fast`'s memory.
  IssueRecord record;          // The strict path's.
  // The fast path's rows of a part whose ids are of their lines: computed
  // together once the part is parsed (IssueIdsInto, several side by side),
  // into the 32 bytes their rows keep for them.
  struct LineId {
    size_t id_at = 0;    // In the part's rows.
    size_t host_at = 0;  // In `hosts`.
    size_t host_size = 0;
    absl::string_view line;  // In the segment's text.
  };
  std::vector<LineId> line_ids;
  std::string hosts;
  std::vector<internal::IssueIdJob> jobs;

  void WriteLineIds(std::string& rows) {
    jobs.clear();
    for (const LineId& id : line_ids) {
      jobs.push_back({.host_id = absl::string_view(hosts).substr(id.host_at, id.host_size),
                      .report = id.line,
                      .out = rows.data() + id.id_at});
    }
    internal::IssueIdsInto(jobs);
    line_ids.clear();
    hosts.clear();
  }
};

struct FleetPusher::Segment {
  struct Line {
    // As read.
    size_t at = 0;  // In `text`.
    size_t size = 0;
    int64_t bytes = 0;  // Read from the file, the newline included.
    bool terminated = false;
    bool too_long = false;
    // As parsed: its rows in parts[part] (also those of a malformed line
    // that parsed in part), and whether it is an issue.
    int part = 0;
    size_t rows_at = 0;
    size_t rows_size = 0;
    size_t last_row_at = 0;  // In parts[part].
    int64_t rows = 0;
    bool ok = true;
    std::string reason;
  };
  std::string text;
  std::vector<Line> lines;
  std::vector<std::string> parts;  // RowBinary, one per parsing thread.

  // Reads the next lines of `buffer` (through `line`), up to
  // kSegmentBytes; true at the end of the file (or after a last line
  // without its newline, or before one when `take_unterminated_tail` is
  // false).
  bool Read(internal::FdStreamBuf& buffer, bool take_unterminated_tail, std::string& line) {
    text.clear();
    lines.clear();
    while (text.size() < kSegmentBytes) {
      const internal::LineRead got =
          internal::ReadLineBounded(buffer, static_cast<size_t>(kMaxIssueLineBytes), line);
      if (!got.got || (!got.terminated && !take_unterminated_tail)) return true;
      Line& read = lines.emplace_back();
      read.at = text.size();
      read.size = line.size();
      read.bytes = got.bytes;
      read.terminated = got.terminated;
      read.too_long = got.too_long;
      text.append(line);
      if (!got.terminated) return true;
    }
    return false;
  }
};

struct FleetPusher::Pending {
  // The batch being filled.
  std::string rows_binary;  // RowBinary (AppendFleetRowBinary).
  // The memory of the last batch sent, for the one after this (a batch's
  // tens of MiB are not allocated, faulted in and grown again each time).
  std::string spare_rows;
  std::string spare_sorted;
  int64_t rows = 0;
  size_t last_row_at = 0;  // In rows_binary.
  // Where each file will be once these rows are acknowledged.
  std::map<std::pair<std::string, FileId>, Mark> advances;
  // Loaded checkpoints, by checkpoint file, with the marks of every batch
  // handed over (each is saved only by its own batch, once acknowledged).
  std::map<std::string, Checkpoint> checkpoints;
  // Checkpoint files refused (internal/fleet_checkpoint.h): their
  // directories' files are not pushed.
  std::set<std::string> refused;
  // Every file of this push, by checkpoint file.
  std::set<std::pair<std::string, FileId>> seen;
  // The batches handed over and not yet awaited, oldest first (at most
  // kBatchesInFlight): the oldest being sent, the next one prepared.
  std::deque<std::unique_ptr<Batch>> in_flight;
  std::vector<std::unique_ptr<Part>> spare_shard_parts;
  // One parser per parsing thread (their memory reused from line to line),
  // and the lines read ahead.
  std::vector<std::unique_ptr<LineParser>> parsers;
  Segment segment;
  PartPool pool;  // Destroyed (its threads joined) before the parsers.

  ~Pending() {
    for (const std::unique_ptr<Batch>& batch : in_flight) {
      if (batch->sender.joinable()) batch->sender.join();
    }
  }

  void Add(const FleetRow& added) { AddRow(added, rows_binary, last_row_at, rows); }
};

FleetPusher::FleetPusher(ClickHouseClient& client, PushOptions options)
    : client_(client),
      options_(std::move(options)),
      table_(absl::StrCat(options_.fleet.database, ".issues")) {
  if (options_.fallback_host_id.empty()) {
    options_.fallback_host_id = CurrentAppIdentity().host_id();
  }
}

FleetPusher::~FleetPusher() = default;

absl::Status FleetPusher::EnsureSchema() {
  for (const std::string& sql : FleetSchema(options_.fleet)) {
    absl::StatusOr<std::string> result = client_.Query(sql);
    if (!result.ok()) return result.status();
  }
  return absl::OkStatus();
}

absl::Status FleetPusher::Await(Pending& pending, PushStats& stats) {
  if (pending.in_flight.empty()) return absl::OkStatus();
  const std::unique_ptr<Batch> done = std::move(pending.in_flight.front());
  pending.in_flight.pop_front();
  done->sender.join();
  if (done->acknowledged) {
    stats.sent += done->rows;
    stats.bytes += static_cast<int64_t>(done->rows_binary.size());
    ++stats.batches;
  }
  pending.spare_rows = std::move(done->rows_binary);
  pending.spare_rows.clear();
  pending.spare_sorted = std::move(done->sorted);
  pending.spare_shard_parts = std::move(done->shard_parts);
  return done->status;
}

absl::Status FleetPusher::Flush(Pending& pending, PushStats& stats) {
  // At most kBatchesInFlight handed over: the oldest must be done (its
  // checkpoints saved) before another goes.
  while (pending.in_flight.size() >= kBatchesInFlight) {
    if (absl::Status status = Await(pending, stats); !status.ok()) return status;
  }
  auto batch = std::make_unique<Batch>();
  batch->rows_binary = std::move(pending.rows_binary);
  batch->sorted = std::move(pending.spare_sorted);
  batch->rows = pending.rows;
  batch->SetEndRows(pending.last_row_at);
  batch->shard_parts = std::move(pending.spare_shard_parts);
  batch->shard_parts.resize(shards_.size());
  for (std::unique_ptr<Part>& part : batch->shard_parts) {
    if (part == nullptr) part = std::make_unique<Part>();
  }
  batch->outcome = std::make_shared<Outcome>(std::max<size_t>(1, shards_.size()));
  if (!pending.in_flight.empty()) batch->before = pending.in_flight.back()->outcome;
  std::set<std::string> touched;
  for (auto& [where, mark] : pending.advances) {
    pending.checkpoints[where.first][where.second] = mark;
    touched.insert(where.first);
  }
  for (const std::string& path : touched) batch->checkpoints[path] = pending.checkpoints[path];
  pending.rows_binary = std::move(pending.spare_rows);
  pending.rows_binary.clear();
  pending.rows = 0;
  pending.last_row_at = 0;
  pending.advances.clear();
  Batch* const sending = batch.get();
  pending.in_flight.push_back(std::move(batch));
  sending->sender = std::thread([this, sending] {
    sending->status = Send(*sending);
    sending->outcome->acknowledged = sending->status.ok();
    sending->outcome->done.Notify();
  });
  return absl::OkStatus();
}

struct FleetPusher::Source {
  const std::string& file;
  int fd;
  const struct stat& st;
  // Its checkpoint file and id there.
  std::pair<std::string, FileId> where;
  // How far it was sent, and its first kHeadBytes.
  Mark mark;
  std::string head;
  // HeadHash of all kHeadBytes, once the file has them (the same for every
  // mark past them).
  std::optional<uint64_t> whole_head_hash;

  uint64_t HeadHashAtMark() {
    if (whole_head_hash.has_value()) return *whole_head_hash;
    const uint64_t hash = HeadHash(head, mark.offset);
    if (head.size() >= kHeadBytes && mark.offset >= static_cast<int64_t>(kHeadBytes)) {
      whole_head_hash = hash;
    }
    return hash;
  }
};

absl::Status FleetPusher::PushFile(const std::string& file, Pending& pending, PushStats& stats) {
  // Only regular files are read: a FIFO would block, a device never end.
  absl::StatusOr<internal::RegularFile> opened =
      internal::OpenRegularFile(file, /*follow_symlinks=*/true);
  if (!opened.ok()) {
    stats.errors.push_back(absl::StrCat(opened.status().message(), "; skipped"));
    return absl::OkStatus();
  }
  const std::string checkpoint_path =
      CheckpointPath(DirectoryOf(file), client_.options().url, options_.fleet.database);
  auto [cp, inserted] = pending.checkpoints.try_emplace(checkpoint_path);
  if (inserted) {
    absl::StatusOr<Checkpoint> loaded = LoadCheckpoint(checkpoint_path);
    if (loaded.ok()) {
      cp->second = *std::move(loaded);
    } else {
      pending.refused.insert(checkpoint_path);
      stats.errors.push_back(absl::StrCat(loaded.status().message(), "; the files of ",
                                          DirectoryOf(file), " are not pushed"));
    }
  }
  if (pending.refused.count(checkpoint_path) > 0) return absl::OkStatus();
  ++stats.files;
  const struct stat& st = opened->st;
  const FileId id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  Source source{.file = file,
                .fd = opened->fd.get(),
                .st = st,
                .where = {checkpoint_path, id},
                .mark = {},
                .head = ReadHead(opened->fd.get()),
                .whole_head_hash = std::nullopt};
  if (auto it = cp->second.find(id);
      it != cp->second.end() && !options_.ignore_checkpoints && it->second.offset <= st.st_size &&
      it->second.head == HeadHash(source.head, it->second.offset)) {
    // Otherwise the file was truncated, or is another file on a reused
    // inode: from the start.
    source.mark = it->second;
  }
  source.mark.path = file;
  source.mark.head = HeadHash(source.head, source.mark.offset);
  pending.seen.insert(source.where);
  return IsBlockLog(source.fd) ? PushBlockLog(source, pending, stats)
                               : PushLines(source, pending, stats);
}

bool FleetPusher::Full(const Pending& pending) const {
  // With shards, each shard's INSERT takes about batch_rows: a batch of
  // that many per shard (a server's cost per row grows as its INSERTs
  // shrink).
  const auto per_server = static_cast<int64_t>(std::max<size_t>(1, shards_.size()));
  return pending.rows >= options_.batch_rows * per_server ||
         static_cast<int64_t>(pending.rows_binary.size()) >= options_.batch_bytes * per_server;
}

absl::Status FleetPusher::PushBlockLog(Source& source, Pending& pending, PushStats& stats) {
  Mark& mark = source.mark;
  if (mark.offset > 0 && mark.offset >= source.st.st_size) return absl::OkStatus();
  internal::FdStreamBuf buffer(source.fd);
  std::istream in(&buffer);
  ReadStats read;
  IssueStreamReader reader(in, source.file, {}, &read);
  IssueRecord record;
  while (reader.Next(record)) pending.Add(MakeFleetRow(record, "", options_.fallback_host_id));
  if (buffer.error() != 0) {
    stats.errors.push_back(absl::StrCat(source.file, ": read error: ",
                                        std::strerror(buffer.error()), "; skipped"));
    return absl::OkStatus();
  }
  if (read.malformed_lines > 0) {
    stats.malformed += read.malformed_lines;
    stats.first_malformed.push_back(read.malformed_files.front().first);
  }
  mark.offset = source.st.st_size;
  mark.head = HeadHash(source.head, mark.offset);
  pending.advances[source.where] = mark;
  return Full(pending) ? Flush(pending, stats) : absl::OkStatus();
}

bool FleetPusher::ParseLine(LineParser& parser, const std::string& file, int64_t line_number,
                            absl::string_view trimmed, std::string& rows, size_t& last_row_at,
                            int64_t& count, std::string& reason) const {
  IssueRecord& record = parser.record;
  // An issue to change before it is stored (before_store) needs all of it:
  // the fast path reads only the stored columns.
  if (options_.fast_parse && !options_.before_store &&
      parser.fast.ParseRow(trimmed, options_.fallback_host_id, parser.row, /*line_id=*/false)) {
    last_row_at = rows.size();
    if (parser.row.issue_id.empty()) {
      // The id is written later (WriteLineIds), after its length (32: one
      // byte of LEB128).
      static constexpr char kLater[] = "................................";
      parser.line_ids.push_back({.id_at = rows.size() + 1,
                                 .host_at = parser.hosts.size(),
                                 .host_size = parser.row.host_id.size(),
                                 .line = trimmed});
      parser.hosts.append(parser.row.host_id.data(), parser.row.host_id.size());
      parser.row.issue_id = absl::string_view(kLater, 32);
    }
    internal::AppendFleetRowBinary(parser.row, rows);
    ++count;
    return true;
  }
  std::istringstream one{std::string(trimmed)};
  ReadStats read;
  IssueStreamReader reader(one, file, {}, &read);
  int records = 0;
  while (reader.Next(record)) {
    record.source = {file, line_number};
    ++records;
    // A clean line is stored as written; a glued one as parsed. A line
    // changed before it is stored keeps the id of its line as written
    // (pushed again named, it replaces itself rather than being doubled).
    const bool changed = options_.before_store && options_.before_store(record);
    FleetRow row = MakeFleetRow(record, read.malformed_lines == 0 ? trimmed : absl::string_view(),
                                options_.fallback_host_id);
    if (changed) row.report = RecordToJson(record);
    AddRow(row, rows, last_row_at, count);
  }
  if (read.malformed_lines == 0 && records > 0) return true;
  reason = read.malformed_files.empty() ? std::string("not an issue")
                                        : read.malformed_files.front().first.reason;
  return false;
}

void FleetPusher::ParseSegment(Segment& segment, const std::string& file,
                               int64_t first_line_number, Pending& pending) const {
  size_t threads = options_.parse_threads > 0
                       ? static_cast<size_t>(options_.parse_threads)
                       : std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 8);
  if (options_.before_store) threads = 1;  // Not called from two threads at once.
  const size_t lines = segment.lines.size();
  const size_t parts = std::max<size_t>(1, std::min(threads, lines / kMinLinesPerPart));
  while (pending.parsers.size() < parts) pending.parsers.push_back(std::make_unique<LineParser>());
  if (segment.parts.size() < parts) segment.parts.resize(parts);
  const auto parse_part = [&](size_t part) {
    std::string& rows = segment.parts[part];
    rows.clear();
    LineParser& parser = *pending.parsers[part];
    for (size_t i = lines * part / parts; i < lines * (part + 1) / parts; ++i) {
      Segment::Line& line = segment.lines[i];
      line.part = static_cast<int>(part);
      line.rows_at = rows.size();
      line.rows = 0;
      line.ok = true;
      const absl::string_view trimmed =
          absl::StripAsciiWhitespace(absl::string_view(segment.text).substr(line.at, line.size));
      if (!line.too_long && !trimmed.empty()) {
        line.ok = ParseLine(parser, file, first_line_number + static_cast<int64_t>(i), trimmed,
                            rows, line.last_row_at, line.rows, line.reason);
      }
      line.rows_size = rows.size() - line.rows_at;
    }
    parser.WriteLineIds(rows);
  };
  pending.pool.Run(parts, parse_part);
}

absl::Status FleetPusher::PushLines(Source& source, Pending& pending, PushStats& stats) {
  const std::string& file = source.file;
  Mark& mark = source.mark;
  if (::lseek(source.fd, static_cast<off_t>(mark.offset), SEEK_SET) < 0) {
    stats.errors.push_back(absl::StrCat("cannot read ", file, ": ", std::strerror(errno)));
    return absl::OkStatus();
  }
  internal::FdStreamBuf buffer(source.fd);
  std::string line;
  bool file_malformed = false;
  // This file's entry in pending.advances (looked up again after a flush
  // empties them).
  Mark* advance_slot = nullptr;
  auto malformed = [&](int64_t line_number, absl::string_view why) {
    ++stats.malformed;
    if (file_malformed) return;
    file_malformed = true;
    stats.first_malformed.push_back({{file, line_number}, std::string(why)});
  };
  Segment& segment = pending.segment;
  for (bool at_end = false; !at_end;) {
    // Read a run of lines ahead, then parse them (on several threads).
    at_end = segment.Read(buffer, options_.take_unterminated_tail, line);
    ParseSegment(segment, file, mark.line + 1, pending);
    // Then take them in file order, as one thread reading them would.
    for (const Segment::Line& got : segment.lines) {
      const int64_t line_number = mark.line + 1;
      // A torn last line (without its newline) that is not an issue: the
      // writer may still finish it. Not sent, not passed.
      bool advance = true;
      if (got.too_long) {
        malformed(line_number, kLineTooLong);
        advance = got.terminated;
      } else {
        if (got.rows > 0) {
          pending.last_row_at = pending.rows_binary.size() + (got.last_row_at - got.rows_at);
          pending.rows_binary.append(segment.parts[static_cast<size_t>(got.part)], got.rows_at,
                                     got.rows_size);
          pending.rows += got.rows;
        }
        if (!got.ok) {
          advance = got.terminated;
          malformed(line_number, got.reason);
        }
      }
      if (!advance) {
        at_end = true;
        break;
      }
      mark.offset += got.bytes;
      mark.line = line_number;
      if (source.head.size() < std::min<size_t>(static_cast<size_t>(mark.offset), kHeadBytes)) {
        source.head = ReadHead(source.fd);  // It was shorter when first read.
      }
      mark.head = source.HeadHashAtMark();
      if (advance_slot == nullptr) advance_slot = &pending.advances[source.where];
      *advance_slot = mark;
      if (Full(pending)) {
        if (absl::Status s = Flush(pending, stats); !s.ok()) return s;
        advance_slot = nullptr;
      }
    }
  }
  if (buffer.error() != 0) {
    // What was read before the error is pushed; the rest is not.
    stats.errors.push_back(absl::StrCat(file, ": read error after line ", mark.line, ": ",
                                        std::strerror(buffer.error()),
                                        "; the rest of the file is skipped"));
  }
  if (pending.advances.find(source.where) == pending.advances.end()) {
    // Nothing new: keep its mark (and drop marks of files gone).
    pending.advances[source.where] = mark;
  }
  return absl::OkStatus();
}

absl::Status FleetPusher::Push(const std::vector<std::string>& inputs, PushStats& stats) {
  Pending pending;
  for (const std::string& input : inputs) {
    std::vector<std::string> not_regular;
    absl::StatusOr<std::vector<std::string>> files = ExpandInput(input, &not_regular);
    for (const std::string& skipped : not_regular) stats.errors.push_back(skipped);
    if (!files.ok()) {
      if (not_regular.empty()) stats.errors.push_back(std::string(files.status().message()));
      continue;
    }
    for (const std::string& file : *files) {
      if (absl::Status s = PushFile(file, pending, stats); !s.ok()) return s;
    }
  }
  // Marks of files no longer there are dropped when a checkpoint is saved:
  // keep only the files seen now.
  for (auto& [path, checkpoint] : pending.checkpoints) {
    for (auto it = checkpoint.begin(); it != checkpoint.end();) {
      if (pending.seen.count({path, it->first}) == 0) {
        it = checkpoint.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (absl::Status s = Flush(pending, stats); !s.ok()) return s;
  while (!pending.in_flight.empty()) {
    if (absl::Status s = Await(pending, stats); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace matrix::report
