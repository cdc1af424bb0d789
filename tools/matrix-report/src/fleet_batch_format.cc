// A batch of the fleet's rows in the table's order, as RowBinary or as one
// ClickHouse Native block (internal/fleet_row_view.h, docs/fleet.md
// "Pushing"), and a batch's rows split by shard (docs/fleet.md, "Two shards"):
// push builds its batches as RowBinary rows in the order it
// reads them, and sends them sorted, which the server then writes without
// sorting them again (and, as Native, takes column by column rather than
// parsing every row).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "internal/city_hash.h"
#include "internal/fleet_row_view.h"

namespace matrix::report::internal {

namespace {

// kFleetColumns with their types; a width of 0 is a String (a LEB128
// length and the bytes, in RowBinary and in Native alike), other widths are
// numbers of that many little-endian bytes.
struct NativeColumn {
  const char* name;
  const char* type;
  size_t width;
};
constexpr NativeColumn kNativeColumns[] = {
    {"issue_id", "String", 0},   {"time_ms", "Int64", 8},        {"host_id", "String", 0},
    {"host_name", "String", 0},  {"process", "String", 0},       {"pid", "Int32", 4},
    {"build_id", "String", 0},   {"version", "String", 0},       {"tag", "String", 0},
    {"detail", "String", 0},     {"kind", "String", 0},          {"key", "String", 0},
    {"scene", "String", 0},      {"cost_ms", "Float64", 8},      {"fps", "Float64", 8},
    {"frames", "Int64", 8},      {"dropped_frames", "Int64", 8}, {"drop_best", "Int64", 8},
    {"drop_normal", "Int64", 8}, {"drop_middle", "Int64", 8},    {"drop_high", "Int64", 8},
    {"drop_frozen", "Int64", 8}, {"report", "String", 0},        {"quality", "UInt8", 1},
};
constexpr size_t kColumnCount = sizeof(kNativeColumns) / sizeof(kNativeColumns[0]);

void AppendVarUInt(uint64_t n, std::string& out) {
  do {
    const auto byte = static_cast<uint8_t>(n & 0x7F);
    n >>= 7;
    out.push_back(static_cast<char>(n != 0 ? byte | 0x80 : byte));
  } while (n != 0);
}

void AppendString(absl::string_view text, std::string& out) {
  AppendVarUInt(text.size(), out);
  out.append(text.data(), text.size());
}

// The end of the String that starts at `at` of `rows` (its LEB128 length,
// then its bytes), or npos when it does not end inside `rows`.
inline size_t StringEnd(absl::string_view rows, size_t at) {
  uint64_t size = 0;
  for (int shift = 0;; shift += 7) {
    if (at >= rows.size() || shift > 63) return absl::string_view::npos;
    const auto byte = static_cast<uint8_t>(rows[at++]);
    size |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) break;
  }
  return rows.size() - at >= size ? at + size : absl::string_view::npos;
}

// The end of the row that starts at `at` of `rows` (npos when it does not
// end inside `rows`); calls field(column, begin, end) for each of its
// fields, the columns unrolled (their widths known where they are copied).
template <size_t kColumn = 0, typename F>
inline size_t WalkRow(absl::string_view rows, size_t at, F& field) {
  if constexpr (kColumn == kColumnCount) {
    return at;
  } else {
    constexpr size_t kWidth = kNativeColumns[kColumn].width;
    size_t end = absl::string_view::npos;
    if constexpr (kWidth != 0) {
      if (rows.size() - at < kWidth) return end;
      end = at + kWidth;
    } else {
      end = StringEnd(rows, at);
      if (end == absl::string_view::npos) return end;
    }
    field(kColumn, at, end);
    return WalkRow<kColumn + 1>(rows, end, field);
  }
}

// The table's sorting key is (host_id, issue_id). A batch holds few hosts,
// each in runs of rows (a host's files one after the other): each row gets
// the rank of its host among the batch's hosts, and the first 8 bytes of
// its issue id as a big-endian number, so that most comparisons are of two
// integers. Strings compare as the server compares them: bytes, then length.
constexpr size_t kIssueIdColumn = 0;
constexpr size_t kHostIdColumn = 2;

struct SortedRow {
  uint32_t host_rank;
  uint64_t issue_prefix;
  absl::string_view issue_id;
  size_t at;   // In the RowBinary rows (unique: the sort's last key).
  size_t end;  // Of the row.
};

absl::string_view Value(absl::string_view rows, size_t begin, size_t end) {
  size_t at = begin;
  while (at < end && (static_cast<uint8_t>(rows[at]) & 0x80) != 0) ++at;
  return rows.substr(at + 1, end - at - 1);
}

uint64_t Prefix(absl::string_view text) {
  uint64_t prefix = 0;
  for (size_t i = 0; i < 8; ++i) {
    prefix = prefix << 8 | (i < text.size() ? static_cast<uint8_t>(text[i]) : 0);
  }
  return prefix;
}

bool Before(const SortedRow& a, const SortedRow& b) {
  if (a.host_rank != b.host_rank) return a.host_rank < b.host_rank;
  if (a.issue_prefix != b.issue_prefix) return a.issue_prefix < b.issue_prefix;
  const int issue = a.issue_id.compare(b.issue_id);
  return issue != 0 ? issue < 0 : a.at < b.at;
}

// Gives each row of `order` the rank of its host (`hosts`: each row's)
// among the distinct hosts.
void RankHosts(const std::vector<absl::string_view>& hosts, std::vector<SortedRow>& order) {
  absl::flat_hash_map<absl::string_view, uint32_t> rank;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i == 0 || hosts[i] != hosts[i - 1]) rank.try_emplace(hosts[i], 0);
  }
  std::vector<absl::string_view> distinct;
  distinct.reserve(rank.size());
  for (const auto& [host, unused] : rank) distinct.push_back(host);
  std::sort(distinct.begin(), distinct.end());
  for (size_t i = 0; i < distinct.size(); ++i) rank[distinct[i]] = static_cast<uint32_t>(i);
  uint32_t run_rank = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i == 0 || hosts[i] != hosts[i - 1]) run_rank = rank[hosts[i]];
    order[i].host_rank = run_rank;
  }
}

}  // namespace

