// Stack capture through code without unwind info (docs/stacks.md, "JIT
// frames"): a hand-assembled "JIT" function in an anonymous executable page
// (no ELF module, no FDE) keeps a frame-pointer frame and calls back into
// C++. The unwinder stops at it; the capture continues by frame pointers to
// the C++ caller below it. This binary is built with -fno-omit-frame-pointer
// (tests/CMakeLists.txt) so the caller keeps the chain, as node's code does.
// x86-64 only.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "matrix/core/thread_handle.h"
#include "matrix/testing/sanitizers.h"
#include "matrix/trace/stack_capture.h"

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

// What the frameless "JIT" functions below spin on (their rdi): they set
// `spinning`, then wait for `stop`.
struct SpinFlags {
  std::atomic<uint8_t> stop{0};
  std::atomic<uint8_t> spinning{0};
};
static_assert(sizeof(SpinFlags) == 2, "the hand-assembled code reads bytes 0 and 1");
using SpinEntry = void (*)(SpinFlags*);

// Calls `jit` (through a register: an indirect call), with a frame pointer of
// its own.
__attribute__((noinline)) void CallerOfSpinningJitCode(SpinEntry jit, SpinFlags* flags) {
  jit(flags);
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

// A function without unwind info interrupted while it has no frame of its
// own (its rbp is still, or again, its caller's): at its first instruction,
// after push rbp, after its epilogue's leave or pop rbp (where V8's CEntry
// stub runs a few instructions on every call into the runtime). The capture
// must not skip its caller, whose return address is then on top of the
// stack. Each variant spins (setting flags->spinning, then waiting for
// flags->stop) at that point; "framed" spins with its frame set up.
struct FramelessCase {
  const char* name;
  std::vector<unsigned char> code;
};

// mov byte [rdi + 1], 1; 1: pause; cmp byte [rdi], 0; je 1b
std::vector<unsigned char> Spin() {
  return {0xc6, 0x47, 0x01, 0x01, 0xf3, 0x90, 0x80, 0x3f, 0x00, 0x74, 0xf9};
}

std::vector<unsigned char> Concat(std::initializer_list<std::vector<unsigned char>> parts) {
  std::vector<unsigned char> code;
  for (const auto& part : parts) code.insert(code.end(), part.begin(), part.end());
  return code;
}

std::vector<FramelessCase> FramelessCases() {
  const std::vector<unsigned char> push_rbp = {0x55}, mov_rbp_rsp = {0x48, 0x89, 0xe5},
                                   pop_rbp = {0x5d}, leave = {0xc9}, ret = {0xc3};
  return {
      {"before push rbp", Concat({Spin(), push_rbp, mov_rbp_rsp, pop_rbp, ret})},
      {"after push rbp", Concat({push_rbp, Spin(), mov_rbp_rsp, pop_rbp, ret})},
      {"after leave", Concat({push_rbp, mov_rbp_rsp, leave, Spin(), ret})},
      {"after pop rbp", Concat({push_rbp, mov_rbp_rsp, pop_rbp, Spin(), ret})},
      {"framed", Concat({push_rbp, mov_rbp_rsp, Spin(), pop_rbp, ret})},
  };
}

// One page of code: `function` at 0, then (at kStubOffset) a stub with a
// frame that calls it with call rel32, as JIT code calls another's:
// push rbp; mov rbp, rsp; call function; pop rbp; ret.
class SpinningJitCode {
 public:
  static constexpr size_t kStubOffset = 256;
  static constexpr size_t kStubSize = 10;

  explicit SpinningJitCode(const std::vector<unsigned char>& function) : size_(function.size()) {
    page_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page_ == MAP_FAILED || function.size() > kStubOffset) return;
    auto* bytes = static_cast<unsigned char*>(page_);
    std::memcpy(bytes, function.data(), function.size());
    const int32_t relative = -static_cast<int32_t>(kStubOffset + 9);  // From the call's end to 0.
    unsigned char stub[kStubSize] = {0x55, 0x48, 0x89, 0xe5, 0xe8, 0, 0, 0, 0, 0x5d};
    std::memcpy(stub + 5, &relative, sizeof(relative));
    std::memcpy(bytes + kStubOffset, stub, sizeof(stub));
    bytes[kStubOffset + kStubSize] = 0xc3;
    if (mprotect(page_, 4096, PROT_READ | PROT_EXEC) != 0) {
      munmap(page_, 4096);
      page_ = MAP_FAILED;
    }
  }
  ~SpinningJitCode() {
    if (page_ != MAP_FAILED) munmap(page_, 4096);
  }
  bool ok() const { return page_ != MAP_FAILED; }
  uintptr_t begin() const { return reinterpret_cast<uintptr_t>(page_); }
  uintptr_t end() const { return begin() + size_; }
  uintptr_t stub_begin() const { return begin() + kStubOffset; }
  uintptr_t stub_end() const { return stub_begin() + kStubSize + 1; }
  jit_capture_test::SpinEntry function() const {
    return reinterpret_cast<jit_capture_test::SpinEntry>(page_);
  }
  jit_capture_test::SpinEntry stub() const {
    return reinterpret_cast<jit_capture_test::SpinEntry>(stub_begin());
  }

 private:
  void* page_ = MAP_FAILED;
  size_t size_;
};

