// The fleet's schema and rows (fleet.h, docs/fleet.md): the table's
// statements, an issue as a row and as TabSeparated, and the checkpoint
// file's name. The pusher is in fleet_push.cc (its loop), fleet_send.cc
// (sending a batch) and fleet_placement.cc (the shards' check), the queries in
// fleet_queries.cc, their text tables in fleet_render.cc.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "internal/fleet_row_view.h"
#include "matrix/report/fleet.h"

namespace matrix::report {

namespace {

// Issue ids are two FNV-1a hashes with different bases of the same bytes,
// as 32 hex digits.
constexpr uint64_t kFnvBaseA = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvBaseB = 0x84222325cbf29ce4ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

struct IdHash {
  uint64_t a = kFnvBaseA;
  uint64_t b = kFnvBaseB;

  void Add(absl::string_view text) {
    for (unsigned char c : text) {
      a = (a ^ c) * kFnvPrime;
      b = (b ^ c) * kFnvPrime;
    }
  }
  void HexInto(char* out) const {
    static constexpr char kHex[] = "0123456789abcdef";
    for (int i = 0; i < 16; ++i) {
      out[i] = kHex[(a >> (60 - 4 * i)) & 0xF];
      out[16 + i] = kHex[(b >> (60 - 4 * i)) & 0xF];
    }
  }
};

// 32 hex digits into `out`: both hashes of `parts` one after the other, in
// one pass.
void StableIdInto(std::initializer_list<absl::string_view> parts, std::string& out) {
  IdHash hash;
  for (absl::string_view part : parts) hash.Add(part);
  out.resize(32);
  hash.HexInto(out.data());
}

// The ids of N jobs side by side: each byte is a multiplication after the
// one before (a chain of latency, not of work), so N chains run at once
// about as fast as one.
template <int N>
void IssueIdsSideBySide(const internal::IssueIdJob* jobs) {
  IdHash hash[N];
  size_t common = jobs[0].report.size();
  for (int k = 0; k < N; ++k) {
    hash[k].Add(jobs[k].host_id);
    hash[k].Add("\n");
    common = std::min(common, jobs[k].report.size());
  }
  uint64_t a[N];
  uint64_t b[N];
  const unsigned char* report[N];
  for (int k = 0; k < N; ++k) {
    a[k] = hash[k].a;
    b[k] = hash[k].b;
    report[k] = reinterpret_cast<const unsigned char*>(jobs[k].report.data());
  }
  for (size_t i = 0; i < common; ++i) {
#pragma GCC unroll 4
    for (int k = 0; k < N; ++k) {
      a[k] = (a[k] ^ report[k][i]) * kFnvPrime;
      b[k] = (b[k] ^ report[k][i]) * kFnvPrime;
    }
  }
  for (int k = 0; k < N; ++k) {
    hash[k].a = a[k];
    hash[k].b = b[k];
    hash[k].Add(jobs[k].report.substr(common));
    hash[k].HexInto(jobs[k].out);
  }
}

std::string StableId(std::initializer_list<absl::string_view> parts) {
  std::string id;
  StableIdInto(parts, id);
  return id;
}

std::string TableColumns() {
  return R"((
    issue_id String,
    time_ms Int64,
    time DateTime DEFAULT toDateTime(intDiv(time_ms, 1000)),
    host_id String,
    host_name String,
    process String,
    pid Int32,
    build_id String,
    version String,
    tag String,
    detail String,
    kind String,
    key String,
    scene String,
    cost_ms Float64,
    fps Float64,
    frames Int64,
    dropped_frames Int64,
    drop_best Int64,
    drop_normal Int64,
    drop_middle Int64,
    drop_high Int64,
    drop_frozen Int64,
    report String,
    quality UInt8
))";
}

std::string Num(double value) {
  if (!std::isfinite(value)) return "0";
  return absl::StrFormat("%.17g", value);
}

}  // namespace

const char kFleetColumns[] =
    "issue_id, time_ms, host_id, host_name, process, pid, build_id, version, tag, detail, "
    "kind, key, scene, cost_ms, fps, frames, dropped_frames, drop_best, drop_normal, "
    "drop_middle, drop_high, drop_frozen, report, quality";

