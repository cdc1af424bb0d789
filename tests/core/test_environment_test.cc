// Tests for matrix::testing::TestEnvironment, the deterministic runner every
// other test relies on: RunUntilIdle, FastForwardBy (delayed work in due
// order, the clock observed inside each task), AdvanceClock, auto-vsync frames
// at the refresh rate, and background loopers in global due-time order.

#include "matrix/testing/test_environment.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"

namespace matrix::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class TestEnvironmentTest : public ::testing::Test {
 protected:
  // Records "<name>@<ms since start>" when the task runs.
  Task Record(std::string name) {
    return [this, name = std::move(name)] {
      ran_.push_back(absl::StrCat(name, "@", absl::ToDoubleMilliseconds(env_.Now() - t0_)));
    };
  }

  TestEnvironment env_;
  const TimeTicks t0_ = env_.Now();
  std::vector<std::string> ran_;
};

TEST_F(TestEnvironmentTest, Constructor_ByDefault_PreparesMainLooperAndChoreographer) {
  EXPECT_EQ(env_.looper(), Looper::MyLooper());
  EXPECT_EQ(env_.looper(), Looper::MainLooper());
  EXPECT_EQ(env_.looper()->clock(), env_.clock());
  EXPECT_EQ(env_.choreographer(), Choreographer::Peek());
  EXPECT_EQ(env_.choreographer()->vsync_source(), env_.vsync());
  EXPECT_EQ(env_.choreographer()->refresh_rate(), RefreshRate::FromHz(60));
}

TEST_F(TestEnvironmentTest, RunUntilIdle_RunsDueWorkAndWhatItPostsButNothingDelayed) {
  Handler handler(env_.looper());
  handler.Post([&] {
    Record("a")();
    handler.Post(Record("posted by a"));
    handler.PostDelayed(Record("delayed"), absl::Milliseconds(1));
  });

  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("a@0", "posted by a@0"));
  EXPECT_EQ(env_.Now(), t0_);
  EXPECT_EQ(env_.PendingMessageCount(), 1u);
}

TEST_F(TestEnvironmentTest, FastForwardBy_RunsDelayedTasksInDueOrderAtTheirDueTimes) {
  Handler handler(env_.looper());
  handler.PostDelayed(Record("c"), absl::Milliseconds(30));
  handler.PostDelayed(Record("a"), absl::Milliseconds(10));
  handler.PostDelayed(Record("b"), absl::Milliseconds(20));
  handler.PostDelayed(Record("too late"), absl::Milliseconds(101));

  env_.FastForwardBy(absl::Milliseconds(100));

  EXPECT_THAT(ran_, ElementsAre("a@10", "b@20", "c@30"));
  EXPECT_EQ(env_.Now(), t0_ + absl::Milliseconds(100));
}

TEST_F(TestEnvironmentTest, FastForwardBy_WithTaskPostingDelayedWork_RunsItWithinTheSameCall) {
  Handler handler(env_.looper());
  std::function<void()> tick = [&] {
    Record("tick")();
    handler.PostDelayed(tick, absl::Milliseconds(25));
  };
  handler.PostDelayed(tick, absl::Milliseconds(25));

  env_.FastForwardBy(absl::Milliseconds(100));

  EXPECT_THAT(ran_, ElementsAre("tick@25", "tick@50", "tick@75", "tick@100"));
  handler.RemoveCallbacksAndMessages();
}

TEST_F(TestEnvironmentTest, FastForwardBy_WhenATaskTakesTime_LaterTasksRunLate) {
  Handler handler(env_.looper());
  handler.PostDelayed(
      [&] {
        Record("slow")();
        env_.AdvanceClock(absl::Milliseconds(15));  // The task "takes" 15 ms.
      },
      absl::Milliseconds(10));
  handler.PostDelayed(Record("next"), absl::Milliseconds(20));

  env_.FastForwardBy(absl::Milliseconds(50));

  EXPECT_THAT(ran_, ElementsAre("slow@10", "next@25"));
  EXPECT_EQ(env_.Now(), t0_ + absl::Milliseconds(50));
}

