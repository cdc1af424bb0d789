#include "matrix/core/thread_handle.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <fstream>

namespace matrix {
namespace {

absl::Duration ReadCpuClock(clockid_t clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return absl::ZeroDuration();
  return absl::Seconds(ts.tv_sec) + absl::Nanoseconds(ts.tv_nsec);
}

}  // namespace

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
