// DrainWatch: how long an exit hook waits for the drain thread. Times are
// fed by hand (the hooks read matrix::MonotonicNow()).

#include "drain_watch.h"

#include "gtest/gtest.h"

namespace matrix::agent {
namespace {

constexpr absl::Duration kStall = absl::Seconds(2);
constexpr absl::Duration kSlice = absl::Milliseconds(50);

TimeTicks Ms(int64_t ms) { return TimeTicks::FromNanoseconds(ms * 1000 * 1000); }

TEST(DrainWatchTest, ADrainThatNeverAdvancesIsGivenUpAfterTheStallLimit) {
  DrainWatch watch(kStall, kSlice, Ms(1000), 0);
  EXPECT_TRUE(watch.KeepWaiting(Ms(1000), 0));
  EXPECT_TRUE(watch.KeepWaiting(Ms(2999), 0));
  EXPECT_FALSE(watch.KeepWaiting(Ms(3000), 0));
}

// The drain thread may wait seconds for a CPU before it takes the request,
// and each step after that may too: the hook waits as long as steps come,
// well past the stall limit in all (the old fixed wait was 2 s).
TEST(DrainWatchTest, EachStepRestartsTheStallLimit) {
  DrainWatch watch(kStall, kSlice, Ms(0), 0);
  EXPECT_TRUE(watch.KeepWaiting(Ms(1900), 1));  // Taken late.
  EXPECT_TRUE(watch.KeepWaiting(Ms(3800), 2));  // Dispatch ended, FPS published.
  EXPECT_TRUE(watch.KeepWaiting(Ms(5700), 3));  // Reports delivered.
  EXPECT_TRUE(watch.KeepWaiting(Ms(7600), 3));
  EXPECT_FALSE(watch.KeepWaiting(Ms(7700), 3));  // 2 s since the last step.
}

TEST(DrainWatchTest, ProgressMadeBeforeTheWatchStartsIsNoStep) {
  DrainWatch watch(kStall, kSlice, Ms(0), 5);
  EXPECT_FALSE(watch.KeepWaiting(Ms(2000), 5));
}

TEST(DrainWatchTest, ACounterThatWrapsAroundIsStillAStep) {
  DrainWatch watch(kStall, kSlice, Ms(0), UINT32_MAX);
  EXPECT_TRUE(watch.KeepWaiting(Ms(1999), 0));
  EXPECT_TRUE(watch.KeepWaiting(Ms(3998), 0));
  EXPECT_FALSE(watch.KeepWaiting(Ms(3999), 0));
}

TEST(DrainWatchTest, WaitsLastASliceAndNeverPassTheStallLimit) {
  DrainWatch watch(kStall, kSlice, Ms(0), 0);
  EXPECT_EQ(watch.NextWaitMs(Ms(0)), 50);
  EXPECT_EQ(watch.NextWaitMs(Ms(1970)), 30);
  // Rounded up: a wait that ends before the limit would wake once more.
  EXPECT_EQ(watch.NextWaitMs(TimeTicks::FromNanoseconds(1999500 * 1000)), 1);
  EXPECT_EQ(watch.NextWaitMs(Ms(2500)), 1);  // Past the limit: a minimal poll.
  watch.KeepWaiting(Ms(1990), 1);
  EXPECT_EQ(watch.NextWaitMs(Ms(1990)), 50);
}

}  // namespace
}  // namespace matrix::agent
