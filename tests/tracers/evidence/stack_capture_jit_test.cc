// Stack capture through code without unwind info (docs/stacks.md, "JIT
// frames"): a hand-assembled "JIT" function in an anonymous executable page
// (no ELF module, no FDE) keeps a frame-pointer frame and calls back into
// C++. The unwinder stops at it; the capture continues by frame pointers to
// the C++ caller below it. This binary is built with -fno-omit-frame-pointer
// (tests/CMakeLists.txt) so the caller keeps the chain, as node's code does.
// x86-64 only.

#include "matrix/trace/stack_capture.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "matrix/core/thread_handle.h"

namespace jit_capture_test {

using Callback = void (*)(void*);
using JitEntry = void (*)(Callback, void*);

std::atomic<bool> g_started{false};
std::atomic<bool> g_stop{false};
matrix::RawStack g_self_stack;

__attribute__((noinline)) void SpinCallback(void*) {
  g_started.store(true);
  while (!g_stop.load(std::memory_order_relaxed)) asm volatile("" ::: "memory");
}

__attribute__((noinline)) void SelfCaptureCallback(void*) {
  matrix::StackCapturer::CaptureCurrentThread(&g_self_stack);
  asm volatile("" ::: "memory");
}

// The frame below the JIT frame: calls it, with a frame pointer of its own.
__attribute__((noinline)) void CallerOfJitCode(JitEntry jit, Callback callback) {
  jit(callback, nullptr);
  asm volatile("" ::: "memory");  // Not a tail call.
}

}  // namespace jit_capture_test

namespace matrix {
namespace {

using jit_capture_test::CallerOfJitCode;

#if defined(__x86_64__)

// push rbp; mov rbp, rsp; mov rax, rdi; mov rdi, rsi; call rax; pop rbp; ret
constexpr unsigned char kJitCode[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48,
                                      0x89, 0xf7, 0xff, 0xd0, 0x5d, 0xc3};

class JitCode {
 public:
  JitCode() {
    page_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page_ == MAP_FAILED) return;
    std::memcpy(page_, kJitCode, sizeof(kJitCode));
    if (mprotect(page_, 4096, PROT_READ | PROT_EXEC) != 0) {
      munmap(page_, 4096);
      page_ = MAP_FAILED;
    }
  }
  ~JitCode() {
    if (page_ != MAP_FAILED) munmap(page_, 4096);
  }
  bool ok() const { return page_ != MAP_FAILED; }
  uintptr_t begin() const { return reinterpret_cast<uintptr_t>(page_); }
  uintptr_t end() const { return begin() + sizeof(kJitCode); }
  jit_capture_test::JitEntry entry() const {
    return reinterpret_cast<jit_capture_test::JitEntry>(page_);
  }

 private:
  void* page_ = MAP_FAILED;
};

// Index of the first frame in [begin, end), -1 if none.
int FindFrameIn(const SymbolizedStack& stack, uintptr_t begin, uintptr_t end) {
  for (size_t i = 0; i < stack.frames.size(); ++i) {
    if (stack.frames[i].pc > begin && stack.frames[i].pc <= end) return static_cast<int>(i);
  }
  return -1;
}

std::string Describe(const SymbolizedStack& stack) { return stack.ToString(); }

TEST(StackCaptureJitTest, SignalCapture_ContinuesByFramePointersBelowCodeWithoutUnwindInfo) {
  JitCode jit;
  ASSERT_TRUE(jit.ok());
  jit_capture_test::g_started = false;
  jit_capture_test::g_stop = false;
  std::atomic<pid_t> tid{0};
  std::thread thread([&] {
    tid = ThreadHandle::Current().tid();
    CallerOfJitCode(jit.entry(), &jit_capture_test::SpinCallback);
  });
  while (!jit_capture_test::g_started.load()) std::this_thread::yield();
  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(tid.load(), &raw);
  // Wall time of a capture through the JIT frame (median of 50).
  std::vector<int64_t> times_us;
  for (int i = 0; i < 50 && status.ok(); ++i) {
    RawStack again;
    const auto started = std::chrono::steady_clock::now();
    if (!StackCapturer::Get()->Capture(tid.load(), &again).ok()) break;
    times_us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count());
  }
  std::sort(times_us.begin(), times_us.end());
  const int64_t median_us = times_us.empty() ? -1 : times_us[times_us.size() / 2];
  jit_capture_test::g_stop = true;
  thread.join();
  ASSERT_TRUE(status.ok()) << status;
  SymbolizedStack stack = SymbolizeStack(raw);
  const int jit_frame = FindFrameIn(stack, jit.begin(), jit.end());
  ASSERT_GE(jit_frame, 1) << Describe(stack);
  // The spinning callback is above the JIT frame (innermost, or under a call
  // it makes that an -O0 build does not inline: std::atomic's load).
  bool in_callback = false;
  for (int i = 0; i < jit_frame; ++i) {
    in_callback |= absl::StrContains(stack.frames[static_cast<size_t>(i)].symbol.function,
                                     "SpinCallback");
  }
  EXPECT_TRUE(in_callback) << Describe(stack);
  // Without the frame-pointer walk the stack ended at the JIT frame.
  ASSERT_LT(jit_frame + 1, static_cast<int>(stack.frames.size())) << Describe(stack);
  EXPECT_TRUE(absl::StrContains(stack.frames[jit_frame + 1].symbol.function, "CallerOfJitCode"))
      << Describe(stack);
  std::printf("capture median %lld us, %d frames (%d below the JIT frame)\n%s",
              static_cast<long long>(median_us), raw.depth, raw.depth - jit_frame - 1,
              Describe(stack).c_str());
}

TEST(StackCaptureJitTest, SelfCapture_ContinuesByFramePointersBelowCodeWithoutUnwindInfo) {
  JitCode jit;
  ASSERT_TRUE(jit.ok());
  CallerOfJitCode(jit.entry(), &jit_capture_test::SelfCaptureCallback);
  SymbolizedStack stack = SymbolizeStack(jit_capture_test::g_self_stack);
  const int jit_frame = FindFrameIn(stack, jit.begin(), jit.end());
  ASSERT_GE(jit_frame, 1) << Describe(stack);
  ASSERT_LT(jit_frame + 1, static_cast<int>(stack.frames.size())) << Describe(stack);
  EXPECT_TRUE(absl::StrContains(stack.frames[jit_frame + 1].symbol.function, "CallerOfJitCode"))
      << Describe(stack);
}

#else
TEST(StackCaptureJitTest, X86_64Only) { GTEST_SKIP() << "hand-assembled x86-64 code"; }
#endif

}  // namespace
}  // namespace matrix
