// A real hang: the main looper blocks for 6 s inside a named function built
// without method tracing. Exactly one ANR is reported, at the 5 s crossing,
// and the main thread's stack captured then names the function.

#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/thread_handle.h"
#include "uninstrumented.h"

namespace {

// A hang (a sleep, as HangInUninstrumentedCode) that keeps its own record
// of its sleeps: a stack capture's signal ends a nanosleep early (EINTR),
// right after the capture's handler ran on its thread, and a sleep that ran
// its full length was interrupted by nobody. Read with CLOCK_MONOTONIC
// directly, independent of matrix-cpp's clock.
struct Sleep {
  int64_t from_ns;
  int64_t to_ns;
  bool interrupted;
};
struct Interruptions {
  int64_t begin_ns = 0;
  std::vector<Sleep> sleeps;
};
int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
// The time the threads named `names` of this process have waited for a CPU
// (schedstat's run-queue wait), in total: what the machine's other load
// took from them.
absl::Duration WaitedToRun(const std::vector<std::string>& names) {
  int64_t ns = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    std::ifstream schedstat(task.path() / "schedstat");
    int64_t run_ns = 0;
    int64_t wait_ns = 0;
    if (schedstat >> run_ns >> wait_ns) ns += wait_ns;
  }
  return absl::Nanoseconds(ns);
}

__attribute__((noinline)) void HangRecordingInterruptions(absl::Duration d, Interruptions* out) {
  out->begin_ns = MonotonicNs();
  const int64_t end = out->begin_ns + absl::ToInt64Nanoseconds(d);
  for (int64_t now = out->begin_ns; now < end;) {
    const timespec left = absl::ToTimespec(absl::Nanoseconds(end - now));
    const bool interrupted = nanosleep(&left, nullptr) != 0;
    const int64_t after = MonotonicNs();
    if (out->sleeps.size() < out->sleeps.capacity()) {
      out->sleeps.push_back({now, after, interrupted});
    }
    now = after;
  }
  asm volatile("" ::: "memory");
}

// Whether a capture at `at_ns` agrees with the hang's record: not inside a
// sleep nobody interrupted (0.5 ms margins for the clocks' reads).
bool CaptureAgrees(const Interruptions& hang, int64_t at_ns) {
  for (const Sleep& sleep : hang.sleeps) {
    if (!sleep.interrupted && sleep.from_ns + 500'000 < at_ns && at_ns < sleep.to_ns - 500'000) {
      return false;
    }
  }
  return !hang.sleeps.empty() && hang.begin_ns - 500'000 <= at_ns &&
         at_ns <= hang.sleeps.back().to_ns + 500'000;
}

int CountDetail(const std::vector<matrix::Issue>& issues, matrix::proto::Detail detail) {
  return static_cast<int>(e2e::AnrReports(issues, detail).size());
}

TEST(AnrE2ETest, SixSecondHang_OneAnrWithTheHungFunctionOnTheStack) {
  auto config = matrix::TraceConfig::Builder().EnableAnrTrace(true).EnableEvilMethodTrace(true).Build();
  ASSERT_TRUE(config.ok());
  e2e::TracedProgram program(*config);
  matrix::Handler handler(program.looper());
  handler.Post([] { e2e::HangInUninstrumentedCode(absl::Seconds(6)); });
  program.RunFor(absl::Milliseconds(6500));

  ASSERT_TRUE(program.listener().WaitFor(
      [](const auto& issues) { return CountDetail(issues, matrix::proto::ANR) > 0; },
      absl::Seconds(10)));
  // Let anything else that might be reported arrive.
  program.RunFor(absl::Milliseconds(500));
  std::vector<matrix::Issue> issues = program.listener().issues();

  EXPECT_EQ(CountDetail(issues, matrix::proto::ANR), 1);
  // One report per stuck dispatch: no LAG and no slow-method report for it.
  EXPECT_EQ(issues.size(), 1u);

  const matrix::Issue* anr_issue = nullptr;
  for (const auto& issue : issues) {
    if (issue.proto().has_anr()) anr_issue = &issue;
  }
  ASSERT_NE(anr_issue, nullptr);
  const matrix::proto::AnrReport& anr = anr_issue->proto().anr();
  EXPECT_EQ(anr_issue->tag(), "Trace_EvilMethod");

  bool named = false;
  std::string frames;
  for (const auto& frame : anr.thread_stack().frames()) {
    frames += frame.function() + "\n";
    named |= absl::StrContains(frame.function(), "e2e::HangInUninstrumentedCode(absl::");
  }
  EXPECT_TRUE(named) << frames << anr.thread_stack().error();
  // The key is the hung function, found from the native stack.
  EXPECT_TRUE(absl::StrContains(anr.stack_key(), "HangInUninstrumentedCode")) << anr.stack_key();
  // Detected at the 5 s crossing (threshold + 10 ms; the capture adds little).
  EXPECT_GE(anr.cost_ms(), 5000);
  EXPECT_LT(anr.detection_delay_ms(), 10);
  EXPECT_LT(anr.cost_ms(), 5000 + 100);
  EXPECT_FALSE(anr.thread().state().empty());
  EXPECT_GT(anr.memory().vm_rss_kb(), 0);
}

