#include "matrix/trace/proc_stats.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/tick_clock.h"
#include "matrix/testing/sanitizers.h"

// AddressSanitizer and ThreadSanitizer replace malloc, leaving glibc's heap
// (what mallinfo2 reports) empty.
#define MATRIX_TEST_REPLACES_MALLOC \
  (MATRIX_TESTING_ADDRESS_SANITIZER || MATRIX_TESTING_THREAD_SANITIZER)

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake /proc tree in a fresh temporary directory, removed at the end.
class FakeProc {
 public:
  FakeProc() {
    std::string pattern = ::testing::TempDir() + "/fake_proc_XXXXXX";
    char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr);
    root_ = pattern;
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }

  const std::string& root() const { return root_; }

  void Write(const std::string& relative_path, const std::string& contents) {
    std::filesystem::path path = std::filesystem::path(root_) / relative_path;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << contents;
  }

 private:
  std::string root_;
};

// A realistic /proc/<pid>/stat line (52 fields) with the given comm.
std::string StatLine(int pid, const std::string& comm, char state = 'S') {
  return absl::StrCat(pid, " (", comm, ") ", std::string(1, state),
                      " 1 1234 1234 0 -1 4194560 2954 0 0 0 "
                      "157 42 3 4 20 0 7 0 93861 3133440 358 18446744073709551615 1 1 0 0 0 0 "
                      "0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
}

TEST(ParseTaskStatTest, ParsesAllFields) {
  absl::StatusOr<TaskStat> stat = ParseTaskStat(StatLine(4321, "matrix-demo", 'R'));
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->id, 4321);
  EXPECT_EQ(stat->comm, "matrix-demo");
  EXPECT_EQ(stat->state, 'R');
  EXPECT_EQ(stat->ppid, 1);
  EXPECT_EQ(stat->utime, 157u);
  EXPECT_EQ(stat->stime, 42u);
  EXPECT_EQ(stat->cutime, 3);
  EXPECT_EQ(stat->cstime, 4);
  EXPECT_EQ(stat->priority, 20);
  EXPECT_EQ(stat->nice, 0);
  EXPECT_EQ(stat->num_threads, 7);
  EXPECT_EQ(stat->start_time, 93861u);
  EXPECT_EQ(stat->last_cpu, 1);
}

TEST(ParseTaskStatTest, CommWithSpacesAndParentheses_IsKeptWhole) {
  // A thread may name itself anything up to 15 bytes, including ") S 1 2".
  for (const std::string& comm :
       {std::string("Web Content"), std::string("a) S 1 (b"), std::string(") R 9 9 9"),
        std::string("(("), std::string("))"), std::string("new\nline"), std::string("")}) {
    absl::StatusOr<TaskStat> stat = ParseTaskStat(StatLine(77, comm, 'D'));
    ASSERT_TRUE(stat.ok()) << "comm '" << comm << "': " << stat.status();
    EXPECT_EQ(stat->comm, comm);
    EXPECT_EQ(stat->state, 'D');
    EXPECT_EQ(stat->num_threads, 7);
    EXPECT_EQ(stat->start_time, 93861u);
  }
}

TEST(ParseTaskStatTest, NegativeNiceAndRealtimePriority) {
  // Fields 3..22, then 16 zeros (23..38), then processor (39) = 3.
  std::string line = "12 (rt) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 -51 -20 1 0 100";
  for (int field = 23; field <= 38; ++field) line += " 0";
  line += " 3";
  absl::StatusOr<TaskStat> stat = ParseTaskStat(line);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->priority, -51);
  EXPECT_EQ(stat->nice, -20);
  EXPECT_EQ(stat->last_cpu, 3);
}

TEST(ParseTaskStatTest, OldKernelWithoutProcessorField) {
  std::string line = "12 (x) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 100";
  absl::StatusOr<TaskStat> stat = ParseTaskStat(line);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->start_time, 100u);
  EXPECT_EQ(stat->last_cpu, -1);
}