// Runs `entry` on a thread until it spins, captures that thread's stack by
// signal, and returns it symbolized.
SymbolizedStack CaptureSpinning(jit_capture_test::SpinEntry entry) {
  jit_capture_test::SpinFlags flags;
  std::atomic<pid_t> tid{0};
  std::thread thread([&] {
    tid = ThreadHandle::Current().tid();
    jit_capture_test::CallerOfSpinningJitCode(entry, &flags);
  });
  while (flags.spinning.load() == 0) std::this_thread::yield();
  RawStack raw;
  const absl::Status status = StackCapturer::Get()->Capture(tid.load(), &raw);
  flags.stop.store(1);
  thread.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(raw.exact_top_pc);
  return SymbolizeStack(raw);
}

TEST(StackCaptureJitTest, InterruptedWithoutItsOwnFrame_CallerCalledThroughARegisterIsKept) {
  if (MATRIX_TESTING_THREAD_SANITIZER) {
    // TSan delivers a signal when the thread next runs instrumented code; the
    // spinning JIT code never does, so the capture's signal waits forever.
    GTEST_SKIP() << "TSan defers signals while the thread runs uninstrumented code";
  }
  for (const FramelessCase& c : FramelessCases()) {
    SCOPED_TRACE(c.name);
    SpinningJitCode jit(c.code);
    ASSERT_TRUE(jit.ok());
    const SymbolizedStack stack = CaptureSpinning(jit.function());
    // The interrupted frame is the JIT function itself, the innermost one.
    const int jit_frame = FindFrameIn(stack, jit.begin() - 1, jit.end());
    ASSERT_EQ(jit_frame, 0) << Describe(stack);
    // Below it: its caller (skipped when the walk started from the caller's
    // rbp), then the thread's function.
    ASSERT_LT(jit_frame + 2, static_cast<int>(stack.frames.size())) << Describe(stack);
    EXPECT_TRUE(absl::StrContains(stack.frames[1].symbol.function, "CallerOfSpinningJitCode"))
        << Describe(stack);
    EXPECT_FALSE(absl::StrContains(stack.frames[2].symbol.function, "CallerOfSpinningJitCode"))
        << Describe(stack);
  }
}

TEST(StackCaptureJitTest, InterruptedWithoutItsOwnFrame_JitCallerCalledWithRel32IsKept) {
  if (MATRIX_TESTING_THREAD_SANITIZER) {
    // TSan delivers a signal when the thread next runs instrumented code; the
    // spinning JIT code never does, so the capture's signal waits forever.
    GTEST_SKIP() << "TSan defers signals while the thread runs uninstrumented code";
  }
  for (const FramelessCase& c : FramelessCases()) {
    SCOPED_TRACE(c.name);
    SpinningJitCode jit(c.code);
    ASSERT_TRUE(jit.ok());
    const SymbolizedStack stack = CaptureSpinning(jit.stub());
    ASSERT_EQ(FindFrameIn(stack, jit.begin() - 1, jit.end()), 0) << Describe(stack);
    // JIT code calling JIT code (V8's JavaScript calling its CEntry stub):
    // the stub's frame, then the C++ caller.
    ASSERT_GE(stack.frames.size(), 3u) << Describe(stack);
    EXPECT_EQ(FindFrameIn(stack, jit.stub_begin(), jit.stub_end()), 1) << Describe(stack);
    EXPECT_TRUE(absl::StrContains(stack.frames[2].symbol.function, "CallerOfSpinningJitCode"))
        << Describe(stack);
  }
}

#else
TEST(StackCaptureJitTest, X86_64Only) { GTEST_SKIP() << "hand-assembled x86-64 code"; }
#endif

}  // namespace
}  // namespace matrix
