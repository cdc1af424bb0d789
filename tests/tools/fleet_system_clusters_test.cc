// The reader of system.clusters that push's placement check and the
// rollups' fingerprint share (tools/matrix-report/src/internal/
// system_clusters.h), on answers as ClickHouse writes them, without a
// server (tools_fleet_shards_test and tools_fleet_rollup_test read real
// servers' clusters through it).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/system_clusters.h"

namespace matrix::report::internal {
namespace {

using ::testing::HasSubstr;

TEST(SystemClustersTest, QueryNamesTheClusterQuotedAndOrdersByShardThenReplica) {
  const std::string sql = ClusterReplicasSql("it's");
  EXPECT_THAT(sql, HasSubstr("FROM system.clusters WHERE cluster = 'it\\'s'"));
  EXPECT_THAT(sql, HasSubstr("ORDER BY shard_num, replica_num FORMAT TabSeparated"));
}

TEST(SystemClustersTest, ParsesEveryField) {
  absl::StatusOr<std::vector<ClusterReplica>> replicas = ParseClusterReplicas(
      "1\t1\t1\tch1.example\t10.0.0.1\t9000\t1\n"
      "2\t3\t1\tch2\\tx\t::1\t9001\t0\n");
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  ASSERT_EQ(replicas->size(), 2u);
  const ClusterReplica& a = (*replicas)[0];
  EXPECT_EQ(a.shard_num, 1);
  EXPECT_EQ(a.shard_weight, 1);
  EXPECT_EQ(a.replica_num, 1);
  EXPECT_EQ(a.host_name, "ch1.example");
  EXPECT_EQ(a.host_address, "10.0.0.1");
  EXPECT_EQ(a.port, 9000);
  EXPECT_TRUE(a.is_local);
  const ClusterReplica& b = (*replicas)[1];
  EXPECT_EQ(b.shard_num, 2);
  EXPECT_EQ(b.shard_weight, 3);
  EXPECT_EQ(b.host_name, "ch2\tx");  // TabSeparated escapes undone.
  EXPECT_EQ(b.host_address, "::1");
  EXPECT_EQ(b.port, 9001);
  EXPECT_FALSE(b.is_local);
}

TEST(SystemClustersTest, NoRowsIsNoCluster) {
  absl::StatusOr<std::vector<ClusterReplica>> replicas = ParseClusterReplicas("");
  ASSERT_TRUE(replicas.ok());
  EXPECT_TRUE(replicas->empty());
}

TEST(SystemClustersTest, RowsOfAnotherShapeAreRefused) {
  for (const char* tsv : {"1\t1\t1\th\t1.2.3.4\t9000\n",            // six fields
                          "1\t1\t1\th\t1.2.3.4\t9000\t1\textra\n",  // eight
                          "one\t1\t1\th\t1.2.3.4\t9000\t1\n", "1\t1\t1\th\t1.2.3.4\tport\t1\n",
                          "1\t1\t1\th\t1.2.3.4\t9000\t2\n"}) {
    absl::StatusOr<std::vector<ClusterReplica>> replicas = ParseClusterReplicas(tsv);
    ASSERT_FALSE(replicas.ok()) << tsv;
    EXPECT_EQ(replicas.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(replicas.status().message(), HasSubstr("system.clusters: unexpected row"));
  }
}

}  // namespace
}  // namespace matrix::report::internal
