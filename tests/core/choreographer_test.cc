// Tests for Choreographer on a ManualVsyncSource and the fake clock: the five
// callback queues and their order, frame callbacks and frame times, vsync
// requests only while work is pending, asynchronous vsync messages, late
// frames, callback removal and InsertCallbackAtHead().

#include "matrix/core/choreographer.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"
#include "matrix/testing/log_capture.h"
#include "spdlog/spdlog.h"

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration k60HzInterval = absl::Nanoseconds(16'666'666);  // Floor of 1/60 s.

TestEnvironment::Options ManualVsync() {
  TestEnvironment::Options options;
  options.auto_vsync = false;
  return options;
}

class ChoreographerTest : public ::testing::Test {
 protected:
  ChoreographerTest() : env_(ManualVsync()) {}
  Choreographer* choreographer() { return env_.choreographer(); }
  Task Record(std::string name) {
    return [this, name = std::move(name)] { ran_.push_back(name); };
  }
  Choreographer::FrameCallback RecordFrame(std::string name) {
    return [this, name = std::move(name)](TimeTicks frame_time) {
      ran_.push_back(name);
      frame_times_.push_back(frame_time);
    };
  }

  TestEnvironment env_;
  std::vector<std::string> ran_;
  std::vector<TimeTicks> frame_times_;
};

TEST_F(ChoreographerTest, DoFrame_WithEveryCallbackType_RunsQueuesInAndroidOrder) {
  choreographer()->PostCallback(Choreographer::kCommit, Record("commit"));
  choreographer()->PostCallback(Choreographer::kTraversal, Record("traversal"));
  choreographer()->PostCallback(Choreographer::kInsetsAnimation, Record("insets"));
  choreographer()->PostCallback(Choreographer::kAnimation, Record("animation"));
  choreographer()->PostFrameCallback(RecordFrame("frame callback"));
  choreographer()->PostCallback(Choreographer::kInput, Record("input"));
  choreographer()->PostCallback(Choreographer::kAnimation, Record("animation 2"));
  EXPECT_THAT(ran_, IsEmpty());

  ASSERT_TRUE(env_.FireVsync());

  EXPECT_THAT(ran_, ElementsAre("input", "animation", "frame callback", "animation 2", "insets",
                                "traversal", "commit"));
  EXPECT_FALSE(choreographer()->is_in_frame());
}

TEST_F(ChoreographerTest, DoFrame_WhileRunningEachQueue_ReportsItsTypeAndInFrame) {
  std::vector<std::string> seen;
  for (int type = Choreographer::kCommit; type >= Choreographer::kInput; --type) {
    choreographer()->PostCallback(static_cast<Choreographer::CallbackType>(type), [&] {
      seen.push_back(absl::StrCat(
          Choreographer::CallbackTypeName(choreographer()->current_callback_type()),
          choreographer()->is_in_frame() ? " in frame" : " outside"));
    });
  }

  env_.FireVsync();

  EXPECT_THAT(seen, ElementsAre("INPUT in frame", "ANIMATION in frame",
                                "INSETS_ANIMATION in frame", "TRAVERSAL in frame",
                                "COMMIT in frame"));
}

TEST_F(ChoreographerTest, PostFrameCallback_ReceivesTheVsyncTimestampAsFrameTime) {
  env_.AdvanceClock(absl::Milliseconds(5));
  const TimeTicks vsync = env_.Now() - absl::Milliseconds(4);  // Less than a frame late.
  choreographer()->PostFrameCallback(RecordFrame("frame"));

  ASSERT_TRUE(env_.FireVsyncAt(vsync));

  ASSERT_THAT(frame_times_, ElementsAre(vsync));
  EXPECT_EQ(frame_times_[0].ToNanoseconds(), vsync.ToNanoseconds());
  EXPECT_EQ(choreographer()->GetFrameTime(), vsync);
  const Choreographer::FrameInfo& info = choreographer()->frame_info();
  EXPECT_EQ(info.intended_vsync, vsync);
  EXPECT_EQ(info.frame_time, vsync);
  EXPECT_EQ(info.start, env_.Now());
  EXPECT_EQ(info.skipped_frames, 0);
  EXPECT_EQ(info.frame_number, 1);
  EXPECT_EQ(info.refresh_rate, RefreshRate::FromHz(60));
}

