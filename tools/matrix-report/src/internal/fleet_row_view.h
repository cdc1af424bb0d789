// File: tools/matrix-report/src/internal/fleet_row_view.h
//
// A fleet row whose text columns point into memory the caller keeps (the
// line read, a parser's unescaped strings), and the issue ids (internal to
// matrix_report_lib; docs/fleet.md "Pushing"): push's fast path writes the
// RowBinary of a row straight from what it parsed, with no copy of each
// column into a FleetRow first.
//
//   FleetRowView view = ViewOf(row);          // or filled by a parser
//   AppendFleetRowBinary(view, rows_binary);  // the same bytes as for `row`
//
// Thread safety: value types and pure functions; thread-compatible.

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_ROW_VIEW_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_ROW_VIEW_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "matrix/report/fleet.h"

namespace matrix::report::internal {

// FleetRow's columns, text as views (valid while what they point into is).
struct FleetRowView {
  absl::string_view issue_id;
  int64_t time_ms = 0;
  absl::string_view host_id;
  absl::string_view host_name;
  absl::string_view process;
  int32_t pid = 0;
  absl::string_view build_id;
  absl::string_view version;
  absl::string_view tag;
  absl::string_view detail;
  absl::string_view kind;
  absl::string_view key;
  absl::string_view scene;
  double cost_ms = 0;
  double fps = 0;
  int64_t frames = 0;
  int64_t dropped_frames = 0;
  int64_t drop_level[5] = {0, 0, 0, 0, 0};
  absl::string_view report;
  uint8_t quality = 1;
};

// `row` as a view into its strings.
FleetRowView ViewOf(const FleetRow& row);
// The view's columns copied into a FleetRow.
FleetRow ToFleetRow(const FleetRowView& view);

// AppendFleetRowBinary of a view: the same bytes as for the FleetRow it
// shows.
void AppendFleetRowBinary(const FleetRowView& row, std::string& out);

// The 32 hex digits of an issue's id into `out`: of a JSON-lines issue, by
// its host and its line as stored; of a block (in a JSON-lines issue or a
// BlockCanary text file), by its host, pid and start and end times.
void IssueIdInto(absl::string_view host_id, absl::string_view report, std::string& out);
// An issue id IssueIdInto would give, to be written to the 32 bytes at
// `out`.
struct IssueIdJob {
  absl::string_view host_id;
  absl::string_view report;
  char* out;
};
// The ids of `jobs`, several side by side: each hash is a chain of
// multiplications, one per byte, so independent chains fill the CPU's time
// between them (about 2x IssueIdInto one by one).
void IssueIdsInto(absl::Span<const IssueIdJob> jobs);

// The `count` rows of `rows` (AppendFleetRowBinary, one after the other)
// in the table's order (host_id, then issue_id, as the server compares
// strings; rows of one issue keep their order) into `out`, which is written
// over (its memory kept):
//   - kSortedRowBinary: the same rows;
//   - kNative: one block of ClickHouse's Native format of the same columns
//     (kFleetColumns): per column its name, its type and its values one
//     after the other (a String value as in RowBinary).
// The server finds either sorted and writes it without sorting it again; it
// stores the same rows as from `rows`. False (and `out` empty) when `rows`
// is not exactly `count` whole rows.
bool SortFleetRows(absl::string_view rows, int64_t count, BatchFormat format, std::string& out);

// One shard's rows of a batch (SplitFleetRowsByShard).
struct ShardRows {
  std::string rows;  // RowBinary, in the batch's order.
  int64_t count = 0;
  size_t last_row_at = 0;  // In `rows`.
};

// Appends each of the `count` rows of `rows` (AppendFleetRowBinary, one
// after the other) to the ShardRows of its shard: out[slot_to_shard[
// CityHash64(host_id) % slot_to_shard.size()]], the rule of a Distributed
// table sharded by cityHash64(host_id) (each shard has as many slots as its
// weight, in the cluster's order). `out` has one entry per shard, cleared
// here (their memory kept). False when `rows` is not exactly `count` whole
// rows, or a slot names no entry of `out`.
bool SplitFleetRowsByShard(absl::string_view rows, int64_t count,
                           absl::Span<const uint32_t> slot_to_shard,
                           absl::Span<ShardRows* const> out);

void BlockIdInto(absl::string_view host_id, int32_t pid, int64_t time_start_ms,
                 int64_t time_end_ms, std::string& out);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_ROW_VIEW_H_
