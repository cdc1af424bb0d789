// Tests for Handler: posting tasks and messages (now, delayed, at a time, at
// the front), dispatch to HandleMessage()/Callback, removal and queries by
// what/token, asynchronous handlers, and cleanup on destruction.

#include "matrix/core/handler.h"

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/looper.h"
#include "matrix/core/message.h"
#include "matrix/testing/test_environment.h"

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int kWhatA = 1;
constexpr int kWhatB = 2;

TestEnvironment::Options NoChoreographer() {
  TestEnvironment::Options options;
  options.choreographer = false;
  return options;
}

// Records every message it handles as "what/arg1/arg2".
class RecordingHandler : public Handler {
 public:
  explicit RecordingHandler(Looper* looper, Callback* callback = nullptr)
      : Handler(looper, callback) {}
  void HandleMessage(Message& msg) override {
    handled.push_back(std::to_string(msg.what) + "/" + std::to_string(msg.arg1) + "/" +
                      std::to_string(msg.arg2));
    if (msg.obj.has_value()) objects.push_back(std::any_cast<std::string>(msg.obj));
  }
  std::vector<std::string> handled;
  std::vector<std::string> objects;
};

class HandlerTest : public ::testing::Test {
 protected:
  HandlerTest() : env_(NoChoreographer()), handler_(env_.looper()) {}
  Task Record(std::string name) {
    return [this, name = std::move(name)] { ran_.push_back(name); };
  }

  TestEnvironment env_;
  RecordingHandler handler_;
  std::vector<std::string> ran_;
};

TEST_F(HandlerTest, Post_FromTheLooperThread_RunsOnlyWhenTheLoopRuns) {
  EXPECT_TRUE(handler_.Post(Record("task")));
  EXPECT_THAT(ran_, IsEmpty());

  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("task"));
}

TEST_F(HandlerTest, PostDelayed_BeforeTheDelay_DoesNotRun) {
  const TimeTicks t0 = env_.Now();
  TimeTicks ran_at;
  handler_.PostDelayed([&] { ran_at = env_.Now(); }, absl::Milliseconds(40));

  env_.FastForwardBy(absl::Milliseconds(39));
  EXPECT_TRUE(ran_at.is_null());
  env_.FastForwardBy(absl::Milliseconds(1));

  EXPECT_EQ(ran_at, t0 + absl::Milliseconds(40));
}

TEST_F(HandlerTest, PostDelayed_WithNegativeDelay_RunsNowInPostOrder) {
  handler_.Post(Record("first"));
  handler_.PostDelayed(Record("negative"), absl::Milliseconds(-5));

  env_.RunUntilIdle();

  EXPECT_THAT(ran_, ElementsAre("first", "negative"));
}

TEST_F(HandlerTest, PostAtTime_InThePast_RunsAheadOfLaterDueMessages) {
  const TimeTicks t0 = env_.Now();
  handler_.Post(Record("now"));
  handler_.PostAtTime(Record("past"), t0 - absl::Milliseconds(1));
  handler_.PostAtTime(Record("at +3ms"), t0 + absl::Milliseconds(3));

  env_.FastForwardBy(absl::Milliseconds(3));

  EXPECT_THAT(ran_, ElementsAre("past", "now", "at +3ms"));
}

TEST_F(HandlerTest, PostAtFrontOfQueue_WithDelayedAndDueWork_RunsFirst) {
  handler_.PostDelayed(Record("delayed"), absl::Milliseconds(1));
  handler_.Post(Record("due"));
  handler_.PostAtFrontOfQueue(Record("front"));

  env_.FastForwardBy(absl::Milliseconds(1));

  EXPECT_THAT(ran_, ElementsAre("front", "due", "delayed"));
}

TEST_F(HandlerTest, SendMessage_WithFields_DeliversThemToHandleMessage) {
  Message msg(kWhatA);
  msg.arg1 = 11;
  msg.arg2 = -3;
  msg.obj = std::string("payload");
  handler_.SendMessage(std::move(msg));
  handler_.SendEmptyMessageDelayed(kWhatB, absl::Milliseconds(2));
  handler_.SendEmptyMessageAtTime(kWhatA, env_.Now() + absl::Milliseconds(1));
  handler_.SendEmptyMessage(kWhatB);

  env_.FastForwardBy(absl::Milliseconds(2));

  EXPECT_THAT(handler_.handled, ElementsAre("1/11/-3", "2/0/0", "1/0/0", "2/0/0"));
  EXPECT_THAT(handler_.objects, ElementsAre("payload"));
}

TEST_F(HandlerTest, SendMessageAtFrontOfQueue_WithPendingMessages_IsHandledFirst) {
  handler_.SendEmptyMessage(kWhatA);
  handler_.SendMessageAtFrontOfQueue(Message(kWhatB));

  env_.RunUntilIdle();

  EXPECT_THAT(handler_.handled, ElementsAre("2/0/0", "1/0/0"));
}

class InterceptWhatA : public Handler::Callback {
 public:
  bool HandleMessage(Message& msg) override {
    seen.push_back(msg.what);
    return msg.what == kWhatA;
  }
  std::vector<int> seen;
};

