#include "matrix/core/thread_handle.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <fstream>

#include "absl/status/status.h"

namespace matrix {
namespace {

absl::Duration ReadCpuClock(clockid_t clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return absl::ZeroDuration();
  return absl::Seconds(ts.tv_sec) + absl::Nanoseconds(ts.tv_nsec);
}

// The kernel's struct sched_attr (glibc 2.36 does not declare it).
struct SchedAttr {
  uint32_t size = sizeof(SchedAttr);
  uint32_t sched_policy = 0;
  uint64_t sched_flags = 0;
  int32_t sched_nice = 0;
  uint32_t sched_priority = 0;
  uint64_t sched_runtime = 0;  // SCHED_OTHER/BATCH/IDLE: the custom slice.
  uint64_t sched_deadline = 0;
  uint64_t sched_period = 0;
};

bool GetSchedAttr(pid_t tid, SchedAttr* attr) {
  return syscall(SYS_sched_getattr, tid, attr, sizeof(SchedAttr), 0) == 0;
}

}  // namespace

absl::StatusOr<absl::Duration> CustomTimeSlice(pid_t tid) {
  SchedAttr attr;
  if (!GetSchedAttr(tid, &attr)) return absl::ErrnoToStatus(errno, "sched_getattr");
  // Kernels with EEVDF report a fair thread's slice (the default one too);
  // older ones report 0.
  if (attr.sched_runtime == 0) return absl::UnimplementedError("no custom time slices here");
  return absl::Nanoseconds(attr.sched_runtime);
}

absl::StatusOr<absl::Duration> RequestShortTimeSlice(absl::Duration slice) {
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  SchedAttr attr;
  if (!GetSchedAttr(tid, &attr)) return absl::ErrnoToStatus(errno, "sched_getattr");
  if (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH &&
      attr.sched_policy != SCHED_IDLE) {
    return absl::FailedPreconditionError("a real-time or deadline thread keeps its policy");
  }
  const uint64_t requested = static_cast<uint64_t>(absl::ToInt64Nanoseconds(slice));
  attr.size = sizeof(SchedAttr);
  attr.sched_flags = 0;  // Policy and nice as read: only the slice changes.
  attr.sched_runtime = requested;
  if (syscall(SYS_sched_setattr, tid, &attr, 0) != 0) {
    return absl::ErrnoToStatus(errno, "sched_setattr");
  }
  absl::StatusOr<absl::Duration> now = CustomTimeSlice(tid);
  // The kernel clamps to 0.1-100 ms; a kernel without custom slices ignores
  // the request and reports its own value (or none).
  if (!now.ok() || *now > std::max(slice, absl::Microseconds(100))) {
    return absl::UnimplementedError("the kernel ignored the requested time slice");
  }
  return now;
}

ThreadHandle ThreadHandle::Current() {
  ThreadHandle handle;
  handle.tid_ = static_cast<pid_t>(syscall(SYS_gettid));
  handle.pthread_ = pthread_self();
  handle.has_cpu_clock_ = pthread_getcpuclockid(handle.pthread_, &handle.cpu_clock_) == 0;
  return handle;
}

bool ThreadHandle::IsCurrent() const {
  return valid() && pthread_equal(pthread_, pthread_self()) != 0;
}

absl::Duration ThreadHandle::CpuTime() const {
  if (!valid() || !has_cpu_clock_) return absl::ZeroDuration();
  return ReadCpuClock(cpu_clock_);
}

std::string ThreadHandle::Name() const {
  if (!valid()) return "";
  std::ifstream comm("/proc/self/task/" + std::to_string(tid_) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

absl::Duration CurrentThreadCpuTime() { return ReadCpuClock(CLOCK_THREAD_CPUTIME_ID); }

void SetCurrentThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace matrix
