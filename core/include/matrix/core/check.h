// File: matrix/core/check.h
//
// MATRIX_CHECK aborts with a message when a condition is false, in every
// build: it guards invariants whose violation would corrupt state.
// MATRIX_DCHECK is the same in debug builds and compiles to nothing (without
// evaluating its argument) when NDEBUG is defined.
//
// ThreadChecker remembers the thread it was created (or last detached) on and
// verifies calls happen there; in NDEBUG builds it is empty and free.
//
//   class Choreographer {
//     void PostCallback(...) { MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_); }
//     MATRIX_THREAD_CHECKER(thread_checker_);
//   };
//
// Thread safety: ThreadChecker may be queried from any thread.

#ifndef MATRIX_CORE_CHECK_H_
#define MATRIX_CORE_CHECK_H_

#include <thread>

namespace matrix::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const char* message);
}  // namespace matrix::internal

#define MATRIX_CHECK(condition, message)                                  \
  do {                                                                    \
    if (__builtin_expect(!(condition), 0)) {                              \
      ::matrix::internal::CheckFailed(__FILE__, __LINE__, #condition, message); \
    }                                                                     \
  } while (0)

#ifdef NDEBUG
#define MATRIX_DCHECK_IS_ON() 0
#define MATRIX_DCHECK(condition, message) \
  do {                                    \
    if (false) {                          \
      (void)(condition);                  \
    }                                     \
  } while (0)
#else
#define MATRIX_DCHECK_IS_ON() 1
#define MATRIX_DCHECK(condition, message) MATRIX_CHECK(condition, message)
#endif

namespace matrix {

class ThreadChecker {
 public:
  ThreadChecker() : id_(std::this_thread::get_id()) {}
  bool CalledOnValidThread() const {
    if (id_ == std::thread::id()) id_ = std::this_thread::get_id();  // Re-bind.
    return id_ == std::this_thread::get_id();
  }
  // The next call binds the checker to whichever thread makes it.
  void Detach() { id_ = std::thread::id(); }

 private:
  mutable std::thread::id id_;
};

}  // namespace matrix

#if MATRIX_DCHECK_IS_ON()
#define MATRIX_THREAD_CHECKER(name) ::matrix::ThreadChecker name
#define MATRIX_DCHECK_CALLED_ON_VALID_THREAD(name) \
  MATRIX_DCHECK((name).CalledOnValidThread(), "called on the wrong thread")
#define MATRIX_DETACH_FROM_THREAD(name) (name).Detach()
#else
#define MATRIX_THREAD_CHECKER(name) static_assert(true, "")
#define MATRIX_DCHECK_CALLED_ON_VALID_THREAD(name) \
  do {                                             \
  } while (0)
#define MATRIX_DETACH_FROM_THREAD(name) \
  do {                                  \
  } while (0)
#endif

#endif  // MATRIX_CORE_CHECK_H_