bool SortFleetRows(absl::string_view rows, int64_t count, BatchFormat format, std::string& out) {
  const auto refuse = [&out] {
    out.clear();
    return false;
  };
  if (count < 0) return refuse();
  size_t column_bytes[kColumnCount] = {};
  std::vector<SortedRow> order(static_cast<size_t>(count));
  std::vector<absl::string_view> hosts(static_cast<size_t>(count));
  size_t at = 0;
  for (size_t row = 0; row < order.size(); ++row) {
    SortedRow& sorted = order[row];
    sorted.at = at;
    const auto measure = [&](size_t column, size_t begin, size_t end) {
      column_bytes[column] += end - begin;
      if (column == kHostIdColumn) hosts[row] = Value(rows, begin, end);
      if (column == kIssueIdColumn) sorted.issue_id = Value(rows, begin, end);
    };
    at = WalkRow(rows, at, measure);
    if (at == absl::string_view::npos) return refuse();
    sorted.end = at;
    sorted.issue_prefix = Prefix(sorted.issue_id);
  }
  if (at != rows.size()) return refuse();
  // In the table's order, stably (rows of one issue keep theirs): the server
  // finds the block sorted and writes it as it is, without a permutation of
  // every column. `out` is sized, not cleared: the memory of the batch
  // before (push's, of about the same size) is written over rather than
  // zeroed first.
  RankHosts(hosts, order);
  std::sort(order.begin(), order.end(), Before);
  if (format == BatchFormat::kSortedRowBinary) {
    out.resize(rows.size());
    size_t out_at = 0;
    for (const SortedRow& row : order) {
      std::memcpy(out.data() + out_at, rows.data() + row.at, row.end - row.at);
      out_at += row.end - row.at;
    }
    return true;
  }
  // The block: its column and row counts, then each column's name, type and
  // values one after the other.
  std::string counts;
  AppendVarUInt(kColumnCount, counts);
  AppendVarUInt(static_cast<uint64_t>(count), counts);
  std::string headers[kColumnCount];  // Each column's name and type.
  size_t column_at[kColumnCount];
  size_t size = counts.size();
  for (size_t column = 0; column < kColumnCount; ++column) {
    AppendString(kNativeColumns[column].name, headers[column]);
    AppendString(kNativeColumns[column].type, headers[column]);
    column_at[column] = size + headers[column].size();
    size = column_at[column] + column_bytes[column];
  }
  out.resize(size);
  char* const data = out.data();
  std::memcpy(data, counts.data(), counts.size());
  for (size_t column = 0; column < kColumnCount; ++column) {
    const std::string& header = headers[column];
    std::memcpy(data + column_at[column] - header.size(), header.data(), header.size());
  }
  const auto copy = [&](size_t column, size_t begin, size_t end) {
    std::memcpy(data + column_at[column], rows.data() + begin, end - begin);
    column_at[column] += end - begin;
  };
  for (const SortedRow& row : order) WalkRow(rows, row.at, copy);
  return true;
}

bool SplitFleetRowsByShard(absl::string_view rows, int64_t count,
                           absl::Span<const uint32_t> slot_to_shard,
                           absl::Span<ShardRows* const> out) {
  for (ShardRows* shard : out) {
    shard->rows.clear();
    shard->count = 0;
    shard->last_row_at = 0;
  }
  if (count < 0 || slot_to_shard.empty()) return false;
  // A batch holds runs of rows of one host: the hash once per run.
  absl::string_view run_host;
  ShardRows* run_shard = nullptr;
  size_t at = 0;
  for (int64_t row = 0; row < count; ++row) {
    absl::string_view host;
    const auto find_host = [&](size_t column, size_t begin, size_t end) {
      if (column == kHostIdColumn) host = Value(rows, begin, end);
    };
    const size_t end = WalkRow(rows, at, find_host);
    if (end == absl::string_view::npos) return false;
    if (run_shard == nullptr || host != run_host) {
      const uint32_t shard = slot_to_shard[CityHash64(host) % slot_to_shard.size()];
      if (shard >= out.size()) return false;
      run_host = host;
      run_shard = out[shard];
    }
    run_shard->last_row_at = run_shard->rows.size();
    run_shard->rows.append(rows.data() + at, end - at);
    ++run_shard->count;
    at = end;
  }
  return at == rows.size();
}

}  // namespace matrix::report::internal