TEST_F(ChoreographerTest, Vsync_WhenNothingIsPending_IsNeverRequested) {
  EXPECT_FALSE(env_.vsync()->vsync_requested());
  EXPECT_FALSE(choreographer()->is_frame_scheduled());

  env_.set_auto_vsync(true);
  env_.FastForwardBy(absl::Seconds(1));

  EXPECT_FALSE(env_.vsync()->vsync_requested());
  EXPECT_EQ(env_.vsync()->frames_fired(), 0);
}

TEST_F(ChoreographerTest, Vsync_AfterTheLastPendingCallbackRan_IsNoLongerRequested) {
  choreographer()->PostCallback(Choreographer::kTraversal, Record("draw"));
  EXPECT_TRUE(env_.vsync()->vsync_requested());
  EXPECT_TRUE(choreographer()->is_frame_scheduled());

  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("draw"));
  EXPECT_FALSE(env_.vsync()->vsync_requested());

  env_.set_auto_vsync(true);
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(env_.vsync()->frames_fired(), 1);
}

TEST_F(ChoreographerTest, PostCallback_Repeatedly_RequestsOneVsyncAndRunsAllInOneFrame) {
  choreographer()->PostCallback(Choreographer::kAnimation, Record("a"));
  choreographer()->PostCallback(Choreographer::kAnimation, Record("b"));
  choreographer()->PostFrameCallback(RecordFrame("c"));

  EXPECT_TRUE(env_.FireVsync());
  EXPECT_FALSE(env_.FireVsync());  // Nothing left: no second vsync was asked for.

  EXPECT_THAT(ran_, ElementsAre("a", "b", "c"));
  EXPECT_EQ(env_.vsync()->frames_fired(), 1);
}

TEST_F(ChoreographerTest, PostCallbackDelayed_BeforeItsDelay_RequestsNoVsync) {
  const TimeTicks t0 = env_.Now();
  env_.set_auto_vsync(true);
  choreographer()->PostCallbackDelayed(Choreographer::kAnimation, Record("delayed"), nullptr,
                                       absl::Milliseconds(50));

  env_.FastForwardBy(absl::Milliseconds(49));
  EXPECT_FALSE(env_.vsync()->vsync_requested());
  EXPECT_THAT(ran_, IsEmpty());

  // Due at +50 ms (a vsync tick itself); it runs in the next frame after that.
  env_.FastForwardBy(absl::Milliseconds(1));
  EXPECT_TRUE(env_.vsync()->vsync_requested());
  env_.FastForwardBy(k60HzInterval + absl::Nanoseconds(1));
  EXPECT_THAT(ran_, ElementsAre("delayed"));
  EXPECT_EQ(choreographer()->GetFrameTime(), RefreshRate::FromHz(60).TickAfter(t0, 4));
}

TEST_F(ChoreographerTest, PostFrameCallbackDelayed_RunsInTheFirstFrameAfterTheDelay) {
  const TimeTicks t0 = env_.Now();
  env_.set_auto_vsync(true);
  choreographer()->PostFrameCallbackDelayed(RecordFrame("delayed"), absl::Milliseconds(20));

  env_.FastForwardBy(absl::Milliseconds(100));

  // Due at +20 ms; the next vsync tick after that is tick 2 (+33.3 ms).
  EXPECT_THAT(frame_times_, ElementsAre(RefreshRate::FromHz(60).TickAfter(t0, 2)));
}

TEST_F(ChoreographerTest, PostCallbackDelayed_AfterItsDelayInAFrame_WaitsForTheNextFrame) {
  choreographer()->PostCallback(Choreographer::kInput, Record("input"));
  choreographer()->PostCallbackDelayed(Choreographer::kInput, Record("delayed"), nullptr,
                                       absl::Milliseconds(10));

  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("input"));

  env_.FastForwardBy(absl::Milliseconds(10));
  EXPECT_TRUE(env_.vsync()->vsync_requested());
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("input", "delayed"));
}

