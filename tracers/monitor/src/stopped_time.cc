#include "matrix/trace/stopped_time.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace matrix {
namespace {

// Reads a small file whole (up to 4 KiB) with plain system calls: the
// watchdog reads these at each wake-up.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[4096];
  size_t size = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer + size, sizeof(buffer) - 1 - size);
    if (n <= 0) break;
    size += static_cast<size_t>(n);
    if (size == sizeof(buffer) - 1) break;
  }
  close(fd);
  return std::string(buffer, size);
}

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
  const std::optional<std::string> cgroups = ReadSmallFile(proc_root + "/self/cgroup");
  if (!cgroups) return files;
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

}  // namespace

StoppedTime::WaitToRunReader StoppedTime::SystemReader(pid_t tid, std::string proc_root,
                                                       std::string cgroup_root) {
  auto files = std::make_shared<const std::vector<ThrottleFile>>(
      FindThrottleFiles(proc_root, cgroup_root));
  const std::string schedstat =
      proc_root + "/self/task/" + std::to_string(tid) + "/schedstat";
  return [files, schedstat]() -> std::optional<WaitToRun> {
    // "<cpu ns> <run-queue wait ns> <timeslices>".
    const std::optional<std::string> sched = ReadSmallFile(schedstat);
    if (!sched) return std::nullopt;
    char* end = nullptr;
    const int64_t cpu = std::strtoll(sched->c_str(), &end, 10);
    const int64_t wait = std::strtoll(end, nullptr, 10);
    WaitToRun reading;
    reading.ran = absl::Nanoseconds(cpu);
    reading.runnable = absl::Nanoseconds(wait);
    for (const ThrottleFile& file : *files) {
      const std::optional<std::string> stat = ReadSmallFile(file.path);
      if (!stat) continue;
      const int64_t value = StatValue(*stat, file.key);
      if (value > 0) {
        reading.throttled =
            std::max(reading.throttled, absl::Nanoseconds(value * file.ns_per_unit));
      }
    }
    return reading;
  };
}

bool StoppedTime::OnWakeup(TimeTicks scheduled, TimeTicks now) {
  const int64_t now_ns = now.ToNanoseconds();
  // Late from when the watchdog could have run it: not before it was free
  // (see OnBusyUntil()), nor before its last wake-up (the process ran then;
  // another late task already judged the time before it).
  TimeTicks from = scheduled;
  if (!from.is_null()) {
    for (const int64_t ns : {busy_until_ns_.load(std::memory_order_relaxed),
                             observed_ns_.load(std::memory_order_relaxed)}) {
      from = std::max(from, TimeTicks::FromNanoseconds(ns));
    }
  }
  const bool late = !from.is_null() && now - from > kTolerance;
  std::optional<WaitToRun> reading;
  if (reader_) reading = reader_();
  // What the counters say of the time since the last wake-up: the looper
  // thread waited to run (throttled, or on a run queue) for `waited` of it,
  // and ran or waited for `explained` of it. Running and waiting do not
  // overlap, but a kernel may count throttled time as run-queue wait too, and
  // a cgroup's throttled time adds up over CPUs: both are capped at the gap.
  const int64_t last_ns = observed_ns_.load(std::memory_order_relaxed);
  absl::Duration waited;
  absl::Duration explained;
  if (reading && last_reading_ && last_ns > 0 && now_ns > last_ns) {
    const absl::Duration gap = absl::Nanoseconds(now_ns - last_ns);
    waited = std::clamp((reading->runnable - last_reading_->runnable) +
                            (reading->throttled - last_reading_->throttled),
                        absl::ZeroDuration(), gap);
    explained = std::clamp(waited + (reading->ran - last_reading_->ran), absl::ZeroDuration(),
                           gap);
    // Throttled time, placed at the end of the gap (where a late wake-up's
    // wait is).
    if (waited > absl::ZeroDuration()) {
      throttled_.Add(now_ns - absl::ToInt64Nanoseconds(waited), now_ns);
    }
  }
  bool stopped = false;
  if (late) {
    // The lateness the counters do not explain was a stop.
    const absl::Duration unexplained =
        std::max(absl::ZeroDuration(), now - from - explained);
    if (unexplained > kTolerance) {
      const int64_t from_ns = from.ToNanoseconds();
      stopped_.Add(from_ns, from_ns + absl::ToInt64Nanoseconds(unexplained));
      stopped = true;
    }
  }
  if (reading) last_reading_ = reading;
  if (now_ns > observed_ns_.load(std::memory_order_relaxed)) {
    observed_ns_.store(now_ns, std::memory_order_release);
  }
  return stopped;
}

void StoppedTime::IntervalLog::Add(int64_t begin_ns, int64_t end_ns) {
  sequence_.fetch_add(1, std::memory_order_acq_rel);  // Odd: writing.
  const uint64_t count = count_.load(std::memory_order_relaxed);
  Interval* last = count > 0 ? &intervals_[(count - 1) % kCapacity] : nullptr;
  if (last != nullptr && begin_ns <= last->end_ns.load(std::memory_order_relaxed)) {
    // The same interval, seen by another task: extend it.
    const int64_t old_end = last->end_ns.load(std::memory_order_relaxed);
    if (end_ns > old_end) {
      last->end_ns.store(end_ns, std::memory_order_relaxed);
      total_ns_.fetch_add(end_ns - old_end, std::memory_order_relaxed);
    }
  } else {
    Interval& slot = intervals_[count % kCapacity];
    slot.begin_ns.store(begin_ns, std::memory_order_relaxed);
    slot.end_ns.store(end_ns, std::memory_order_relaxed);
    count_.store(count + 1, std::memory_order_relaxed);
    total_ns_.fetch_add(end_ns - begin_ns, std::memory_order_relaxed);
  }
  sequence_.fetch_add(1, std::memory_order_acq_rel);  // Even: done.
}

absl::Duration StoppedTime::IntervalLog::Within(TimeTicks begin, TimeTicks end) const {
  const int64_t from = begin.ToNanoseconds();
  const int64_t to = end.ToNanoseconds();
  if (to <= from) return absl::ZeroDuration();
  for (int attempt = 0; attempt < 100; ++attempt) {
    const uint64_t before = sequence_.load(std::memory_order_acquire);
    if (before % 2 == 1) continue;
    const uint64_t count = count_.load(std::memory_order_relaxed);
    const uint64_t first = count > kCapacity ? count - kCapacity : 0;
    int64_t within = 0;
    for (uint64_t i = count; i > first; --i) {
      const Interval& interval = intervals_[(i - 1) % kCapacity];
      const int64_t b = interval.begin_ns.load(std::memory_order_relaxed);
      const int64_t e = interval.end_ns.load(std::memory_order_relaxed);
      if (e <= from) break;  // Intervals are in time order.
      within += std::max<int64_t>(0, std::min(e, to) - std::max(b, from));
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (sequence_.load(std::memory_order_relaxed) == before) return absl::Nanoseconds(within);
  }
  return absl::ZeroDuration();  // A writer kept changing it: count nothing.
}

}  // namespace matrix
