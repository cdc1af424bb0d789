#include "matrix/plugins/block_canary_context.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(BlockCanaryContextTest, Defaults_AreBlockCanarys) {
  absl::StatusOr<BlockCanaryContext> c = BlockCanaryContext::Builder().Build();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->qualifier(), "unknown");
  EXPECT_EQ(c->uid(), "uid");
  EXPECT_EQ(c->network(), "unknown");
  EXPECT_EQ(c->block_threshold(), absl::Milliseconds(1000));
  EXPECT_EQ(c->log_retention(), absl::Hours(48));
  EXPECT_EQ(c->max_log_files(), 500);
  EXPECT_TRUE(c->concern_packages().empty());
  EXPECT_FALSE(c->filter_non_concern_stack());
  EXPECT_TRUE(c->delete_files_in_white_list());
  EXPECT_TRUE(c->stop_when_debugging());
  EXPECT_TRUE(c->display_notification());
  EXPECT_EQ(c->looper_source(), LooperMonitor::Source::kPrinter);
  EXPECT_EQ(c->monitor_duration(), absl::InfiniteDuration());
  // Ours, not BlockCanary's (which samples at the threshold itself).
  EXPECT_EQ(c->dump_interval(), absl::Milliseconds(100));
}

TEST(BlockCanaryContextTest, DumpInterval_FollowsTheThresholdUnlessSet) {
  auto c = BlockCanaryContext::Builder().SetBlockThreshold(absl::Milliseconds(3000)).Build();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dump_interval(), absl::Milliseconds(300));
  c = BlockCanaryContext::Builder()
          .SetBlockThreshold(absl::Milliseconds(3000))
          .SetDumpInterval(absl::Milliseconds(3000))
          .Build();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dump_interval(), absl::Milliseconds(3000));
}

TEST(BlockCanaryContextTest, Build_RejectsBadValuesNamingTheField) {
  struct Case {
    BlockCanaryContext::Builder builder;
    std::string field;
  };
  std::vector<Case> cases;
  cases.push_back({BlockCanaryContext::Builder().SetBlockThreshold(absl::ZeroDuration()),
                   "block_threshold"});
  cases.push_back({BlockCanaryContext::Builder().SetBlockThreshold(absl::InfiniteDuration()),
                   "block_threshold"});
  cases.push_back({BlockCanaryContext::Builder().SetDumpInterval(-absl::Milliseconds(1)),
                   "dump_interval"});
  cases.push_back({BlockCanaryContext::Builder().SetDumpInterval(absl::Microseconds(10)),
                   "dump_interval"});
  cases.push_back({BlockCanaryContext::Builder().SetDumpInterval(absl::Seconds(2)),
                   "must not exceed block_threshold"});
  cases.push_back({BlockCanaryContext::Builder().SetMaxSamplesPerBlock(3),
                   "max_samples_per_block"});
  cases.push_back({BlockCanaryContext::Builder().SetMaxSamplesPerBlock(7),
                   "max_samples_per_block"});
  cases.push_back({BlockCanaryContext::Builder().SetMonitorDuration(absl::ZeroDuration()),
                   "monitor_duration"});
  cases.push_back({BlockCanaryContext::Builder().SetLogRetention(absl::ZeroDuration()),
                   "log_retention"});
  cases.push_back({BlockCanaryContext::Builder().SetMaxLogFiles(0), "max_log_files"});
  cases.push_back({BlockCanaryContext::Builder().SetConcernPackages({"app::", ""}),
                   "concern package"});
  cases.push_back({BlockCanaryContext::Builder().SetWhiteList({""}), "white-list"});
  cases.push_back({BlockCanaryContext::Builder().SetCpuBusyPercent(0), "cpu_busy_percent"});
  cases.push_back({BlockCanaryContext::Builder().SetCpuBusyPercent(101), "cpu_busy_percent"});
  cases.push_back({BlockCanaryContext::Builder().AddInterceptor(nullptr), "null interceptor"});
  cases.push_back({BlockCanaryContext::Builder().OnBlock(nullptr), "null interceptor"});
  for (const Case& c : cases) {
    absl::StatusOr<BlockCanaryContext> built = c.builder.Build();
    ASSERT_FALSE(built.ok()) << c.field;
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(built.status().message(), HasSubstr(c.field));
    EXPECT_THAT(built.status().message(), HasSubstr("BlockCanaryContext"));
  }
}

TEST(BlockCanaryContextTest, Build_NamesEveryBadFieldInOneError) {
  absl::StatusOr<BlockCanaryContext> built = BlockCanaryContext::Builder()
                                                 .SetDumpInterval(absl::Microseconds(10))
                                                 .SetMaxSamplesPerBlock(7)
                                                 .SetMaxLogFiles(0)
                                                 .SetWhiteList({""})
                                                 .SetCpuBusyPercent(0)
                                                 .AddInterceptor(nullptr)
                                                 .Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* field : {"dump_interval", "max_samples_per_block", "max_log_files",
                            "white-list", "cpu_busy_percent", "null interceptor"}) {
    EXPECT_THAT(std::string(built.status().message()), HasSubstr(field));
  }
}

TEST(BlockCanaryContextTest, Build_BadThresholdIsNamedOnceNotAgainThroughTheDerivedInterval) {
  absl::StatusOr<BlockCanaryContext> built =
      BlockCanaryContext::Builder().SetBlockThreshold(absl::ZeroDuration()).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr("block_threshold"));
  EXPECT_THAT(std::string(built.status().message()), Not(HasSubstr("dump_interval")));
  // A threshold under 1 ms derives the 1 ms floor, which exceeds it.
  built = BlockCanaryContext::Builder().SetBlockThreshold(absl::Microseconds(500)).Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(), HasSubstr("must not exceed block_threshold"));
}

TEST(BlockCanaryContextTest, LogPath_EmptyMeansNoFilesAndTrailingSlashIsDropped) {
  auto c = BlockCanaryContext::Builder().SetLogPath("").Build();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->log_path(), "");
  c = BlockCanaryContext::Builder().SetLogPath("/tmp/bc/").Build();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->log_path(), "/tmp/bc");
}

TEST(BlockCanaryContextTest, Interceptors_KeepTheirOrder) {
  class Named : public BlockInterceptor {
    void OnBlock(const BlockInfo&) override {}
  };
  auto first = std::make_shared<Named>();
  auto third = std::make_shared<Named>();
  auto c = BlockCanaryContext::Builder()
               .AddInterceptor(first)
               .OnBlock([](const BlockInfo&) {})
               .AddInterceptor(third)
               .Build();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->interceptors().size(), 3u);
  EXPECT_EQ(c->interceptors()[0], first);
  EXPECT_EQ(c->interceptors()[2], third);
}

}  // namespace
}  // namespace matrix