std::vector<std::string> FleetSchema(const FleetOptions& options) {
  const std::string& db = options.database;
  std::vector<std::string> statements = {absl::StrCat("CREATE DATABASE IF NOT EXISTS ", db)};
  // ReplacingMergeTree(quality): rows with one issue_id collapse in merges and
  // under FINAL, keeping the highest quality (the JSON-lines copy of a block).
  const std::string engine = "ENGINE = ReplacingMergeTree(quality) ORDER BY (host_id, issue_id)";
  if (options.cluster.empty()) {
    statements.push_back(
        absl::StrCat("CREATE TABLE IF NOT EXISTS ", db, ".issues ", TableColumns(), " ", engine));
  } else {
    statements.push_back(absl::StrCat("CREATE TABLE IF NOT EXISTS ", db, ".issues_local ",
                                      TableColumns(), " ", engine));
    // Sharded by host: one issue always lands on one shard, so each shard
    // collapses its own repeats.
    statements.push_back(absl::StrCat("CREATE TABLE IF NOT EXISTS ", db, ".issues ", TableColumns(),
                                      " ENGINE = ", FleetDistributedEngine(options)));
  }
  return statements;
}

std::string FleetDistributedEngine(const FleetOptions& options) {
  return absl::StrCat("Distributed(", options.cluster, ", ", options.database,
                      ", issues_local, cityHash64(host_id))");
}

FleetRow MakeFleetRow(const IssueRecord& record, absl::string_view report_json,
                      absl::string_view fallback_host_id) {
  FleetRow row;
  MakeFleetRow(record, report_json, fallback_host_id, row);
  return row;
}

void MakeFleetRow(const IssueRecord& record, absl::string_view report_json,
                  absl::string_view fallback_host_id, FleetRow& row) {
  const proto::Issue& issue = record.issue;
  row.time_ms = issue.time_ms();
  if (issue.app().host_id().empty()) {
    row.host_id.assign(fallback_host_id.data(), fallback_host_id.size());
  } else {
    row.host_id = issue.app().host_id();
  }
  row.host_name = issue.app().host_name();
  row.process = issue.process();
  row.pid = issue.pid();
  row.build_id = issue.app().build_id();
  row.version = issue.app().version();
  row.tag = record.tag();
  row.detail = record.detail;
  row.kind = record.kind;
  row.key = record.key;
  row.scene = record.scene;
  row.cost_ms = 0;
  row.fps = 0;
  row.frames = 0;
  row.dropped_frames = 0;
  for (int64_t& level : row.drop_level) level = 0;
  if (record.metric.present()) {
    if (record.metric.unit == "fps") {
      row.fps = record.metric.value;
    } else {
      row.cost_ms = record.metric.value;
    }
  }
  if (issue.has_frame()) {
    const proto::FrameReport& frame = issue.frame();
    row.fps = frame.fps();
    row.frames = frame.frames();
    row.dropped_frames = frame.dropped_frames();
    row.drop_level[0] = frame.drop_level().best();
    row.drop_level[1] = frame.drop_level().normal();
    row.drop_level[2] = frame.drop_level().middle();
    row.drop_level[3] = frame.drop_level().high();
    row.drop_level[4] = frame.drop_level().frozen();
  }
  if (report_json.empty()) {
    row.report = RecordToJson(record);
  } else {
    row.report.assign(report_json.data(), report_json.size());
  }
  const bool text_block = record.source.line == 0 && issue.has_block();
  row.quality = text_block ? 0 : 1;
  if (issue.has_block()) {
    internal::BlockIdInto(row.host_id, issue.pid(), issue.block().time_start_ms(),
                          issue.block().time_end_ms(), row.issue_id);
  } else {
    internal::IssueIdInto(row.host_id, row.report, row.issue_id);
  }
}

void AppendFleetRowTsv(const FleetRow& row, std::string& out) {
  auto field = [&out](absl::string_view text) {
    AppendTsvEscaped(text, out);
    out += '\t';
  };
  field(row.issue_id);
  absl::StrAppend(&out, row.time_ms, "\t");
  field(row.host_id);
  field(row.host_name);
  field(row.process);
  absl::StrAppend(&out, row.pid, "\t");
  field(row.build_id);
  field(row.version);
  field(row.tag);
  field(row.detail);
  field(row.kind);
  field(row.key);
  field(row.scene);
  absl::StrAppend(&out, Num(row.cost_ms), "\t", Num(row.fps), "\t", row.frames, "\t",
                  row.dropped_frames, "\t");
  for (int64_t level : row.drop_level) absl::StrAppend(&out, level, "\t");
  field(row.report);
  absl::StrAppend(&out, static_cast<int>(row.quality), "\n");
}

namespace {

// RowBinary: strings as a LEB128 length and the bytes, numbers as their
// little-endian bytes.
void BinaryString(absl::string_view text, std::string& out) {
  uint64_t n = text.size();
  do {
    const uint8_t byte = static_cast<uint8_t>(n & 0x7F);
    n >>= 7;
    out.push_back(static_cast<char>(n != 0 ? byte | 0x80 : byte));
  } while (n != 0);
  out.append(text.data(), text.size());
}

template <typename T>
void BinaryNumber(T value, std::string& out) {
  static_assert(std::is_arithmetic_v<T>);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64: little-endian.
  out.append(bytes, sizeof(T));
}

double Finite(double value) { return std::isfinite(value) ? value : 0; }

}  // namespace

