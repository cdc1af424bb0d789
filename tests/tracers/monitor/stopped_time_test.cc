// StoppedTime: late wake-ups of the watchdog's timed tasks as stopped
// intervals, merged when two tasks saw the same stop, and the overlap with a
// dispatch.

#include "matrix/trace/stopped_time.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "matrix/trace/proc_stats.h"

namespace {

using ::matrix::StoppedTime;
using ::matrix::TimeTicks;

TimeTicks At(int64_t ms) { return TimeTicks() + absl::Milliseconds(1'000'000 + ms); }

TEST(StoppedTimeTest, OnTimeAndSlightlyLateWakeupsAreNotStops) {
  StoppedTime stopped;
  EXPECT_FALSE(stopped.OnWakeup(At(0), At(0)));
  EXPECT_FALSE(stopped.OnWakeup(At(50), At(150)));  // 100 ms late: the tolerance.
  EXPECT_FALSE(stopped.OnWakeup(TimeTicks(), At(9000)));  // Not scheduled: cannot be late.
  EXPECT_EQ(stopped.Within(At(0), At(10'000)), absl::ZeroDuration());
  EXPECT_EQ(stopped.total(), absl::ZeroDuration());
  EXPECT_EQ(stopped.observed_until(), At(9000));
}

TEST(StoppedTimeTest, ALateWakeupIsAStopAndOverlapsAreCountedOnce) {
  StoppedTime stopped;
  // The sampler's poll due at 50 ms and an ANR check due at 2 s both run at
  // 7 s: one stop, [50 ms, 7 s] (the second is late from the first's wake-up
  // on: the process ran then).
  EXPECT_TRUE(stopped.OnWakeup(At(50), At(7000)));
  stopped.OnWakeup(At(2000), At(7001));
  EXPECT_EQ(stopped.total(), absl::Milliseconds(6950));
  EXPECT_EQ(stopped.Within(At(0), At(8000)), absl::Milliseconds(6950));
  // Partial overlaps.
  EXPECT_EQ(stopped.Within(At(1000), At(2000)), absl::Seconds(1));
  EXPECT_EQ(stopped.Within(At(0), At(50)), absl::ZeroDuration());
  EXPECT_EQ(stopped.Within(At(7001), At(9000)), absl::ZeroDuration());
  // A second stop later.
  stopped.OnWakeup(At(10'000), At(12'000));
  EXPECT_EQ(stopped.Within(At(0), At(20'000)), absl::Milliseconds(6950 + 2000));
  EXPECT_EQ(stopped.Within(At(11'000), At(20'000)), absl::Seconds(1));
}

TEST(StoppedTimeTest, LateBecauseTheWatchdogWasBusy_IsNotAStop) {
  StoppedTime stopped;
  // A capture kept the watchdog busy from 0 to 300 ms, within its bound; the
  // sampler due at 50 ms runs right after it: not stopped.
  EXPECT_FALSE(stopped.OnBusy(At(0), At(300), absl::Milliseconds(300)));
  EXPECT_FALSE(stopped.OnWakeup(At(50), At(320)));
  EXPECT_EQ(stopped.Within(At(0), At(1000)), absl::ZeroDuration());
  // A real stop after the busy spell counts from the last wake-up (320 ms),
  // not from the due time.
  EXPECT_TRUE(stopped.OnWakeup(At(100), At(900)));
  EXPECT_EQ(stopped.Within(At(0), At(1000)), absl::Milliseconds(580));
  // An earlier busy mark never moves the reference back.
  EXPECT_FALSE(stopped.OnBusy(At(150), At(200), absl::Milliseconds(300)));
  EXPECT_TRUE(stopped.OnWakeup(At(1000), At(1250)));
}

TEST(StoppedTimeTest, BusyLongerThanItsBound_IsAStopFromTheBoundOn) {
  StoppedTime stopped;
  stopped.OnWakeup(At(0), At(0));
  // Two captures may take 600 ms; the watchdog was busy 2,600 ms: the
  // process stopped (SIGSTOP) while it waited, from 600 ms on.
  EXPECT_TRUE(stopped.OnBusy(At(0), At(2600), absl::Milliseconds(600)));
  EXPECT_EQ(stopped.Within(At(0), At(3000)), absl::Milliseconds(2000));
  // A task due meanwhile is late only from the work's end.
  EXPECT_FALSE(stopped.OnWakeup(At(50), At(2650)));
  EXPECT_EQ(stopped.total(), absl::Milliseconds(2000));
}

TEST(StoppedTimeTest, WorkWithoutCapturesThatTookLong_IsAStop) {
  StoppedTime stopped;
  stopped.OnWakeup(At(0), At(0));
  // A check that made no capture has no reason to take 100 ms.
  EXPECT_FALSE(stopped.OnBusy(At(0), At(90), absl::ZeroDuration()));
  EXPECT_TRUE(stopped.OnBusy(At(1000), At(1500), absl::ZeroDuration()));
  EXPECT_EQ(stopped.Within(At(0), At(2000)), absl::Milliseconds(500));
}

TEST(StoppedTimeTest, BusyLongerThanItsBound_ButTheWatchdogWaitedForACpu_IsNoStop) {
  StoppedTime stopped;
  StoppedTime::WaitToRun counters;
  counters.caller_tid = 7;
  stopped.SetWaitToRunReader(
      [&counters] { return std::optional<StoppedTime::WaitToRun>(counters); });
  stopped.OnWakeup(At(0), At(0));
  // The watchdog's own thread waited 1.5 s on a run queue during the work.
  counters.caller_runnable = absl::Milliseconds(1500);
  EXPECT_FALSE(stopped.OnBusy(At(0), At(1800), absl::Milliseconds(300)));
  EXPECT_EQ(stopped.total(), absl::ZeroDuration());
}

TEST(StoppedTimeTest, KeepsTheLastCapacityStops) {
  StoppedTime stopped;
  for (int i = 0; i < StoppedTime::kCapacity + 10; ++i) {
    stopped.OnWakeup(At(i * 1000), At(i * 1000 + 500));
  }
  const int64_t last = StoppedTime::kCapacity + 9;
  EXPECT_EQ(stopped.Within(At(last * 1000), At(last * 1000 + 1000)), absl::Milliseconds(500));
  // Older than the ring: forgotten.
  EXPECT_EQ(stopped.Within(At(0), At(5000)), absl::ZeroDuration());
  EXPECT_EQ(stopped.total(), absl::Milliseconds(500) * (StoppedTime::kCapacity + 10));
}

// A StoppedTime reading the kernel's counters as the test moves them, first
// woken at 0 ms.
class StoppedTimeCountersTest : public ::testing::Test {
 protected:
  StoppedTimeCountersTest() {
    stopped_.SetWaitToRunReader([this] { return std::optional<StoppedTime::WaitToRun>(now_); });
    stopped_.OnWakeup(At(0), At(0));
  }
  StoppedTime stopped_;
  StoppedTime::WaitToRun now_;
};

TEST_F(StoppedTimeCountersTest, ALateWakeupExplainedByACpuQuota_IsThrottledTimeNotAStop) {
  // Due at 50 ms, run at 1050: the cgroup was throttled 900 ms meanwhile.
  now_.throttled += absl::Milliseconds(900);
  now_.ran += absl::Milliseconds(100);
  EXPECT_FALSE(stopped_.OnWakeup(At(50), At(1050)));
  EXPECT_EQ(stopped_.total(), absl::ZeroDuration());
  EXPECT_EQ(stopped_.ThrottledWithin(At(0), At(2000)), absl::Milliseconds(900));
  EXPECT_EQ(stopped_.throttled_total(), absl::Milliseconds(900));
}

TEST_F(StoppedTimeCountersTest, ALateWakeupWhileTheLooperRanOrWaitedOnARunQueue_IsNotAStop) {
  // A busy machine: the watchdog waited, the looper thread ran or waited to.
  now_.ran += absl::Milliseconds(200);
  now_.runnable += absl::Milliseconds(280);
  EXPECT_FALSE(stopped_.OnWakeup(At(50), At(550)));
  EXPECT_EQ(stopped_.total(), absl::ZeroDuration());
  EXPECT_EQ(stopped_.ThrottledWithin(At(0), At(1000)), absl::Milliseconds(280));
}

TEST_F(StoppedTimeCountersTest, ThrottlingIsCountedAtEveryWakeup_NotOnlyLateOnes) {
  // A 10 % quota: every 100 ms period the process waits 90 ms, so the
  // watchdog's 50 ms polls are late by less than the tolerance, and the
  // throttled time still adds up.
  for (int i = 1; i <= 10; ++i) {
    now_.throttled += absl::Milliseconds(90);
    now_.ran += absl::Milliseconds(10);
    EXPECT_FALSE(stopped_.OnWakeup(At(i * 100 - 50), At(i * 100)));
  }
  EXPECT_EQ(stopped_.ThrottledWithin(At(0), At(1000)), absl::Milliseconds(900));
  EXPECT_EQ(stopped_.total(), absl::ZeroDuration());
  // More throttled time than the gap (summed over CPUs): capped at the gap.
  now_.throttled += absl::Milliseconds(500);
  stopped_.OnWakeup(At(1050), At(1100));
  EXPECT_EQ(stopped_.ThrottledWithin(At(1000), At(1100)), absl::Milliseconds(100));
}

TEST_F(StoppedTimeCountersTest, WhatTheCountersDoNotExplain_IsAStop) {
  // SIGSTOP for 7 s, with 200 ms of throttling besides.
  now_.throttled += absl::Milliseconds(200);
  EXPECT_TRUE(stopped_.OnWakeup(At(50), At(7250)));
  EXPECT_EQ(stopped_.ThrottledWithin(At(0), At(8000)), absl::Milliseconds(200));
  EXPECT_EQ(stopped_.Within(At(0), At(8000)), absl::Milliseconds(7000));
  EXPECT_EQ(stopped_.Within(At(7050), At(7250)), absl::ZeroDuration());  // The throttled part.
  // No counter moved at all: all of it.
  EXPECT_TRUE(stopped_.OnWakeup(At(10'000), At(12'000)));
  EXPECT_EQ(stopped_.Within(At(9000), At(13'000)), absl::Seconds(2));
  // Counters the reader cannot read: as without a reader.
  stopped_.SetWaitToRunReader([] { return std::optional<StoppedTime::WaitToRun>(); });
  EXPECT_TRUE(stopped_.OnWakeup(At(20'000), At(21'000)));
}

TEST_F(StoppedTimeCountersTest, ALateWakeupWhileTheWatchdogItselfWaitedForACpu_IsNotAStop) {
  // The looper thread sleeps in a system call (its counters stand still);
  // the watchdog's task, due at 50 ms, waited 450 ms on a busy run queue.
  now_.caller_tid = 7;
  stopped_.OnWakeup(At(0), At(0));  // The watchdog's first reading.
  now_.caller_runnable += absl::Milliseconds(450);
  EXPECT_FALSE(stopped_.OnWakeup(At(50), At(500)));
  EXPECT_EQ(stopped_.total(), absl::ZeroDuration());
  // It is not the looper's wait: no throttled time in its dispatches.
  EXPECT_EQ(stopped_.throttled_total(), absl::ZeroDuration());
  // A stop of 3 s, then 200 ms of waiting for a CPU: the stop is counted.
  now_.caller_runnable += absl::Milliseconds(200);
  EXPECT_TRUE(stopped_.OnWakeup(At(550), At(3750)));
  EXPECT_EQ(stopped_.Within(At(500), At(4000)), absl::Seconds(3));
}

TEST_F(StoppedTimeCountersTest, AnotherThreadsWait_ExplainsNothing) {
  // Thread 7 reads first; thread 8's wait is counted from its own first
  // reading on, never against thread 7's.
  now_.caller_tid = 7;
  now_.caller_runnable = absl::Seconds(50);
  stopped_.OnWakeup(At(0), At(0));
  now_.caller_tid = 8;
  now_.caller_runnable = absl::Seconds(60);
  EXPECT_TRUE(stopped_.OnWakeup(At(50), At(1050)));  // 8's first reading: unexplained.
  EXPECT_EQ(stopped_.total(), absl::Seconds(1));
  now_.caller_tid = 7;
  now_.caller_runnable = absl::Seconds(50) + absl::Milliseconds(500);
  EXPECT_FALSE(stopped_.OnWakeup(At(1100), At(1600)));  // 7 waited for it.
  EXPECT_EQ(stopped_.total(), absl::Seconds(1));
}

// A fake /proc and cgroup file system.
class SystemReaderTest : public ::testing::Test {
 protected:
  SystemReaderTest()
      : root_(std::filesystem::temp_directory_path() /
              ("matrix-stopped-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(root_);
    Write("proc/self/task/42/schedstat", "1500000000 250000000 77\n");
  }
  ~SystemReaderTest() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& path, const std::string& text) {
    const std::filesystem::path file = root_ / path;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
  }
  std::optional<StoppedTime::WaitToRun> Read() {
    return matrix::SystemWaitToRunReader(42, (root_ / "proc").string(), (root_ / "cg").string())();
  }

  std::filesystem::path root_;
};

TEST_F(SystemReaderTest, CgroupV2_TheLargestThrottledTimeOfTheCgroupAndItsAncestors) {
  Write("proc/self/cgroup", "0::/app.slice/game.scope\n");
  Write("cg/cgroup.controllers", "cpu memory\n");
  Write("cg/app.slice/cpu.stat", "usage_usec 9\nthrottled_usec 3000000\n");
  Write("cg/app.slice/game.scope/cpu.stat",
        "usage_usec 5\nnr_throttled 12\nthrottled_usec 1200000\n");
  const auto reading = Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->ran, absl::Milliseconds(1500));
  EXPECT_EQ(reading->runnable, absl::Milliseconds(250));
  EXPECT_EQ(reading->throttled, absl::Seconds(3));  // The slice's quota.
}

TEST_F(SystemReaderTest, CgroupV1_TheCpuControllersThrottledTimeInNanoseconds) {
  Write("proc/self/cgroup", "5:memory:/\n4:cpu,cpuacct:/matrix-quota\n0::/\n");
  Write("cg/cpu,cpuacct/cpu.stat", "nr_periods 0\nthrottled_time 0\n");
  Write("cg/cpu,cpuacct/matrix-quota/cpu.stat",
        "nr_periods 21\nnr_throttled 21\nthrottled_time 1849067548\n");
  const auto reading = Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->throttled, absl::Nanoseconds(1849067548));
}

TEST_F(SystemReaderTest, TheCallersOwnRunQueueWait) {
  Write("proc/self/cgroup", "0::/\n");
  auto reading = Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->caller_tid, 0);  // No thread-self: not read.
  Write("proc/thread-self/schedstat", "900 333000000 5\n");
  reading = Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->caller_tid, matrix::ThreadHandle::Current().tid());
  EXPECT_EQ(reading->caller_runnable, absl::Milliseconds(333));
  EXPECT_EQ(reading->runnable, absl::Milliseconds(250));  // The looper thread's.
}

TEST_F(SystemReaderTest, NoCgroupFiles_NoThrottling_NoSchedstat_NoReading) {
  Write("proc/self/cgroup", "0::/\n");
  auto reading = Read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->throttled, absl::ZeroDuration());
  std::filesystem::remove(root_ / "proc/self/task/42/schedstat");
  EXPECT_FALSE(Read().has_value());
}

}  // namespace
