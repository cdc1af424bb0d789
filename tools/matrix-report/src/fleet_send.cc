// Sending push's batches (internal/fleet_send.h, docs/fleet.md "Pushing"):
// on a batch's own thread, its rows sorted into the table's order
// (fleet_batch_format.cc, PushOptions::batch_format) and, with shards
// (FleetPusher::UseShards, fleet_placement.cc), split by shard as the
// Distributed table would (cityHash64(host_id), internal/city_hash.h); then
// each server's rows INSERTed once that server acknowledged its rows of the
// batch before (every shard's at once, each on a thread of its own), checked
// stored, and the batch's checkpoints saved once the batch before saved its
// own.

#include "internal/fleet_send.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "internal/fleet_checkpoint.h"
#include "internal/fleet_row_view.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

namespace matrix::report {

namespace {

// The (host_id, issue_id) of the RowBinary row at `at` of `rows`
// (AppendFleetRowBinary: issue_id first, then time_ms, then host_id).
std::pair<std::string, std::string> RowIds(absl::string_view rows, size_t at) {
  const auto string_at = [&rows](size_t& from) {
    uint64_t size = 0;
    for (int shift = 0; from < rows.size() && shift < 64; shift += 7) {
      const auto byte = static_cast<uint8_t>(rows[from++]);
      size |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) break;
    }
    const absl::string_view text = rows.substr(std::min(from, rows.size()), size);
    from += size;
    return std::string(text);
  };
  std::string issue_id = string_at(at);
  at += sizeof(int64_t);  // time_ms
  std::string host_id = string_at(at);
  return {std::move(host_id), std::move(issue_id)};
}

// A batch (or a shard's part of it) that did not split into `rows` whole
// rows: nothing of it is sent.
absl::Status NotWholeRows(int64_t rows) {
  return absl::InternalError(
      absl::StrCat("a batch of ", rows, " rows is not whole rows; nothing of it is sent"));
}

}  // namespace

void FleetPusher::Part::SetEndRows(size_t last_row_at) {
  if (rows == 0) return;
  first_row = RowIds(rows_binary, 0);
  last_row = RowIds(rows_binary, last_row_at);
}

absl::Status FleetPusher::CheckStored(ClickHouseClient& client, const std::string& table,
                                      const Part& part, const InsertResult& result) {
  if (result.written_rows.has_value() && *result.written_rows >= part.rows) {
    return absl::OkStatus();
  }
  // No summary (ClickHouse before 19), or one that counts fewer rows (a
  // server may leave out rows a Distributed table wrote on other shards):
  // the part's first and last rows must be there.
  const auto tuple = [](const std::pair<std::string, std::string>& row) {
    return absl::StrCat("(", SqlQuote(row.first), ", ", SqlQuote(row.second), ")");
  };
  const int64_t expected = part.first_row == part.last_row ? 1 : 2;
  absl::StatusOr<std::string> body = client.Query(absl::StrCat(
      "SELECT uniqExact(host_id, issue_id) FROM ", table, " WHERE (host_id, issue_id) IN (",
      tuple(part.first_row), ", ", tuple(part.last_row), ") FORMAT TabSeparated"));
  if (!body.ok()) return body.status();
  int64_t found = -1;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(*body), &found) && found == expected) {
    return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrCat(client.shown_url(), ": ",
                   result.written_rows.has_value()
                       ? absl::StrCat("the server wrote ", *result.written_rows, " of ", part.rows,
                                      " rows of the batch (X-ClickHouse-Summary), and ")
                       : "",
                   "the batch's rows were not found after the INSERT (",
                   found < 0 ? std::string("no count") : absl::StrCat(found), " of ", expected,
                   " rows counted back); nothing of it is checkpointed"));
}

absl::Status FleetPusher::PreparePart(Part& part) const {
  if (options_.batch_format == BatchFormat::kRowBinary ||
      internal::SortFleetRows(part.rows_binary, part.rows, options_.batch_format, part.sorted)) {
    return absl::OkStatus();
  }
  return NotWholeRows(part.rows);
}

