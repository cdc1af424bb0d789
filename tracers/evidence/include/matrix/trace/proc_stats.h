// File: matrix/trace/proc_stats.h
//
// Readers for the process and system context that ANR, lag and block reports
// carry (Matrix's "machine", "cpu_app", "mem", "processPriority",
// "processNice" fields, BlockCanary's cpu-busy and thread states): CPU times
// of the process, of one thread and of the whole system, memory, debugger
// presence, core count and device level, process name and start time.
//
// Every reader reads from a configurable root ("/proc" and "/sys" by default)
// so tests can point it at fixture files. Parsing is separate from reading:
// the Parse* functions take file contents and fail with a clear
// absl::Status instead of returning garbage.
//
//   matrix::ProcReader proc;                       // this process, real /proc
//   absl::StatusOr<matrix::TaskStat> before = proc.ReadProcessStat();
//   absl::StatusOr<matrix::SystemCpuTimes> sys_before = proc.ReadSystemCpuTimes();
//   ... later ...
//   std::optional<matrix::CpuUsage> usage = matrix::ComputeCpuUsage(
//       *sys_before, *proc.ReadSystemCpuTimes(),
//       before->utime + before->stime, after->utime + after->stime);
//   if (usage) report.set_cpu_app(usage->process_percent);
//
// None of this is for the looper thread: every Read* call opens and reads a
// file (a few microseconds each). Call them from the watchdog or worker.
//
// Thread safety: ProcReader is immutable after construction and thread-safe;
// the free functions are thread-safe.

#ifndef MATRIX_TRACE_PROC_STATS_H_
#define MATRIX_TRACE_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/stopped_time.h"

namespace matrix {

// TaskStat
//
// The fields of /proc/<pid>/stat (a process) or /proc/<pid>/task/<tid>/stat
// (one thread) that reports use. Field numbers are those of proc(5).
// CPU times are in clock ticks (sysconf(_SC_CLK_TCK), 100 on Linux).
struct TaskStat {
  pid_t id = 0;             // (1) pid or tid
  std::string comm;         // (2) executable or thread name, without the parentheses
  char state = '?';         // (3) R, S, D, T, t, Z, X, I, ... see ThreadStateName()
  pid_t ppid = 0;           // (4)
  uint64_t utime = 0;       // (14) user-mode CPU time
  uint64_t stime = 0;       // (15) kernel-mode CPU time
  int64_t cutime = 0;       // (16) waited-for children's user time
  int64_t cstime = 0;       // (17) waited-for children's kernel time
  int64_t priority = 0;     // (18) kernel priority (20 + nice for normal tasks)
  int64_t nice = 0;         // (19) -20 (high) .. 19 (low)
  int64_t num_threads = 0;  // (20)
  uint64_t start_time = 0;  // (22) clock ticks since boot (CLOCK_BOOTTIME) at start
  int last_cpu = -1;        // (39) CPU it last ran on; -1 if the kernel omits it
};

// ThreadStateName()
//
// A readable name for the one-letter state in /proc/.../stat:
// 'R' "running", 'S' "sleeping", 'D' "uninterruptible (disk) sleep",
// 'T' "stopped", 't' "tracing stop", 'Z' "zombie", 'X'/'x' "dead",
// 'I' "idle", 'P' "parked", 'W' "waking", 'K' "wakekill";
// anything else "unknown".
std::string_view ThreadStateName(char state);

// ParseTaskStat()
//
// Parses the contents of /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat.
// The comm field may contain spaces, parentheses and newlines; it ends at the
// last ')' in the file. Fails (InvalidArgument) on truncated or non-numeric
// fields.
absl::StatusOr<TaskStat> ParseTaskStat(std::string_view contents);

// SystemCpuTimes
//
// The aggregate "cpu" line of /proc/stat, in clock ticks summed over every
// CPU. (guest time is already included in user and nice, so it is not
// counted again.)
struct SystemCpuTimes {
  uint64_t user = 0;
  uint64_t nice = 0;
  uint64_t system = 0;
  uint64_t idle = 0;
  uint64_t iowait = 0;
  uint64_t irq = 0;
  uint64_t softirq = 0;
  uint64_t steal = 0;

