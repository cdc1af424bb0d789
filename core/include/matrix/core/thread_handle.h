// File: matrix/core/thread_handle.h
//
// ThreadHandle names an OS thread in the ways the monitor needs from another
// thread: its kernel thread id (for /proc and for signalling it), its pthread
// handle, and its CPU-time clock.
//
//   matrix::ThreadHandle looper_thread = matrix::ThreadHandle::Current();
//   // later, on the watchdog thread:
//   absl::Duration cpu = looper_thread.CpuTime();   // one syscall
//
// Thread safety: a value type; every method can be called from any thread.

#ifndef MATRIX_CORE_THREAD_HANDLE_H_
#define MATRIX_CORE_THREAD_HANDLE_H_

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace matrix {

class ThreadHandle {
 public:
  // An invalid handle (valid() is false).
  ThreadHandle() = default;

  // The calling thread. Async-signal-safe.
  static ThreadHandle Current();

  bool valid() const { return tid_ > 0; }
  // Kernel thread id (what gettid() returns).
  pid_t tid() const { return tid_; }
  pthread_t pthread() const { return pthread_; }
  // True when called on the thread this handle names.
  bool IsCurrent() const;

  // CPU time this thread has consumed, read from its CPU-time clock. A
  // syscall (about 0.6 us on a VM): never call it per message on the looper
  // thread. Returns absl::ZeroDuration() if the thread is gone or invalid.
  absl::Duration CpuTime() const;

  // The thread's name from /proc/self/task/<tid>/comm, or "" if unknown.
  std::string Name() const;

  friend bool operator==(const ThreadHandle& a, const ThreadHandle& b) {
    return a.tid_ == b.tid_;
  }

 private:
  pid_t tid_ = 0;
  pthread_t pthread_{};
  clockid_t cpu_clock_{};
  bool has_cpu_clock_ = false;
};

// CPU time consumed by the calling thread. A syscall; see ThreadHandle::CpuTime.
absl::Duration CurrentThreadCpuTime();

// Sets the calling thread's name (at most 15 characters are kept).
void SetCurrentThreadName(const std::string& name);

// Asks the scheduler for a short time slice for the calling thread (the
// kernel clamps it to 0.1-100 ms), keeping its policy and nice value. With
// the EEVDF scheduler (Linux 6.12 and later) a waking thread whose slice is
// shorter than the running one's preempts it, so a thread that sleeps until
// a deadline runs at the deadline on a loaded machine instead of after the
// running threads' slices (3 ms each on 2 cores, several in a row). Its
// share of the CPU does not change, and no privilege is needed. Returns the
// slice the thread now has; Unimplemented where the kernel does not take
// custom slices (it ignores the request), FailedPrecondition for a
// real-time thread (left alone). Matrix asks 0.1 ms for matrix-watchdog.
absl::StatusOr<absl::Duration> RequestShortTimeSlice(absl::Duration slice);

// The custom time slice of thread `tid` of this process (see above);
// Unimplemented when it has none.
absl::StatusOr<absl::Duration> CustomTimeSlice(pid_t tid);

}  // namespace matrix

#endif  // MATRIX_CORE_THREAD_HANDLE_H_