TEST_F(HandlerTest, DispatchMessage_WithCallback_SkipsHandleMessageOnlyWhenCallbackHandles) {
  InterceptWhatA callback;
  RecordingHandler handler(env_.looper(), &callback);
  handler.SendEmptyMessage(kWhatA);
  handler.SendEmptyMessage(kWhatB);
  handler.Post(Record("task"));  // Tasks bypass both.

  env_.RunUntilIdle();

  EXPECT_THAT(callback.seen, ElementsAre(kWhatA, kWhatB));
  EXPECT_THAT(handler.handled, ElementsAre("2/0/0"));
  EXPECT_THAT(ran_, ElementsAre("task"));
}

TEST_F(HandlerTest, RemoveMessages_ByWhat_RemovesOnlyThatWhatOfThisHandler) {
  RecordingHandler other(env_.looper());
  handler_.SendEmptyMessage(kWhatA);
  handler_.SendEmptyMessageDelayed(kWhatA, absl::Seconds(1));
  handler_.SendEmptyMessage(kWhatB);
  other.SendEmptyMessage(kWhatA);
  Message task_with_what_a(kWhatA);  // A task message is not a `what` message.
  task_with_what_a.callback = Record("task");
  handler_.SendMessage(std::move(task_with_what_a));

  handler_.RemoveMessages(kWhatA);

  EXPECT_FALSE(handler_.HasMessages(kWhatA));
  EXPECT_TRUE(handler_.HasMessages(kWhatB));
  EXPECT_TRUE(other.HasMessages(kWhatA));
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(handler_.handled, ElementsAre("2/0/0"));
  EXPECT_THAT(other.handled, ElementsAre("1/0/0"));
  EXPECT_THAT(ran_, ElementsAre("task"));
}

TEST_F(HandlerTest, RemoveMessages_ByWhatAndToken_RemovesOnlyMatchingToken) {
  int token_x = 0;
  int token_y = 0;
  Message x(kWhatA);
  x.token = &token_x;
  x.arg1 = 1;
  Message y(kWhatA);
  y.token = &token_y;
  y.arg1 = 2;
  handler_.SendMessage(std::move(x));
  handler_.SendMessage(std::move(y));
  EXPECT_TRUE(handler_.HasMessages(kWhatA, &token_x));
  EXPECT_TRUE(handler_.HasMessages(kWhatA, &token_y));

  handler_.RemoveMessages(kWhatA, &token_x);

  EXPECT_FALSE(handler_.HasMessages(kWhatA, &token_x));
  EXPECT_TRUE(handler_.HasMessages(kWhatA, &token_y));
  EXPECT_TRUE(handler_.HasMessages(kWhatA));  // A null token matches any.
  env_.RunUntilIdle();
  EXPECT_THAT(handler_.handled, ElementsAre("1/2/0"));
}

TEST_F(HandlerTest, RemoveCallbacks_ByToken_RemovesOnlyTasksWithThatToken) {
  int token = 0;
  int other_token = 0;
  handler_.PostDelayed(Record("tagged"), &token, absl::Milliseconds(5));
  handler_.PostAtTime(Record("tagged at time"), &token, env_.Now());
  handler_.PostDelayed(Record("other tag"), &other_token, absl::Milliseconds(5));
  handler_.Post(Record("untagged"));
  Message what_message(kWhatA);
  what_message.token = &token;  // Not a callback: RemoveCallbacks keeps it.
  handler_.SendMessage(std::move(what_message));
  ASSERT_TRUE(handler_.HasCallbacks(&token));

  handler_.RemoveCallbacks(&token);

  EXPECT_FALSE(handler_.HasCallbacks(&token));
  EXPECT_TRUE(handler_.HasCallbacks(&other_token));
  EXPECT_TRUE(handler_.HasMessages(kWhatA, &token));
  env_.FastForwardBy(absl::Milliseconds(5));
  EXPECT_THAT(ran_, ElementsAre("untagged", "other tag"));
  EXPECT_THAT(handler_.handled, ElementsAre("1/0/0"));
}

TEST_F(HandlerTest, HasCallbacks_AfterTheTaskRan_IsFalse) {
  int token = 0;
  handler_.PostDelayed(Record("tagged"), &token, absl::Milliseconds(1));
  EXPECT_TRUE(handler_.HasCallbacks(&token));
  EXPECT_FALSE(handler_.HasMessages(0, &token));  // A task is not a `what` message.

  env_.FastForwardBy(absl::Milliseconds(1));

  EXPECT_FALSE(handler_.HasCallbacks(&token));
}

