// Tests for MessageQueue's Android semantics: due-time order (FIFO among
// equals), posting at the front, sync barriers, idle handlers and quitting.
// Everything runs on the test thread on a fake clock.

#include "matrix/core/message_queue.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/message.h"
#include "matrix/testing/test_environment.h"

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TestEnvironment::Options QuittableLooper() {
  TestEnvironment::Options options;
  options.main_looper = false;  // The main looper may not quit.
  options.choreographer = false;
  return options;
}

TestEnvironment::Options NoChoreographer() {
  TestEnvironment::Options options;
  options.choreographer = false;
  return options;
}

// Records the order in which tasks run.
class MessageQueueTest : public ::testing::Test {
 protected:
  MessageQueueTest() : env_(NoChoreographer()), handler_(env_.looper()) {}

  Task Record(std::string name) {
    return [this, name = std::move(name)] { ran_.push_back(name); };
  }
  MessageQueue* queue() { return env_.looper()->queue(); }

  TestEnvironment env_;
  Handler handler_;
  std::vector<std::string> ran_;
};

TEST_F(MessageQueueTest, Next_WithMessagesPostedOutOfOrder_DispatchesByDueTime) {
  const TimeTicks t0 = env_.Now();
  handler_.PostAtTime(Record("30ms"), t0 + absl::Milliseconds(30));
  handler_.PostAtTime(Record("10ms"), t0 + absl::Milliseconds(10));
  handler_.PostAtTime(Record("20ms"), t0 + absl::Milliseconds(20));
  handler_.Post(Record("now"));

  env_.FastForwardBy(absl::Milliseconds(30));

  EXPECT_THAT(ran_, ElementsAre("now", "10ms", "20ms", "30ms"));
}

TEST_F(MessageQueueTest, Next_WithEqualDueTimes_DispatchesFirstInFirstOut) {
  const TimeTicks due = env_.Now() + absl::Milliseconds(5);
  Handler other(env_.looper());
  handler_.PostAtTime(Record("a"), due);
  other.PostDelayed(Record("b"), absl::Milliseconds(5));
  handler_.PostAtTime(Record("c"), due);
  handler_.PostAtTime(Record("early"), due - absl::Nanoseconds(1));
  other.PostAtTime(Record("d"), due);

  env_.FastForwardBy(absl::Milliseconds(5));

  EXPECT_THAT(ran_, ElementsAre("early", "a", "b", "c", "d"));
}

TEST_F(MessageQueueTest, PostAtFrontOfQueue_WithDueMessagesPending_RunsBeforeThem) {
  handler_.Post(Record("first posted"));
  handler_.Post(Record("second posted"));
  handler_.PostAtFrontOfQueue(Record("front 1"));
  handler_.PostAtFrontOfQueue(Record("front 2"));

  env_.RunUntilIdle();

  // Each front post goes ahead of every pending message, earlier front posts
  // included (android.os.MessageQueue puts `when == 0` at the head).
  EXPECT_THAT(ran_, ElementsAre("front 2", "front 1", "first posted", "second posted"));
}

TEST_F(MessageQueueTest, SyncBarrier_WhilePosted_HoldsSyncMessagesAndLetsAsyncPass) {
  Handler async_handler(env_.looper(), "async", /*async=*/true);
  handler_.Post(Record("sync before barrier"));
  const int barrier = queue()->PostSyncBarrier();
  handler_.Post(Record("sync 1"));
  async_handler.Post(Record("async"));
  Message async_message;
  async_message.callback = Record("async message");
  async_message.set_asynchronous(true);
  handler_.SendMessage(std::move(async_message));
  handler_.Post(Record("sync 2"));

  env_.FastForwardBy(absl::Seconds(1));

  // A message due before the barrier was posted is ahead of it and still runs.
  EXPECT_THAT(ran_, ElementsAre("sync before barrier", "async", "async message"));
  EXPECT_EQ(queue()->PendingCount(), 3u);  // The barrier and two sync messages.

  queue()->RemoveSyncBarrier(barrier);
  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("sync before barrier", "async", "async message", "sync 1",
                                "sync 2"));
  EXPECT_EQ(queue()->PendingCount(), 0u);
}

