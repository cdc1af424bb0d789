// Tests for Looper: the thread-local Prepare()/MyLooper() slot, the main
// looper, Loop() and PollOnce() on a fake clock, and the fatal misuses.

#include "matrix/core/looper.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/testing/fake_tick_clock.h"

namespace matrix {
namespace {

using ::matrix::testing::FakeTickClock;
using ::testing::ElementsAre;

// Releases whatever looper the test thread prepared, so every test starts
// (and leaves the process) clean.
class LooperTest : public ::testing::Test {
 protected:
  ~LooperTest() override { Looper::ReleaseForTesting(); }
  FakeTickClock clock_;
};

TEST_F(LooperTest, Prepare_OnThisThread_BecomesMyLooperButNotMain) {
  ASSERT_EQ(Looper::MyLooper(), nullptr);

  Looper* looper = Looper::Prepare(&clock_);

  EXPECT_EQ(Looper::MyLooper(), looper);
  EXPECT_EQ(Looper::MainLooper(), nullptr);
  EXPECT_FALSE(looper->is_main());
  EXPECT_TRUE(looper->IsCurrentThread());
  EXPECT_EQ(looper->clock(), &clock_);
}

TEST_F(LooperTest, MyLooper_OnAnotherThread_IsThatThreadsOwn) {
  Looper* mine = Looper::Prepare(&clock_);
  Looper* theirs_before_prepare = mine;
  Looper* theirs = nullptr;
  Looper* theirs_seen = nullptr;
  bool is_current_there = true;

  std::thread other([&] {
    theirs_before_prepare = Looper::MyLooper();
    theirs = Looper::Prepare(&clock_);
    theirs_seen = Looper::MyLooper();
    is_current_there = mine->IsCurrentThread();
    Looper::ReleaseForTesting();
  });
  other.join();

  EXPECT_EQ(theirs_before_prepare, nullptr);
  EXPECT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(theirs_seen, theirs);
  EXPECT_FALSE(is_current_there);
  EXPECT_EQ(Looper::MyLooper(), mine);
}

TEST_F(LooperTest, PrepareMainLooper_FromTheMainThread_IsVisibleFromEveryThread) {
  Looper* main = Looper::PrepareMainLooper(&clock_);
  Looper* seen_elsewhere = nullptr;
  Looper* my_looper_elsewhere = main;

  std::thread other([&] {
    seen_elsewhere = Looper::MainLooper();
    my_looper_elsewhere = Looper::MyLooper();
  });
  other.join();

  EXPECT_EQ(Looper::MyLooper(), main);
  EXPECT_EQ(Looper::MainLooper(), main);
  EXPECT_TRUE(main->is_main());
  EXPECT_EQ(seen_elsewhere, main);
  EXPECT_EQ(my_looper_elsewhere, nullptr);
}

TEST_F(LooperTest, ReleaseForTesting_OfTheMainLooper_ClearsMainLooper) {
  Looper::PrepareMainLooper(&clock_);

  Looper::ReleaseForTesting();

  EXPECT_EQ(Looper::MainLooper(), nullptr);
  EXPECT_EQ(Looper::MyLooper(), nullptr);
  EXPECT_NE(Looper::PrepareMainLooper(&clock_), nullptr);  // Can be prepared afresh.
}

TEST_F(LooperTest, Loop_WithTasks_RunsThemOnThisThreadUntilQuit) {
  Looper* looper = Looper::Prepare(&clock_);
  Handler handler(looper);
  std::vector<std::string> ran;
  bool on_this_thread = true;
  handler.Post([&] { ran.push_back("a"); });
  handler.Post([&] {
    ran.push_back("b");
    on_this_thread = on_this_thread && looper->IsCurrentThread() && looper->is_dispatching();
    handler.Post([&] {
      ran.push_back("posted by b");
      looper->Quit();
    });
  });

  Looper::Loop();

  EXPECT_THAT(ran, ElementsAre("a", "b", "posted by b"));
  EXPECT_TRUE(on_this_thread);
  EXPECT_FALSE(looper->is_dispatching());
}

TEST_F(LooperTest, Loop_WhenHandlerThrows_PropagatesAndLooperStaysUsable) {
  Looper* looper = Looper::Prepare(&clock_);
  Handler handler(looper);
  handler.Post([] { throw std::runtime_error("boom"); });
  bool ran_after = false;
  handler.Post([&] {
    ran_after = true;
    looper->Quit();
  });

  EXPECT_THROW(Looper::Loop(), std::runtime_error);
  EXPECT_FALSE(looper->is_dispatching());
  EXPECT_FALSE(ran_after);

  Looper::Loop();  // The next message still runs.
  EXPECT_TRUE(ran_after);
}

TEST_F(LooperTest, PollOnce_ReportsDispatchedIdleAndQuit) {
  std::unique_ptr<Looper> looper = Looper::Create(&clock_);
  Handler handler(looper.get());
  int runs = 0;
  handler.Post([&] { ++runs; });
  handler.PostDelayed([&] { ++runs; }, absl::Milliseconds(10));

  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kDispatched);
  EXPECT_EQ(runs, 1);
  // The delayed message is not due on the fake clock: nothing to dispatch.
  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kIdle);
  EXPECT_EQ(runs, 1);