TEST_F(ChoreographerTest, RemoveCallbacks_ByToken_RemovesOnlyThatTokensCallbacksOfThatType) {
  int token = 0;
  int other = 0;
  choreographer()->PostCallback(Choreographer::kTraversal, Record("traversal token"), &token);
  choreographer()->PostCallback(Choreographer::kTraversal, Record("traversal other"), &other);
  choreographer()->PostCallback(Choreographer::kInput, Record("input token"), &token);
  choreographer()->PostFrameCallback(RecordFrame("frame token"), &token);
  choreographer()->PostCallback(Choreographer::kAnimation, Record("animation token"), &token);

  choreographer()->RemoveCallbacks(Choreographer::kTraversal, &token);
  choreographer()->RemoveCallbacks(Choreographer::kAnimation, &token);  // Keeps frame callbacks.

  EXPECT_TRUE(choreographer()->HasPendingCallbacks(Choreographer::kTraversal));
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("input token", "frame token", "traversal other"));
}

TEST_F(ChoreographerTest, RemoveCallbacks_WithNullToken_RemovesEveryCallbackOfThatType) {
  int token = 0;
  choreographer()->PostCallback(Choreographer::kTraversal, Record("a"), &token);
  choreographer()->PostCallback(Choreographer::kTraversal, Record("b"));
  choreographer()->PostCallback(Choreographer::kCommit, Record("commit"));

  choreographer()->RemoveCallbacks(Choreographer::kTraversal, nullptr);

  EXPECT_FALSE(choreographer()->HasPendingCallbacks(Choreographer::kTraversal));
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("commit"));
}

TEST_F(ChoreographerTest, RemoveCallbacks_OfADelayedCallback_RequestsNoVsyncWhenItWouldBeDue) {
  int token = 0;
  choreographer()->PostCallbackDelayed(Choreographer::kAnimation, Record("delayed"), &token,
                                       absl::Milliseconds(10));

  choreographer()->RemoveCallbacks(Choreographer::kAnimation, &token);
  env_.FastForwardBy(absl::Milliseconds(100));

  EXPECT_FALSE(env_.vsync()->vsync_requested());
  EXPECT_EQ(env_.looper()->queue()->PendingCount(), 0u);
}

TEST_F(ChoreographerTest, RemoveFrameCallback_ByToken_RemovesOnlyThoseFrameCallbacks) {
  int token = 0;
  int other = 0;
  choreographer()->PostFrameCallback(RecordFrame("frame token"), &token);
  choreographer()->PostFrameCallback(RecordFrame("frame other"), &other);
  choreographer()->PostCallback(Choreographer::kAnimation, Record("animation token"), &token);

  choreographer()->RemoveFrameCallback(&token);

  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("frame other", "animation token"));
}

TEST_F(ChoreographerTest, Vsync_BehindASyncBarrier_StillRunsTheFrame) {
  Handler handler(env_.looper());
  const int barrier = env_.looper()->queue()->PostSyncBarrier();
  handler.Post(Record("sync message"));
  choreographer()->PostFrameCallback(RecordFrame("frame"));

  ASSERT_TRUE(env_.FireVsync());
  EXPECT_THAT(ran_, ElementsAre("frame"));

  env_.looper()->queue()->RemoveSyncBarrier(barrier);
  env_.RunUntilIdle();
  EXPECT_THAT(ran_, ElementsAre("frame", "sync message"));
}

TEST_F(ChoreographerTest, DoFrame_StartingThreeIntervalsLate_SkipsToTheLatestVsync) {
  env_.AdvanceClock(absl::Milliseconds(50));
  const TimeTicks vsync = env_.Now() - absl::Milliseconds(50);  // Exactly 3 intervals at 60 Hz.
  choreographer()->PostFrameCallback(RecordFrame("frame"));

  env_.FireVsyncAt(vsync);

  ASSERT_EQ(frame_times_.size(), 1u);
  EXPECT_EQ(frame_times_[0], vsync + absl::Milliseconds(50));
  EXPECT_EQ(choreographer()->frame_info().intended_vsync, vsync);
  EXPECT_EQ(choreographer()->frame_info().skipped_frames, 3);
}