  // All eight fields: what Matrix's cpu_app divides by.
  uint64_t Total() const {
    return user + nice + system + idle + iowait + irq + softirq + steal;
  }
  // Total minus idle and iowait.
  uint64_t Busy() const { return Total() - idle - iowait; }
};

// ParseSystemCpuTimes()
//
// Parses the first ("cpu ") line of /proc/stat. Kernels older than 2.6.11
// omit steal (and older ones more); missing trailing fields read as 0, but
// at least user, nice, system and idle must be present.
absl::StatusOr<SystemCpuTimes> ParseSystemCpuTimes(std::string_view proc_stat);

// CpuUsage
//
// Rates between two samples, in percent of all CPU time that passed (so on
// a 4-core machine one saturated core is 25 %).
struct CpuUsage {
  double busy_percent = 0;     // everything but idle and iowait
  double process_percent = 0;  // process utime+stime share: Matrix's "cpu_app"
  double user_percent = 0;     // user + nice
  double system_percent = 0;   // system + irq + softirq
  double iowait_percent = 0;
};

// ComputeCpuUsage()
//
// Rates between the samples `before` and `after`. `process_ticks_*` are the
// process's utime+stime at the same instants (pass 0 and 0 when only system
// rates matter). Returns std::nullopt when no time passed between the samples
// or the system counters went backwards as a whole (a reset, or samples from
// different boots). Individual fields that went backwards (the kernel's
// iowait is known to) count as 0. A process delta that is negative counts as
// 0; one larger than the system delta is clamped to 100 %.
std::optional<CpuUsage> ComputeCpuUsage(const SystemCpuTimes& before,
                                        const SystemCpuTimes& after,
                                        uint64_t process_ticks_before,
                                        uint64_t process_ticks_after);

// ProcessMemory
//
// From /proc/<pid>/status, in KiB.
struct ProcessMemory {
  int64_t vm_size_kb = 0;  // VmSize: virtual address space
  int64_t vm_rss_kb = 0;   // VmRSS: resident set
};

// ParseProcessMemory()
//
// Parses VmSize and VmRSS from /proc/<pid>/status. Fails (NotFound) when
// either is missing, as it is for kernel threads and zombies.
absl::StatusOr<ProcessMemory> ParseProcessMemory(std::string_view status);

// ParseTracerPid()
//
// The TracerPid field of /proc/<pid>/status: the pid of the process tracing
// this one (a debugger or strace), 0 if none.
absl::StatusOr<pid_t> ParseTracerPid(std::string_view status);

// ParseSignalBlockedMask()
//
// The SigBlk field of /proc/<pid>/task/<tid>/status: bit (n - 1) is set when
// signal n is blocked.
absl::StatusOr<uint64_t> ParseSignalBlockedMask(std::string_view status);

// SystemMemory
//
// From /proc/meminfo, in KiB.
struct SystemMemory {
  int64_t mem_total_kb = 0;      // MemTotal: usable RAM (installed minus kernel reserve)
  int64_t mem_available_kb = 0;  // MemAvailable: estimate of memory available
                                 // without swapping (MemFree on kernels < 3.14)
};

// ParseMemInfo()
//
// Parses MemTotal and MemAvailable from /proc/meminfo; falls back to MemFree
// when MemAvailable is absent (kernels before 3.14). Fails when MemTotal is
// missing.
absl::StatusOr<SystemMemory> ParseMemInfo(std::string_view meminfo);

// HeapInUseBytes()
//
// Bytes of the malloc heap in use (glibc mallinfo2: uordblks + hblkhd, i.e.
// arena chunks in use plus mmapped chunks): the analog of Android's
// Debug.getNativeHeapAllocatedSize(). mallinfo2 locks every arena; call it off
// the looper thread. Under AddressSanitizer, which replaces malloc, this
// reports glibc's (mostly unused) heap only. Can be called from any thread.
uint64_t HeapInUseBytes();

// ParseCpuList()
//
// Counts the CPUs in a sysfs CPU list such as "0-3,8-11" or "0,2,4-5"
// (/sys/devices/system/cpu/{present,possible,online}).
absl::StatusOr<int> ParseCpuList(std::string_view list);

// NumCpuCores()
//
// The number of CPUs present: <sys_root>/devices/system/cpu/present, then
// .../possible, then sysconf(_SC_NPROCESSORS_CONF). Unlike a "cpu[0-9]"
// directory regex it counts cpu10 and above. Always >= 1. Any thread.
int NumCpuCores(const std::string& sys_root = "/sys");

// DeviceLevel
//
// Matrix's DeviceUtil.LEVEL: a coarse class of the machine from its RAM and
// cores, used to pick thresholds per device class.
enum class DeviceLevel {
  kUnknown = -1,
  kBad = 1,     // < 2 GiB
  kLow = 2,     // >= 2 GiB
  kMiddle = 3,  // >= 4 GiB, or >= 2 GiB with >= 4 cores
  kHigh = 4,    // >= 6 GiB
  kBest = 5,    // >= 8 GiB
};

// ComputeDeviceLevel()
//
// Classifies a machine with `total_ram_bytes` of RAM and `cpu_cores` cores.
// Returns kUnknown when total_ram_bytes <= 0. The RAM figure is MemTotal,
// which is slightly below the installed size (the kernel keeps some), so a
// machine sold as 8 GB may classify as kHigh, exactly as Matrix does.
DeviceLevel ComputeDeviceLevel(int64_t total_ram_bytes, int cpu_cores);

// DeviceLevelName()
//
// Matrix's names, as they appear in the reports' "machine" field: "BEST",
// "HIGH", "MIDDLE", "LOW", "BAD" and "UN_KNOW".
std::string_view DeviceLevelName(DeviceLevel level);

// BootTimeToMonotonic()
//
// Converts /proc/<pid>/stat's starttime (`start_clock_ticks` clock ticks after
// boot, on the CLOCK_BOOTTIME scale, which keeps counting during suspend) to
// the CLOCK_MONOTONIC scale that TimeTicks and TickClock::Default() use.
// `boottime_now` and `monotonic_now` are the two clocks read back to back;
// their difference is the total time the machine has spent suspended, which
// is subtracted. Resolution is one clock tick (10 ms at 100 Hz). Exact unless
// the machine suspended between the process start and the clock reads; then
// the start comes out earlier by the time suspended in between, so read it
// early (the StartupTracer reads it at initialization).
TimeTicks BootTimeToMonotonic(uint64_t start_clock_ticks, int64_t clock_ticks_per_second,
                              absl::Duration boottime_now, TimeTicks monotonic_now);

// ProcReader
//
// Reads the files above for one process. Construct it with the defaults for
// this process; tests pass a fixture root and pid, e.g.
// ProcReader("/tmp/fixture", 1234) reads /tmp/fixture/1234/stat.
//
// Thread safety: immutable, thread-safe. Every method can be called from any
// thread but reads files, so not from the looper thread.
class ProcReader {
 public:
  // `proc_root` is the procfs mount ("/proc"); `pid` 0 means this process.
  explicit ProcReader(std::string proc_root = "/proc", pid_t pid = 0);