TEST_F(TestEnvironmentTest, AdvanceClock_MovesTimeWithoutRunningAnything) {
  Handler handler(env_.looper());
  handler.Post(Record("due"));
  handler.PostDelayed(Record("delayed"), absl::Milliseconds(10));

  env_.AdvanceClock(absl::Seconds(1));

  EXPECT_THAT(ran_, IsEmpty());
  EXPECT_EQ(env_.Now(), t0_ + absl::Seconds(1));
  env_.RunUntilIdle();
  EXPECT_THAT(ran_, ElementsAre("due@1000", "delayed@1000"));
}

class AutoVsyncTest : public ::testing::TestWithParam<int> {};

TEST_P(AutoVsyncTest, FastForwardBy_OneSecondWithSelfRepostingFrameCallback_DrawsRateFrames) {
  const int hz = GetParam();
  TestEnvironment::Options options;
  options.refresh_rate = RefreshRate::FromHz(hz);
  TestEnvironment env(options);
  Choreographer* choreographer = env.choreographer();
  std::vector<TimeTicks> frame_times;
  std::function<void(TimeTicks)> animate = [&](TimeTicks frame_time) {
    frame_times.push_back(frame_time);
    choreographer->PostFrameCallback(animate);
  };
  const TimeTicks t0 = env.Now();
  choreographer->PostFrameCallback(animate);

  env.FastForwardBy(absl::Seconds(1));

  ASSERT_EQ(frame_times.size(), static_cast<size_t>(hz));
  for (int i = 0; i < hz; ++i) {
    ASSERT_EQ(frame_times[i], options.refresh_rate.TickAfter(t0, i + 1)) << "frame " << i;
  }
  EXPECT_EQ(frame_times.back(), t0 + absl::Seconds(1));
  EXPECT_EQ(env.vsync()->frames_fired(), hz);
  choreographer->RemoveFrameCallback(nullptr);
}

INSTANTIATE_TEST_SUITE_P(CommonRates, AutoVsyncTest, ::testing::Values(60, 90, 120, 144),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Hz");
                         });

TEST_F(TestEnvironmentTest, AutoVsync_WhenTurnedOff_FiresNoFrames) {
  env_.set_auto_vsync(false);
  int frames = 0;
  env_.choreographer()->PostFrameCallback([&](TimeTicks) { ++frames; });

  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(frames, 0);

  EXPECT_TRUE(env_.FireVsync());
  EXPECT_EQ(frames, 1);
  EXPECT_FALSE(env_.FireVsync());  // Nothing was requested.
}

TEST_F(TestEnvironmentTest, SetRefreshRate_MidRun_DrawsOnTheNewGrid) {
  Choreographer* choreographer = env_.choreographer();
  int frames = 0;
  std::function<void(TimeTicks)> animate = [&](TimeTicks) {
    ++frames;
    choreographer->PostFrameCallback(animate);
  };
  choreographer->PostFrameCallback(animate);
  env_.FastForwardBy(absl::Milliseconds(500));
  ASSERT_EQ(frames, 30);

  env_.SetRefreshRate(RefreshRate::FromHz(120));
  env_.FastForwardBy(absl::Milliseconds(500));

  EXPECT_EQ(frames, 90);
  EXPECT_EQ(choreographer->frame_info().refresh_rate, RefreshRate::FromHz(120));
  choreographer->RemoveFrameCallback(nullptr);
}

