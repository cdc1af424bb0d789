#include "matrix/trace/proc_stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "matrix/core/thread_handle.h"

namespace matrix {
namespace {

// Debian's Abseil has its own string_view type; the public API uses std's.
absl::string_view ToAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Parses a whole token as an integer of type T.
template <typename T>
bool ParseInt(absl::string_view token, T* out) {
  if (token.empty()) return false;
  const char* end = token.data() + token.size();
  auto [ptr, ec] = std::from_chars(token.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// Finds "Key:" at the start of a line of a /proc "Key:\tvalue" file and
// returns the value, trimmed. std::nullopt if the key is absent.
std::optional<absl::string_view> FindKeyValue(absl::string_view contents, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    if (line.size() > key.size() && absl::StartsWith(line, key) && line[key.size()] == ':') {
      return absl::StripAsciiWhitespace(line.substr(key.size() + 1));
    }
  }
  return std::nullopt;
}

// "1234 kB" -> 1234.
absl::StatusOr<int64_t> ParseKbValue(absl::string_view contents, absl::string_view key) {
  std::optional<absl::string_view> value = FindKeyValue(contents, key);
  if (!value) return absl::NotFoundError(absl::StrCat("no ", key, " field"));
  absl::string_view number = *value;
  if (absl::ConsumeSuffix(&number, "kB")) number = absl::StripTrailingAsciiWhitespace(number);
  int64_t kb = 0;
  if (!ParseInt(number, &kb) || kb < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ", key, " value '", *value, "'"));
  }
  return kb;
}

}  // namespace

namespace internal {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot open ", path, ": ", strerror(err));
    if (err == ENOENT || err == ESRCH) return absl::NotFoundError(message);
    return absl::UnavailableError(message);
  }
  std::string contents;
  std::array<char, 4096> buffer;
  for (;;) {
    ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      std::string message = absl::StrCat("cannot read ", path, ": ", strerror(err));
      // Reading the stat of a thread that exited between open and read.
      if (err == ESRCH) return absl::NotFoundError(message);
      return absl::UnavailableError(message);
    }
    if (n == 0) break;
    contents.append(buffer.data(), static_cast<size_t>(n));
  }
  close(fd);
  return contents;
}

}  // namespace internal

std::string_view ThreadStateName(char state) {
  switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "uninterruptible (disk) sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'Z': return "zombie";
    case 'X':
    case 'x': return "dead";
    case 'I': return "idle";
    case 'P': return "parked";
    case 'W': return "waking";
    case 'K': return "wakekill";
    default: return "unknown";
  }
}

absl::StatusOr<TaskStat> ParseTaskStat(std::string_view contents_in) {
  absl::string_view contents = ToAbsl(contents_in);
  // "<pid> (<comm>) <state> <ppid> ...": comm is whatever the task set with
  // prctl(PR_SET_NAME), so it may hold ' ', '(' , ')' or '\n'. It ends at the
  // last ')' because no later field can contain one.
  size_t open_paren = contents.find('(');
  size_t close_paren = contents.rfind(')');
  if (open_paren == absl::string_view::npos || close_paren == absl::string_view::npos ||
      close_paren < open_paren) {
    return absl::InvalidArgumentError("stat: no '(comm)' field");
  }
  TaskStat stat;
  if (!ParseInt(absl::StripAsciiWhitespace(contents.substr(0, open_paren)), &stat.id) ||
      stat.id <= 0) {
    return absl::InvalidArgumentError("stat: malformed pid field");
  }
  stat.comm = std::string(contents.substr(open_paren + 1, close_paren - open_paren - 1));

  // Fields after comm, numbered from 3 (state).
  std::vector<absl::string_view> fields =
      absl::StrSplit(contents.substr(close_paren + 1), ' ', absl::SkipEmpty());
  if (!fields.empty()) fields.back() = absl::StripTrailingAsciiWhitespace(fields.back());
  auto field = [&fields](int number) -> absl::string_view {
    size_t index = static_cast<size_t>(number - 3);
    return index < fields.size() ? fields[index] : absl::string_view();
  };
  constexpr int kLastRequiredField = 22;  // starttime
  if (fields.size() < static_cast<size_t>(kLastRequiredField - 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stat: ", fields.size() + 2, " fields, need at least ", kLastRequiredField));
  }
  absl::string_view state = field(3);
  if (state.size() != 1 || !absl::ascii_isalpha(static_cast<unsigned char>(state[0]))) {
    return absl::InvalidArgumentError(absl::StrCat("stat: malformed state '", state, "'"));
  }
  stat.state = state[0];
  bool ok = ParseInt(field(4), &stat.ppid) && ParseInt(field(14), &stat.utime) &&
            ParseInt(field(15), &stat.stime) && ParseInt(field(16), &stat.cutime) &&
            ParseInt(field(17), &stat.cstime) && ParseInt(field(18), &stat.priority) &&
            ParseInt(field(19), &stat.nice) && ParseInt(field(20), &stat.num_threads) &&
            ParseInt(field(22), &stat.start_time);
  if (!ok) return absl::InvalidArgumentError("stat: malformed numeric field");
  if (!field(39).empty() && !ParseInt(field(39), &stat.last_cpu)) {
    return absl::InvalidArgumentError("stat: malformed processor field");
  }
  return stat;
}

absl::StatusOr<SystemCpuTimes> ParseSystemCpuTimes(std::string_view proc_stat_in) {
  absl::string_view proc_stat = ToAbsl(proc_stat_in);
  absl::string_view line = proc_stat.substr(0, proc_stat.find('\n'));
  if (!absl::ConsumePrefix(&line, "cpu ")) {
    return absl::InvalidArgumentError("/proc/stat: first line is not the aggregate 'cpu' line");
  }
  std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (fields.size() < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("/proc/stat: cpu line has ", fields.size(), " fields, need at least 4"));
  }
  std::array<uint64_t, 8> values{};
  for (size_t i = 0; i < values.size() && i < fields.size(); ++i) {
    if (!ParseInt(absl::StripAsciiWhitespace(fields[i]), &values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("/proc/stat: malformed cpu field '", fields[i], "'"));
    }
  }
  SystemCpuTimes times;
  times.user = values[0];
  times.nice = values[1];
  times.system = values[2];
  times.idle = values[3];
  times.iowait = values[4];
  times.irq = values[5];
  times.softirq = values[6];
  times.steal = values[7];
  return times;
}