absl::Status FleetPusher::DeliverPart(ClickHouseClient& client, const std::string& table,
                                      const Part& part) {
  const BatchFormat format = options_.batch_format;
  absl::StatusOr<InsertResult> result =
      client.Insert(absl::StrCat("INSERT INTO ", table, " (", kFleetColumns, ") FORMAT ",
                                 format == BatchFormat::kNative ? "Native" : "RowBinary"),
                    format == BatchFormat::kRowBinary ? absl::string_view(part.rows_binary)
                                                      : absl::string_view(part.sorted));
  if (!result.ok()) return result.status();
  return CheckStored(client, table, part, *result);
}

absl::Status FleetPusher::Prepare(Batch& batch) const {
  if (shards_.empty()) return PreparePart(batch);
  std::vector<internal::ShardRows> rows(shards_.size());
  std::vector<internal::ShardRows*> split;
  for (size_t i = 0; i < shards_.size(); ++i) {
    // Each part's memory of an earlier batch, written over.
    rows[i].rows = std::move(batch.shard_parts[i]->rows_binary);
    split.push_back(&rows[i]);
  }
  const bool whole =
      internal::SplitFleetRowsByShard(batch.rows_binary, batch.rows, slot_to_shard_, split);
  for (size_t i = 0; i < shards_.size(); ++i) {
    Part& part = *batch.shard_parts[i];
    part.rows_binary = std::move(rows[i].rows);
    part.rows = rows[i].count;
    part.SetEndRows(rows[i].last_row_at);
    if (part.rows == 0 || !whole) continue;
    if (absl::Status sorted = PreparePart(part); !sorted.ok()) return sorted;
  }
  return whole ? absl::OkStatus() : NotWholeRows(batch.rows);
}

absl::Status FleetPusher::DeliverAfter(Batch& batch, size_t server, const absl::Status& prepared) {
  absl::Status status = prepared;
  if (batch.before != nullptr) {
    batch.before->part_done[server].WaitForNotification();
    if (!batch.before->part_acknowledged[server]) {
      status = absl::AbortedError("not sent: the batch before it was not acknowledged");
    }
  }
  if (status.ok() && batch.rows > 0) {
    status = shards_.empty() ? DeliverPart(client_, table_, batch)
             : batch.shard_parts[server]->rows > 0
                 ? DeliverPart(*shards_[server], local_table_, *batch.shard_parts[server])
                 : absl::OkStatus();
  }
  batch.outcome->part_acknowledged[server] = status.ok();
  batch.outcome->part_done[server].Notify();
  return status;
}

absl::Status FleetPusher::Send(Batch& batch) {
  // Sorted (and split by shard) here, while the batch before is sent and
  // the next one read; each server's rows sent once that server
  // acknowledged its rows of the batch before: every shard's at once, on
  // threads of their own (the first on this one).
  const absl::Status prepared = batch.rows > 0 ? Prepare(batch) : absl::OkStatus();
  const size_t servers = std::max<size_t>(1, shards_.size());
  std::vector<absl::Status> status(servers);
  std::vector<std::thread> threads;
  for (size_t server = 1; server < servers; ++server) {
    threads.emplace_back([this, &batch, &status, &prepared, server] {
      status[server] = DeliverAfter(batch, server, prepared);
    });
  }
  status[0] = DeliverAfter(batch, 0, prepared);
  for (std::thread& thread : threads) thread.join();
  // The checkpoints only after the batch before saved its own.
  if (batch.before != nullptr) {
    batch.before->done.WaitForNotification();
    if (!batch.before->acknowledged) {
      return absl::AbortedError("not checkpointed: the batch before it was not acknowledged");
    }
  }
  for (size_t server = 0; server < servers; ++server) {
    if (status[server].ok()) continue;
    if (shards_.empty()) return status[server];
    return absl::Status(
        status[server].code(),
        absl::StrCat("shard ", server + 1, " of ", shards_.size(), " (",
                     shards_[server]->shown_url(), "): ", status[server].message()));
  }
  batch.acknowledged = batch.rows > 0;
  // Acknowledged (or nothing to send: skipped lines only): save the marks.
  for (const auto& [path, checkpoint] : batch.checkpoints) {
    if (absl::Status saved = internal::SaveCheckpoint(path, checkpoint); !saved.ok()) return saved;
  }
  return absl::OkStatus();
}

}  // namespace matrix::report