// The first report of a run reaches the listener within the budget
// (docs/performance.md, "Budgets": capture within threshold + 10 ms, first
// report delivered <= 50 ms after it): TracePlugin::Start had the worker load the symbols and
// DWARF of the looper thread's modules before any report needs them.
TEST(AnrE2ETest, FirstAnr_ReachesTheListenerSoonAfterTheCrossing) {
  auto config = matrix::TraceConfig::Builder()
                    .EnableAnrTrace(true)
                    .SetAnrThreshold(absl::Seconds(1))
                    .SetLagThreshold(absl::Milliseconds(500))
                    .Build();
  ASSERT_TRUE(config.ok());
  e2e::TracedProgram program(*config);
  matrix::Handler handler(program.looper());
  // The report's path: the watchdog captures, the worker builds it. A
  // thread of the test reads how long they waited for a CPU so far at the
  // crossing (or, on a loaded machine, a little after it).
  const std::vector<std::string> path_threads = {"matrix-watchdog", "matrix-worker"};
  absl::Time hang_begin;
  std::atomic<bool> hanging{false};
  absl::Duration waited_before;
  std::thread at_crossing([&] {
    while (!hanging.load(std::memory_order_acquire)) absl::SleepFor(absl::Milliseconds(1));
    absl::SleepFor(hang_begin + absl::Seconds(1) - absl::Now());
    waited_before = WaitedToRun(path_threads);
  });
  handler.Post([&] {
    hang_begin = absl::Now();
    hanging.store(true, std::memory_order_release);
    e2e::HangInUninstrumentedCode(absl::Milliseconds(1500));
  });
  program.RunFor(absl::Milliseconds(1700));
  at_crossing.join();
  ASSERT_TRUE(program.listener().WaitFor(
      [](const auto& issues) { return CountDetail(issues, matrix::proto::ANR) > 0; },
      absl::Seconds(10)));
  EXPECT_GT(program.plugin()->preloaded_symbols(), 0);
  const std::vector<absl::Time> arrivals = program.listener().arrivals();
  ASSERT_FALSE(arrivals.empty());
  const absl::Duration latency = arrivals.front() - (hang_begin + absl::Seconds(1));
  // Time the path's threads waited for a CPU that other programs held (on
  // a quiet machine about 0) is not the monitor's.
  const absl::Duration waited = WaitedToRun(path_threads) - waited_before;
  std::printf("first ANR reached the listener %.1f ms after the crossing (%.1f ms of it "
              "waiting for a CPU)\n",
              absl::ToDoubleMilliseconds(latency), absl::ToDoubleMilliseconds(waited));
  // 10 ms capture + 50 ms delivery, with a margin for a loaded machine.
  EXPECT_LT(latency - waited, absl::Milliseconds(120));
}

