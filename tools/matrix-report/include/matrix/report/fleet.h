// File: matrix/report/fleet.h
//
// The fleet: reports of many machines in ClickHouse (docs/fleet.md).
//
// FleetPusher ships the issues of report directories (JSON-lines files and
// BlockCanary text files, as matrix-report reads them) into one table,
// `<database>.issues`, one row per issue: typed columns for what fleet
// queries filter and group on, and the full report. Each issue has a stable
// id (a hash of its host and its report), and the table is a
// ReplacingMergeTree ordered by it, so pushing an issue again replaces it:
// `SELECT count() FROM matrix.issues FINAL` is the number of issues. A
// checkpoint per directory (.matrix-push-<hash of URL and database>) keeps
// how far each file was sent (by inode, so a rotated file keeps its place),
// and is written only after the server acknowledged the rows: a push that
// stops anywhere sends again at most what was not acknowledged, and the table
// collapses what a lost acknowledgement made it send twice. A batch counts as
// acknowledged only when ClickHouse says its rows were written. Report
// directories may belong to other users: a checkpoint is read only when it is
// a regular file of the pushing user or the directory's owner, and written
// through a new temporary file of its own; only regular report files are
// read, and lines longer than kMaxIssueLineBytes are skipped as malformed
// (docs/fleet.md). With a cluster, rows go through the Distributed `issues`
// of the pusher's server, or, given a client of every shard (UseShards),
// straight to each shard's `issues_local`, each row on the shard the
// Distributed table would choose (CityHash64 v1.0.2 of its host id, by the
// shards' weights), every shard's INSERT of a batch at once.
//
// FleetQueries answers the fleet questions in SQL (top, new, fps, show) on
// the same table, or on a Distributed table over shards (`cluster`). Top,
// new and fps read small rollup tables built from the table under FINAL;
// each answer carries the fingerprint of the table's data the rollups were
// built from (its parts' block numbers), and a rollup that is not the
// table's as it is now is rebuilt first (or, when it cannot be, the answer
// comes from FINAL): never a stale answer.
//
//   ClickHouseClient client({.url = "http://127.0.0.1:8123"});
//   FleetPusher pusher(client, {.database = "matrix"});
//   absl::Status status = pusher.EnsureSchema();
//   PushStats stats;
//   absl::Status pushed = pusher.Push({"./matrix-reports"}, stats);
//   FleetQueries fleet(client, {.database = "matrix"});
//   absl::StatusOr<std::vector<FleetKey>> top = fleet.Top({.limit = 20});
//
// Thread safety: thread-compatible; one thread uses a pusher or a query
// object (and its client).

#ifndef MATRIX_REPORT_FLEET_H_
#define MATRIX_REPORT_FLEET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/issue_reader.h"
#include "matrix/report/issue_record.h"
#include "matrix/report/text_render.h"