TEST(ParseTaskStatTest, MalformedInput_FailsClearly) {
  EXPECT_FALSE(ParseTaskStat("").ok());
  EXPECT_FALSE(ParseTaskStat("garbage").ok());
  EXPECT_FALSE(ParseTaskStat("12 (no closing paren S 1 2 3").ok());
  EXPECT_FALSE(ParseTaskStat("x12 (a) S 1").ok());
  // Truncated after utime.
  absl::StatusOr<TaskStat> truncated = ParseTaskStat("12 (a) S 1 1 1 0 -1 0 0 0 0 0 5");
  ASSERT_FALSE(truncated.ok());
  EXPECT_THAT(truncated.status().message(), HasSubstr("fields"));
  // Non-numeric utime.
  std::string bad = StatLine(12, "a");
  bad.replace(bad.find(" 157 "), 5, " 1x7 ");
  EXPECT_FALSE(ParseTaskStat(bad).ok());
  // Multi-letter state.
  EXPECT_FALSE(ParseTaskStat(absl::StrCat("12 (a) SS", StatLine(1, "b").substr(7))).ok());
}

TEST(ThreadStateNameTest, NamesKnownStates) {
  EXPECT_EQ(ThreadStateName('R'), "running");
  EXPECT_EQ(ThreadStateName('S'), "sleeping");
  EXPECT_EQ(ThreadStateName('D'), "uninterruptible (disk) sleep");
  EXPECT_EQ(ThreadStateName('Z'), "zombie");
  EXPECT_EQ(ThreadStateName('t'), "tracing stop");
  EXPECT_EQ(ThreadStateName('?'), "unknown");
}

TEST(ParseSystemCpuTimesTest, ParsesAggregateLine) {
  absl::StatusOr<SystemCpuTimes> times = ParseSystemCpuTimes(
      "cpu  17479 10 4134 164898 654 1 42 63 0 0\ncpu0 8000 5 2000 80000 300 0 20 30 0 0\n");
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->user, 17479u);
  EXPECT_EQ(times->nice, 10u);
  EXPECT_EQ(times->system, 4134u);
  EXPECT_EQ(times->idle, 164898u);
  EXPECT_EQ(times->iowait, 654u);
  EXPECT_EQ(times->irq, 1u);
  EXPECT_EQ(times->softirq, 42u);
  EXPECT_EQ(times->steal, 63u);
  EXPECT_EQ(times->Total(), 17479u + 10 + 4134 + 164898 + 654 + 1 + 42 + 63);
  EXPECT_EQ(times->Busy(), times->Total() - 164898 - 654);
}

TEST(ParseSystemCpuTimesTest, OldKernelWithFourFields) {
  absl::StatusOr<SystemCpuTimes> times = ParseSystemCpuTimes("cpu 1 2 3 4\n");
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_EQ(times->idle, 4u);
  EXPECT_EQ(times->steal, 0u);
}

TEST(ParseSystemCpuTimesTest, MalformedInput_FailsClearly) {
  EXPECT_FALSE(ParseSystemCpuTimes("").ok());
  EXPECT_FALSE(ParseSystemCpuTimes("cpu0 1 2 3 4\n").ok());
  EXPECT_FALSE(ParseSystemCpuTimes("cpu 1 2 3\n").ok());
  EXPECT_FALSE(ParseSystemCpuTimes("cpu 1 2 x 4\n").ok());
  EXPECT_FALSE(ParseSystemCpuTimes("cpu 1 2 3 -4\n").ok());
}

TEST(ComputeCpuUsageTest, RatesBetweenSamples) {
  SystemCpuTimes before{100, 0, 50, 800, 10, 0, 0, 0};
  // +60 user, +20 nice, +40 system, +250 idle, +20 iowait, +5 irq, +5 softirq = 400.
  SystemCpuTimes after{160, 20, 90, 1050, 30, 5, 5, 0};
  std::optional<CpuUsage> usage = ComputeCpuUsage(before, after, 1000, 1100);
  ASSERT_TRUE(usage.has_value());
  EXPECT_DOUBLE_EQ(usage->busy_percent, 100.0 * 130 / 400);
  EXPECT_DOUBLE_EQ(usage->process_percent, 25.0);
  EXPECT_DOUBLE_EQ(usage->user_percent, 20.0);
  EXPECT_DOUBLE_EQ(usage->system_percent, 12.5);
  EXPECT_DOUBLE_EQ(usage->iowait_percent, 5.0);
}

TEST(ComputeCpuUsageTest, ZeroDelta_ReturnsNullopt) {
  SystemCpuTimes same{100, 0, 50, 800, 10, 0, 0, 0};
  EXPECT_FALSE(ComputeCpuUsage(same, same, 5, 5).has_value());
}

TEST(ComputeCpuUsageTest, CounterReset_ReturnsNullopt) {
  SystemCpuTimes before{100000, 0, 50000, 800000, 10, 0, 0, 0};
  SystemCpuTimes after{10, 0, 5, 80, 1, 0, 0, 0};
  EXPECT_FALSE(ComputeCpuUsage(before, after, 0, 0).has_value());
}

