// File: tracers/src/tsan_visible_mutex_lock.h (private)
//
// TsanVisibleMutexLock is absl::MutexLock that ThreadSanitizer can see.
// Debian's prebuilt Abseil is not compiled with -fsanitize=thread, so its
// Mutex has no TSan annotations: TSan does not know that two critical
// sections of one absl::Mutex are ordered, and reports races on data the
// mutex guards. This lock adds __tsan_acquire after Lock() and
// __tsan_release before Unlock() on the mutex's address. Outside TSan builds
// it is exactly absl::MutexLock.
//
//   absl::Mutex mu_;
//   int value_ ABSL_GUARDED_BY(mu_);
//   void Set(int v) {
//     internal::TsanVisibleMutexLock lock(&mu_);
//     value_ = v;
//   }
//
// Thread safety: like absl::MutexLock; use on one thread.

#ifndef MATRIX_TRACERS_SRC_TSAN_VISIBLE_MUTEX_LOCK_H_
#define MATRIX_TRACERS_SRC_TSAN_VISIBLE_MUTEX_LOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(__SANITIZE_THREAD__)
#define MATRIX_INTERNAL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MATRIX_INTERNAL_TSAN 1
#endif
#endif

#ifdef MATRIX_INTERNAL_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace matrix::internal {

class ABSL_SCOPED_LOCKABLE TsanVisibleMutexLock {
 public:
  explicit TsanVisibleMutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
#ifdef MATRIX_INTERNAL_TSAN
    __tsan_acquire(mu_);
#endif
  }
  ~TsanVisibleMutexLock() ABSL_UNLOCK_FUNCTION() {
#ifdef MATRIX_INTERNAL_TSAN
    __tsan_release(mu_);
#endif
    mu_->Unlock();
  }
  TsanVisibleMutexLock(const TsanVisibleMutexLock&) = delete;
  TsanVisibleMutexLock& operator=(const TsanVisibleMutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_SRC_TSAN_VISIBLE_MUTEX_LOCK_H_