namespace matrix::report {

struct FleetOptions {
  std::string database = "matrix";
  // A cluster of the servers' <remote_servers>: the rows go to
  // `issues_local` on each shard and `issues` is a Distributed table over
  // them, sharded by host.
  std::string cluster;
  // FleetQueries: answer top, new and fps from the rollup tables
  // (`fleet_keys`, `fleet_fps`; docs/fleet.md, "Rollups"), rebuilt from
  // FINAL whenever `issues` changed since they were built; false: straight
  // from FINAL (the same answers, slower at scale).
  bool rollups = true;
};

// The statements that create the schema on one server: the database, and
// `issues` (or, with a cluster, `issues_local` and the Distributed
// `issues`).
std::vector<std::string> FleetSchema(const FleetOptions& options);

// The engine of the Distributed `issues` FleetSchema makes with a cluster, as
// system.tables' engine_full gives it: "Distributed(<cluster>, <database>,
// issues_local, cityHash64(host_id))". Push places rows by this rule only on
// a table that has it.
std::string FleetDistributedEngine(const FleetOptions& options);

// One issue as a row.
struct FleetRow {
  std::string issue_id;
  int64_t time_ms = 0;
  std::string host_id;
  std::string host_name;
  std::string process;
  int32_t pid = 0;
  std::string build_id;
  std::string version;
  std::string tag;
  std::string detail;
  std::string kind;
  std::string key;
  std::string scene;
  double cost_ms = 0;  // Hangs, slow methods, blocks, startups.
  double fps = 0;      // Frame reports.
  int64_t frames = 0;
  int64_t dropped_frames = 0;
  // Frames per drop level (best, normal, middle, high, frozen).
  int64_t drop_level[5] = {0, 0, 0, 0, 0};
  // The report as a JSON line (what matrix-report reads).
  std::string report;
  // 1 for a JSON-lines issue, 0 for a BlockCanary text file's block: the
  // table keeps the higher of two rows with one id (a block is in both).
  uint8_t quality = 1;
};

// The row of `record`. `report_json` is its JSON line (empty: written from
// the record); `fallback_host_id` is used when the report carries no host id
// (reports written before they did).
FleetRow MakeFleetRow(const IssueRecord& record, absl::string_view report_json,
                      absl::string_view fallback_host_id);
// The same into `row`, reusing its strings' memory (every field is set).
void MakeFleetRow(const IssueRecord& record, absl::string_view report_json,
                  absl::string_view fallback_host_id, FleetRow& row);

// Appends `row` to `out` as one TabSeparated line in kFleetColumns' order.
void AppendFleetRowTsv(const FleetRow& row, std::string& out);

// Appends `row` to `out` in ClickHouse's RowBinary format, kFleetColumns'
// order: what push sends (the server reads it without unescaping text).
// Non-finite numbers are written as 0, as AppendFleetRowTsv writes them.
void AppendFleetRowBinary(const FleetRow& row, std::string& out);

// The columns AppendFleetRowTsv and AppendFleetRowBinary write,
// comma-separated, for the INSERT.
extern const char kFleetColumns[];

// How push sends a batch of rows. The server writes a batch that is in the
// table's order (host_id, issue_id) without sorting it again, and reads a
// Native block column by column rather than row by row: the default costs
// the server 8-39% less CPU per issue than rows as read, and push ~1.5 us
// more, on its sending thread while the next batch is read
// (docs/performance.md, "Fleet").
enum class BatchFormat {
  kRowBinary,        // RowBinary rows in the order they are read.
  kSortedRowBinary,  // RowBinary rows in the table's order.
  kNative,           // One Native block (columns) in the table's order (the default).
};

struct PushOptions {
  FleetOptions fleet;
  // Rows per INSERT, and bytes of rows. With shards (UseShards), per
  // shard's INSERT: a batch holds that many times the number of shards, and
  // each shard takes its part (about its share by weight).
  int64_t batch_rows = 20000;
  int64_t batch_bytes = 32 << 20;
  // The host id of reports that carry none: this machine's by default.
  std::string fallback_host_id;
  // Ignore the checkpoints (send everything again; the table still keeps
  // each issue once).
  bool ignore_checkpoints = false;
  // A final line without its newline is taken only when true (one-shot
  // push); --follow waits for the writer to finish it.
  bool take_unterminated_tail = true;
  // JSON lines through the fast path (internal/fleet_fast_parse.h) when it
  // can decide them; false sends every line through ParseIssueLine (the
  // baseline tools_fleet_bench measures the fast path against). The rows
  // are the same either way.
  bool fast_parse = true;
  // Called on each issue of a JSON-lines file before it is stored; returns
  // true when it changed the issue (which is then stored as changed, not as
  // its line was written). push --debuginfod/--debug-dir names raw frames
  // here. (BlockCanary text files carry no build ids: not called.)
  std::function<bool(IssueRecord&)> before_store;
  // Threads that parse JSON lines into rows, each a part of every run of
  // lines read ahead (up to 2 MiB), the rows then taken in file order: the
  // batches, rows, skipped lines and checkpoints are those of one thread.
  // 0: one per CPU (at most 8). With before_store set, one.
  int parse_threads = 0;
  // How each batch is sent (BatchFormat). The stored rows are the same
  // either way.
  BatchFormat batch_format = BatchFormat::kNative;
};

struct PushStats {
  int64_t files = 0;
  // Issues sent (acknowledged by the server).
  int64_t sent = 0;
  int64_t batches = 0;
  int64_t bytes = 0;
  // Lines skipped because they are not issues; the first of them.
  int64_t malformed = 0;
  std::vector<MalformedLine> first_malformed;  // At most one per file.
  // Inputs and files that could not be read or were refused (not regular
  // files, refused checkpoints, read errors), each a full message.
  std::vector<std::string> errors;
};

class FleetPusher {
 public:
  FleetPusher(ClickHouseClient& client, PushOptions options);
  ~FleetPusher();
  FleetPusher(const FleetPusher&) = delete;
  FleetPusher& operator=(const FleetPusher&) = delete;

