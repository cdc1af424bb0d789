// The fleet's rows as one ClickHouse Native block (internal/fleet_row_view.h,
// docs/fleet.md "Pushing"): push builds its batches as RowBinary rows and
// sends them as Native columns in the table's order, which the server takes
// column by column rather than parsing every row, and writes without
// sorting them again.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
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
    {"issue_id", "String", 0},  {"time_ms", "Int64", 8},     {"host_id", "String", 0},
    {"host_name", "String", 0}, {"process", "String", 0},    {"pid", "Int32", 4},
    {"build_id", "String", 0},  {"version", "String", 0},    {"tag", "String", 0},
    {"detail", "String", 0},    {"kind", "String", 0},       {"key", "String", 0},
    {"scene", "String", 0},     {"cost_ms", "Float64", 8},   {"fps", "Float64", 8},
    {"frames", "Int64", 8},     {"dropped_frames", "Int64", 8}, {"drop_best", "Int64", 8},
    {"drop_normal", "Int64", 8}, {"drop_middle", "Int64", 8}, {"drop_high", "Int64", 8},
    {"drop_frozen", "Int64", 8}, {"report", "String", 0},    {"quality", "UInt8", 1},
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

// The end of the field of `column` that starts at `at` of `rows`, or
// npos when the field does not end inside `rows`.
size_t FieldEnd(absl::string_view rows, size_t at, const NativeColumn& column) {
  if (column.width != 0) {
    return rows.size() - at >= column.width ? at + column.width : absl::string_view::npos;
  }
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
// fields.
template <typename F>
size_t ForEachField(absl::string_view rows, size_t at, F&& field) {
  for (size_t column = 0; column < kColumnCount; ++column) {
    const size_t end = FieldEnd(rows, at, kNativeColumns[column]);
    if (end == absl::string_view::npos) return end;
    field(column, at, end);
    at = end;
  }
  return at;
}

// The fields of the table's sorting key (ORDER BY (host_id, issue_id)),
// with their LEB128 lengths: as strings they compare as the server compares
// them, bytes then length.
constexpr size_t kIssueIdColumn = 0;
constexpr size_t kHostIdColumn = 2;

struct SortedRow {
  size_t at;  // In the RowBinary rows.
  absl::string_view host_id;
  absl::string_view issue_id;
};

absl::string_view Value(absl::string_view rows, size_t begin, size_t end) {
  size_t at = begin;
  while (at < end && (static_cast<uint8_t>(rows[at]) & 0x80) != 0) ++at;
  return rows.substr(at + 1, end - at - 1);
}

}  // namespace

bool FleetRowBinaryToNative(absl::string_view rows, int64_t count, std::string& out) {
  out.clear();
  if (count < 0) return false;
  size_t column_bytes[kColumnCount] = {};
  std::vector<SortedRow> order;
  order.reserve(static_cast<size_t>(count));
  size_t at = 0;
  for (int64_t row = 0; row < count; ++row) {
    SortedRow& sorted = order.emplace_back();
    sorted.at = at;
    at = ForEachField(rows, at, [&](size_t column, size_t begin, size_t end) {
      column_bytes[column] += end - begin;
      if (column == kHostIdColumn) sorted.host_id = Value(rows, begin, end);
      if (column == kIssueIdColumn) sorted.issue_id = Value(rows, begin, end);
    });
    if (at == absl::string_view::npos) return false;
  }
  if (at != rows.size()) return false;
  // In the table's order, stably (rows of one issue keep theirs): the server
  // finds the block sorted and writes it as it is, without a permutation of
  // every column.
  std::stable_sort(order.begin(), order.end(), [](const SortedRow& a, const SortedRow& b) {
    const int host = a.host_id.compare(b.host_id);
    return host != 0 ? host < 0 : a.issue_id < b.issue_id;
  });
  // The block: its column and row counts, then each column's name, type and
  // values one after the other.
  AppendVarUInt(kColumnCount, out);
  AppendVarUInt(static_cast<uint64_t>(count), out);
  size_t column_at[kColumnCount];
  for (size_t column = 0; column < kColumnCount; ++column) {
    AppendString(kNativeColumns[column].name, out);
    AppendString(kNativeColumns[column].type, out);
    column_at[column] = out.size();
    out.resize(out.size() + column_bytes[column]);
  }
  char* const data = out.data();
  for (const SortedRow& row : order) {
    ForEachField(rows, row.at, [&](size_t column, size_t begin, size_t end) {
      std::memcpy(data + column_at[column], rows.data() + begin, end - begin);
      column_at[column] += end - begin;
    });
  }
  return true;
}

}  // namespace matrix::report::internal
