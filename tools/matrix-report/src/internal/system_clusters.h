// File: tools/matrix-report/src/internal/system_clusters.h
//
// The one reader of ClickHouse's system.clusters for push and fleet: the
// replicas of a cluster as a server's <remote_servers> lists them. push's
// placement check (FleetPusher::UseShards: the shards' weights and order, and
// which shard each server is) and the rollups' fingerprint (every replica's
// address) both read them here.
//
//   absl::StatusOr<std::vector<ClusterReplica>> replicas =
//       ReadClusterReplicas(client, "fleet");
//   for (const ClusterReplica& r : *replicas) ... r.shard_num, r.host_name, r.port
//
// Thread safety: functions without shared state; ReadClusterReplicas uses
// `client` from the client's thread.

#ifndef MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_SYSTEM_CLUSTERS_H_
#define MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_SYSTEM_CLUSTERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "matrix/report/clickhouse_client.h"

namespace matrix::report::internal {

// One row of system.clusters: a replica of a shard of the cluster.
struct ClusterReplica {
  int64_t shard_num = 0;     // From 1, in <remote_servers> order.
  int64_t shard_weight = 0;  // The shard's <weight> (1 when none is written).
  int64_t replica_num = 0;   // From 1 within its shard.
  std::string host_name;     // As <host> writes it.
  std::string host_address;  // Its resolved IP address (IPv6 without brackets).
  int64_t port = 0;          // Its native (TCP) port.
  bool is_local = false;     // Whether it is the server that answered.
};

// The SELECT ReadClusterReplicas sends for `cluster` (ordered by shard_num,
// then replica_num; TabSeparated).
std::string ClusterReplicasSql(absl::string_view cluster);

// The rows of the answer to ClusterReplicasSql. A row that is not seven
// fields of the expected types is an InternalError "system.clusters:
// unexpected row".
absl::StatusOr<std::vector<ClusterReplica>> ParseClusterReplicas(absl::string_view tsv);

// The replicas of `cluster` in the system.clusters of `client`'s server, by
// shard, then replica; none when the server has no such cluster. Errors are
// the client's, or ParseClusterReplicas' prefixed with the server
// (client.shown_url()).
absl::StatusOr<std::vector<ClusterReplica>> ReadClusterReplicas(ClickHouseClient& client,
                                                                absl::string_view cluster);

}  // namespace matrix::report::internal

#endif  // MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_SYSTEM_CLUSTERS_H_