  // Creates the database and tables when missing. Any thread, one at a time.
  absl::Status EnsureSchema();

  // Places each row on its shard itself and INSERTs each shard's rows
  // straight into that shard's `issues_local` (the shards' INSERTs of one
  // batch at once), rather than every row through the Distributed `issues`
  // of the first server, which then parses and forwards them all
  // (docs/fleet.md, "Two shards"). `shards` are clients of every shard of
  // options.fleet.cluster, in the cluster's order (shard_num 1, 2, ...); the
  // first may be the pusher's own client. A row goes where the Distributed
  // table would put it: shard slot_to_shard[cityHash64(host_id) % total
  // weight], the slots of each shard as many as its weight. Checked first,
  // on every server: the cluster in the first server's system.clusters has
  // exactly these shards, one replica each, each server names itself
  // (is_local) as its shard at its position there, and the first server's
  // `issues` is Distributed over `issues_local` by cityHash64(host_id).
  // Otherwise an error that says what differs, and rows keep going through
  // `issues`. Call after EnsureSchema on every shard, before Push; the
  // clients must outlive the pusher and are used by Push's sending threads
  // (one thread each at a time).
  absl::Status UseShards(std::vector<ClickHouseClient*> shards);

  // Sends what the inputs (directories or files) hold beyond their
  // checkpoints, adding to `stats`. An error (the server gave up) leaves the
  // checkpoints at the last acknowledged batch. Each batch is sorted, sent
  // and its checkpoints saved on threads of its own while the next one is
  // read; it is sorted while the batches before are sent, and sent to each
  // server once that server acknowledged its rows of the batch before (each
  // server takes the batches in order, one at a time, and a client is used
  // by one thread at a time); its checkpoints are saved after the batch
  // before saved its own. Push returns after the last one. With shards
  // (UseShards), a batch counts as acknowledged (and its checkpoints are saved) only once every
  // shard acknowledged its rows.
  absl::Status Push(const std::vector<std::string>& inputs, PushStats& stats);