std::optional<CpuUsage> ComputeCpuUsage(const SystemCpuTimes& before, const SystemCpuTimes& after,
                                        uint64_t process_ticks_before,
                                        uint64_t process_ticks_after) {
  // Per-field deltas; a field that went backwards contributes nothing.
  auto delta = [](uint64_t a, uint64_t b) -> double { return b > a ? double(b - a) : 0.0; };
  if (after.Total() <= before.Total()) return std::nullopt;  // No time passed, or a reset.
  double user = delta(before.user, after.user) + delta(before.nice, after.nice);
  double system = delta(before.system, after.system) + delta(before.irq, after.irq) +
                  delta(before.softirq, after.softirq);
  double idle = delta(before.idle, after.idle);
  double iowait = delta(before.iowait, after.iowait);
  double steal = delta(before.steal, after.steal);
  double total = user + system + idle + iowait + steal;
  if (total <= 0) return std::nullopt;
  double process = delta(process_ticks_before, process_ticks_after);
  CpuUsage usage;
  usage.busy_percent = 100.0 * (total - idle - iowait) / total;
  usage.process_percent = std::min(100.0, 100.0 * process / total);
  usage.user_percent = 100.0 * user / total;
  usage.system_percent = 100.0 * system / total;
  usage.iowait_percent = 100.0 * iowait / total;
  return usage;
}

absl::StatusOr<ProcessMemory> ParseProcessMemory(std::string_view status_in) {
  absl::string_view status = ToAbsl(status_in);
  absl::StatusOr<int64_t> vm_size = ParseKbValue(status, "VmSize");
  if (!vm_size.ok()) return vm_size.status();
  absl::StatusOr<int64_t> vm_rss = ParseKbValue(status, "VmRSS");
  if (!vm_rss.ok()) return vm_rss.status();
  return ProcessMemory{*vm_size, *vm_rss};
}

absl::StatusOr<pid_t> ParseTracerPid(std::string_view status_in) {
  absl::string_view status = ToAbsl(status_in);
  std::optional<absl::string_view> value = FindKeyValue(status, "TracerPid");
  if (!value) return absl::NotFoundError("no TracerPid field");
  pid_t pid = 0;
  if (!ParseInt(*value, &pid) || pid < 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed TracerPid '", *value, "'"));
  }
  return pid;
}

absl::StatusOr<uint64_t> ParseSignalBlockedMask(std::string_view status_in) {
  absl::string_view status = ToAbsl(status_in);
  std::optional<absl::string_view> value = FindKeyValue(status, "SigBlk");
  if (!value) return absl::NotFoundError("no SigBlk field");
  uint64_t mask = 0;
  const char* end = value->data() + value->size();
  auto [ptr, ec] = std::from_chars(value->data(), end, mask, 16);
  if (value->empty() || ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(absl::StrCat("malformed SigBlk '", *value, "'"));
  }
  return mask;
}

