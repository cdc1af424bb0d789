// File: tools/matrix-report/src/internal/fleet_placement.h
//
// push's shard placement (FleetPusher::UseShards; internal to
// matrix_report_lib; docs/fleet.md, "Two shards"): before push places rows on
// the shards itself, it checks that the servers it was given are the
// cluster's shards, in order, and that the Distributed `issues` shards rows
// as FleetSchema makes it; then it gives each shard as many slots as its
// weight. A row goes to shard slot_to_shard[cityHash64(host_id) % slots]
// (internal::SplitFleetRowsByShard, internal/fleet_row_view.h), where the
// Distributed table would put it.
//
//   absl::StatusOr<std::vector<uint32_t>> slot_to_shard =
//       CheckShardPlacement(first, shards, options.fleet);
//
// Thread safety: a function without shared state; it uses each client from
// the calling thread (one thread per client at a time).

#ifndef MATRIX_REPORT_SRC_INTERNAL_FLEET_PLACEMENT_H_
#define MATRIX_REPORT_SRC_INTERNAL_FLEET_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

namespace matrix::report::internal {

// Checks, on every server, that fleet.cluster in the system.clusters of
// `first` has exactly `shards` as its shards, one replica each; that each
// server names itself (is_local) as the shard at its position there; and
// that the `issues` of `first` is FleetDistributedEngine(fleet). Returns each
// slot's shard (an index into `shards`; shard i has as many slots as its
// weight), or an error that names the servers and says what differs.
absl::StatusOr<std::vector<uint32_t>> CheckShardPlacement(
    ClickHouseClient& first, absl::Span<ClickHouseClient* const> shards, const FleetOptions& fleet);

}  // namespace matrix::report::internal

#endif  // MATRIX_REPORT_SRC_INTERNAL_FLEET_PLACEMENT_H_