 private:
  struct Batch;
  struct Pending;
  // One open report file and its mark.
  struct Source;
  // Reads one file beyond its checkpoint into `pending`, flushing full
  // batches; a file that cannot be read is an error in `stats`.
  absl::Status PushFile(const std::string& file, Pending& pending, PushStats& stats);
  // A BlockCanary text file (one block), and a JSON-lines file from its mark.
  absl::Status PushBlockLog(Source& source, Pending& pending, PushStats& stats);
  absl::Status PushLines(Source& source, Pending& pending, PushStats& stats);
  // A parsing thread's parser and the record and row it fills per line.
  struct LineParser;
  // Lines read ahead from one file and the rows of each.
  struct Segment;
  // Appends the rows of one non-blank line to `rows` (`last_row_at` the
  // offset of the last one, `count` counting them); false (and why in
  // `reason`) when it is malformed. Any thread, each with its own parser.
  bool ParseLine(LineParser& parser, const std::string& file, int64_t line_number,
                 absl::string_view trimmed, std::string& rows, size_t& last_row_at,
                 int64_t& count, std::string& reason) const;
  // Parses the segment's lines (the first at `first_line_number`) on up to
  // parse_threads threads.
  void ParseSegment(Segment& segment, const std::string& file, int64_t first_line_number,
                    Pending& pending) const;
  // Whether `pending` holds a whole batch.
  bool Full(const Pending& pending) const;
  // Waits for the batch in flight, then hands the pending one (rows and
  // marks) to a sending thread.
  absl::Status Flush(Pending& pending, PushStats& stats);
  // Waits for the batch in flight, if any: its error, or its rows counted in
  // `stats`.
  absl::Status Await(Pending& pending, PushStats& stats);
  // On the batch's sending thread: Prepare, then each server's rows
  // (DeliverAfter, every shard's at once), then (once the batch before is
  // done) the batch's checkpoints.
  absl::Status Send(Batch& batch);
  // A batch's rows for one table on one server (the whole batch, or one
  // shard's part of it).
  struct Part;
  // Whether a batch was acknowledged, for the batch after it.
  struct Outcome;
  // Sorts `part` into batch_format.
  absl::Status PreparePart(Part& part) const;
  // INSERTs `part` into `table` of `client`, then checks it was stored
  // (CheckStored).
  absl::Status DeliverPart(ClickHouseClient& client, const std::string& table, const Part& part);
  // The batch sorted, or split by shard (UseShards) and each shard's part
  // sorted. Any sending thread: reads only what UseShards set.
  absl::Status Prepare(Batch& batch) const;
  // The batch's rows for server `server` (the pusher's own, or shard
  // `server`), once that server acknowledged its rows of the batch before,
  // unless `prepared` failed; tells the batch after whether they were
  // acknowledged. On a sending thread of the batch, one per server.
  absl::Status DeliverAfter(Batch& batch, size_t server, const absl::Status& prepared);
  // OK when the server's answer to the part's INSERT says the rows were
  // written, or else its first and last rows count back from `table`.
  absl::Status CheckStored(ClickHouseClient& client, const std::string& table, const Part& part,
                           const InsertResult& result);

  ClickHouseClient& client_;
  PushOptions options_;
  std::string table_;  // "matrix.issues"
  // UseShards: the shards' clients, `issues_local`, and each slot's shard
  // (shard i has weight i's slots). Empty: rows go to `table_`.
  std::vector<ClickHouseClient*> shards_;
  std::string local_table_;  // "matrix.issues_local"
  std::vector<uint32_t> slot_to_shard_;
};

// The checkpoint file of `dir` for a server URL and database.
std::string CheckpointPath(const std::string& dir, absl::string_view url,
                           absl::string_view database);

// ---- Queries -------------------------------------------------------------

struct FleetFilter {
  // Only this version (empty: all).
  std::string version;
  int limit = 20;
};

// A hang or slow-method key across the fleet.
struct FleetKey {
  std::string tag;
  std::string detail;
  std::string key;
  int64_t hosts = 0;
  int64_t count = 0;
  double worst_ms = 0;
  double median_ms = 0;
  // `new`: the first version it appeared in; `top`: the newest version.
  std::string version;
};

struct FleetFps {
  std::string scene;
  std::string version;
  int64_t reports = 0;
  int64_t hosts = 0;
  double fps_p50 = 0;
  double fps_p10 = 0;  // 10% of reports are at or below it.
  double dropped_percent_p50 = 0;
  double dropped_percent_p90 = 0;
  // Sums of frames per drop level.
  int64_t drop_level[5] = {0, 0, 0, 0, 0};
};

struct FleetShow {
  int64_t count = 0;
  int64_t hosts = 0;
  std::vector<std::string> versions;
  // The worst report's record (highest cost; lowest FPS for frames).
  IssueRecord worst;
};

// Orders version strings naturally: "2.10" after "2.9", "2.3" before
// "2.3.1"; digits compare as numbers.
bool VersionLess(absl::string_view a, absl::string_view b);

// How a FleetQueries answered so far (tests, tools_fleet_bench).
struct FleetQueryStats {
  int64_t from_rollups = 0;  // Answers of top/new/fps read from the rollups.
  int64_t from_final = 0;    // Answers of top/new/fps from FINAL.
  int64_t rebuilds = 0;      // Rollups built, and the time they took.
  absl::Duration rebuild_time;
};

class FleetQueries {
 public:
  FleetQueries(ClickHouseClient& client, FleetOptions options);