TEST_F(TestEnvironmentTest, FastForwardBy_WithBackgroundLoopers_RunsAllInGlobalDueOrder) {
  Handler main(env_.looper());
  Looper* watchdog_looper = env_.CreateBackgroundLooper("watchdog");
  Looper* worker_looper = env_.CreateBackgroundLooper("worker");
  Handler watchdog(watchdog_looper);
  Handler worker(worker_looper);
  EXPECT_NE(watchdog_looper, env_.looper());
  EXPECT_EQ(watchdog_looper->clock(), env_.clock());

  worker.PostDelayed(Record("worker 40"), absl::Milliseconds(40));
  main.PostDelayed(Record("main 30"), absl::Milliseconds(30));
  watchdog.PostDelayed(Record("watchdog 10"), absl::Milliseconds(10));
  main.PostDelayed(Record("main 20"), absl::Milliseconds(20));
  watchdog.PostDelayed(
      [&] {
        Record("watchdog 25")();
        main.Post(Record("main from watchdog"));
      },
      absl::Milliseconds(25));

  env_.FastForwardBy(absl::Milliseconds(50));

  EXPECT_THAT(ran_, ElementsAre("watchdog 10@10", "main 20@20", "watchdog 25@25",
                                "main from watchdog@25", "main 30@30", "worker 40@40"));
}

TEST_F(TestEnvironmentTest, RunUntilIdle_AfterAdvanceClock_RunsAllLoopersInGlobalDueOrder) {
  Handler main(env_.looper());
  Handler worker(env_.CreateBackgroundLooper("worker"));
  main.PostDelayed(Record("main 30"), absl::Milliseconds(30));
  worker.PostDelayed(Record("worker 10"), absl::Milliseconds(10));
  main.PostDelayed(Record("main 5"), absl::Milliseconds(5));
  worker.PostDelayed(Record("worker 20"), absl::Milliseconds(20));

  env_.AdvanceClock(absl::Milliseconds(100));
  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("main 5@100", "worker 10@100", "worker 20@100", "main 30@100"));
}

TEST_F(TestEnvironmentTest, PendingMessageCount_CountsEveryLooper) {
  Handler main(env_.looper());
  Handler worker(env_.CreateBackgroundLooper("worker"));
  main.PostDelayed([] {}, absl::Milliseconds(1));
  worker.Post([] {});
  worker.PostDelayed([] {}, absl::Milliseconds(1));

  EXPECT_EQ(env_.PendingMessageCount(), 3u);
  env_.RunUntilIdle();
  EXPECT_EQ(env_.PendingMessageCount(), 2u);
  env_.FastForwardBy(absl::Milliseconds(1));
  EXPECT_EQ(env_.PendingMessageCount(), 0u);
}

TEST(TestEnvironmentOptionsTest, Options_WithoutMainLooperOrChoreographer_PreparesPlainLooper) {
  TestEnvironment::Options options;
  options.main_looper = false;
  options.choreographer = false;
  TestEnvironment env(options);

  EXPECT_EQ(Looper::MyLooper(), env.looper());
  EXPECT_EQ(Looper::MainLooper(), nullptr);
  EXPECT_EQ(env.choreographer(), nullptr);
  EXPECT_EQ(Choreographer::Peek(), nullptr);
}

TEST(TestEnvironmentOptionsTest, Destructor_ReleasesLooperSoANewEnvironmentCanStart) {
  { TestEnvironment first; }
  EXPECT_EQ(Looper::MyLooper(), nullptr);
  EXPECT_EQ(Looper::MainLooper(), nullptr);
  EXPECT_EQ(Choreographer::Peek(), nullptr);
  TestEnvironment second;
  EXPECT_NE(second.looper(), nullptr);
}

TEST(TestEnvironmentDeathTest, Constructor_WhenThreadAlreadyHasLooper_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestEnvironment first;
  EXPECT_DEATH({ TestEnvironment second; }, "already has a Looper");
}

TEST(TestEnvironmentDeathTest, FastForwardBy_NegativeDuration_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestEnvironment env;
  EXPECT_DEATH(env.FastForwardBy(absl::Milliseconds(-1)), "negative");
}

}  // namespace
}  // namespace matrix::testing
