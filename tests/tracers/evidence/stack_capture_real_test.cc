// Stack capture with real threads: a helper thread sits inside a named
// function (spinning, sleeping in nanosleep, waiting on a futex) and another
// thread captures and symbolizes its stack. Waits are bounded polls with
// generous deadlines; nothing sleeps for a fixed time.

#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/tick_clock.h"
#include "matrix/testing/sanitizers.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"

// Named functions the helper threads block in. Outside any anonymous
// namespace so the expected names are simple.
namespace capture_test {

__attribute__((noinline)) void SpinInNamedFunction(std::atomic<bool>* started,
                                                   const std::atomic<bool>* stop) {
  started->store(true);
  while (!stop->load(std::memory_order_relaxed)) {
    asm volatile("" ::: "memory");
  }
}

__attribute__((noinline)) void SleepInNamedFunction(std::atomic<bool>* started,
                                                    const std::atomic<bool>* stop) {
  started->store(true);
  while (!stop->load()) {
    timespec ts{0, 20'000'000};
    nanosleep(&ts, nullptr);
  }
}

__attribute__((noinline)) void WaitOnConditionInNamedFunction(std::atomic<bool>* started,
                                                              std::mutex* mu,
                                                              std::condition_variable* cv,
                                                              const bool* stop) {
  std::unique_lock<std::mutex> lock(*mu);
  started->store(true);
  cv->wait(lock, [stop] { return *stop; });
}

__attribute__((noinline)) void RawFutexWaitInNamedFunction(std::atomic<bool>* started,
                                                           std::atomic<uint32_t>* word) {
  started->store(true);
  while (word->load() == 0) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, 0, nullptr,
            nullptr, 0);
  }
}

__attribute__((noinline)) int RecurseThenSpin(int depth, std::atomic<bool>* started,
                                              const std::atomic<bool>* stop) {
  if (depth > 0) {
    int result = RecurseThenSpin(depth - 1, started, stop);
    asm volatile("" ::: "memory");  // No tail call: every level keeps a frame.
    return result + 1;
  }
  SpinInNamedFunction(started, stop);
  return 0;
}

}  // namespace capture_test

namespace matrix {
namespace {

using ::testing::HasSubstr;

// Polls `done` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(20)) {
  absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A helper thread running `body` with a handle published before it starts.
class HelperThread {
 public:
  explicit HelperThread(std::function<void()> body)
      : thread_([this, body = std::move(body)] {
          handle_ = ThreadHandle::Current();
          ready_.store(true);
          body();
        }) {
    EXPECT_TRUE(WaitFor([this] { return ready_.load(); }));
  }
  ~HelperThread() { thread_.join(); }
  const ThreadHandle& handle() const { return handle_; }