TEST_F(HandlerTest, RemoveCallbacksAndMessages_WithNullToken_EmptiesOnlyThisHandler) {
  RecordingHandler other(env_.looper());
  int token = 0;
  handler_.Post(Record("mine"));
  handler_.PostDelayed(Record("mine tagged"), &token, absl::Milliseconds(1));
  handler_.SendEmptyMessage(kWhatA);
  other.SendEmptyMessage(kWhatB);

  handler_.RemoveCallbacksAndMessages();

  EXPECT_FALSE(handler_.HasMessages(kWhatA));
  EXPECT_FALSE(handler_.HasCallbacks(&token));
  env_.FastForwardBy(absl::Milliseconds(1));
  EXPECT_THAT(ran_, IsEmpty());
  EXPECT_THAT(handler_.handled, IsEmpty());
  EXPECT_THAT(other.handled, ElementsAre("2/0/0"));
}

TEST_F(HandlerTest, RemoveCallbacksAndMessages_WithToken_RemovesTasksAndMessagesWithIt) {
  int token = 0;
  handler_.PostDelayed(Record("tagged task"), &token, absl::Milliseconds(1));
  Message tagged(kWhatA);
  tagged.token = &token;
  handler_.SendMessage(std::move(tagged));
  handler_.SendEmptyMessage(kWhatB);

  handler_.RemoveCallbacksAndMessages(&token);

  env_.FastForwardBy(absl::Milliseconds(1));
  EXPECT_THAT(ran_, IsEmpty());
  EXPECT_THAT(handler_.handled, ElementsAre("2/0/0"));
}

TEST_F(HandlerTest, Destructor_WithPendingMessages_RemovesOnlyItsOwn) {
  RecordingHandler survivor(env_.looper());
  survivor.SendEmptyMessage(kWhatA);
  {
    Handler doomed(env_.looper());
    doomed.Post(Record("doomed task"));
    doomed.PostDelayed(Record("doomed delayed"), absl::Milliseconds(1));
    EXPECT_EQ(env_.looper()->queue()->PendingCount(), 3u);
  }

  EXPECT_EQ(env_.looper()->queue()->PendingCount(), 1u);
  env_.FastForwardBy(absl::Milliseconds(1));
  EXPECT_THAT(ran_, IsEmpty());
  EXPECT_THAT(survivor.handled, ElementsAre("1/0/0"));
}

TEST_F(HandlerTest, AsyncHandler_BehindASyncBarrier_StillRuns) {
  Handler async(env_.looper(), "async", /*async=*/true);
  EXPECT_TRUE(async.is_asynchronous());
  env_.looper()->queue()->PostSyncBarrier();
  async.Post(Record("async post"));
  async.PostAtFrontOfQueue(Record("async front"));
  async.PostDelayed(Record("async delayed"), absl::Milliseconds(1));
  handler_.Post(Record("sync"));

  env_.FastForwardBy(absl::Milliseconds(1));

  EXPECT_THAT(ran_, ElementsAre("async front", "async post", "async delayed"));
}

TEST_F(HandlerTest, Message_WhenDispatched_CarriesTargetTimeAndPostSite) {
  const TimeTicks due = env_.Now() + absl::Milliseconds(3);
  Handler* target = nullptr;
  TimeTicks when;
  std::string post_site;
  class Inspector : public Handler {
   public:
    Inspector(Looper* looper, Handler** target, TimeTicks* when)
        : Handler(looper), target_(target), when_(when) {}
    void HandleMessage(Message& msg) override {
      *target_ = msg.target();
      *when_ = msg.when();
    }

   private:
    Handler** target_;
    TimeTicks* when_;
  } inspector(env_.looper(), &target, &when);
  inspector.SendEmptyMessageAtTime(kWhatA, due);
  const int line = __LINE__ + 1;
  handler_.Post([&] { post_site = "posted"; });
  {
    // The post site is recorded from the caller's line.
    auto head = env_.looper()->queue()->PeekHead();
    ASSERT_TRUE(head.has_value());
    EXPECT_THAT(head->description,
                ::testing::HasSubstr("handler_test.cc:" + std::to_string(line)));
  }

  env_.FastForwardBy(absl::Milliseconds(3));

  EXPECT_EQ(target, &inspector);
  EXPECT_EQ(when, due);
  EXPECT_EQ(post_site, "posted");
}

TEST(HandlerDeathTest, RemoveCallbacks_WithNullToken_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestEnvironment env(NoChoreographer());
  Handler handler(env.looper());
  EXPECT_DEATH(handler.RemoveCallbacks(nullptr), "needs the token");
}

TEST(HandlerDeathTest, Constructor_WithoutLooper_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Handler handler(nullptr), "A Handler needs a Looper");
}

TEST(HandlerNameTest, Name_IsInternedAndOutlivesTheHandler) {
  testing::TestEnvironment env;
  const std::string* name = nullptr;
  {
    Handler first(env.looper(), "app::NetHandler");
    Handler second(env.looper(), "app::NetHandler");
    EXPECT_EQ(&first.name(), &second.name());  // One copy per distinct name.
    EXPECT_EQ(first.ToString().find("Handler (app::NetHandler) {"), 0u);
    name = &first.name();
  }
  // Watchdog threads may keep the reference after the handler is gone.
  EXPECT_EQ(*name, "app::NetHandler");
  Handler unnamed(env.looper());
  EXPECT_EQ(unnamed.name(), "matrix::Handler");
}

}  // namespace
}  // namespace matrix