  looper->Quit();
  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kQuit);
  EXPECT_EQ(runs, 1);
}

// A foreign loop (a game loop, a GUI toolkit) drives a Create()d looper with
// PollOnce() between its own work, during which time passes.
class BeginRecorder : public DispatchObserver {
 public:
  void OnDispatchBegin(const Message&, TimeTicks begin) override { begins.push_back(begin); }
  void OnDispatchEnd(const Message&, TimeTicks, TimeTicks) override {}
  std::vector<TimeTicks> begins;
};

TEST_F(LooperTest, PollOnce_AfterTimePassedSinceLastDispatch_SeesNewlyDueMessages) {
  std::unique_ptr<Looper> looper = Looper::Create(&clock_);
  Handler handler(looper.get());
  BeginRecorder observer;
  ObserverRegistration registration = looper->AddDispatchObserver(&observer);
  const TimeTicks t0 = clock_.NowTicks();
  handler.Post([] {});
  handler.PostDelayed([] {}, absl::Milliseconds(10));

  ASSERT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kDispatched);
  clock_.Advance(absl::Milliseconds(30));  // The foreign loop does its own work.

  EXPECT_EQ(looper->PollOnce(absl::ZeroDuration()), Looper::PollResult::kDispatched);
  // The begin timestamp is a clock reading taken when the message was found
  // due, not a stale one from before the foreign loop's work.
  EXPECT_THAT(observer.begins, ElementsAre(t0, t0 + absl::Milliseconds(30)));
}

TEST_F(LooperTest, Create_ByDefault_IsQuittableAndNotBoundToTheThread) {
  std::unique_ptr<Looper> looper = Looper::Create(&clock_);
  EXPECT_EQ(Looper::MyLooper(), nullptr);
  EXPECT_FALSE(looper->is_main());
  looper->QuitSafely();
  EXPECT_TRUE(looper->queue()->IsQuitting());
}

using LooperDeathTest = LooperTest;

TEST_F(LooperDeathTest, Prepare_Twice_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Looper::Prepare(&clock_);
  EXPECT_DEATH(Looper::Prepare(&clock_), "Only one Looper may be created per thread");
  EXPECT_DEATH(Looper::PrepareMainLooper(&clock_), "Only one Looper may be created per thread");
}

TEST_F(LooperDeathTest, PrepareMainLooper_WhenAnotherThreadIsMain_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        // The other thread stays alive: its looper would unregister as main
        // when the thread exits.
        absl::Notification prepared;
        std::thread main_thread([&] {
          Looper::PrepareMainLooper(&clock_);
          prepared.Notify();
          absl::Notification().WaitForNotification();  // Forever.
        });
        main_thread.detach();
        prepared.WaitForNotification();
        Looper::PrepareMainLooper(&clock_);
      },
      "The main Looper has already been prepared");
}

TEST_F(LooperDeathTest, Loop_WithoutPrepare_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Looper::Loop(), "Looper::Prepare\\(\\) wasn't called");
}

}  // namespace
}  // namespace matrix
