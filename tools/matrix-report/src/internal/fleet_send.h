// File: tools/matrix-report/src/internal/fleet_send.h
//
// What push hands to a batch's sending thread (internal to
// matrix_report_lib; docs/fleet.md "Pushing"): the batch's rows, each
// shard's part of them (FleetPusher::UseShards), its checkpoints, and the
// outcome the batch after it waits for. The push loop (fleet_push.cc) fills
// a Batch and starts its thread (FleetPusher::Flush), and takes it back
// (FleetPusher::Await); the thread sorts it, splits it by shard, sends it and
// saves its checkpoints (FleetPusher::Send, fleet_send.cc).
//
//   // In FleetPusher::Flush (the rows and checkpoints moved in first):
//   batch->SetEndRows(pending.last_row_at);
//   batch->sender = std::thread([this, b = batch.get()] { b->status = Send(*b); });
//
// Thread safety: a Batch and its Parts belong to the push loop until its
// sending thread starts, then to that thread (and the threads it starts, one
// per server, each with its own Part) until the loop joins it. An Outcome is
// shared with the batch after: each server's flags are set by that server's
// thread before it notifies part_done[server], `acknowledged` before `done`.

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_SEND_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_SEND_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "internal/fleet_checkpoint.h"
#include "matrix/report/fleet.h"

namespace matrix::report {

// Rows for one table on one server: a whole batch, or one shard's part of
// it.
struct FleetPusher::Part {
  std::string rows_binary;  // RowBinary (AppendFleetRowBinary).
  std::string sorted;       // The same rows as sent (batch_format), unless kRowBinary.
  int64_t rows = 0;
  // The first and last rows (host_id, issue_id), counted back after an
  // INSERT whose answer does not say how many rows it wrote.
  std::pair<std::string, std::string> first_row;
  std::pair<std::string, std::string> last_row;

  // Sets first_row and last_row from rows_binary, the last row at
  // `last_row_at`; nothing when there are no rows.
  void SetEndRows(size_t last_row_at);
};

// Whether a batch was sent, per server: the batch after it sends its rows
// to a server (shard) once this one's are acknowledged there, so each
// shard takes its parts in order while a faster one runs ahead; its
// checkpoints are saved once this batch is done and was acknowledged.
struct FleetPusher::Outcome {
  explicit Outcome(size_t servers)
      : part_done(new absl::Notification[servers]), part_acknowledged(new bool[servers]()) {}
  // Per server: its part sent (or given up), and acknowledged (set before;
  // each server's by its own thread).
  std::unique_ptr<absl::Notification[]> part_done;
  std::unique_ptr<bool[]> part_acknowledged;
  // The whole batch acknowledged and its checkpoints saved (set before).
  absl::Notification done;
  bool acknowledged = false;
};

// A batch handed to its sending thread: its rows, and the checkpoints to
// save once the server (every shard) has them.
struct FleetPusher::Batch : FleetPusher::Part {
  // UseShards: each shard's rows of the batch, in the shards' order.
  std::vector<std::unique_ptr<Part>> shard_parts;
  // This batch's outcome, and the one of the batch handed over before it
  // (nullptr when that one was already done).
  std::shared_ptr<Outcome> outcome;
  std::shared_ptr<Outcome> before;
  std::thread sender;  // Joinable while it runs.
  // Whole checkpoint files, with this batch's marks in them.
  std::map<std::string, internal::Checkpoint> checkpoints;
  // The sending thread's result, and whether the server has the rows
  // (also when saving a checkpoint failed after).
  absl::Status status;
  bool acknowledged = false;
};

}  // namespace matrix::report

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_SEND_H_
