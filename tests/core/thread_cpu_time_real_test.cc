// Real-thread tests for thread CPU time: the calling thread's CPU clock, and
// ThreadHandle::CpuTime() read from another thread, which grows while that
// thread spins and stays still while it blocks. Also the other ThreadHandle
// facts (tid, pthread, name) a watchdog needs about the looper thread.

#include "matrix/core/thread_handle.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/tick_clock.h"

namespace matrix {
namespace {

constexpr absl::Duration kSpin = absl::Milliseconds(30);
constexpr absl::Duration kWallLimit = absl::Seconds(20);

// Burns CPU on the calling thread until `handle` reports `amount` more CPU
// time (or the wall-clock limit passes). Returns the CPU time gained.
absl::Duration SpinUntilCpuGrows(const ThreadHandle& handle, absl::Duration amount) {
  const absl::Duration start = handle.CpuTime();
  const TimeTicks deadline = MonotonicNow() + kWallLimit;
  volatile uint64_t sink = 0;
  while (handle.CpuTime() - start < amount && MonotonicNow() < deadline) {
    for (int i = 0; i < 10'000; ++i) sink = sink + i;
  }
  return handle.CpuTime() - start;
}

TEST(ThreadCpuTimeTest, CurrentThreadCpuTime_WhileSpinning_Grows) {
  const absl::Duration before = CurrentThreadCpuTime();
  const absl::Duration gained = SpinUntilCpuGrows(ThreadHandle::Current(), kSpin);
  const absl::Duration after = CurrentThreadCpuTime();

  EXPECT_GE(gained, kSpin);
  EXPECT_GE(after - before, kSpin);
}

TEST(ThreadCpuTimeTest, CurrentThreadCpuTime_WhileSleeping_BarelyGrows) {
  const absl::Duration before = CurrentThreadCpuTime();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_LT(CurrentThreadCpuTime() - before, absl::Milliseconds(20));
}

// A thread that spins while `spin` is set and blocks otherwise.
class Worker {
 public:
  Worker()
      : thread_([this] {
          handle_ = ThreadHandle::Current();
          started_.Notify();
          volatile uint64_t sink = 0;
          while (!stop_.load()) {
            if (spin_.load()) {
              sink = sink + 1;
            } else {
              absl::SleepFor(absl::Milliseconds(1));
            }
          }
        }) {
    started_.WaitForNotification();
  }
  ~Worker() {
    stop_ = true;
    thread_.join();
  }
  void set_spin(bool spin) { spin_ = spin; }
  const ThreadHandle& handle() const { return handle_; }

 private:
  std::atomic<bool> spin_{false};
  std::atomic<bool> stop_{false};
  ThreadHandle handle_;
  absl::Notification started_;
  std::thread thread_;
};

TEST(ThreadCpuTimeTest, CpuTime_OfAnotherThreadWhileItSpins_Grows) {
  Worker spinner;
  spinner.set_spin(true);

  const absl::Duration start = spinner.handle().CpuTime();
  const TimeTicks deadline = MonotonicNow() + kWallLimit;
  while (spinner.handle().CpuTime() - start < kSpin && MonotonicNow() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // This thread stays idle.
  }

  EXPECT_GE(spinner.handle().CpuTime() - start, kSpin);
  EXPECT_GE(TickClock::Default()->ThreadCpuTime(spinner.handle()) - start, kSpin);
}

TEST(ThreadCpuTimeTest, CpuTime_OfAnIdleThread_StaysStillWhileOthersSpin) {
  Worker idle;
  Worker spinner;
  spinner.set_spin(true);
  const absl::Duration idle_before = idle.handle().CpuTime();

  // This thread spins too: neither its CPU time nor the spinner's may show up
  // in the idle thread's clock.
  SpinUntilCpuGrows(spinner.handle(), absl::Milliseconds(50));

  EXPECT_LT(idle.handle().CpuTime() - idle_before, absl::Milliseconds(20));
  EXPECT_GE(spinner.handle().CpuTime(), absl::Milliseconds(50));
}

TEST(ThreadHandleTest, Current_DescribesTheCallingThread) {
  const ThreadHandle me = ThreadHandle::Current();
  EXPECT_TRUE(me.valid());
  EXPECT_EQ(me.tid(), static_cast<pid_t>(syscall(SYS_gettid)));
  EXPECT_TRUE(pthread_equal(me.pthread(), pthread_self()));
  EXPECT_TRUE(me.IsCurrent());
  EXPECT_EQ(me, ThreadHandle::Current());
}

TEST(ThreadHandleTest, Handle_FromAnotherThread_IsNotCurrentHereAndNamesThatThread) {
  ThreadHandle theirs;
  bool current_there = false;
  absl::Notification named, checked;
  std::thread other([&] {
    SetCurrentThreadName("matrix-test-name-that-is-long");
    theirs = ThreadHandle::Current();
    current_there = theirs.IsCurrent();
    named.Notify();
    checked.WaitForNotification();
  });
  named.WaitForNotification();

  EXPECT_FALSE(theirs.IsCurrent());
  EXPECT_FALSE(theirs == ThreadHandle::Current());
  EXPECT_EQ(theirs.Name(), "matrix-test-nam");  // The kernel keeps 15 characters.
  checked.Notify();
  other.join();
  EXPECT_TRUE(current_there);
}

TEST(ThreadHandleTest, Invalid_HasNoCpuTimeOrName) {
  const ThreadHandle invalid;
  EXPECT_FALSE(invalid.valid());
  EXPECT_FALSE(invalid.IsCurrent());
  EXPECT_EQ(invalid.CpuTime(), absl::ZeroDuration());
  EXPECT_EQ(invalid.Name(), "");
}

TEST(ThreadHandleTest, CpuTime_AfterTheThreadExited_IsZero) {
  ThreadHandle gone;
  std::thread short_lived([&] {
    gone = ThreadHandle::Current();
    SpinUntilCpuGrows(gone, absl::Milliseconds(1));
  });
  short_lived.join();

  EXPECT_EQ(gone.CpuTime(), absl::ZeroDuration());
}

}  // namespace
}  // namespace matrix

namespace matrix {
namespace {

// A thread that asks for a short slice gets it where the kernel takes
// custom slices (EEVDF, Linux 6.12+), keeps its nice value, and another
// thread's slice is untouched.
TEST(ShortTimeSliceTest, RequestShortTimeSlice_SetsTheCallingThreadsSliceOnly) {
  absl::StatusOr<absl::Duration> before = CustomTimeSlice(ThreadHandle::Current().tid());
  const int nice_before = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  absl::StatusOr<absl::Duration> main_slice;
  absl::StatusOr<absl::Duration> got;
  absl::StatusOr<absl::Duration> read_back;
  int nice_after = 0;
  std::thread thread([&] {
    got = RequestShortTimeSlice(absl::Microseconds(100));
    read_back = CustomTimeSlice(ThreadHandle::Current().tid());
    nice_after = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  });
  thread.join();
  if (absl::IsUnimplemented(got.status())) GTEST_SKIP() << got.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, absl::Microseconds(100));
  ASSERT_TRUE(read_back.ok()) << read_back.status();
  EXPECT_EQ(*read_back, absl::Microseconds(100));
  EXPECT_EQ(nice_after, nice_before);
  // This thread kept its own (default) slice.
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(*CustomTimeSlice(ThreadHandle::Current().tid()), *before);
}

}  // namespace
}  // namespace matrix