absl::StatusOr<SystemMemory> ParseMemInfo(std::string_view meminfo_in) {
  absl::string_view meminfo = ToAbsl(meminfo_in);
  absl::StatusOr<int64_t> total = ParseKbValue(meminfo, "MemTotal");
  if (!total.ok()) return total.status();
  absl::StatusOr<int64_t> available = ParseKbValue(meminfo, "MemAvailable");
  if (absl::IsNotFound(available.status())) available = ParseKbValue(meminfo, "MemFree");
  if (!available.ok()) return available.status();
  return SystemMemory{*total, *available};
}

uint64_t HeapInUseBytes() {
  struct mallinfo2 info = mallinfo2();
  return static_cast<uint64_t>(info.uordblks) + static_cast<uint64_t>(info.hblkhd);
}

absl::StatusOr<int> ParseCpuList(std::string_view list_in) {
  absl::string_view list = ToAbsl(list_in);
  list = absl::StripAsciiWhitespace(list);
  if (list.empty()) return absl::InvalidArgumentError("empty CPU list");
  int count = 0;
  for (absl::string_view range : absl::StrSplit(list, ',')) {
    std::pair<absl::string_view, absl::string_view> bounds = absl::StrSplit(range, '-');
    int first = 0;
    int last = 0;
    if (!ParseInt(bounds.first, &first) || first < 0) {
      return absl::InvalidArgumentError(absl::StrCat("malformed CPU list '", list, "'"));
    }
    last = first;
    if (range.find('-') != absl::string_view::npos && (!ParseInt(bounds.second, &last) ||
                                                      last < first)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed CPU list '", list, "'"));
    }
    count += last - first + 1;
  }
  return count;
}

int NumCpuCores(const std::string& sys_root) {
  for (const char* file : {"present", "possible"}) {
    absl::StatusOr<std::string> contents =
        internal::ReadFileToString(absl::StrCat(sys_root, "/devices/system/cpu/", file));
    if (!contents.ok()) continue;
    absl::StatusOr<int> count = ParseCpuList(*contents);
    if (count.ok() && *count > 0) return *count;
  }
  long configured = sysconf(_SC_NPROCESSORS_CONF);
  return configured > 0 ? static_cast<int>(configured) : 1;
}

DeviceLevel ComputeDeviceLevel(int64_t total_ram_bytes, int cpu_cores) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  if (total_ram_bytes <= 0) return DeviceLevel::kUnknown;
  if (total_ram_bytes >= 8 * kGiB) return DeviceLevel::kBest;
  if (total_ram_bytes >= 6 * kGiB) return DeviceLevel::kHigh;
  if (total_ram_bytes >= 4 * kGiB) return DeviceLevel::kMiddle;
  if (total_ram_bytes >= 2 * kGiB) {
    return cpu_cores >= 4 ? DeviceLevel::kMiddle : DeviceLevel::kLow;
  }
  return DeviceLevel::kBad;
}

std::string_view DeviceLevelName(DeviceLevel level) {
  switch (level) {
    case DeviceLevel::kBest: return "BEST";
    case DeviceLevel::kHigh: return "HIGH";
    case DeviceLevel::kMiddle: return "MIDDLE";
    case DeviceLevel::kLow: return "LOW";
    case DeviceLevel::kBad: return "BAD";
    case DeviceLevel::kUnknown: return "UN_KNOW";
  }
  return "UN_KNOW";
}

TimeTicks BootTimeToMonotonic(uint64_t start_clock_ticks, int64_t clock_ticks_per_second,
                              absl::Duration boottime_now, TimeTicks monotonic_now) {
  // Ticks -> ns without overflow for any realistic uptime: split whole
  // seconds and the remainder.
  uint64_t hz = clock_ticks_per_second > 0 ? static_cast<uint64_t>(clock_ticks_per_second) : 100;
  absl::Duration start_boottime =
      absl::Seconds(static_cast<int64_t>(start_clock_ticks / hz)) +
      absl::Nanoseconds(static_cast<int64_t>((start_clock_ticks % hz) * 1'000'000'000 / hz));
  absl::Duration suspended = boottime_now - (monotonic_now - TimeTicks());
  return TimeTicks() + (start_boottime - suspended);
}

ProcReader::ProcReader(std::string proc_root, pid_t pid)
    : proc_root_(std::move(proc_root)), pid_(pid > 0 ? pid : getpid()) {}

std::string ProcReader::ProcessPath(std::string_view file) const {
  return absl::StrCat(proc_root_, "/", pid_, "/", ToAbsl(file));
}

std::string ProcReader::ThreadPath(pid_t tid, std::string_view file) const {
  return absl::StrCat(proc_root_, "/", pid_, "/task/", tid, "/", ToAbsl(file));
}

absl::StatusOr<TaskStat> ProcReader::ReadProcessStat() const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ProcessPath("stat"));
  if (!contents.ok()) return contents.status();
  return ParseTaskStat(*contents);
}