  const std::string& proc_root() const { return proc_root_; }
  pid_t pid() const { return pid_; }

  // /proc/<pid>/stat.
  absl::StatusOr<TaskStat> ReadProcessStat() const;
  // /proc/<pid>/task/<tid>/stat. NotFound when the thread is gone.
  absl::StatusOr<TaskStat> ReadThreadStat(pid_t tid) const;
  // The thread ids in /proc/<pid>/task, ascending.
  absl::StatusOr<std::vector<pid_t>> ListThreads() const;
  // /proc/<pid>/task/<tid>/comm without the trailing newline.
  absl::StatusOr<std::string> ReadThreadName(pid_t tid) const;
  // SigBlk of /proc/<pid>/task/<tid>/status.
  absl::StatusOr<uint64_t> ReadThreadSignalBlockedMask(pid_t tid) const;
  // The first line of /proc/stat.
  absl::StatusOr<SystemCpuTimes> ReadSystemCpuTimes() const;
  // VmSize / VmRSS of /proc/<pid>/status.
  absl::StatusOr<ProcessMemory> ReadProcessMemory() const;
  // /proc/meminfo.
  absl::StatusOr<SystemMemory> ReadSystemMemory() const;
  // TracerPid != 0 in /proc/<pid>/status.
  absl::StatusOr<bool> IsDebuggerAttached() const;
  // The base name of argv[0] from /proc/<pid>/cmdline; the comm field of
  // /proc/<pid>/stat when cmdline is empty (kernel threads, zombies).
  absl::StatusOr<std::string> ReadProcessName() const;
  // The process start on the CLOCK_MONOTONIC scale (comparable with
  // MonotonicNow()), from starttime in /proc/<pid>/stat; see
  // BootTimeToMonotonic(). Reads CLOCK_BOOTTIME and CLOCK_MONOTONIC now.
  absl::StatusOr<TimeTicks> ReadProcessStartTime() const;

 private:
  std::string ProcessPath(std::string_view file) const;
  std::string ThreadPath(pid_t tid, std::string_view file) const;

  std::string proc_root_;
  pid_t pid_;
};

// SystemWaitToRunReader()
//
// The kernel's counters that tell a stopped process from one waiting to run
// (StoppedTime::WaitToRun), for thread `tid` of this process: its
// `task/TID/schedstat` under `proc_root`, and the throttled time in the
// cpu.stat of the process's CPU cgroup and each ancestor under
// `cgroup_root` (cgroup v2 throttled_usec or v1 throttled_time; the files
// are found once, here, from /proc/self/cgroup), and the calling thread's
// own run-queue wait (`thread-self/schedstat`). The reader returns nullopt
// when the schedstat cannot be read. Any thread.
StoppedTime::WaitToRunReader SystemWaitToRunReader(pid_t tid, std::string proc_root = "/proc",
                                                  std::string cgroup_root = "/sys/fs/cgroup");

namespace internal {
// Reads a whole file (procfs files report size 0, so it reads until EOF).
// NotFound when the file does not exist. Any thread.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
}  // namespace internal

}  // namespace matrix

#endif  // MATRIX_TRACE_PROC_STATS_H_