TEST(ComputeCpuUsageTest, FieldGoingBackwards_CountsAsZero) {
  // iowait is documented to go backwards on some kernels.
  SystemCpuTimes before{100, 0, 0, 100, 50, 0, 0, 0};
  SystemCpuTimes after{200, 0, 0, 200, 40, 0, 0, 0};
  std::optional<CpuUsage> usage = ComputeCpuUsage(before, after, 0, 0);
  ASSERT_TRUE(usage.has_value());
  EXPECT_DOUBLE_EQ(usage->iowait_percent, 0.0);
  EXPECT_DOUBLE_EQ(usage->busy_percent, 50.0);
  EXPECT_DOUBLE_EQ(usage->user_percent, 50.0);
}

TEST(ComputeCpuUsageTest, ProcessDeltaClampedToRange) {
  SystemCpuTimes before{0, 0, 0, 0, 0, 0, 0, 0};
  SystemCpuTimes after{10, 0, 0, 10, 0, 0, 0, 0};
  EXPECT_DOUBLE_EQ(ComputeCpuUsage(before, after, 0, 500)->process_percent, 100.0);
  EXPECT_DOUBLE_EQ(ComputeCpuUsage(before, after, 500, 0)->process_percent, 0.0);
}

constexpr char kStatus[] =
    "Name:\tmatrix demo\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4321\nPid:\t4321\n"
    "TracerPid:\t0\nVmPeak:\t  300000 kB\nVmSize:\t  291234 kB\nVmRSS:\t   12345 kB\n"
    "Threads:\t7\nSigQ:\t0/96365\nSigPnd:\t0000000000000000\nSigBlk:\t0000000000010002\n";

TEST(ParseStatusTest, MemoryTracerAndSignalMask) {
  absl::StatusOr<ProcessMemory> memory = ParseProcessMemory(kStatus);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->vm_size_kb, 291234);
  EXPECT_EQ(memory->vm_rss_kb, 12345);
  EXPECT_EQ(*ParseTracerPid(kStatus), 0);
  EXPECT_EQ(*ParseSignalBlockedMask(kStatus), 0x10002u);  // SIGINT (2) and SIGCHLD (17).
}

TEST(ParseStatusTest, MissingOrMalformedFields_FailClearly) {
  // Kernel threads have no Vm* lines.
  EXPECT_TRUE(absl::IsNotFound(ParseProcessMemory("Name:\tkthreadd\nTracerPid:\t0\n").status()));
  EXPECT_FALSE(ParseProcessMemory("VmSize:\t abc kB\nVmRSS:\t 1 kB\n").ok());
  EXPECT_FALSE(ParseTracerPid("TracerPid:\t-3\n").ok());
  EXPECT_FALSE(ParseTracerPid("Name:\tx\n").ok());
  EXPECT_FALSE(ParseSignalBlockedMask("SigBlk:\tzz\n").ok());
  // "VmSizeX" must not match "VmSize".
  EXPECT_FALSE(ParseProcessMemory("VmSizeX:\t1 kB\nVmRSS:\t1 kB\n").ok());
}

TEST(ParseStatusTest, TracerPidSet_MeansDebugger) {
  EXPECT_EQ(*ParseTracerPid("Name:\tx\nTracerPid:\t999\n"), 999);
}

TEST(ParseMemInfoTest, TotalAndAvailable) {
  absl::StatusOr<SystemMemory> memory = ParseMemInfo(
      "MemTotal:       16310800 kB\nMemFree:         1234567 kB\n"
      "MemAvailable:    9876543 kB\nBuffers:          123 kB\n");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->mem_total_kb, 16310800);
  EXPECT_EQ(memory->mem_available_kb, 9876543);
}

TEST(ParseMemInfoTest, OldKernelWithoutMemAvailable_UsesMemFree) {
  absl::StatusOr<SystemMemory> memory = ParseMemInfo("MemTotal: 1000 kB\nMemFree: 250 kB\n");
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->mem_available_kb, 250);
}

TEST(ParseMemInfoTest, Malformed_FailsClearly) {
  EXPECT_FALSE(ParseMemInfo("").ok());
  EXPECT_FALSE(ParseMemInfo("MemFree: 250 kB\n").ok());
  EXPECT_FALSE(ParseMemInfo("MemTotal: lots kB\nMemFree: 250 kB\n").ok());
}