TEST_F(MessageQueueTest, SyncBarrier_WithTwoBarriers_ReleasesOnlyWhenBothAreRemoved) {
  const int first = queue()->PostSyncBarrier();
  const int second = queue()->PostSyncBarrier();
  EXPECT_NE(first, second);
  handler_.Post(Record("sync"));

  queue()->RemoveSyncBarrier(first);
  env_.RunUntilIdle();
  EXPECT_THAT(ran_, IsEmpty());

  queue()->RemoveSyncBarrier(second);
  env_.RunUntilIdle();
  EXPECT_THAT(ran_, ElementsAre("sync"));
}

TEST_F(MessageQueueTest, NextRunnableTime_BehindBarrier_SkipsSyncMessages) {
  const TimeTicks t0 = env_.Now();
  const int barrier = queue()->PostSyncBarrier();
  handler_.PostAtTime(Record("sync"), t0 + absl::Milliseconds(1));
  EXPECT_EQ(queue()->NextRunnableTime(), std::nullopt);

  Message async_message;
  async_message.callback = Record("async");
  async_message.set_asynchronous(true);
  handler_.SendMessageAtTime(std::move(async_message), t0 + absl::Milliseconds(7));
  EXPECT_EQ(queue()->NextRunnableTime(), t0 + absl::Milliseconds(7));

  queue()->RemoveSyncBarrier(barrier);
  EXPECT_EQ(queue()->NextRunnableTime(), t0 + absl::Milliseconds(1));
}

TEST_F(MessageQueueTest, PeekHead_WithOverdueMessage_ReportsHowLate) {
  handler_.SendEmptyMessage(7);
  env_.AdvanceClock(absl::Milliseconds(250));

  std::optional<MessageQueue::HeadInfo> head = queue()->PeekHead();

  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->overdue, absl::Milliseconds(250));
  EXPECT_EQ(head->pending, 1u);
  EXPECT_THAT(head->description, ::testing::HasSubstr("what=7"));
}

// ---- Idle handlers ----

class CountingIdleHandler : public IdleHandler {
 public:
  explicit CountingIdleHandler(bool keep, std::vector<std::string>* log = nullptr)
      : keep_(keep), log_(log) {}
  bool QueueIdle() override {
    ++calls_;
    if (log_ != nullptr) log_->push_back("idle");
    return keep_;
  }
  int calls() const { return calls_; }

 private:
  const bool keep_;
  std::vector<std::string>* const log_;
  int calls_ = 0;
};

TEST_F(MessageQueueTest, IdleHandler_AfterABurstOfMessages_RunsOnceWhenQueueDrains) {
  CountingIdleHandler idle(/*keep=*/true, &ran_);
  queue()->AddIdleHandler(&idle);
  handler_.Post(Record("a"));
  handler_.Post(Record("b"));
  handler_.Post(Record("c"));

  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("a", "b", "c", "idle"));
  queue()->RemoveIdleHandler(&idle);
}

TEST_F(MessageQueueTest, IdleHandler_ReturningTrue_RunsAgainAfterTheNextBurst) {
  CountingIdleHandler idle(/*keep=*/true);
  queue()->AddIdleHandler(&idle);
  handler_.Post(Record("a"));
  env_.RunUntilIdle();
  ASSERT_EQ(idle.calls(), 1);

  handler_.Post(Record("b"));
  handler_.Post(Record("c"));
  env_.RunUntilIdle();

  EXPECT_EQ(idle.calls(), 2);
  queue()->RemoveIdleHandler(&idle);
}

TEST_F(MessageQueueTest, IdleHandler_ReturningFalse_IsRemovedAfterItsRun) {
  CountingIdleHandler once(/*keep=*/false);
  queue()->AddIdleHandler(&once);
  handler_.Post(Record("a"));
  env_.RunUntilIdle();
  ASSERT_EQ(once.calls(), 1);

  handler_.Post(Record("b"));
  env_.RunUntilIdle();

  EXPECT_EQ(once.calls(), 1);
  EXPECT_THAT(queue()->IdleHandlersSnapshot(), IsEmpty());
}

