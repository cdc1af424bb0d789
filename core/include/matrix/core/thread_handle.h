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

}  // namespace matrix

#endif  // MATRIX_CORE_THREAD_HANDLE_H_
