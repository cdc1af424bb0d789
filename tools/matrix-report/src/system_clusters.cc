#include "internal/system_clusters.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace matrix::report::internal {

std::string ClusterReplicasSql(absl::string_view cluster) {
  return absl::StrCat(
      "SELECT shard_num, shard_weight, replica_num, host_name, host_address, port, is_local "
      "FROM system.clusters WHERE cluster = ",
      SqlQuote(cluster), " ORDER BY shard_num, replica_num FORMAT TabSeparated");
}

absl::StatusOr<std::vector<ClusterReplica>> ParseClusterReplicas(absl::string_view tsv) {
  std::vector<ClusterReplica> replicas;
  for (std::vector<std::string>& row : ParseTsv(tsv)) {
    ClusterReplica replica;
    if (row.size() != 7 || !absl::SimpleAtoi(row[0], &replica.shard_num) ||
        !absl::SimpleAtoi(row[1], &replica.shard_weight) ||
        !absl::SimpleAtoi(row[2], &replica.replica_num) ||
        !absl::SimpleAtoi(row[5], &replica.port) || (row[6] != "0" && row[6] != "1")) {
      return absl::InternalError("system.clusters: unexpected row");
    }
    replica.host_name = std::move(row[3]);
    replica.host_address = std::move(row[4]);
    replica.is_local = row[6] == "1";
    replicas.push_back(std::move(replica));
  }
  return replicas;
}

absl::StatusOr<std::vector<ClusterReplica>> ReadClusterReplicas(ClickHouseClient& client,
                                                                absl::string_view cluster) {
  absl::StatusOr<std::string> body = client.Query(ClusterReplicasSql(cluster));
  if (!body.ok()) return body.status();
  absl::StatusOr<std::vector<ClusterReplica>> replicas = ParseClusterReplicas(*body);
  if (!replicas.ok()) {
    return absl::Status(replicas.status().code(),
                        absl::StrCat(client.shown_url(), ": ", replicas.status().message()));
  }
  return replicas;
}

}  // namespace matrix::report::internal
