// Real-thread tests: a Handler whose looper's thread has exited (the looper
// was prepared with Looper::Prepare() and freed with the thread). Posting and
// sending return false and log once per handler ("sending message to a
// Handler on a dead thread", as Android), removal and queries are harmless,
// and nothing touches the freed looper (ASan catches that in the sanitizer
// build; in the plain build the old code returned true or crashed).

#include <atomic>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/executor.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/tick_clock.h"
#include "matrix/testing/log_capture.h"

namespace matrix {
namespace {

using ::matrix::testing::ScopedLogCapture;

// Runs a thread that prepares a looper, builds a T from it, loops until
// quit, and exits (joined, so its looper is freed). Returns the T.
template <typename T>
std::unique_ptr<T> MakeOnThreadThatExits(bool loop) {
  std::unique_ptr<T> made;
  std::thread thread([&] {
    Looper* looper = Looper::Prepare(TickClock::Default());
    made = std::make_unique<T>(looper);
    if (loop) {
      looper->QuitSafely();  // Loop() then returns at once.
      Looper::Loop();
    }
  });
  thread.join();
  return made;
}

// Counts how many copies of it are destroyed (a task that was dropped).
struct DropCounter {
  explicit DropCounter(std::atomic<int>* drops) : drops(drops) {}
  DropCounter(DropCounter&& other) noexcept : drops(std::exchange(other.drops, nullptr)) {}
  ~DropCounter() {
    if (drops != nullptr) drops->fetch_add(1);
  }
  std::atomic<int>* drops;
};

TEST(HandlerDeadLooperTest, PostAfterTheLoopersThreadExited_ReturnsFalse) {
  std::unique_ptr<Handler> handler = MakeOnThreadThatExits<Handler>(/*loop=*/false);
  std::atomic<int> drops{0};
  bool ran = false;
  EXPECT_FALSE(handler->Post([&ran, d = DropCounter(&drops)] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_EQ(drops.load(), 1);  // The task was dropped, not kept anywhere.
}

TEST(HandlerDeadLooperTest, EveryPostAndSendVariant_ReturnsFalse) {
  std::unique_ptr<Handler> handler = MakeOnThreadThatExits<Handler>(/*loop=*/true);
  const int token = 0;
  const TimeTicks now = TickClock::Default()->NowTicks();
  EXPECT_FALSE(handler->Post([] {}));
  EXPECT_FALSE(handler->PostDelayed([] {}, absl::Milliseconds(5)));
  EXPECT_FALSE(handler->PostDelayed([] {}, &token, absl::Milliseconds(5)));
  EXPECT_FALSE(handler->PostAtTime([] {}, now));
  EXPECT_FALSE(handler->PostAtTime([] {}, &token, now));
  EXPECT_FALSE(handler->PostAtFrontOfQueue([] {}));
  EXPECT_FALSE(handler->SendMessage(Message(1)));
  EXPECT_FALSE(handler->SendMessageDelayed(Message(1), absl::Milliseconds(5)));
  EXPECT_FALSE(handler->SendMessageAtTime(Message(1), now));
  EXPECT_FALSE(handler->SendMessageAtFrontOfQueue(Message(1)));
  EXPECT_FALSE(handler->SendEmptyMessage(2));
  EXPECT_FALSE(handler->SendEmptyMessageDelayed(2, absl::Milliseconds(5)));
  EXPECT_FALSE(handler->SendEmptyMessageAtTime(2, now));
}

TEST(HandlerDeadLooperTest, RemovalAndQueries_AreHarmlessAndFindNothing) {
  std::unique_ptr<Handler> handler = MakeOnThreadThatExits<Handler>(/*loop=*/false);
  const int token = 0;
  EXPECT_FALSE(handler->SendEmptyMessage(3));
  EXPECT_FALSE(handler->HasMessages(3));
  EXPECT_FALSE(handler->HasMessages(3, &token));
  EXPECT_FALSE(handler->HasCallbacks(&token));
  handler->RemoveMessages(3);
  handler->RemoveCallbacks(&token);
  handler->RemoveCallbacksAndMessages();
  handler.reset();  // The destructor does not touch the freed looper either.
}

TEST(HandlerDeadLooperTest, PendingMessagesWhenTheThreadExits_AreDropped) {
  std::atomic<int> drops{0};
  bool ran = false;
  std::unique_ptr<Handler> handler;
  std::thread thread([&] {
    Looper* looper = Looper::Prepare(TickClock::Default());
    handler = std::make_unique<Handler>(looper);
    // Never dispatched: the thread exits without looping.
    ASSERT_TRUE(handler->Post([&ran, d = DropCounter(&drops)] { ran = true; }));
    EXPECT_TRUE(handler->HasCallbacks(nullptr));
  });
  thread.join();
  EXPECT_FALSE(ran);
  EXPECT_EQ(drops.load(), 1);  // Released when the looper went away.
  EXPECT_FALSE(handler->Post([] {}));
}

TEST(HandlerDeadLooperTest, RefusedPosts_AreLoggedOncePerHandler) {
  ScopedLogCapture logs;
  std::unique_ptr<Handler> first = MakeOnThreadThatExits<Handler>(/*loop=*/false);
  std::unique_ptr<Handler> second = MakeOnThreadThatExits<Handler>(/*loop=*/false);
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(first->Post([] {}));
    EXPECT_FALSE(first->SendEmptyMessage(i));
  }
  EXPECT_FALSE(second->Post([] {}));
  FlushLogs();
  EXPECT_EQ(logs.Count("sending message to a Handler on a dead thread"), 2) << logs.text();
  EXPECT_EQ(logs.Count(first->ToString()), 1) << logs.text();
  EXPECT_EQ(logs.Count(second->ToString()), 1) << logs.text();
}

TEST(HandlerDeadLooperTest, LooperExecutorOnADeadThread_DropsTheTask) {
  std::unique_ptr<LooperExecutor> executor =
      MakeOnThreadThatExits<LooperExecutor>(/*loop=*/false);
  std::atomic<int> drops{0};
  bool ran = false;
  executor->Execute([&ran, d = DropCounter(&drops)] { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_EQ(drops.load(), 1);
}

}  // namespace
}  // namespace matrix