TEST_F(ChoreographerTest, DoFrame_StartingOneAndAHalfIntervalsLate_SkipsOneInterval) {
  env_.AdvanceClock(absl::Milliseconds(25));
  const TimeTicks vsync = env_.Now() - absl::Milliseconds(25);
  choreographer()->PostFrameCallback(RecordFrame("frame"));

  env_.FireVsyncAt(vsync);

  EXPECT_THAT(frame_times_, ElementsAre(RefreshRate::FromHz(60).TickAfter(vsync, 1)));
  EXPECT_EQ(choreographer()->frame_info().skipped_frames, 1);
}

TEST_F(ChoreographerTest, DoFrame_JustUnderOneIntervalLate_KeepsTheVsyncAsFrameTime) {
  env_.AdvanceClock(absl::Milliseconds(20));
  const TimeTicks vsync = env_.Now() - k60HzInterval;  // 16.666666 ms < 1/60 s.
  choreographer()->PostFrameCallback(RecordFrame("frame"));

  env_.FireVsyncAt(vsync);

  EXPECT_THAT(frame_times_, ElementsAre(vsync));
  EXPECT_EQ(choreographer()->frame_info().skipped_frames, 0);
}

TEST_F(ChoreographerTest, DoFrame_WithVsyncOlderThanTheLastFrame_WaitsForTheNextVsync) {
  env_.AdvanceClock(absl::Milliseconds(100));
  choreographer()->PostFrameCallback(RecordFrame("first"));
  const TimeTicks first_vsync = env_.Now();
  env_.FireVsyncAt(first_vsync);
  choreographer()->PostFrameCallback(RecordFrame("second"));

  env_.FireVsyncAt(first_vsync - absl::Milliseconds(1));  // Time went backwards.
  EXPECT_THAT(ran_, ElementsAre("first"));
  EXPECT_TRUE(env_.vsync()->vsync_requested());

  env_.AdvanceClock(absl::Milliseconds(16));
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("first", "second"));
  EXPECT_THAT(frame_times_, ElementsAre(first_vsync, first_vsync + absl::Milliseconds(16)));
}

TEST_F(ChoreographerTest, InputCallback_PostingTraversalWork_RunsItInTheSameFrame) {
  std::vector<int64_t> frames;
  choreographer()->PostCallback(Choreographer::kInput, [&] {
    frames.push_back(choreographer()->frame_info().frame_number);
    choreographer()->PostCallback(Choreographer::kTraversal, [&] {
      frames.push_back(choreographer()->frame_info().frame_number);
    });
    choreographer()->PostCallback(Choreographer::kInput, [&] {
      frames.push_back(-choreographer()->frame_info().frame_number);
    });
  });

  env_.FireVsync();
  EXPECT_THAT(frames, ElementsAre(1, 1));  // INPUT posted during INPUT waits.

  env_.FireVsync();
  EXPECT_THAT(frames, ElementsAre(1, 1, -2));
}

TEST_F(ChoreographerTest, QueueStart_IsEachQueuesStartInTheFrameRunningNow) {
  using C = Choreographer;
  std::vector<TimeTicks> seen_in_traversal;
  const TimeTicks t0 = env_.Now();
  choreographer()->PostCallback(C::kInput, [&] { env_.AdvanceClock(absl::Milliseconds(2)); });
  choreographer()->PostCallback(C::kAnimation, [&] { env_.AdvanceClock(absl::Milliseconds(3)); });
  choreographer()->PostCallback(C::kTraversal, [&] {
    for (C::CallbackType type : {C::kInput, C::kAnimation, C::kInsetsAnimation, C::kTraversal,
                                 C::kCommit}) {
      seen_in_traversal.push_back(choreographer()->queue_start(type));
    }
    env_.AdvanceClock(absl::Milliseconds(4));
  });
  env_.FireVsync();
  // Mid-frame: the queues that started so far; COMMIT not yet (null).
  EXPECT_THAT(seen_in_traversal,
              ElementsAre(t0, t0 + absl::Milliseconds(2), t0 + absl::Milliseconds(5),
                          t0 + absl::Milliseconds(5), TimeTicks()));
  // After it: every queue of the last frame.
  EXPECT_EQ(choreographer()->queue_start(C::kCommit), t0 + absl::Milliseconds(9));

  // The next frame starts afresh: a queue not started yet in it reads null.
  std::vector<TimeTicks> seen_in_input;
  env_.AdvanceClock(absl::Milliseconds(10));
  choreographer()->PostCallback(C::kInput, [&] {
    seen_in_input.push_back(choreographer()->queue_start(C::kInput));
    seen_in_input.push_back(choreographer()->queue_start(C::kCommit));
  });
  env_.FireVsync();
  EXPECT_THAT(seen_in_input, ElementsAre(t0 + absl::Milliseconds(19), TimeTicks()));
}