// Every capture within threshold + 10 ms (docs/performance.md) over 20
// hangs on a real looper while two busy child processes keep both cores
// loaded. The cost of an ANR is measured from the dispatch's begin to the
// instant the stack was taken, so it exposes any lateness, including a
// restart of the dispatch's clock and a looper thread slow to take the
// capture's signal; each hang's own record of when a capture woke it checks
// that instant on an independent clock.
TEST(AnrE2ETest, TwentyHangsUnderFullLoad_CapturedWithinTheBudget) {
  constexpr absl::Duration kAnr = absl::Milliseconds(300);
  auto config = matrix::TraceConfig::Builder()
                    .EnableAnrTrace(true)
                    .SetAnrThreshold(kAnr)
                    .SetLagThreshold(absl::Milliseconds(150))
                    .Build();
  ASSERT_TRUE(config.ok());
  std::vector<pid_t> busy;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(60);  // Never outlives a crashed test.
      volatile uint64_t n = 0;
      for (;;) n = n + 1;
    }
    busy.push_back(pid);
  }
  {
    e2e::TracedProgram program(*config);
    // matrix-watchdog asked for a 0.1 ms slice (where the kernel takes it).
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "matrix-watchdog") continue;
      const auto slice = matrix::CustomTimeSlice(std::stoi(task.path().filename().string()));
      if (!absl::IsUnimplemented(slice.status())) {
        ASSERT_TRUE(slice.ok()) << slice.status();
        EXPECT_EQ(*slice, absl::Microseconds(100));
      }
    }
    matrix::Handler handler(program.looper());
    constexpr int kHangs = 20;
    std::vector<Interruptions> hangs(kHangs);
    for (int i = 0; i < kHangs; ++i) {
      hangs[i].sleeps.reserve(64);
      handler.Post([hang = &hangs[i]] {
        HangRecordingInterruptions(absl::Milliseconds(360), hang);
      });
      program.RunFor(absl::Milliseconds(500));
    }
    program.listener().WaitFor(
        [](const auto& issues) { return CountDetail(issues, matrix::proto::ANR) >= kHangs; },
        absl::Seconds(10));
    std::vector<double> late_ms;
    int checked = 0;
    for (const auto& issue : program.listener().issues()) {
      if (!issue.proto().has_anr() || issue.proto().anr().detail() != matrix::proto::ANR) {
        continue;
      }
      const matrix::proto::AnrReport& anr = issue.proto().anr();
      late_ms.push_back(anr.cost_ms() - absl::ToDoubleMilliseconds(kAnr));
      // The delay field is the truth: the capture's instant, as the hang's
      // own clock saw it interrupted, less the threshold. The dispatch began
      // just before the hang's first clock read (a few microseconds).
      EXPECT_NEAR(anr.detection_delay_ms(), late_ms.back(), 0.01);
      const Interruptions& hang = hangs[static_cast<size_t>(checked++)];
      const int64_t captured_ns =
          hang.begin_ns + static_cast<int64_t>(anr.thread_stack().captured_at_ms() * 1e6);
      EXPECT_TRUE(CaptureAgrees(hang, captured_ns))
          << "hang " << checked << ": the report says the stack was taken "
          << anr.thread_stack().captured_at_ms()
          << " ms in, but the hang slept through that instant";
    }
    for (pid_t pid : busy) kill(pid, SIGKILL);
    for (pid_t pid : busy) waitpid(pid, nullptr, 0);
    busy.clear();
    std::sort(late_ms.begin(), late_ms.end());
    std::string text;
    for (double ms : late_ms) text += std::to_string(ms) + " ";
    std::printf("capture after the threshold (ms, sorted): %s\n", text.c_str());
    EXPECT_EQ(late_ms.size(), static_cast<size_t>(kHangs)) << text;
    ASSERT_FALSE(late_ms.empty());
    // The budget is 10 ms for every capture. The watchdog sleeps until the
    // threshold and must get a core at once although both are busy: it asks
    // for a 0.1 ms time slice, so it preempts a spinning thread when it wakes
    // (EEVDF, Linux 6.12+). Before that, the worst of 20 was 11.8-23.8 ms
    // here (the spinners' slices), and 99.7 ms once.
    EXPECT_LE(late_ms.back(), 10.0) << text;
  }
  for (pid_t pid : busy) kill(pid, SIGKILL);
  for (pid_t pid : busy) waitpid(pid, nullptr, 0);
}

}  // namespace
