// File: tracers/evidence/src/internal/safe_read.h
//
// Reads this process's memory without faulting on bad addresses: the kernel
// copies it (process_vm_readv on our own pid returns EFAULT instead of raising
// SIGSEGV for unmapped or protected memory). Used where the memory may be in
// flux or garbage: the frame-pointer walk through JIT code (stack_capture.cc)
// and the interpreters' frame-chain readers (python_frames.cc,
// qml_frames.cc), which share the checks below: a plausible pointer, a field
// of a copied struct, and a bounded chain walk that refuses a cycle.
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
#include <cstring>

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

// A user-space, `align`-aligned, non-null pointer (x86-64 / aarch64 48-bit
// user space).
inline bool PlausiblePointer(uintptr_t p, uintptr_t align = 8) {
  return p >= 4096 && p < (uintptr_t{1} << 47) && (p & (align - 1)) == 0;
}

// The `T` at `offset` of a struct copied into `buffer`.
template <typename T>
T Field(const unsigned char* buffer, size_t offset) {
  T value;
  memcpy(&value, buffer + offset, sizeof(T));
  return value;
}

// The nodes of a linked chain visited so far, at most kMax (fixed storage).
// full(): the walk is at its bound (the chain is truncated there). Visit():
// false when the node was seen before (a cycle: the chain changed under the
// reader or is garbage); call it only when not full().
template <int kMax>
class ChainWalk {
 public:
  bool full() const { return count_ == kMax; }
  bool Visit(uintptr_t node) {
    for (int i = 0; i < count_; ++i) {
      if (seen_[i] == node) return false;
    }
    seen_[count_++] = node;
    return true;
  }

 private:
  uintptr_t seen_[kMax];
  int count_ = 0;
};

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_SAFE_READ_H_
