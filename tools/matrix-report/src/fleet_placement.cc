// push's shard placement (internal/fleet_placement.h, docs/fleet.md "Two
// shards"): FleetPusher::UseShards checks the servers against the cluster's
// system.clusters and the Distributed table, and keeps each slot's shard for
// the sending threads, which split each batch by shard
// (internal::SplitFleetRowsByShard, fleet_batch_format.cc; fleet_send.cc).

#include "internal/fleet_placement.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "internal/system_clusters.h"
#include "matrix/report/clickhouse_client.h"
#include "matrix/report/fleet.h"

namespace matrix::report {

namespace internal {

absl::StatusOr<std::vector<uint32_t>> CheckShardPlacement(
    ClickHouseClient& first, absl::Span<ClickHouseClient* const> shards,
    const FleetOptions& fleet) {
  const std::string& cluster = fleet.cluster;
  if (cluster.empty()) return absl::InvalidArgumentError("shards need a cluster (--cluster)");
  if (shards.empty()) return absl::InvalidArgumentError("no shards given");
  const std::string& first_url = first.shown_url();
  absl::StatusOr<std::vector<ClusterReplica>> replicas = ReadClusterReplicas(first, cluster);
  if (!replicas.ok()) return replicas.status();
  const auto address_of = [](const ClusterReplica& replica) {
    return absl::StrCat(replica.host_name, ":", replica.port);
  };
  // The cluster's shards as the first server has them: weight and address.
  struct Listed {
    int64_t weight = 0;
    std::string address;
  };
  std::vector<Listed> listed;
  for (const ClusterReplica& replica : *replicas) {
    if (replica.replica_num > 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", replica.shard_num, " of cluster ", cluster,
                       " has replicas (system.clusters of ", first_url,
                       "): push places rows itself on one server per shard only; give only the "
                       "first --clickhouse URL to push through the Distributed ",
                       fleet.database, ".issues"));
    }
    if (replica.shard_num != static_cast<int64_t>(listed.size()) + 1) {
      return absl::InternalError(absl::StrCat(first_url, ": system.clusters numbers the shards of ",
                                              cluster, " with gaps"));
    }
    listed.push_back({replica.shard_weight, address_of(replica)});
  }
  const auto addresses = [&listed] {
    std::string all;
    for (size_t i = 0; i < listed.size(); ++i) {
      absl::StrAppend(&all, i == 0 ? "" : ", ", i + 1, ": ", listed[i].address);
    }
    return all;
  };
  if (listed.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cluster ", cluster,
                                                      " is not in the <remote_servers> of ",
                                                      first_url, " (system.clusters)"));
  }
  if (listed.size() != shards.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", cluster, " has ", listed.size(), " shards (system.clusters of ", first_url,
        ": ", addresses(), ") but ", shards.size(),
        " --clickhouse URLs were given: give one per shard, in the cluster's order, or only "
        "the first to push through the Distributed ",
        fleet.database, ".issues"));
  }
  // Each server names itself (is_local) as the shard at its position.
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string& url = shards[i]->shown_url();
    absl::StatusOr<std::vector<ClusterReplica>> own = ReadClusterReplicas(*shards[i], cluster);
    if (!own.ok()) return own.status();
    std::vector<const ClusterReplica*> local;
    for (const ClusterReplica& replica : *own) {
      if (replica.is_local) local.push_back(&replica);
    }
    if (local.size() != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat(url, " (--clickhouse ", i + 1, ") is ",
                       local.empty() ? "no shard" : absl::StrCat(local.size(), " shards"),
                       " of cluster ", cluster,
                       " by its own system.clusters (is_local); the cluster's shards, in order, "
                       "are ",
                       addresses(), " (system.clusters of ", first_url, ")"));
    }
    const int64_t shard_num = local[0]->shard_num;
    const std::string address = address_of(*local[0]);
    if (shard_num != static_cast<int64_t>(i) + 1 || address != listed[i].address) {
      return absl::FailedPreconditionError(
          absl::StrCat(url, " (--clickhouse ", i + 1, ") is shard ", shard_num, " (", address,
                       ") of cluster ", cluster, " by its own system.clusters, not shard ", i + 1,
                       " (", listed[i].address, "): give the URLs in the cluster's shard order, ",
                       addresses(), " (system.clusters of ", first_url, ")"));
    }
  }
  // Rows go where the Distributed table puts them only if it is sharded as
  // FleetSchema makes it.
  const std::string expected_engine = FleetDistributedEngine(fleet);
  absl::StatusOr<std::string> engine = first.Query(absl::StrCat(
      "SELECT engine_full FROM system.tables WHERE database = ", SqlQuote(fleet.database),
      " AND name = 'issues' FORMAT TabSeparated"));
  if (!engine.ok()) return engine.status();
  const std::vector<std::vector<std::string>> engine_rows = ParseTsv(*engine);
  if (engine_rows.size() != 1 || engine_rows[0].size() != 1 ||
      engine_rows[0][0] != expected_engine) {
    return absl::FailedPreconditionError(absl::StrCat(
        fleet.database, ".issues on ", first_url, " is ",
        engine_rows.empty() || engine_rows[0].empty() ? std::string("missing") : engine_rows[0][0],
        ", not ", expected_engine, ": push cannot place rows as it does"));
  }
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < listed.size(); ++i) {
    if (listed[i].weight < 0 || listed[i].weight > 1000000) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", i + 1, " of cluster ", cluster, " has weight ", listed[i].weight));
    }
    slots.insert(slots.end(), static_cast<size_t>(listed[i].weight), static_cast<uint32_t>(i));
  }
  if (slots.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("every shard of cluster ", cluster, " has weight 0"));
  }
  return slots;
}

}  // namespace internal

absl::Status FleetPusher::UseShards(std::vector<ClickHouseClient*> shards) {
  absl::StatusOr<std::vector<uint32_t>> slots =
      internal::CheckShardPlacement(client_, shards, options_.fleet);
  if (!slots.ok()) return slots.status();
  shards_ = std::move(shards);
  slot_to_shard_ = *std::move(slots);
  local_table_ = absl::StrCat(options_.fleet.database, ".issues_local");
  return absl::OkStatus();
}

}  // namespace matrix::report