  // Hang, slow-method and block keys by hosts affected, then count.
  absl::StatusOr<std::vector<FleetKey>> Top(const FleetFilter& filter);
  // Keys seen in `since` or a later version and in no earlier one, by hosts.
  absl::StatusOr<std::vector<FleetKey>> New(absl::string_view since, const FleetFilter& filter);
  // FPS and dropped-frame percentiles per scene and version.
  absl::StatusOr<std::vector<FleetFps>> Fps(const FleetFilter& filter);
  // One key's numbers and worst report; NotFound when no issue has it.
  absl::StatusOr<FleetShow> Show(absl::string_view key, const FleetFilter& filter);
  // Every version, in VersionLess order.
  absl::StatusOr<std::vector<std::string>> Versions();
  // Number of issues (FINAL).
  absl::StatusOr<int64_t> Count();
  // Rebuilds the rollups unless they were built from the table as it is
  // now: true when it rebuilt them. Top, New and Fps do this on their own.
  absl::StatusOr<bool> RefreshRollups();
  const FleetQueryStats& stats() const { return stats_; }

 private:
  // The fingerprint of the table as it is now (fleet_rollups.cc).
  absl::StatusOr<std::string> Fingerprint();
  // The SQL expression of the fingerprint (looked up once: the shards'
  // addresses of a Distributed `issues`); NotFound without `issues`.
  absl::StatusOr<std::string> FingerprintSql();
  // Builds both rollups from FINAL into new tables and swaps them in.
  absl::Status RebuildRollups(const std::string& fingerprint);
  // The rows of `sql` on a rollup: a query whose first column is the
  // fingerprint now and whose first row is the rollup's sentinel (is_meta
  // 1, built_from). Rebuilds once when they differ. nullopt when the
  // answer must come from FINAL (no rollup can be built or read). With
  // `fingerprint` (what an earlier query of the same answer read), the
  // sentinel must carry that one instead, and nothing is rebuilt.
  absl::StatusOr<std::optional<std::vector<std::vector<std::string>>>> RollupRows(
      const std::string& sql, bool raw, const std::string* fingerprint = nullptr);
  absl::StatusOr<std::vector<FleetKey>> TopFinal(const FleetFilter& filter);
  absl::StatusOr<std::vector<FleetKey>> NewFinal(absl::string_view since,
                                                 const FleetFilter& filter);
  absl::StatusOr<std::vector<FleetFps>> FpsFinal(const FleetFilter& filter);

  // The rows of `sql`'s TabSeparated answer, fields unescaped (ParseTsv),
  // or as the server wrote them when `raw` (SplitTsv; for Array columns).
  absl::StatusOr<std::vector<std::vector<std::string>>> Rows(const std::string& sql,
                                                             bool raw = false);

  ClickHouseClient& client_;
  FleetOptions options_;
  std::string table_;
  std::string fingerprint_sql_;  // Empty until looked up.
  FleetQueryStats stats_;
};

// Text tables of the answers, for the fleet command.
std::string RenderFleetKeys(const std::vector<FleetKey>& keys, bool is_new);
std::string RenderFleetFps(const std::vector<FleetFps>& rows);
// `fleet show KEY`: the key's issues, hosts and versions, then its worst
// report as RenderIssue draws it.
std::string RenderFleetShow(absl::string_view key, const FleetShow& show,
                            const RenderOptions& options);

}  // namespace matrix::report

#endif  // MATRIX_REPORT_FLEET_H_