TEST(ParseCpuListTest, CountsRanges) {
  EXPECT_EQ(*ParseCpuList("0"), 1);
  EXPECT_EQ(*ParseCpuList("0-3\n"), 4);
  EXPECT_EQ(*ParseCpuList("0-3,8-11"), 8);
  EXPECT_EQ(*ParseCpuList("0,2,4-5"), 4);
  EXPECT_EQ(*ParseCpuList("0-127"), 128);  // cpu10 and beyond count.
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a-b").ok());
  EXPECT_FALSE(ParseCpuList("1-").ok());
}

TEST(NumCpuCoresTest, ReadsSysfsPresentThenPossible) {
  FakeProc sys;
  sys.Write("devices/system/cpu/present", "0-15\n");
  sys.Write("devices/system/cpu/possible", "0-63\n");
  EXPECT_EQ(NumCpuCores(sys.root()), 16);
  FakeProc only_possible;
  only_possible.Write("devices/system/cpu/possible", "0-11\n");
  EXPECT_EQ(NumCpuCores(only_possible.root()), 12);
  FakeProc empty;
  EXPECT_EQ(NumCpuCores(empty.root()), sysconf(_SC_NPROCESSORS_CONF));
  EXPECT_GE(NumCpuCores(), 1);
}

TEST(DeviceLevelTest, MatrixThresholds) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  EXPECT_EQ(ComputeDeviceLevel(16 * kGiB, 8), DeviceLevel::kBest);
  EXPECT_EQ(ComputeDeviceLevel(8 * kGiB, 1), DeviceLevel::kBest);
  EXPECT_EQ(ComputeDeviceLevel(8 * kGiB - 1, 8), DeviceLevel::kHigh);
  EXPECT_EQ(ComputeDeviceLevel(6 * kGiB, 2), DeviceLevel::kHigh);
  EXPECT_EQ(ComputeDeviceLevel(4 * kGiB, 1), DeviceLevel::kMiddle);
  EXPECT_EQ(ComputeDeviceLevel(3 * kGiB, 4), DeviceLevel::kMiddle);
  EXPECT_EQ(ComputeDeviceLevel(3 * kGiB, 3), DeviceLevel::kLow);
  EXPECT_EQ(ComputeDeviceLevel(2 * kGiB, 1), DeviceLevel::kLow);
  EXPECT_EQ(ComputeDeviceLevel(2 * kGiB - 1, 16), DeviceLevel::kBad);
  EXPECT_EQ(ComputeDeviceLevel(0, 4), DeviceLevel::kUnknown);
  EXPECT_EQ(ComputeDeviceLevel(-1, 4), DeviceLevel::kUnknown);
  EXPECT_EQ(DeviceLevelName(DeviceLevel::kMiddle), "MIDDLE");
  EXPECT_EQ(DeviceLevelName(DeviceLevel::kUnknown), "UN_KNOW");
}

TEST(BootTimeToMonotonicTest, SubtractsSuspendedTime) {
  // Booted 1000 s ago by CLOCK_BOOTTIME, of which 300 s were spent suspended,
  // so CLOCK_MONOTONIC reads 700 s. A process started at boottime 900.25 s
  // (90025 ticks at 100 Hz) started at monotonic 600.25 s.
  TimeTicks start = BootTimeToMonotonic(90025, 100, absl::Seconds(1000),
                                        TimeTicks() + absl::Seconds(700));
  EXPECT_EQ(start, TimeTicks() + absl::Seconds(600) + absl::Milliseconds(250));
}

TEST(BootTimeToMonotonicTest, NoSuspend_IsTickScaleConversion) {
  TimeTicks start =
      BootTimeToMonotonic(12345, 250, absl::Seconds(100), TimeTicks() + absl::Seconds(100));
  EXPECT_EQ(start, TimeTicks() + absl::Milliseconds(49380));
}

