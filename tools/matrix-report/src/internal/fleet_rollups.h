// File: tools/matrix-report/src/internal/fleet_rollups.h
//
// What fleet_queries.cc (the queries over FINAL) and fleet_rollups.cc (the
// same answers from the rollup tables, docs/fleet.md "Rollups") share: the
// hang filter and the parsing of the answer rows.
//
// The rollups are two small MergeTree tables of the database, each with one
// sentinel row (is_meta 1) that carries the fingerprint of `issues` it was
// built from (built_from):
//   fleet_keys  scope 0: per (tag, detail, key) over every version: hosts,
//               count, worst, median, newest version, versions;
//               scope 1: the same per (tag, detail, key, version);
//               the sentinel's `versions`: every version of scope 1.
//   fleet_fps   per (scene, version): today's fps figures.
//
//   std::vector<FleetKey> keys = KeysFromRows(rows, 1, /*raw=*/false);
//
// Thread safety: functions without shared state; thread-safe.

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_ROLLUPS_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_ROLLUPS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "matrix/report/fleet.h"

namespace matrix::report::internal {

// The WHERE condition of the hang and slow-method rows (top, new).
extern const char kHangTags[];

// FleetKeys from answer rows of eight fields (tag, detail, key, hosts,
// count, worst, median, version), from row `first` on. `raw`: fields as
// the server wrote them and the eighth an Array(String) of versions, of
// which the first in VersionLess order is the version.
std::vector<FleetKey> KeysFromRows(const std::vector<std::vector<std::string>>& rows,
                                   size_t first, bool raw);

// FleetFps from answer rows of eleven fields (scene, version, reports, hosts,
// [fps p50, p10], [dropped p50, p90], five drop-level sums), from row
// `first` on, by scene, then version (VersionLess).
std::vector<FleetFps> FpsFromRows(const std::vector<std::vector<std::string>>& rows,
                                  size_t first);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_ROLLUPS_H_