TEST_F(ChoreographerTest, FrameCallback_RepostingItself_RunsOncePerVsync) {
  std::function<void(TimeTicks)> animate = [&](TimeTicks frame_time) {
    frame_times_.push_back(frame_time);
    choreographer()->PostFrameCallback(animate);
  };
  choreographer()->PostFrameCallback(animate);
  const TimeTicks t0 = env_.Now();

  for (int i = 1; i <= 3; ++i) {
    env_.AdvanceClock(absl::Milliseconds(10));
    env_.FireVsync();
  }

  EXPECT_THAT(frame_times_,
              ElementsAre(t0 + absl::Milliseconds(10), t0 + absl::Milliseconds(20),
                          t0 + absl::Milliseconds(30)));
  EXPECT_TRUE(env_.vsync()->vsync_requested());
  choreographer()->RemoveFrameCallback(nullptr);
}

TEST_F(ChoreographerTest, InsertCallbackAtHead_Alone_RequestsNoFrame) {
  choreographer()->InsertCallbackAtHead(Choreographer::kInput, Record("head"));

  EXPECT_FALSE(env_.vsync()->vsync_requested());
  EXPECT_FALSE(choreographer()->is_frame_scheduled());
  EXPECT_TRUE(choreographer()->HasPendingCallbacks(Choreographer::kInput));
  env_.set_auto_vsync(true);
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(ran_, IsEmpty());
}

TEST_F(ChoreographerTest, InsertCallbackAtHead_ThenSomeoneRequestsAFrame_RunsFirstInIt) {
  choreographer()->PostCallback(Choreographer::kInput, Record("pending input"));
  choreographer()->InsertCallbackAtHead(Choreographer::kInput, Record("head 1"));
  choreographer()->InsertCallbackAtHead(Choreographer::kInput, Record("head 2"));
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("head 2", "head 1", "pending input"));

  ran_.clear();
  choreographer()->InsertCallbackAtHead(Choreographer::kTraversal, Record("traversal head"));
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(ran_, IsEmpty());

  choreographer()->PostCallback(Choreographer::kTraversal, Record("someone's draw"));
  env_.FireVsync();
  EXPECT_THAT(ran_, ElementsAre("traversal head", "someone's draw"));
}

TEST_F(ChoreographerTest, InsertCallbackAtHead_FromAnEarlierQueue_RunsInTheSameFrame) {
  // UIThreadMonitor's pattern: at INPUT's head, add a marker at ANIMATION's
  // head and so on, to time each queue of this frame.
  choreographer()->PostFrameCallback(RecordFrame("frame callback"));
  choreographer()->PostCallback(Choreographer::kTraversal, Record("draw"));
  choreographer()->InsertCallbackAtHead(Choreographer::kInput, [&] {
    ran_.push_back("input marker");
    choreographer()->InsertCallbackAtHead(Choreographer::kAnimation, [&] {
      ran_.push_back("animation marker");
      choreographer()->InsertCallbackAtHead(Choreographer::kTraversal,
                                            Record("traversal marker"));
    });
  });

  env_.FireVsync();

  EXPECT_THAT(ran_, ElementsAre("input marker", "animation marker", "frame callback",
                                "traversal marker", "draw"));
  EXPECT_FALSE(env_.vsync()->vsync_requested());
}

using ::matrix::testing::ScopedLogCapture;

TEST_F(ChoreographerTest, DoFrame_SkippingAtLeastTheLimit_LogsSkippedFrames) {
  ScopedLogCapture logs;
  env_.AdvanceClock(absl::Seconds(1));
  choreographer()->PostFrameCallback(RecordFrame("late frame"));

  env_.FireVsyncAt(env_.Now() - absl::Milliseconds(500));  // 30 intervals late.

  EXPECT_EQ(choreographer()->frame_info().skipped_frames, 30);
  EXPECT_THAT(logs.text(), HasSubstr("Skipped 30 frames!"));
}

