// File: tracers/evidence/src/internal/safe_read.h
//
// Reads this process's memory without faulting on bad addresses: the kernel
// copies it (process_vm_readv on our own pid returns EFAULT instead of raising
// SIGSEGV for unmapped or protected memory). Used where the memory may be in
// flux or garbage: the frame-pointer walk through JIT code (stack_capture.cc)
// and the CPython frame-chain reader (python_frames.cc).
//
//   uintptr_t words[2];
//   if (matrix::internal::SafeRead(getpid(), fp, words, sizeof(words))) ...
//
// Thread safety: thread-safe and async-signal-safe (one syscall; errno is
// left as it was).

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_SAFE_READ_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_SAFE_READ_H_

#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace matrix::internal {

// Copies `size` bytes at `address` of process `pid` (our own) into `out`.
// False, with `out` unspecified, when any of them cannot be read.
inline bool SafeRead(pid_t pid, uintptr_t address, void* out, size_t size) {
  if (size == 0) return true;
  if (address == 0 || address + size < address) return false;
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(address), size};
  const int saved_errno = errno;
  // The typed libc wrapper, not syscall(): its variadic int arguments would
  // reach the kernel with undefined upper halves (seen failing under ASan).
  const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  errno = saved_errno;
  return n == static_cast<ssize_t>(size);
}

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_SAFE_READ_H_
