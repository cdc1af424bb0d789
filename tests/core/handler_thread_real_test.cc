// Real-thread tests: HandlerThread (GetLooper() blocks until the looper is
// ready, quitting, joining), posting across threads, a Loop() woken by another
// thread, and LooperExecutor on a real worker thread. Timing margins are
// generous: CI runs on a loaded 2-core VM.

#include "matrix/core/handler_thread.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/executor.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/tick_clock.h"

namespace matrix {
namespace {

constexpr absl::Duration kWaitLimit = absl::Seconds(20);

TEST(HandlerThreadTest, GetLooper_BeforeStart_ReturnsNull) {
  HandlerThread thread("never-started");
  EXPECT_EQ(thread.GetLooper(), nullptr);
  EXPECT_FALSE(thread.thread().valid());
  EXPECT_FALSE(thread.Quit());
}

TEST(HandlerThreadTest, GetLooper_RightAfterStart_WaitsAndReturnsTheThreadsLooper) {
  // Repeated, with several callers racing the thread's startup: GetLooper()
  // must never return before the looper exists.
  for (int round = 0; round < 20; ++round) {
    HandlerThread thread("matrix-test-ht");
    thread.Start();
    std::vector<Looper*> seen(3, nullptr);
    std::vector<std::thread> callers;
    for (int i = 1; i < 3; ++i) {
      callers.emplace_back([&, i] { seen[i] = thread.GetLooper(); });
    }
    seen[0] = thread.GetLooper();
    for (std::thread& t : callers) t.join();

    ASSERT_NE(seen[0], nullptr) << "round " << round;
    EXPECT_EQ(seen[1], seen[0]);
    EXPECT_EQ(seen[2], seen[0]);

    Looper* my_looper_there = nullptr;
    bool is_current = false;
    absl::Notification done;
    Handler handler(seen[0]);
    handler.Post([&] {
      my_looper_there = Looper::MyLooper();
      is_current = thread.thread().IsCurrent();
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWaitLimit));
    EXPECT_EQ(my_looper_there, seen[0]);
    EXPECT_TRUE(is_current);
    EXPECT_FALSE(seen[0]->IsCurrentThread());
  }
}

TEST(HandlerThreadTest, Start_NamesTheThread) {
  HandlerThread thread("matrix-worker");
  thread.Start();
  ASSERT_NE(thread.GetLooper(), nullptr);
  EXPECT_EQ(thread.name(), "matrix-worker");
  EXPECT_TRUE(thread.thread().valid());
  EXPECT_EQ(thread.thread().Name(), "matrix-worker");
}

TEST(HandlerThreadTest, PostDelayed_FromAnotherThread_WakesTheLoopAfterTheDelay) {
  HandlerThread thread("matrix-test-ht");
  thread.Start();
  Handler handler(thread.GetLooper());
  absl::Notification done;
  const TimeTicks posted = MonotonicNow();
  TimeTicks ran;
  handler.PostDelayed(
      [&] {
        ran = MonotonicNow();
        done.Notify();
      },
      absl::Milliseconds(30));

  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWaitLimit));
  EXPECT_GE(ran - posted, absl::Milliseconds(30));
}

TEST(HandlerThreadTest, Post_FromSeveralThreads_RunsEachThreadsTasksInOrder) {
  HandlerThread thread("matrix-test-ht");
  thread.Start();
  Handler handler(thread.GetLooper());
  constexpr int kProducers = 3;
  constexpr int kTasksEach = 200;
  std::vector<std::vector<int>> received(kProducers);  // Touched on the looper only.
  absl::Notification done;
  std::atomic<int> remaining{kProducers * kTasksEach};

  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kTasksEach; ++i) {
        EXPECT_TRUE(handler.Post([&, p, i] {
          received[p].push_back(i);
          if (remaining.fetch_sub(1) == 1) done.Notify();
        }));
      }
    });
  }
  for (std::thread& t : producers) t.join();

  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWaitLimit));
  for (int p = 0; p < kProducers; ++p) {
    ASSERT_EQ(received[p].size(), static_cast<size_t>(kTasksEach));
    for (int i = 0; i < kTasksEach; ++i) ASSERT_EQ(received[p][i], i) << "producer " << p;
  }
}