TEST_F(MessageQueueTest, IdleHandler_WhileStillIdle_IsNotCalledAgain) {
  CountingIdleHandler idle(/*keep=*/true);
  queue()->AddIdleHandler(&idle);
  handler_.Post(Record("a"));
  env_.RunUntilIdle();
  ASSERT_EQ(idle.calls(), 1);

  // No message ran since: the queue did not become idle again (Android runs
  // idle handlers once per idle period, not on every poll).
  env_.RunUntilIdle();
  env_.FastForwardBy(absl::Seconds(1));

  EXPECT_EQ(idle.calls(), 1);
  queue()->RemoveIdleHandler(&idle);
}

TEST_F(MessageQueueTest, IdleHandler_WhileOnlyFutureMessagesPending_RunsBeforeThem) {
  CountingIdleHandler idle(/*keep=*/true, &ran_);
  queue()->AddIdleHandler(&idle);
  handler_.Post(Record("now"));
  handler_.PostDelayed(Record("later"), absl::Milliseconds(100));

  env_.FastForwardBy(absl::Milliseconds(100));

  EXPECT_THAT(ran_, ElementsAre("now", "idle", "later", "idle"));
  queue()->RemoveIdleHandler(&idle);
}

TEST_F(MessageQueueTest, IdleHandler_PostingWork_GetsItRunBeforeRunUntilIdleReturns) {
  class Poster : public IdleHandler {
   public:
    Poster(Handler* handler, std::vector<std::string>* log) : handler_(handler), log_(log) {}
    bool QueueIdle() override {
      handler_->Post([log = log_] { log->push_back("posted by idle"); });
      return false;
    }

   private:
    Handler* handler_;
    std::vector<std::string>* log_;
  } poster(&handler_, &ran_);
  queue()->AddIdleHandler(&poster);

  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("posted by idle"));
}

TEST_F(MessageQueueTest, RemoveIdleHandler_BeforeIdle_HandlerIsNotCalled) {
  CountingIdleHandler idle(/*keep=*/true);
  queue()->AddIdleHandler(&idle);
  queue()->RemoveIdleHandler(&idle);
  handler_.Post(Record("a"));

  env_.RunUntilIdle();

  EXPECT_EQ(idle.calls(), 0);
}

TEST(IdleHandlerTest, Name_ByDefault_IsTheDemangledDynamicType) {
  CountingIdleHandler idle(/*keep=*/true);
  EXPECT_EQ(idle.Name(), "matrix::(anonymous namespace)::CountingIdleHandler");
}

// ---- Quitting ----

class QuitTest : public ::testing::Test {
 protected:
  QuitTest() : env_(QuittableLooper()), handler_(env_.looper()) {}
  Task Record(std::string name) {
    return [this, name = std::move(name)] { ran_.push_back(name); };
  }

  TestEnvironment env_;
  Handler handler_;
  std::vector<std::string> ran_;
};

TEST_F(QuitTest, Quit_WithPendingMessages_DropsThemAllAndLoopReturns) {
  handler_.Post(Record("a"));
  handler_.Post([this] {
    ran_.push_back("quit");
    env_.looper()->Quit();
  });
  handler_.Post(Record("due after quit"));
  handler_.PostDelayed(Record("future"), absl::Seconds(1));

  Looper::Loop();  // Returns once the queue quits.

  EXPECT_THAT(ran_, ElementsAre("a", "quit"));
  EXPECT_TRUE(env_.looper()->queue()->IsQuitting());
  EXPECT_EQ(env_.looper()->queue()->PendingCount(), 0u);
}

TEST_F(QuitTest, QuitSafely_WithDueAndFutureMessages_RunsDueOnesAndDropsFutureOnes) {
  handler_.Post(Record("a"));
  handler_.PostDelayed(Record("future"), absl::Milliseconds(1));
  handler_.Post([this] {
    ran_.push_back("quit safely");
    env_.looper()->QuitSafely();
  });
  handler_.Post(Record("due 1"));
  handler_.Post(Record("due 2"));

  Looper::Loop();

  EXPECT_THAT(ran_, ElementsAre("a", "quit safely", "due 1", "due 2"));
  EXPECT_EQ(env_.looper()->queue()->PendingCount(), 0u);
}

