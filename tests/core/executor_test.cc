// Tests for LooperExecutor (FIFO on the looper, never inline) and
// InlineExecutor (runs before Execute() returns, on the caller's thread).
// The real-thread counterpart is in handler_thread_real_test.cc.

#include "matrix/core/executor.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(LooperExecutorTest, Execute_FromAnyPoint_RunsTasksOnTheLooperInFifoOrder) {
  TestEnvironment env;
  Looper* worker = env.CreateBackgroundLooper("worker");
  LooperExecutor executor(worker);
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    executor.Execute([&order, i] { order.push_back(i); });
  }
  EXPECT_EQ(executor.looper(), worker);
  EXPECT_THAT(order, IsEmpty());  // Posted, not run inline.

  env.RunUntilIdle();

  EXPECT_THAT(order, ElementsAre(0, 1, 2, 3, 4));
}

TEST(LooperExecutorTest, Execute_FromATaskItRuns_QueuesBehindPendingTasks) {
  TestEnvironment env;
  LooperExecutor executor(env.looper());
  std::vector<std::string> order;
  executor.Execute([&] {
    order.push_back("first");
    executor.Execute([&] { order.push_back("nested"); });
  });
  executor.Execute([&] { order.push_back("second"); });

  env.RunUntilIdle();

  EXPECT_THAT(order, ElementsAre("first", "second", "nested"));
}

TEST(LooperExecutorTest, Destructor_WithPendingTasks_DropsThem) {
  TestEnvironment env;
  bool ran = false;
  {
    LooperExecutor executor(env.looper());
    executor.Execute([&] { ran = true; });
  }

  env.RunUntilIdle();

  EXPECT_FALSE(ran);
  EXPECT_EQ(env.PendingMessageCount(), 0u);
}

TEST(InlineExecutorTest, Execute_RunsBeforeReturningOnTheCallingThread) {
  std::vector<int> order;
  std::thread::id ran_on;
  InlineExecutor::Get()->Execute([&] {
    order.push_back(1);
    ran_on = std::this_thread::get_id();
  });
  order.push_back(2);

  EXPECT_THAT(order, ElementsAre(1, 2));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(InlineExecutorTest, Get_ReturnsOneProcessWideInstance) {
  EXPECT_EQ(InlineExecutor::Get(), InlineExecutor::Get());
  InlineExecutor local;
  int runs = 0;
  Executor* executor = &local;  // Usable through the interface.
  executor->Execute([&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace matrix