absl::StatusOr<TaskStat> ProcReader::ReadThreadStat(pid_t tid) const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ThreadPath(tid, "stat"));
  if (!contents.ok()) return contents.status();
  return ParseTaskStat(*contents);
}

absl::StatusOr<std::vector<pid_t>> ProcReader::ListThreads() const {
  std::string path = ProcessPath("task");
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(path.c_str()), &closedir);
  if (!dir) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  std::vector<pid_t> tids;
  while (dirent* entry = readdir(dir.get())) {
    pid_t tid = 0;
    if (ParseInt(absl::string_view(entry->d_name), &tid) && tid > 0) tids.push_back(tid);
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

absl::StatusOr<std::string> ProcReader::ReadThreadName(pid_t tid) const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ThreadPath(tid, "comm"));
  if (!contents.ok()) return contents.status();
  if (!contents->empty() && contents->back() == '\n') contents->pop_back();
  return contents;
}

absl::StatusOr<uint64_t> ProcReader::ReadThreadSignalBlockedMask(pid_t tid) const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ThreadPath(tid, "status"));
  if (!contents.ok()) return contents.status();
  return ParseSignalBlockedMask(*contents);
}

absl::StatusOr<SystemCpuTimes> ProcReader::ReadSystemCpuTimes() const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(proc_root_ + "/stat");
  if (!contents.ok()) return contents.status();
  return ParseSystemCpuTimes(*contents);
}

absl::StatusOr<ProcessMemory> ProcReader::ReadProcessMemory() const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ProcessPath("status"));
  if (!contents.ok()) return contents.status();
  return ParseProcessMemory(*contents);
}

absl::StatusOr<SystemMemory> ProcReader::ReadSystemMemory() const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(proc_root_ + "/meminfo");
  if (!contents.ok()) return contents.status();
  return ParseMemInfo(*contents);
}

absl::StatusOr<bool> ProcReader::IsDebuggerAttached() const {
  absl::StatusOr<std::string> contents = internal::ReadFileToString(ProcessPath("status"));
  if (!contents.ok()) return contents.status();
  absl::StatusOr<pid_t> tracer = ParseTracerPid(*contents);
  if (!tracer.ok()) return tracer.status();
  return *tracer != 0;
}

absl::StatusOr<std::string> ProcReader::ReadProcessName() const {
  absl::StatusOr<std::string> cmdline = internal::ReadFileToString(ProcessPath("cmdline"));
  if (cmdline.ok() && !cmdline->empty() && (*cmdline)[0] != '\0') {
    absl::string_view argv0(cmdline->c_str());  // Up to the first NUL.
    size_t slash = argv0.rfind('/');
    if (slash != absl::string_view::npos && slash + 1 < argv0.size()) {
      argv0.remove_prefix(slash + 1);
    }
    return std::string(argv0);
  }
  absl::StatusOr<TaskStat> stat = ReadProcessStat();
  if (!stat.ok()) return stat.status();
  return stat->comm;
}

absl::StatusOr<TimeTicks> ProcReader::ReadProcessStartTime() const {
  absl::StatusOr<TaskStat> stat = ReadProcessStat();
  if (!stat.ok()) return stat.status();
  timespec boot;
  timespec mono;
  if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0 || clock_gettime(CLOCK_MONOTONIC, &mono) != 0) {
    return absl::UnavailableError("clock_gettime(CLOCK_BOOTTIME) failed");
  }
  return BootTimeToMonotonic(
      stat->start_time, sysconf(_SC_CLK_TCK), absl::DurationFromTimespec(boot),
      TimeTicks::FromNanoseconds(int64_t{mono.tv_sec} * 1'000'000'000 + mono.tv_nsec));
}

// SystemWaitToRunReader(): the kernel counters StoppedTime tells stops by.

namespace {

// The value after "`key` " on a line of a cpu.stat file, or -1.
int64_t StatValue(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ' ') {
      return std::strtoll(std::string(line.substr(key.size() + 1)).c_str(), nullptr, 10);
    }
    at = end + 1;
  }
  return -1;
}

