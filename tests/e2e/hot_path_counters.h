// Counters for what a thread does on a hot path: heap allocations, mutex
// locks and system calls, counted only on the calling thread while counting
// is on. Used by the hot-path audit to prove that monitoring adds none.
//
//   matrix_test::HotPathCounters::InstallSyscallTrap();   // irreversible for this thread
//   matrix_test::HotPathCounters::Start();
//   RunHotPath();
//   matrix_test::HotPathCounts counts = matrix_test::HotPathCounters::Stop();
//
// - Allocations: every operator new in this binary.
// - Locks: absl::Mutex::Lock/ReaderLock/TryLock/LockWhen and
//   pthread_mutex_lock/trylock (std::mutex), interposed in this binary.
// - System calls: a seccomp filter on the thread traps every syscall except
//   those made from one known instruction; the SIGSYS handler counts the call
//   and re-issues it from that instruction, so the thread behaves as before.
//   vDSO calls (clock_gettime of CLOCK_MONOTONIC) are not syscalls and are not
//   counted. After InstallSyscallTrap() the thread must not create threads
//   (a clone re-issued from a signal handler cannot return correctly).
//
// Not for sanitizer builds (they own operator new and intercept locks).
#ifndef MATRIX_TESTS_E2E_HOT_PATH_COUNTERS_H_
#define MATRIX_TESTS_E2E_HOT_PATH_COUNTERS_H_

#include <cstdint>
#include <string>

namespace matrix_test {

struct HotPathCounts {
  int64_t allocations = 0;
  int64_t locks = 0;
  int64_t syscalls = 0;
  std::string syscall_numbers;  // The first few, for failure messages.
};

class HotPathCounters {
 public:
  // Traps this thread's syscalls (see above). Returns false if seccomp is
  // unavailable.
  static bool InstallSyscallTrap();
  static void Start();
  static HotPathCounts Stop();
};

}  // namespace matrix_test

#endif  // MATRIX_TESTS_E2E_HOT_PATH_COUNTERS_H_