TEST_F(QuitTest, Quit_WithSyncBarrierPending_DropsTheBarrierToo) {
  env_.looper()->queue()->PostSyncBarrier();
  handler_.Post(Record("held"));

  env_.looper()->Quit();

  EXPECT_EQ(env_.looper()->queue()->PendingCount(), 0u);
  EXPECT_EQ(env_.looper()->PollOnce(absl::ZeroDuration()), Looper::PollResult::kQuit);
}

TEST_F(QuitTest, Post_AfterQuit_FailsAndNeverRuns) {
  env_.looper()->QuitSafely();

  EXPECT_FALSE(handler_.Post(Record("post")));
  EXPECT_FALSE(handler_.PostDelayed(Record("delayed"), absl::Milliseconds(1)));
  EXPECT_FALSE(handler_.PostAtFrontOfQueue(Record("front")));
  EXPECT_FALSE(handler_.SendEmptyMessage(1));
  env_.FastForwardBy(absl::Seconds(1));

  EXPECT_THAT(ran_, IsEmpty());
  EXPECT_EQ(env_.looper()->PollOnce(absl::ZeroDuration()), Looper::PollResult::kQuit);
}

// A task whose captured state touches the queue when destroyed, as a task
// owning a Handler (whose destructor removes its messages) does.
class PostsWhenDestroyed {
 public:
  PostsWhenDestroyed(Handler* handler, bool* destroyed) : handler_(handler), destroyed_(destroyed) {}
  ~PostsWhenDestroyed() {
    handler_->RemoveCallbacksAndMessages(nullptr);
    handler_->Post([] {});
    *destroyed_ = true;
  }

 private:
  Handler* handler_;
  bool* destroyed_;
};

TEST_F(QuitTest, Quit_WhenDroppedTaskTouchesQueueInDestructor_DoesNotDeadlock) {
  Handler other(env_.looper());
  bool destroyed = false;
  handler_.PostDelayed([p = std::make_unique<PostsWhenDestroyed>(&other, &destroyed)] {},
                       absl::Seconds(1));

  env_.looper()->Quit();

  EXPECT_TRUE(destroyed);
}

TEST_F(MessageQueueTest, RemoveCallbacks_WhenRemovedTaskTouchesQueueInDestructor_DoesNotDeadlock) {
  Handler other(env_.looper());
  bool destroyed = false;
  int token = 0;
  handler_.PostDelayed([p = std::make_unique<PostsWhenDestroyed>(&other, &destroyed)] {}, &token,
                       absl::Seconds(1));

  handler_.RemoveCallbacks(&token);

  EXPECT_TRUE(destroyed);
  EXPECT_FALSE(handler_.HasCallbacks(&token));
}

// ---- Fatal errors ----

using MessageQueueDeathTest = MessageQueueTest;

TEST_F(MessageQueueDeathTest, RemoveSyncBarrier_WithUnknownToken_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int token = queue()->PostSyncBarrier();
  EXPECT_DEATH(queue()->RemoveSyncBarrier(token + 1000), "barrier token has not been posted");
}

TEST_F(MessageQueueDeathTest, RemoveSyncBarrier_Twice_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int token = queue()->PostSyncBarrier();
  queue()->RemoveSyncBarrier(token);
  EXPECT_DEATH(queue()->RemoveSyncBarrier(token), "barrier token has not been posted");
}

TEST_F(MessageQueueDeathTest, RemoveSyncBarrier_WithTokenZeroAndOrdinaryMessages_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Ordinary messages carry barrier token 0; that must not make 0 a barrier.
  handler_.Post(Record("ordinary"));
  EXPECT_DEATH(queue()->RemoveSyncBarrier(0), "barrier token has not been posted");
}

TEST(MainLooperDeathTest, Quit_OnMainLooper_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestEnvironment env(NoChoreographer());
  ASSERT_TRUE(env.looper()->is_main());
  EXPECT_DEATH(env.looper()->Quit(), "Main thread not allowed to quit");
  EXPECT_DEATH(env.looper()->QuitSafely(), "Main thread not allowed to quit");
}

}  // namespace
}  // namespace matrix