TEST(HandlerThreadTest, QuitSafely_WithDueAndDelayedWork_RunsDueWorkThenStops) {
  HandlerThread thread("matrix-test-ht");
  thread.Start();
  Looper* looper = thread.GetLooper();
  auto handler = std::make_unique<Handler>(looper);
  absl::Mutex mu;
  absl::CondVar cv;
  bool release = false;
  std::atomic<int> due_runs{0};
  std::atomic<bool> delayed_ran{false};
  // Hold the loop so that the next posts are all pending when it quits.
  handler->Post([&] {
    absl::MutexLock lock(&mu);
    while (!release) cv.Wait(&mu);
  });
  handler->Post([&] { ++due_runs; });
  handler->Post([&] { ++due_runs; });
  handler->PostDelayed([&] { delayed_ran = true; }, absl::Seconds(30));

  EXPECT_TRUE(thread.QuitSafely());
  EXPECT_FALSE(handler->Post([] {}));  // Posting after quit fails at once.
  {
    absl::MutexLock lock(&mu);
    release = true;
    cv.Signal();
  }
  thread.Join();

  EXPECT_EQ(due_runs.load(), 2);
  EXPECT_FALSE(delayed_ran.load());
  EXPECT_EQ(thread.GetLooper(), nullptr);  // Finished.
  EXPECT_FALSE(thread.QuitSafely());
  handler.reset();  // The finished looper is still alive for its Handlers.
}

TEST(HandlerThreadTest, Quit_WithPendingWork_DropsItAndJoinsPromptly) {
  HandlerThread thread("matrix-test-ht");
  thread.Start();
  Handler handler(thread.GetLooper());
  std::atomic<bool> ran{false};
  handler.PostDelayed([&] { ran = true; }, absl::Seconds(30));

  const TimeTicks start = MonotonicNow();
  EXPECT_TRUE(thread.Quit());
  thread.Join();

  EXPECT_FALSE(ran.load());
  EXPECT_LT(MonotonicNow() - start, absl::Seconds(10));
}

TEST(HandlerThreadTest, Destructor_OfARunningThread_QuitsAndJoins) {
  ThreadHandle handle;
  {
    HandlerThread thread("matrix-test-ht");
    thread.Start();
    ASSERT_NE(thread.GetLooper(), nullptr);
    handle = thread.thread();
  }
  // The thread has been joined: its CPU clock no longer exists.
  EXPECT_EQ(handle.CpuTime(), absl::ZeroDuration());
}

TEST(LooperRealTest, Loop_OnThisThread_IsWokenByPostsFromAnotherThread) {
  Looper* looper = Looper::Prepare();
  std::vector<int> received;
  {
    Handler handler(looper);
    std::thread producer([&] {
      for (int i = 0; i < 50; ++i) handler.Post([&received, i] { received.push_back(i); });
      // Also wake a loop that is waiting for a delayed message.
      handler.PostDelayed([] {}, absl::Seconds(60));
      handler.Post([looper] { looper->Quit(); });
    });
    Looper::Loop();
    producer.join();
  }
  Looper::ReleaseForTesting();

  ASSERT_EQ(received.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(received[i], i);
}

TEST(LooperExecutorRealTest, Execute_FromAnotherThread_RunsInFifoOrderOnTheLooperThread) {
  HandlerThread thread("matrix-test-exec");
  thread.Start();
  LooperExecutor executor(thread.GetLooper());
  const ThreadHandle looper_thread = thread.thread();
  std::vector<int> order;
  std::atomic<bool> all_on_looper{true};
  absl::Notification done;
  for (int i = 0; i < 100; ++i) {
    executor.Execute([&, i] {
      if (!looper_thread.IsCurrent()) all_on_looper = false;
      order.push_back(i);
      if (i == 99) done.Notify();
    });
  }

  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWaitLimit));
  EXPECT_TRUE(all_on_looper.load());
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(HandlerThreadDeathTest, Start_Twice_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        HandlerThread thread("matrix-test-ht");
        thread.Start();
        thread.Start();
      },
      "started twice");
}

}  // namespace
}  // namespace matrix
