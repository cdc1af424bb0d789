// FrameStatsCollector::Flush() and input latency: only scenes that drew
// frames are reported; their input latency comes with them.

#include "gtest/gtest.h"
#include "matrix/trace/frame_stats.h"

namespace matrix {
namespace {

FrameData Frame(SceneId scene, int index) {
  FrameData f;
  f.scene = scene;
  f.is_vsync_frame = true;
  f.intended_frame_time = TimeTicks::FromNanoseconds(1'000'000'000 + index * 16'666'667LL);
  f.end = f.intended_frame_time + absl::Milliseconds(5);
  return f;
}

TEST(FrameStatsFlushTest, SceneWithInputButNoFrames_IsNotReported) {
  FrameStatsCollector collector({});
  collector.AddInputLatency(/*scene=*/1, "default", absl::Milliseconds(12));
  EXPECT_TRUE(collector.Flush().empty());
}

TEST(FrameStatsFlushTest, SceneWithFramesAndInput_ReportsBoth) {
  FrameStatsCollector collector({});
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(collector.Add(Frame(2, i), "Feed").has_value());
  collector.AddInputLatency(2, "Feed", absl::Milliseconds(10));
  collector.AddInputLatency(2, "Feed", absl::Milliseconds(30));
  collector.AddInputLatency(2, "Feed", absl::Milliseconds(20));
  std::vector<proto::FrameReport> reports = collector.Flush();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].scene(), "Feed");
  EXPECT_EQ(reports[0].frames(), 3);
  EXPECT_EQ(reports[0].input_events(), 3);
  EXPECT_DOUBLE_EQ(reports[0].input_latency_median_ms(), 20);
  EXPECT_DOUBLE_EQ(reports[0].input_latency_worst_ms(), 30);
  EXPECT_TRUE(collector.Flush().empty());  // Started afresh.
}

}  // namespace
}  // namespace matrix