 private:
  std::atomic<bool> ready_{false};
  ThreadHandle handle_;
  std::thread thread_;
};

bool StackHasFunction(const SymbolizedStack& stack, const std::string& name) {
  for (const StackFrame& frame : stack.frames) {
    if (absl::StrContains(frame.symbol.function, name)) return true;
  }
  return false;
}

// Index of the first frame whose function contains `name`, or a large number.
int FrameIndexOf(const SymbolizedStack& stack, const std::string& name) {
  for (size_t i = 0; i < stack.frames.size(); ++i) {
    if (absl::StrContains(stack.frames[i].symbol.function, name)) return static_cast<int>(i);
  }
  return 1 << 20;
}

// Waits until the kernel reports `tid` sleeping, i.e. inside its syscall.
bool WaitUntilSleeping(pid_t tid) {
  ProcReader proc;
  return WaitFor([&] {
    absl::StatusOr<TaskStat> stat = proc.ReadThreadStat(tid);
    return stat.ok() && stat->state == 'S';
  });
}

TEST(StackCaptureRealTest, SpinningThread_StackNamesTheFunction) {
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  HelperThread helper([&] { capture_test::SpinInNamedFunction(&started, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));

  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10));
  stop.store(true);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(raw.tid, helper.handle().tid());
  EXPECT_GT(raw.depth, 1);
  EXPECT_FALSE(raw.truncated);
  EXPECT_LE(raw.captured_at, MonotonicNow());
  SymbolizedStack stack = SymbolizeStack(raw);
  std::string text = stack.ToString();
  EXPECT_TRUE(StackHasFunction(stack, "capture_test::SpinInNamedFunction(std::atomic<bool>*, "
                                      "std::atomic<bool> const*)"))
      << text;
#if !MATRIX_TESTING_THREAD_SANITIZER
  // The machinery (handler, unwinder, trampoline) is trimmed: the top frame
  // is the exact interrupted instruction, in the spinning function or (in
  // an unoptimized build) in std::atomic code it calls.
  EXPECT_TRUE(raw.exact_top_pc);
  EXPECT_LE(FrameIndexOf(stack, "SpinInNamedFunction"), 3) << text;
#endif
  EXPECT_THAT(text, ::testing::Not(HasSubstr("HandleSignal"))) << text;
  EXPECT_THAT(text, ::testing::Not(HasSubstr("UnwindIntoSlot"))) << text;
}

TEST(StackCaptureRealTest, ThreadInNanosleep_StackNamesTheFunction) {
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  HelperThread helper([&] { capture_test::SleepInNamedFunction(&started, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_TRUE(WaitUntilSleeping(helper.handle().tid()));

  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10));
  stop.store(true);
  ASSERT_TRUE(status.ok()) << status;
  SymbolizedStack stack = SymbolizeStack(raw);
  EXPECT_TRUE(StackHasFunction(stack, "capture_test::SleepInNamedFunction")) << stack.ToString();
}

TEST(StackCaptureRealTest, ThreadWaitingOnConditionVariable_StackNamesTheFunction) {
  std::atomic<bool> started{false};
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  HelperThread helper(
      [&] { capture_test::WaitOnConditionInNamedFunction(&started, &mu, &cv, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_TRUE(WaitUntilSleeping(helper.handle().tid()));

  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10));
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  ASSERT_TRUE(status.ok()) << status;
  SymbolizedStack stack = SymbolizeStack(raw);
  EXPECT_TRUE(StackHasFunction(stack, "capture_test::WaitOnConditionInNamedFunction"))
      << stack.ToString();
}

TEST(StackCaptureRealTest, ThreadInRawFutexSyscall_StackNamesTheFunction) {
#if MATRIX_TESTING_THREAD_SANITIZER
  // ThreadSanitizer defers asynchronous signals that arrive outside the
  // blocking calls it intercepts; a raw futex syscall restarts (SA_RESTART)
  // without ever running the handler, so the capture times out by design.
  GTEST_SKIP() << "TSan defers signals during raw syscalls";
#endif
  std::atomic<bool> started{false};
  std::atomic<uint32_t> word{0};
  HelperThread helper([&] { capture_test::RawFutexWaitInNamedFunction(&started, &word); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_TRUE(WaitUntilSleeping(helper.handle().tid()));

  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10));
  word.store(1);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
  ASSERT_TRUE(status.ok()) << status;
  SymbolizedStack stack = SymbolizeStack(raw);
  EXPECT_TRUE(StackHasFunction(stack, "capture_test::RawFutexWaitInNamedFunction"))
      << stack.ToString();
}

TEST(StackCaptureRealTest, RepeatedCaptures_AllSucceed) {
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  HelperThread helper([&] { capture_test::SpinInNamedFunction(&started, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  std::vector<RawStack> stacks(200);
  for (size_t i = 0; i < stacks.size(); ++i) {
    absl::Status status =
        StackCapturer::Get()->Capture(helper.handle(), &stacks[i], absl::Seconds(10));
    ASSERT_TRUE(status.ok()) << "capture " << i << ": " << status;
    ASSERT_GT(stacks[i].depth, 0);
  }
  stop.store(true);
  for (const RawStack& raw : stacks) {
    SymbolizedStack stack = SymbolizeStack(raw);
    EXPECT_LE(FrameIndexOf(stack, "SpinInNamedFunction"), 3) << stack.ToString();
  }
}

TEST(StackCaptureRealTest, DeepStack_IsTruncatedAtTheLimit) {
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  HelperThread helper(
      [&] { capture_test::RecurseThenSpin(kMaxStackFrames + 50, &started, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10));
  stop.store(true);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(raw.depth, kMaxStackFrames);
  EXPECT_TRUE(raw.truncated);
  SymbolizedStack stack = SymbolizeStack(raw);
  EXPECT_THAT(stack.ToString(), HasSubstr("(truncated)"));
  // The innermost frames are kept; the outermost are dropped.
  EXPECT_TRUE(StackHasFunction(stack, "SpinInNamedFunction"));
  EXPECT_THAT(stack.frames.back().symbol.function, HasSubstr("RecurseThenSpin"));
}

TEST(StackCaptureRealTest, ExitedThread_FailsFastWithNotFound) {
  ThreadHandle gone;
  std::thread([&] { gone = ThreadHandle::Current(); }).join();
  RawStack raw;
  raw.depth = 5;
  absl::Time start = absl::Now();
  absl::Status status = StackCapturer::Get()->Capture(gone, &raw, absl::Seconds(30));
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // Not the timeout.
  EXPECT_EQ(raw.depth, 0);
}

TEST(StackCaptureRealTest, ThreadBlockingTheSignal_FailsAfterTimeoutAndLateSignalIsIgnored) {
  ASSERT_TRUE(StackCapturer::Get()->Install().ok());
  const int signal_number = StackCapturer::Get()->signal_number();
  std::atomic<bool> blocked{false};
  std::atomic<bool> unblock{false};
  std::atomic<bool> unblocked{false};
  std::atomic<bool> stop{false};
  std::atomic<bool> started{false};
  HelperThread helper([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    blocked.store(true);
    WaitFor([&] { return unblock.load(); }, absl::Minutes(2));
    // Pending signals are delivered before pthread_sigmask returns.
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    unblocked.store(true);
    capture_test::SpinInNamedFunction(&started, &stop);
  });
  ASSERT_TRUE(WaitFor([&] { return blocked.load(); }));

  RawStack raw;
  absl::Time start = absl::Now();
  absl::Status status =
      StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Milliseconds(300));
  absl::Duration waited = absl::Now() - start;
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("blocks"));
  EXPECT_GE(waited, absl::Milliseconds(300));
  EXPECT_LT(waited, absl::Seconds(15));  // Bounded: no hang.
  EXPECT_EQ(raw.depth, 0);

  // Cycle through every slot with captures of another live thread, so the
  // blocked request's slot now holds a newer capture.
  std::atomic<bool> other_started{false};
  std::atomic<bool> other_stop{false};
  HelperThread other([&] { capture_test::SleepInNamedFunction(&other_started, &other_stop); });
  ASSERT_TRUE(WaitFor([&] { return other_started.load(); }));
  RawStack other_raw;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(StackCapturer::Get()->Capture(other.handle(), &other_raw, absl::Seconds(10)).ok());
  }

  // Now the stale signal arrives: the handler must find its slot taken and
  // write nothing.
  uint64_t late_before = StackCapturer::Get()->late_signal_count();
  unblock.store(true);
  ASSERT_TRUE(WaitFor([&] { return unblocked.load(); }));
  EXPECT_EQ(StackCapturer::Get()->late_signal_count(), late_before + 1);

  // Both threads can still be captured, each with its own stack.
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_TRUE(StackCapturer::Get()->Capture(helper.handle(), &raw, absl::Seconds(10)).ok());
  ASSERT_TRUE(StackCapturer::Get()->Capture(other.handle(), &other_raw, absl::Seconds(10)).ok());
  stop.store(true);
  other_stop.store(true);
  EXPECT_EQ(raw.tid, helper.handle().tid());
  EXPECT_EQ(other_raw.tid, other.handle().tid());
  EXPECT_TRUE(StackHasFunction(SymbolizeStack(raw), "SpinInNamedFunction"));
  EXPECT_TRUE(StackHasFunction(SymbolizeStack(other_raw), "SleepInNamedFunction"));
}

TEST(StackCaptureRealTest, CaptureAllThreads_IncludesEveryNamedThread) {
  std::atomic<bool> spin_started{false};
  std::atomic<bool> sleep_started{false};
  std::atomic<bool> stop{false};
  HelperThread spinner([&] {
    SetCurrentThreadName("cap-spinner");
    capture_test::SpinInNamedFunction(&spin_started, &stop);
  });
  HelperThread sleeper([&] {
    SetCurrentThreadName("cap-sleeper");
    capture_test::SleepInNamedFunction(&sleep_started, &stop);
  });
  ASSERT_TRUE(WaitFor([&] { return spin_started.load() && sleep_started.load(); }));

  std::vector<ThreadStack> threads = StackCapturer::Get()->CaptureAllThreads(absl::Seconds(10));
  stop.store(true);
  const ThreadStack* spinner_stack = nullptr;
  const ThreadStack* sleeper_stack = nullptr;
  const ThreadStack* self_stack = nullptr;
  for (const ThreadStack& thread : threads) {
    if (thread.tid == spinner.handle().tid()) spinner_stack = &thread;
    if (thread.tid == sleeper.handle().tid()) sleeper_stack = &thread;
    if (thread.tid == ThreadHandle::Current().tid()) self_stack = &thread;
  }
  ASSERT_NE(spinner_stack, nullptr);
  ASSERT_NE(sleeper_stack, nullptr);
  ASSERT_NE(self_stack, nullptr);
  EXPECT_EQ(spinner_stack->name, "cap-spinner");
  EXPECT_EQ(sleeper_stack->name, "cap-sleeper");
  ASSERT_TRUE(spinner_stack->status.ok()) << spinner_stack->status;
  ASSERT_TRUE(sleeper_stack->status.ok()) << sleeper_stack->status;
  ASSERT_TRUE(self_stack->status.ok()) << self_stack->status;
  EXPECT_TRUE(StackHasFunction(SymbolizeStack(spinner_stack->stack), "SpinInNamedFunction"));
  EXPECT_TRUE(StackHasFunction(SymbolizeStack(sleeper_stack->stack), "SleepInNamedFunction"));
  EXPECT_TRUE(StackHasFunction(SymbolizeStack(self_stack->stack),
                               "CaptureAllThreads_IncludesEveryNamedThread"));

  std::string dump = FormatThreadStacks(threads);
  EXPECT_THAT(dump, HasSubstr("\"cap-spinner\" tid="));
  EXPECT_THAT(dump, HasSubstr("SleepInNamedFunction"));
}

TEST(StackCaptureRealTest, CaptureOfCallingThread_StartsAtTheCaller) {
  RawStack raw;
  ASSERT_TRUE(StackCapturer::Get()->Capture(ThreadHandle::Current(), &raw).ok());
  SymbolizedStack stack = SymbolizeStack(raw);
  ASSERT_FALSE(stack.frames.empty());
  EXPECT_THAT(stack.frames[0].symbol.function,
              HasSubstr("CaptureOfCallingThread_StartsAtTheCaller"))
      << stack.ToString();
  ASSERT_TRUE(StackCapturer::Get()->Capture(ThreadHandle::Current().tid(), &raw).ok());
  stack = SymbolizeStack(raw);
  ASSERT_FALSE(stack.frames.empty());
  EXPECT_THAT(stack.frames[0].symbol.function,
              HasSubstr("CaptureOfCallingThread_StartsAtTheCaller"))
      << stack.ToString();
}

TEST(StackCaptureRealTest, ConcurrentCapturers_AreSerializedAndAllSucceed) {
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  HelperThread target([&] { capture_test::SpinInNamedFunction(&started, &stop); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  std::atomic<int> failures{0};
  std::vector<std::thread> capturers;
  for (int t = 0; t < 3; ++t) {
    capturers.emplace_back([&] {
      RawStack raw;
      for (int i = 0; i < 50; ++i) {
        if (!StackCapturer::Get()->Capture(target.handle(), &raw, absl::Seconds(10)).ok() ||
            raw.tid != target.handle().tid()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& capturer : capturers) capturer.join();
  stop.store(true);
  EXPECT_EQ(failures.load(), 0);
}

// Runs in a fresh child process (death-test machinery), where nothing has
// installed the handler yet.
std::atomic<int> g_previous_handler_calls{0};
void PreviousHandler(int) { g_previous_handler_calls.fetch_add(1); }

void ChainAndCaptureInFreshProcess() {
  const int signal_number = SIGRTMIN + 7;
  signal(signal_number, &PreviousHandler);
  if (!StackCapturer::Get()->Install(signal_number).ok()) _exit(10);
  // A signal that is not a capture request goes to the previous handler.
  sigval value;
  value.sival_int = 1234;
  // (Polled: ThreadSanitizer delivers it at the next atomic operation.)
  if (pthread_sigqueue(pthread_self(), signal_number, value) != 0) _exit(11);
  if (!WaitFor([] { return g_previous_handler_calls.load() >= 1; })) _exit(12);
  raise(signal_number);
  if (!WaitFor([] { return g_previous_handler_calls.load() >= 2; })) _exit(13);
  // Captures still work on that signal.
  std::atomic<bool> started{false};
  std::atomic<bool> stop{false};
  ThreadHandle helper_handle;
  std::thread helper([&] {
    helper_handle = ThreadHandle::Current();
    capture_test::SpinInNamedFunction(&started, &stop);  // Publishes `started`.
  });
  if (!WaitFor([&] { return started.load(); })) _exit(14);
  RawStack raw;
  absl::Status status = StackCapturer::Get()->Capture(helper_handle, &raw, absl::Seconds(10));
  stop.store(true);
  helper.join();
  if (!status.ok() || raw.depth == 0) _exit(15);
  if (g_previous_handler_calls.load() != 2) _exit(16);  // Requests are not chained.
  // The signal cannot be changed once installed.
  if (!absl::IsFailedPrecondition(StackCapturer::Get()->Install(SIGRTMIN + 8))) _exit(17);

  // Another library replaces our handler: captures fail at once, saying so;
  // Install() puts ours back in front, chaining to the newcomer.
  g_previous_handler_calls.store(0);
  signal(signal_number, &PreviousHandler);
  std::atomic<bool> started2{false};
  std::atomic<bool> stop2{false};
  ThreadHandle helper2_handle;
  std::thread helper2([&] {
    helper2_handle = ThreadHandle::Current();
    capture_test::SpinInNamedFunction(&started2, &stop2);
  });
  if (!WaitFor([&] { return started2.load(); })) _exit(18);
  absl::Time start = absl::Now();
  absl::Status replaced = StackCapturer::Get()->Capture(helper2_handle, &raw, absl::Seconds(30));
  if (!absl::IsFailedPrecondition(replaced)) _exit(19);
  if (std::string(replaced.message()).find("replaced") == std::string::npos) _exit(20);
  if (absl::Now() - start > absl::Seconds(10)) _exit(21);  // Not the timeout.
  if (!StackCapturer::Get()->Install(signal_number).ok()) _exit(22);
  absl::Status again = StackCapturer::Get()->Capture(helper2_handle, &raw, absl::Seconds(10));
  stop2.store(true);
  helper2.join();
  if (!again.ok() || raw.depth == 0) _exit(23);
  raise(signal_number);  // A foreign signal reaches the newcomer.
  if (!WaitFor([] { return g_previous_handler_calls.load() >= 1; })) _exit(24);
  _exit(0);
}

TEST(StackCaptureRealTest, ForeignSignals_ChainToThePreviousHandlerAndReplacementIsDetected) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ChainAndCaptureInFreshProcess(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace matrix
