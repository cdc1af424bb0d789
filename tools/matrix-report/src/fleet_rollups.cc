// FleetQueries' rollups: top, new and fps from two small tables built from
// `issues` under FINAL (internal/fleet_rollups.h, docs/fleet.md "Rollups").
//
// Each rollup's sentinel row carries the fingerprint of `issues` it was
// built from: per server holding the rows, the largest block number or
// mutation number of its active parts (every INSERT takes a new block
// number, every mutation a new data version above them; a merge keeps the
// largest of each) and the table's metadata time. Each answer query reads
// the fingerprint now (a scalar subquery of the same query) beside the
// sentinel, so an answer is either the rollup of the table as it is, or the
// rollups are rebuilt (and, if that fails, the answer comes from FINAL).

#include "internal/fleet_rollups.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "internal/system_clusters.h"
#include "matrix/report/fleet.h"

namespace matrix::report {
namespace {

using RowList = std::vector<std::vector<std::string>>;

constexpr char kKeys[] = "fleet_keys";
constexpr char kFps[] = "fleet_fps";
// The least time a build statement gets (a pass over FINAL of 10 M issues
// takes ~10-40 s on a busy 2-core machine).
constexpr absl::Duration kBuildTimeout = absl::Minutes(10);

// The fingerprint of one server's table: its parts and its metadata time.
std::string ServerFingerprint(const std::string& parts, const std::string& tables,
                              const std::string& database, const std::string& table) {
  const std::string where = absl::StrCat(" WHERE database = ", SqlQuote(database));
  return absl::StrCat(
      "(SELECT toString(max(greatest(max_block_number, data_version))) FROM ",
      parts, where, " AND active AND table = ", SqlQuote(table), "), '@', ",
      "(SELECT toString(any(metadata_modification_time)) FROM ", tables, where,
      " AND name = ", SqlQuote(table), ")");
}

// "Distributed(fleet, matrix, issues_local, cityHash64(host_id))" ->
// {"fleet", "matrix", "issues_local"}; empty when it is not that.
std::vector<std::string> DistributedArguments(absl::string_view engine_full) {
  if (!absl::ConsumePrefix(&engine_full, "Distributed(")) return {};
  std::vector<std::string> args;
  for (absl::string_view arg : absl::StrSplit(engine_full, ',')) {
    arg = absl::StripAsciiWhitespace(arg);
    arg = absl::StripSuffix(absl::StripPrefix(arg, "'"), "'");
    arg = absl::StripSuffix(absl::StripPrefix(arg, "`"), "`");
    args.emplace_back(arg);
    if (args.size() == 3) return args;
  }
  return {};
}

std::string RandomSuffix() {
  std::random_device device;
  return absl::StrFormat("%08x%08x", device(), device());
}

// The statements that build both rollups into `keys` and `fps`, each with
// its sentinel: one pass over `issues` under FINAL (18.16 merges FINAL on
// one thread) into `rows`, the rows they need; then each rollup from `rows`
// on every core.
std::vector<std::string> BuildStatements(const std::string& issues, const std::string& rows,
                                         const std::string& keys, const std::string& fps,
                                         const std::string& fingerprint) {
  const std::string hangs = absl::StrCat("(", internal::kHangTags, " AND key != '')");
  const std::string frames = "(tag = 'Trace_FPS' AND frames > 0)";
  const std::string engine = " ENGINE = MergeTree ORDER BY tuple() AS SELECT ";
  return {
      absl::StrCat("CREATE TABLE ", rows, engine,
                   "tag, detail, key, version, host_id, time_ms, cost_ms, scene, fps, frames, "
                   "dropped_frames, drop_best, drop_normal, drop_middle, drop_high, drop_frozen "
                   "FROM ", issues, " FINAL WHERE ", hangs, " OR ", frames),
      absl::StrCat("CREATE TABLE ", keys, engine,
                   "toUInt8(0) AS is_meta, toString('') AS built_from, toUInt8(0) AS scope, "
                   "tag, detail, key, toString('') AS ver, uniqExact(host_id) AS hosts, "
                   "count() AS n, max(cost_ms) AS worst, quantileExact(0.5)(cost_ms) AS median, "
                   "argMax(version, time_ms) AS newest, groupUniqArray(version) AS versions "
                   "FROM ", rows, " WHERE ", hangs, " GROUP BY tag, detail, key"),
      absl::StrCat("INSERT INTO ", keys,
                   " SELECT 0, '', 1, tag, detail, key, version, uniqExact(host_id), count(), "
                   "max(cost_ms), quantileExact(0.5)(cost_ms), version, [version] FROM ",
                   rows, " WHERE ", hangs, " GROUP BY tag, detail, key, version"),
      absl::StrCat("INSERT INTO ", keys, " (is_meta, built_from, versions) SELECT 1, ",
                   SqlQuote(fingerprint), ", groupUniqArray(ver) FROM ", keys,
                   " WHERE scope = 1"),
      // As FpsFinal's query (fleet_queries.cc), kept per scene and version.
      absl::StrCat("CREATE TABLE ", fps, engine,
                   "toUInt8(0) AS is_meta, toString('') AS built_from, scene, version, "
                   "count() AS reports, uniqExact(host_id) AS hosts, "
                   "quantilesExactIf(0.5, 0.1)(fps, fps > 0 AND frames >= 10) AS fps_q, "
                   "quantilesExact(0.5, 0.9)(toFloat64(dropped_frames) * 100 / frames) AS drop_q, "
                   "sum(toFloat64(drop_best)) AS d0, sum(toFloat64(drop_normal)) AS d1, "
                   "sum(toFloat64(drop_middle)) AS d2, sum(toFloat64(drop_high)) AS d3, "
                   "sum(toFloat64(drop_frozen)) AS d4 FROM ",
                   rows, " WHERE ", frames, " GROUP BY scene, version"),
      absl::StrCat("INSERT INTO ", fps, " (is_meta, built_from) VALUES (1, ",
                   SqlQuote(fingerprint), ")"),
  };
}

std::string VersionIs(const std::string& version) {
  return absl::StrCat(" AND ver = ", SqlQuote(version));
}

}  // namespace

absl::StatusOr<std::string> FleetQueries::FingerprintSql() {
  if (!fingerprint_sql_.empty()) return fingerprint_sql_;
  const std::string& db = options_.database;
  absl::StatusOr<RowList> table = Rows(absl::StrCat(
      "SELECT engine, engine_full FROM system.tables WHERE database = ", SqlQuote(db),
      " AND name = 'issues'"));
  if (!table.ok()) return table.status();
  if (table->empty() || table->front().size() < 2) {
    return absl::NotFoundError(absl::StrCat("no table ", table_));
  }
  std::vector<std::string> servers;
  if (table->front()[0] != "Distributed") {
    servers.push_back(ServerFingerprint("system.parts", "system.tables", db, "issues"));
  } else {
    const std::vector<std::string> args = DistributedArguments(table->front()[1]);
    if (args.empty()) return absl::NotFoundError("a Distributed table of no known shards");
    absl::StatusOr<std::vector<internal::ClusterReplica>> replicas =
        internal::ReadClusterReplicas(client_, args[0]);
    if (!replicas.ok()) return replicas.status();
    for (const internal::ClusterReplica& replica : *replicas) {
      const std::string& host = replica.host_address;
      const std::string address = absl::StrContains(host, ':')
                                      ? absl::StrCat("[", host, "]:", replica.port)
                                      : absl::StrCat(host, ":", replica.port);
      servers.push_back(ServerFingerprint(
          absl::StrCat("remote(", SqlQuote(address), ", system, parts)"),
          absl::StrCat("remote(", SqlQuote(address), ", system, tables)"), args[1], args[2]));
    }
    if (servers.empty()) return absl::NotFoundError("a Distributed table of no known shards");
  }
  fingerprint_sql_ = absl::StrCat("concat(", absl::StrJoin(servers, ", ';', "), ")");
  return fingerprint_sql_;
}

absl::StatusOr<std::string> FleetQueries::Fingerprint() {
  absl::StatusOr<std::string> sql = FingerprintSql();
  if (!sql.ok()) return sql.status();
  absl::StatusOr<RowList> rows = Rows(absl::StrCat("SELECT ", *sql));
  if (!rows.ok()) return rows.status();
  if (rows->empty() || rows->front().empty()) return absl::InternalError("no fingerprint");
  return rows->front()[0];
}

absl::Status FleetQueries::RebuildRollups(const std::string& fingerprint) {
  const absl::Time start = absl::Now();
  const std::string db = absl::StrCat(options_.database, ".");
  const std::string suffix = RandomSuffix();
  const std::string keys = absl::StrCat(db, kKeys, "_new_", suffix);
  const std::string fps = absl::StrCat(db, kFps, "_new_", suffix);
  const std::string rows = absl::StrCat(db, "fleet_rows_new_", suffix);
  // A client of its own: one try per statement (a refused CREATE, a
  // read-only user, is HTTP 500 to ClickHouse, and the answer then comes
  // from FINAL with the usual retries), and time for a pass over FINAL of
  // millions of rows.
  ClickHouseOptions build_options = client_.options();
  build_options.retry_for = absl::ZeroDuration();
  build_options.request_timeout = std::max(build_options.request_timeout, kBuildTimeout);
  ClickHouseClient builder(build_options);
  auto drop = [&](const std::vector<std::string>& tables) {
    for (const std::string& t : tables) {
      (void)builder.Query(absl::StrCat("DROP TABLE IF EXISTS ", t));
    }
  };
  for (const std::string& sql : BuildStatements(table_, rows, keys, fps, fingerprint)) {
    if (absl::StatusOr<std::string> done = builder.Query(sql); !done.ok()) {
      drop({rows, keys, fps});
      return done.status();
    }
  }
  drop({rows});
  // One RENAME swaps both in: a reader sees the old rollup or the new one.
  absl::StatusOr<RowList> present = Rows(absl::StrCat(
      "SELECT name FROM system.tables WHERE database = ", SqlQuote(options_.database),
      " AND name IN ('", kKeys, "', '", kFps, "')"));
  if (!present.ok()) {
    drop({keys, fps});
    return present.status();
  }
  std::vector<std::string> renames;
  std::vector<std::string> old;
  for (const std::vector<std::string>& row : *present) {
    if (row.empty()) continue;
    old.push_back(absl::StrCat(db, row[0], "_old_", suffix));
    renames.push_back(absl::StrCat(db, row[0], " TO ", old.back()));
  }
  renames.push_back(absl::StrCat(keys, " TO ", db, kKeys));
  renames.push_back(absl::StrCat(fps, " TO ", db, kFps));
  absl::StatusOr<std::string> swapped =
      builder.Query(absl::StrCat("RENAME TABLE ", absl::StrJoin(renames, ", ")));
  drop(old);
  if (!swapped.ok()) {
    drop({keys, fps});
    return swapped.status();
  }
  ++stats_.rebuilds;
  stats_.rebuild_time += absl::Now() - start;
  return absl::OkStatus();
}

absl::StatusOr<bool> FleetQueries::RefreshRollups() {
  absl::StatusOr<std::string> fingerprint = Fingerprint();
  if (!fingerprint.ok()) return fingerprint.status();
  const std::string db = absl::StrCat(options_.database, ".");
  absl::StatusOr<RowList> built = Rows(absl::StrCat(
      "SELECT (SELECT any(built_from) FROM ", db, kKeys, " WHERE is_meta = 1), ",
      "(SELECT any(built_from) FROM ", db, kFps, " WHERE is_meta = 1)"));
  if (built.ok() && !built->empty() && built->front().size() == 2 &&
      built->front()[0] == *fingerprint && built->front()[1] == *fingerprint) {
    return false;
  }
  if (absl::Status s = RebuildRollups(*fingerprint); !s.ok()) return s;
  return true;
}

absl::StatusOr<std::optional<RowList>> FleetQueries::RollupRows(const std::string& sql, bool raw,
                                                                const std::string* fingerprint) {
  absl::StatusOr<std::string> fingerprint_sql = FingerprintSql();
  if (absl::IsNotFound(fingerprint_sql.status())) return std::nullopt;
  if (!fingerprint_sql.ok()) return fingerprint_sql.status();
  const std::string now = fingerprint != nullptr ? SqlQuote(*fingerprint) : *fingerprint_sql;
  const std::string query = absl::StrCat("SELECT ", now, ", ", sql);
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<RowList> rows = Rows(query, raw);
    if (rows.ok() && !rows->empty() && rows->front().size() >= 3 && rows->front()[1] == "1" &&
        rows->front()[2] == rows->front()[0]) {
      for (std::vector<std::string>& row : *rows) row.erase(row.begin(), row.begin() + 3);
      return rows;
    }
    if (attempt > 0 || fingerprint != nullptr) break;
    absl::StatusOr<std::string> today = Fingerprint();
    if (!today.ok()) return today.status();
    if (!RebuildRollups(*today).ok()) break;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<FleetKey>> FleetQueries::Top(const FleetFilter& filter) {
  if (!options_.rollups) return TopFinal(filter);
  const std::string scope = filter.version.empty()
                                ? std::string("scope = 0")
                                : absl::StrCat("scope = 1", VersionIs(filter.version));
  absl::StatusOr<std::optional<RowList>> rows = RollupRows(
      absl::StrCat("is_meta, built_from, tag, detail, key, hosts, n, worst, median, newest FROM ",
                   options_.database, ".", kKeys, " WHERE is_meta = 1 OR (", scope,
                   ") ORDER BY is_meta DESC, hosts DESC, n DESC, tag, detail, key LIMIT ",
                   int64_t{filter.limit} + 1),
      /*raw=*/false);
  if (!rows.ok()) return rows.status();
  if (!rows->has_value()) return TopFinal(filter);
  ++stats_.from_rollups;
  return internal::KeysFromRows(**rows, 1, /*raw=*/false);
}

absl::StatusOr<std::vector<FleetKey>> FleetQueries::New(absl::string_view since,
                                                        const FleetFilter& filter) {
  if (!options_.rollups) return NewFinal(since, filter);
  // The versions keys were seen in, then the keys seen in none before `since`.
  absl::StatusOr<std::optional<RowList>> sentinel = RollupRows(
      absl::StrCat("is_meta, built_from, built_from, versions FROM ", options_.database, ".",
                   kKeys, " WHERE is_meta = 1"),
      /*raw=*/true);
  if (!sentinel.ok()) return sentinel.status();
  if (!sentinel->has_value() || (*sentinel)->front().size() < 2) return NewFinal(since, filter);
  const std::string built_from = (*sentinel)->front()[0];
  std::vector<std::string> before;
  for (std::string& v : ParseStringArray((*sentinel)->front()[1])) {
    if (VersionLess(v, since)) before.push_back(SqlQuote(v));
  }
  std::string where = filter.version.empty()
                          ? std::string("scope = 0")
                          : absl::StrCat("scope = 1", VersionIs(filter.version));
  if (!before.empty()) {
    absl::StrAppend(&where, " AND NOT hasAny(versions, [", absl::StrJoin(before, ", "), "])");
  }
  absl::StatusOr<std::optional<RowList>> rows = RollupRows(
      absl::StrCat("is_meta, built_from, tag, detail, key, hosts, n, worst, median, versions "
                   "FROM ", options_.database, ".", kKeys, " WHERE is_meta = 1 OR (", where,
                   ") ORDER BY is_meta DESC, hosts DESC, n DESC, tag, detail, key LIMIT ",
                   int64_t{filter.limit} + 1),
      /*raw=*/true, &built_from);
  if (!rows.ok()) return rows.status();
  if (!rows->has_value()) return NewFinal(since, filter);
  ++stats_.from_rollups;
  return internal::KeysFromRows(**rows, 1, /*raw=*/true);
}

absl::StatusOr<std::vector<FleetFps>> FleetQueries::Fps(const FleetFilter& filter) {
  if (!options_.rollups) return FpsFinal(filter);
  const std::string where =
      filter.version.empty() ? "" : absl::StrCat(" OR version = ", SqlQuote(filter.version));
  absl::StatusOr<std::optional<RowList>> rows = RollupRows(
      absl::StrCat("is_meta, built_from, scene, version, reports, hosts, fps_q, drop_q, d0, d1, "
                   "d2, d3, d4 FROM ", options_.database, ".", kFps, " WHERE is_meta = 1",
                   filter.version.empty() ? " OR 1" : where, " ORDER BY is_meta DESC"),
      /*raw=*/false);
  if (!rows.ok()) return rows.status();
  if (!rows->has_value()) return FpsFinal(filter);
  ++stats_.from_rollups;
  return internal::FpsFromRows(**rows, 1);
}

}  // namespace matrix::report
