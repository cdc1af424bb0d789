// Stack capture without helper threads: the calling thread's own stack,
// symbolization of synthetic stacks, text rendering and argument checks.
// Threads and signals are covered in stack_capture_real_test.cc.

#include "matrix/trace/stack_capture.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stack_capture_test {

__attribute__((noinline)) void Inner(matrix::RawStack* out, int skip) {
  matrix::StackCapturer::CaptureCurrentThread(out, skip);
  asm volatile("" ::: "memory");  // Keep the frame: no tail call.
}

__attribute__((noinline)) void Outer(matrix::RawStack* out, int skip) {
  Inner(out, skip);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) int Leaf(int x) { return x * 7 + 3; }

}  // namespace stack_capture_test

namespace matrix {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(CaptureCurrentThreadTest, StartsAtTheCaller) {
  RawStack raw;
  stack_capture_test::Outer(&raw, 0);
  SymbolizedStack stack = SymbolizeStack(raw);
  ASSERT_GE(stack.frames.size(), 3u) << stack.ToString();
  EXPECT_EQ(stack.frames[0].symbol.function, "stack_capture_test::Inner(matrix::RawStack*, int)");
  EXPECT_EQ(stack.frames[1].symbol.function, "stack_capture_test::Outer(matrix::RawStack*, int)");
  EXPECT_THAT(stack.frames[2].symbol.function, HasSubstr("StartsAtTheCaller"));
  EXPECT_EQ(raw.tid, ThreadHandle::Current().tid());
  EXPECT_FALSE(raw.exact_top_pc);
  EXPECT_FALSE(raw.truncated);
}

TEST(CaptureCurrentThreadTest, SkipFramesDropsCallers) {
  RawStack raw;
  stack_capture_test::Outer(&raw, 1);
  SymbolizedStack stack = SymbolizeStack(raw);
  ASSERT_FALSE(stack.frames.empty());
  EXPECT_EQ(stack.frames[0].symbol.function, "stack_capture_test::Outer(matrix::RawStack*, int)");
}

TEST(SymbolizeStackTest, ReturnAddressesNameTheCallAndKeepTheirOffsets) {
  auto leaf = reinterpret_cast<uintptr_t>(&stack_capture_test::Leaf);
  RawStack raw;
  raw.tid = 42;
  raw.depth = 2;
  raw.exact_top_pc = true;
  raw.pcs[0] = leaf + 4;  // Exact: looked up as is.
  raw.pcs[1] = leaf + 1;  // A return address: looked up at pc - 1 (the start).
  SymbolizedStack stack = SymbolizeStack(raw);
  ASSERT_EQ(stack.frames.size(), 2u);
  EXPECT_EQ(stack.tid, 42);
  EXPECT_EQ(stack.frames[0].pc, leaf + 4);
  EXPECT_EQ(stack.frames[0].symbol.function, "stack_capture_test::Leaf(int)");
  EXPECT_EQ(stack.frames[0].symbol.function_offset, 4u);
  EXPECT_EQ(stack.frames[1].symbol.function, "stack_capture_test::Leaf(int)");
  EXPECT_EQ(stack.frames[1].symbol.function_offset, 1u);
  EXPECT_EQ(stack.frames[1].symbol.module_offset, stack.frames[0].symbol.module_offset - 3);
}

TEST(SymbolizedStackTest, ToString_OneFramePerLineThenItsSourceLine) {
  auto leaf = reinterpret_cast<uintptr_t>(&stack_capture_test::Leaf);
  RawStack raw;
  raw.depth = 2;
  raw.exact_top_pc = true;
  raw.pcs[0] = leaf + 2;
  raw.pcs[1] = 0x10;  // Unmapped.
  std::string text = SymbolizeStack(raw).ToString();
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  // The test binary has debug info: Leaf's frame has its source line.
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_THAT(lines[0], StartsWith("#0  0x"));
  EXPECT_THAT(lines[0], HasSubstr(" stack_capture_test::Leaf(int)+0x2 ("));
  EXPECT_THAT(lines[1], StartsWith("      at /"));
  EXPECT_THAT(lines[1], HasSubstr("/tests/tracers/evidence/stack_capture_test.cc:"));
  EXPECT_EQ(lines[2], "#1  0x0000000000000010 ???");

  raw.truncated = true;
  EXPECT_THAT(SymbolizeStack(raw).ToString(), HasSubstr("... (truncated)"));
}

TEST(FormatThreadStacksTest, HeaderPerThreadAndFailures) {
  std::vector<ThreadStack> threads(2);
  threads[0].tid = 100;
  threads[0].name = "main";
  threads[0].state = 'S';
  stack_capture_test::Outer(&threads[0].stack, 0);
  threads[1].tid = 101;
  threads[1].name = "io worker";
  threads[1].state = 'D';
  threads[1].status = absl::DeadlineExceededError("thread 101 did not answer");
  std::string dump = FormatThreadStacks(threads);
  EXPECT_THAT(dump, HasSubstr("\"main\" tid=100 state=S (sleeping)\n#0  0x"));
  EXPECT_THAT(dump, HasSubstr("stack_capture_test::Inner(matrix::RawStack*, int)"));
  EXPECT_THAT(dump, HasSubstr("\n\n\"io worker\" tid=101 state=D (uninterruptible (disk) sleep)\n"
                              "    <no stack: DEADLINE_EXCEEDED: thread 101 did not answer>\n"));
}

TEST(StackCapturerTest, RejectsNonRealtimeSignalsAndBadTargets) {
  EXPECT_TRUE(absl::IsInvalidArgument(StackCapturer::Get()->Install(SIGUSR1)));
  EXPECT_TRUE(absl::IsInvalidArgument(StackCapturer::Get()->Install(SIGRTMAX + 1)));
  RawStack raw;
  raw.depth = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(StackCapturer::Get()->Capture(ThreadHandle(), &raw)));
  EXPECT_EQ(raw.depth, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(StackCapturer::Get()->Capture(pid_t{0}, &raw)));
}

TEST(StackCapturerTest, InstallIsIdempotentForTheSameSignal) {
  StackCapturer* capturer = StackCapturer::Get();
  ASSERT_TRUE(capturer->Install().ok());
  EXPECT_EQ(capturer->signal_number(), StackCapturer::DefaultSignal());
  EXPECT_TRUE(capturer->Install(StackCapturer::DefaultSignal()).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(capturer->Install(StackCapturer::DefaultSignal() + 1)));
  struct sigaction action;
  ASSERT_EQ(sigaction(capturer->signal_number(), nullptr, &action), 0);
  EXPECT_NE(action.sa_flags & SA_SIGINFO, 0);
  EXPECT_NE(action.sa_flags & SA_ONSTACK, 0);
  EXPECT_NE(action.sa_flags & SA_RESTART, 0);
}

}  // namespace
}  // namespace matrix