TEST_F(ChoreographerTest, DoFrame_SkippingFewerThanTheLimit_LogsNothing) {
  ScopedLogCapture logs;
  env_.AdvanceClock(absl::Seconds(1));
  choreographer()->PostFrameCallback(RecordFrame("late frame"));

  env_.FireVsyncAt(env_.Now() - absl::Milliseconds(499));  // 29.94 intervals late.

  EXPECT_EQ(choreographer()->frame_info().skipped_frames, 29);
  EXPECT_THAT(logs.text(), Not(HasSubstr("Skipped")));
}

TEST_F(ChoreographerTest, SetSkippedFrameWarningLimit_Lower_LogsSmallerSkips) {
  ScopedLogCapture logs;
  choreographer()->SetSkippedFrameWarningLimit(2);
  env_.AdvanceClock(absl::Seconds(1));
  choreographer()->PostFrameCallback(RecordFrame("late frame"));

  env_.FireVsyncAt(env_.Now() - absl::Milliseconds(40));

  EXPECT_THAT(logs.text(), HasSubstr("Skipped 2 frames!"));
}

TEST_F(ChoreographerTest, CallbackTypeName_NamesEveryQueue) {
  EXPECT_STREQ(Choreographer::CallbackTypeName(Choreographer::kInput), "INPUT");
  EXPECT_STREQ(Choreographer::CallbackTypeName(Choreographer::kAnimation), "ANIMATION");
  EXPECT_STREQ(Choreographer::CallbackTypeName(Choreographer::kInsetsAnimation),
               "INSETS_ANIMATION");
  EXPECT_STREQ(Choreographer::CallbackTypeName(Choreographer::kTraversal), "TRAVERSAL");
  EXPECT_STREQ(Choreographer::CallbackTypeName(Choreographer::kCommit), "COMMIT");
}

TEST(ChoreographerInstanceTest, Peek_WithoutChoreographer_IsNullAndInstallCreatesOne) {
  TestEnvironment::Options options;
  options.choreographer = false;
  TestEnvironment env(options);
  EXPECT_EQ(Choreographer::Peek(), nullptr);

  auto source = std::make_unique<::matrix::testing::ManualVsyncSource>(RefreshRate::FromHz(90));
  ::matrix::testing::ManualVsyncSource* vsync = source.get();
  Choreographer* installed = Choreographer::Install(std::move(source));

  EXPECT_EQ(Choreographer::Peek(), installed);
  EXPECT_EQ(Choreographer::GetInstance(), installed);
  EXPECT_EQ(installed->looper(), env.looper());
  EXPECT_EQ(installed->vsync_source(), vsync);
  EXPECT_EQ(installed->refresh_rate(), RefreshRate::FromHz(90));
  Choreographer::ReleaseForTesting();
  EXPECT_EQ(Choreographer::Peek(), nullptr);
}

TEST(ChoreographerInstanceTest, ReleaseForTesting_WithFramePending_DropsItsMessages) {
  TestEnvironment env(ManualVsync());
  Handler handler(env.looper());
  bool ran = false;
  env.choreographer()->PostFrameCallback([&](TimeTicks) { ran = true; });
  env.vsync()->Fire(env.Now());  // The frame message is now queued.
  ASSERT_EQ(env.looper()->queue()->PendingCount(), 1u);

  Choreographer::ReleaseForTesting();

  EXPECT_EQ(env.looper()->queue()->PendingCount(), 0u);
  env.RunUntilIdle();
  EXPECT_FALSE(ran);
}

TEST(ChoreographerDeathTest, Install_Twice_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestEnvironment env;
  EXPECT_DEATH(
      Choreographer::Install(std::make_unique<::matrix::testing::ManualVsyncSource>()),
      "already has a Choreographer");
}

TEST(ChoreographerDeathTest, GetInstance_WithoutLooper_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Choreographer::GetInstance(), "must have a looper");
}

}  // namespace
}  // namespace matrix