// A cpu.stat file and the unit of its throttled time.
struct ThrottleFile {
  std::string path;
  std::string key;          // "throttled_usec" (v2) or "throttled_time" (v1).
  int64_t ns_per_unit = 1;  // 1000 for microseconds.
};

// The cpu.stat files of the process's CPU cgroup and its ancestors, from
// /proc/self/cgroup: the v2 line "0::/path" (the unified hierarchy at
// cgroup_root, or cgroup_root/unified in a hybrid set-up) and the v1 line
// whose controllers include "cpu" (mounted at cgroup_root/<controllers> or
// cgroup_root/cpu).
std::vector<ThrottleFile> FindThrottleFiles(const std::string& proc_root,
                                            const std::string& cgroup_root) {
  std::vector<ThrottleFile> files;
  const absl::StatusOr<std::string> cgroups = internal::ReadFileToString(proc_root + "/self/cgroup");
  if (!cgroups.ok()) return files;
  auto add_levels = [&](const std::string& mount, std::string path, const char* key,
                        int64_t ns_per_unit) {
    if (access((mount + "/cpu.stat").c_str(), R_OK) != 0 &&
        access((mount + path + "/cpu.stat").c_str(), R_OK) != 0) {
      return;
    }
    for (;;) {
      const std::string file = mount + (path == "/" ? "" : path) + "/cpu.stat";
      if (access(file.c_str(), R_OK) == 0) files.push_back({file, key, ns_per_unit});
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  };
  std::string_view text = *cgroups;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t first = line.find(':');
    const size_t second = line.find(':', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (line.substr(0, first) == "0" && controllers.empty()) {
      const bool unified_root = access((cgroup_root + "/cgroup.controllers").c_str(), R_OK) == 0;
      add_levels(unified_root ? cgroup_root : cgroup_root + "/unified", path, "throttled_usec",
                 1000);
      continue;
    }
    bool has_cpu = false;
    for (size_t at = 0; at <= controllers.size();) {
      const size_t comma = std::min(controllers.find(',', at), controllers.size());
      if (controllers.substr(at, comma - at) == "cpu") has_cpu = true;
      at = comma + 1;
    }
    if (!has_cpu) continue;
    const std::string mount = cgroup_root + "/" + std::string(controllers);
    add_levels(access(mount.c_str(), R_OK) == 0 ? mount : cgroup_root + "/cpu", path,
               "throttled_time", 1);
  }
  return files;
}

// A thread's schedstat: "<cpu ns> <run-queue wait ns> <timeslices>".
bool ReadSchedstat(const std::string& path, absl::Duration* cpu, absl::Duration* wait) {
  const absl::StatusOr<std::string> sched = internal::ReadFileToString(path);
  if (!sched.ok()) return false;
  char* end = nullptr;
  *cpu = absl::Nanoseconds(std::strtoll(sched->c_str(), &end, 10));
  *wait = absl::Nanoseconds(std::strtoll(end, nullptr, 10));
  return true;
}

}  // namespace

StoppedTime::WaitToRunReader SystemWaitToRunReader(pid_t tid, std::string proc_root,
                                                  std::string cgroup_root) {
  auto files = std::make_shared<const std::vector<ThrottleFile>>(
      FindThrottleFiles(proc_root, cgroup_root));
  const std::string schedstat =
      proc_root + "/self/task/" + std::to_string(tid) + "/schedstat";
  const std::string own_schedstat = proc_root + "/thread-self/schedstat";
  return [files, schedstat, own_schedstat]() -> std::optional<StoppedTime::WaitToRun> {
    absl::Duration cpu;
    absl::Duration wait;
    if (!ReadSchedstat(schedstat, &cpu, &wait)) return std::nullopt;
    StoppedTime::WaitToRun reading;
    reading.ran = cpu;
    reading.runnable = wait;
    absl::Duration own_cpu;
    absl::Duration own_wait;
    if (ReadSchedstat(own_schedstat, &own_cpu, &own_wait)) {
      reading.caller_tid = ThreadHandle::Current().tid();
      reading.caller_runnable = own_wait;
    }
    for (const ThrottleFile& file : *files) {
      const absl::StatusOr<std::string> stat = internal::ReadFileToString(file.path);
      if (!stat.ok()) continue;
      const int64_t value = StatValue(*stat, file.key);
      if (value > 0) {
        reading.throttled =
            std::max(reading.throttled, absl::Nanoseconds(value * file.ns_per_unit));
      }
    }
    return reading;
  };
}

}  // namespace matrix