TEST(ProcReaderTest, ReadsFixtureTree) {
  FakeProc proc;
  proc.Write("4321/stat", StatLine(4321, "demo (main)"));
  proc.Write("4321/status", kStatus);
  proc.Write("4321/cmdline", std::string("/opt/app/bin/matrix-demo\0--fast\0", 32));
  proc.Write("4321/task/4321/stat", StatLine(4321, "demo (main)", 'R'));
  proc.Write("4321/task/4321/comm", "demo (main)\n");
  proc.Write("4321/task/4330/stat", StatLine(4330, "matrix-watchdog", 'S'));
  proc.Write("4321/task/4330/comm", "matrix-watchdog\n");
  proc.Write("4321/task/4330/status", kStatus);
  proc.Write("4321/task/99/stat", StatLine(99, "early"));
  proc.Write("stat", "cpu  1 2 3 4 5 6 7 8 0 0\n");
  proc.Write("meminfo", "MemTotal: 2048 kB\nMemAvailable: 1024 kB\n");

  ProcReader reader(proc.root(), 4321);
  EXPECT_EQ(reader.pid(), 4321);
  absl::StatusOr<TaskStat> process = reader.ReadProcessStat();
  ASSERT_TRUE(process.ok()) << process.status();
  EXPECT_EQ(process->comm, "demo (main)");
  absl::StatusOr<TaskStat> thread = reader.ReadThreadStat(4330);
  ASSERT_TRUE(thread.ok()) << thread.status();
  EXPECT_EQ(thread->comm, "matrix-watchdog");
  EXPECT_EQ(ThreadStateName(thread->state), "sleeping");
  EXPECT_TRUE(absl::IsNotFound(reader.ReadThreadStat(5555).status()));
  EXPECT_THAT(*reader.ListThreads(), ElementsAre(99, 4321, 4330));
  EXPECT_EQ(*reader.ReadThreadName(4321), "demo (main)");
  EXPECT_EQ(*reader.ReadThreadSignalBlockedMask(4330), 0x10002u);
  EXPECT_EQ(reader.ReadSystemCpuTimes()->Total(), 36u);
  EXPECT_EQ(reader.ReadProcessMemory()->vm_rss_kb, 12345);
  EXPECT_EQ(reader.ReadSystemMemory()->mem_total_kb, 2048);
  EXPECT_FALSE(*reader.IsDebuggerAttached());
  EXPECT_EQ(*reader.ReadProcessName(), "matrix-demo");
}

TEST(ProcReaderTest, EmptyCmdline_FallsBackToComm) {
  FakeProc proc;
  proc.Write("7/stat", StatLine(7, "kworker/0:1"));
  proc.Write("7/cmdline", "");
  EXPECT_EQ(*ProcReader(proc.root(), 7).ReadProcessName(), "kworker/0:1");
}

TEST(ProcReaderTest, MissingFiles_AreNotFound) {
  FakeProc proc;
  ProcReader reader(proc.root(), 7);
  EXPECT_TRUE(absl::IsNotFound(reader.ReadProcessStat().status()));
  EXPECT_TRUE(absl::IsNotFound(reader.ReadSystemMemory().status()));
  EXPECT_TRUE(absl::IsNotFound(reader.ListThreads().status()));
}

TEST(ProcReaderTest, CorruptFixture_FailsInsteadOfGarbage) {
  FakeProc proc;
  proc.Write("7/stat", "7 (x) S 1 2\n");
  proc.Write("stat", "intr 1 2 3\n");
  ProcReader reader(proc.root(), 7);
  EXPECT_TRUE(absl::IsInvalidArgument(reader.ReadProcessStat().status()));
  EXPECT_TRUE(absl::IsInvalidArgument(reader.ReadSystemCpuTimes().status()));
}

// The real /proc of this process: sanity, not exact values.
TEST(ProcReaderTest, RealProcSelf) {
  ProcReader reader;
  EXPECT_EQ(reader.pid(), getpid());
  absl::StatusOr<TaskStat> stat = reader.ReadProcessStat();
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->id, getpid());
  EXPECT_GE(stat->num_threads, 1);
  absl::StatusOr<TaskStat> self_thread = reader.ReadThreadStat(gettid());
  ASSERT_TRUE(self_thread.ok()) << self_thread.status();
  EXPECT_EQ(self_thread->state, 'R');  // We are running while reading it.
  EXPECT_GT(reader.ReadProcessMemory()->vm_rss_kb, 0);
  EXPECT_GT(reader.ReadSystemMemory()->mem_total_kb, 0);
  EXPECT_TRUE(reader.IsDebuggerAttached().ok());
  EXPECT_FALSE(reader.ReadProcessName()->empty());
#if !MATRIX_TEST_REPLACES_MALLOC
  EXPECT_GT(HeapInUseBytes(), 0u);
#endif

  // The process started before now, and (in a test) less than a day ago.
  absl::StatusOr<TimeTicks> start = reader.ReadProcessStartTime();
  ASSERT_TRUE(start.ok()) << start.status();
  absl::Duration age = MonotonicNow() - *start;
  EXPECT_GE(age, -absl::Milliseconds(20));  // One 10 ms tick of rounding, doubled.
  EXPECT_LT(age, absl::Hours(24));
}

}  // namespace
}  // namespace matrix
