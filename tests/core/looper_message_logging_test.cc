// Tests for Looper::SetMessageLogging(): the Printer receives Android's exact
// ">>>>> Dispatching to" / "<<<<< Finished to" lines around every dispatch,
// which BlockCanary-style monitors parse.

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/location.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class RecordingPrinter : public Printer {
 public:
  explicit RecordingPrinter(std::vector<std::string>* lines) : lines_(lines) {}
  void Println(std::string_view line) override { lines_->emplace_back(line); }

 private:
  std::vector<std::string>* lines_;
};

TestEnvironment::Options NoChoreographer() {
  TestEnvironment::Options options;
  options.choreographer = false;
  return options;
}

class MessageLoggingTest : public ::testing::Test {
 protected:
  MessageLoggingTest() : env_(NoChoreographer()), printer_(&lines_) {
    env_.looper()->SetMessageLogging(&printer_);
  }
  ~MessageLoggingTest() override { env_.looper()->SetMessageLogging(nullptr); }

  TestEnvironment env_;
  std::vector<std::string> lines_;
  RecordingPrinter printer_;
};

TEST_F(MessageLoggingTest, Dispatch_OfWhatMessage_PrintsNullCallbackAndWhat) {
  Handler handler(env_.looper(), "com.example.UiHandler");
  handler.SendEmptyMessage(42);

  env_.RunUntilIdle();

  const std::string target =
      absl::StrFormat("Handler (com.example.UiHandler) {%x}", reinterpret_cast<uintptr_t>(&handler));
  EXPECT_EQ(handler.ToString(), target);
  EXPECT_THAT(lines_, ElementsAre(">>>>> Dispatching to " + target + " null: 42",
                                  "<<<<< Finished to " + target + " null"));
}

TEST_F(MessageLoggingTest, Dispatch_OfTaskWithExplicitLocation_PrintsLocationAndWhatZero) {
  Handler handler(env_.looper());
  const Location from("Refresh", "/src/app/view.cc", 87);
  handler.Post([] {}, from);

  env_.RunUntilIdle();

  const std::string target = handler.ToString();
  EXPECT_EQ(target, absl::StrFormat("Handler (matrix::Handler) {%x}",
                                    reinterpret_cast<uintptr_t>(&handler)));
  EXPECT_THAT(lines_, ElementsAre(">>>>> Dispatching to " + target + " Refresh@view.cc:87: 0",
                                  "<<<<< Finished to " + target + " Refresh@view.cc:87"));
}

TEST_F(MessageLoggingTest, Dispatch_OfTaskWithDefaultLocation_PrintsTheCallersPostSite) {
  Handler handler(env_.looper());
  const int line = __LINE__ + 1;
  handler.PostDelayed([] {}, absl::Milliseconds(1));

  env_.FastForwardBy(absl::Milliseconds(1));

  const std::string callback =
      absl::StrCat("TestBody@looper_message_logging_test.cc:", line);
  EXPECT_THAT(lines_,
              ElementsAre(">>>>> Dispatching to " + handler.ToString() + " " + callback + ": 0",
                          "<<<<< Finished to " + handler.ToString() + " " + callback));
}

TEST_F(MessageLoggingTest, Dispatch_OfTask_PrintsBeforeAndAfterTheTaskRuns) {
  Handler handler(env_.looper(), "h");
  handler.Post([this] { lines_.push_back("task"); });
  handler.SendEmptyMessage(3);

  env_.RunUntilIdle();

  ASSERT_EQ(lines_.size(), 5u);
  EXPECT_THAT(lines_[0], ::testing::StartsWith(">>>>> Dispatching to Handler (h) {"));
  EXPECT_EQ(lines_[1], "task");
  EXPECT_THAT(lines_[2], ::testing::StartsWith("<<<<< Finished to Handler (h) {"));
  EXPECT_THAT(lines_[3], ::testing::EndsWith("} null: 3"));
  EXPECT_THAT(lines_[4], ::testing::EndsWith("} null"));
}

TEST_F(MessageLoggingTest, Dispatch_WhenHandlerThrows_StillPrintsFinished) {
  Handler handler(env_.looper(), "thrower");
  handler.SendEmptyMessage(1);
  handler.Post([] { throw std::runtime_error("boom"); }, Location("Boom", "boom.cc", 1));

  EXPECT_THROW(env_.RunUntilIdle(), std::runtime_error);

  const std::string target = handler.ToString();
  EXPECT_THAT(lines_, ElementsAre(">>>>> Dispatching to " + target + " null: 1",
                                  "<<<<< Finished to " + target + " null",
                                  ">>>>> Dispatching to " + target + " Boom@boom.cc:1: 0",
                                  "<<<<< Finished to " + target + " Boom@boom.cc:1"));
}

TEST_F(MessageLoggingTest, SetMessageLogging_WithNull_StopsPrinting) {
  Handler handler(env_.looper());
  env_.looper()->SetMessageLogging(nullptr);
  EXPECT_EQ(env_.looper()->GetMessageLogging(), nullptr);
  handler.SendEmptyMessage(1);

  env_.RunUntilIdle();

  EXPECT_THAT(lines_, IsEmpty());
}

TEST_F(MessageLoggingTest, SetMessageLogging_WithAnotherPrinter_ReplacesTheFirst) {
  std::vector<std::string> second_lines;
  RecordingPrinter second(&second_lines);
  Handler handler(env_.looper());
  env_.looper()->SetMessageLogging(&second);
  EXPECT_EQ(env_.looper()->GetMessageLogging(), &second);
  handler.SendEmptyMessage(1);

  env_.RunUntilIdle();

  EXPECT_THAT(lines_, IsEmpty());
  EXPECT_EQ(second_lines.size(), 2u);
}

TEST_F(MessageLoggingTest, SetMessageLogging_DuringDispatch_TakesEffectFromTheNextOne) {
  std::vector<std::string> second_lines;
  RecordingPrinter second(&second_lines);
  Handler handler(env_.looper(), "h");
  handler.Post([&] { env_.looper()->SetMessageLogging(&second); });
  handler.SendEmptyMessage(9);

  env_.RunUntilIdle();

  // The first dispatch finishes on the printer it began with.
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_THAT(lines_[1], ::testing::StartsWith("<<<<< Finished to"));
  ASSERT_EQ(second_lines.size(), 2u);
  EXPECT_THAT(second_lines[0], ::testing::EndsWith("null: 9"));
}

TEST(LocationTest, ToString_WithoutSourceInfo_IsUnknown) {
  EXPECT_EQ(Location().ToString(), "unknown");
  EXPECT_EQ(Location("F", "no_directory.cc", 5).ToString(), "F@no_directory.cc:5");
}

}  // namespace
}  // namespace matrix