void AppendFleetRowBinary(const FleetRow& row, std::string& out) {
  internal::AppendFleetRowBinary(internal::ViewOf(row), out);
}

namespace internal {

FleetRowView ViewOf(const FleetRow& row) {
  FleetRowView view{.issue_id = row.issue_id,
                    .time_ms = row.time_ms,
                    .host_id = row.host_id,
                    .host_name = row.host_name,
                    .process = row.process,
                    .pid = row.pid,
                    .build_id = row.build_id,
                    .version = row.version,
                    .tag = row.tag,
                    .detail = row.detail,
                    .kind = row.kind,
                    .key = row.key,
                    .scene = row.scene,
                    .cost_ms = row.cost_ms,
                    .fps = row.fps,
                    .frames = row.frames,
                    .dropped_frames = row.dropped_frames,
                    .report = row.report,
                    .quality = row.quality};
  std::copy(std::begin(row.drop_level), std::end(row.drop_level), view.drop_level);
  return view;
}

FleetRow ToFleetRow(const FleetRowView& view) {
  FleetRow row;
  row.issue_id = std::string(view.issue_id);
  row.time_ms = view.time_ms;
  row.host_id = std::string(view.host_id);
  row.host_name = std::string(view.host_name);
  row.process = std::string(view.process);
  row.pid = view.pid;
  row.build_id = std::string(view.build_id);
  row.version = std::string(view.version);
  row.tag = std::string(view.tag);
  row.detail = std::string(view.detail);
  row.kind = std::string(view.kind);
  row.key = std::string(view.key);
  row.scene = std::string(view.scene);
  row.cost_ms = view.cost_ms;
  row.fps = view.fps;
  row.frames = view.frames;
  row.dropped_frames = view.dropped_frames;
  std::copy(std::begin(view.drop_level), std::end(view.drop_level), row.drop_level);
  row.report = std::string(view.report);
  row.quality = view.quality;
  return row;
}

void AppendFleetRowBinary(const FleetRowView& row, std::string& out) {
  BinaryString(row.issue_id, out);
  BinaryNumber<int64_t>(row.time_ms, out);
  BinaryString(row.host_id, out);
  BinaryString(row.host_name, out);
  BinaryString(row.process, out);
  BinaryNumber<int32_t>(row.pid, out);
  BinaryString(row.build_id, out);
  BinaryString(row.version, out);
  BinaryString(row.tag, out);
  BinaryString(row.detail, out);
  BinaryString(row.kind, out);
  BinaryString(row.key, out);
  BinaryString(row.scene, out);
  BinaryNumber<double>(Finite(row.cost_ms), out);
  BinaryNumber<double>(Finite(row.fps), out);
  BinaryNumber<int64_t>(row.frames, out);
  BinaryNumber<int64_t>(row.dropped_frames, out);
  for (int64_t level : row.drop_level) BinaryNumber<int64_t>(level, out);
  BinaryString(row.report, out);
  BinaryNumber<uint8_t>(row.quality, out);
}

void IssueIdInto(absl::string_view host_id, absl::string_view report, std::string& out) {
  StableIdInto({host_id, "\n", report}, out);
}

void IssueIdsInto(absl::Span<const IssueIdJob> jobs) {
  constexpr size_t kSideBySide = 4;
  size_t i = 0;
  for (; i + kSideBySide <= jobs.size(); i += kSideBySide) {
    IssueIdsSideBySide<kSideBySide>(&jobs[i]);
  }
  for (; i < jobs.size(); ++i) IssueIdsSideBySide<1>(&jobs[i]);
}

void BlockIdInto(absl::string_view host_id, int32_t pid, int64_t time_start_ms,
                 int64_t time_end_ms, std::string& out) {
  // A block is in its JSON-lines issue and in its BlockCanary text file:
  // one id for both.
  StableIdInto({absl::StrCat(host_id, "\nblock\n", pid, "\n", time_start_ms, "\n", time_end_ms)},
               out);
}

}  // namespace internal

std::string CheckpointPath(const std::string& dir, absl::string_view url,
                           absl::string_view database) {
  std::string u(url);
  while (!u.empty() && u.back() == '/') u.pop_back();
  return absl::StrCat(dir, "/.matrix-push-",
                      StableId({u, "\n", database}).substr(0, 16));
}

}  // namespace matrix::report
