// ThreadSanitizer annotations for a prebuilt (uninstrumented) Abseil.
//
// Linked into matrix::core only when building with -fsanitize=thread (see
// core/CMakeLists.txt). Debian's libabsl_synchronization is not compiled with
// TSan, so absl::Mutex's lock and unlock are invisible to it: every variable
// guarded by an absl::Mutex and shared between threads is reported as a race.
// When Abseil itself is built with TSan it annotates its mutex operations with
// the __tsan_mutex_* interface; this file adds the same annotations around the
// library's exported entry points instead.
//
// It defines absl::Mutex::Lock() and friends in the executable. Those
// definitions take precedence over the shared library's (including the
// library's own calls through its PLT, e.g. from absl::Notification), and
// forward to the library's implementation found with dlsym(RTLD_NEXT).
// Everything between a pre_* and post_* annotation is ignored by TSan, which
// covers the Conditions the library evaluates for other threads.
//
// Limitations: Await() and CondVar waits are annotated as holding the mutex
// exclusively (matrix-cpp never waits on a reader lock); the reader variants
// with timeouts are not wrapped.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wthread-safety-analysis"
#endif

namespace {

#define MATRIX_TSAN_STR2(x) #x
#define MATRIX_TSAN_STR(x) MATRIX_TSAN_STR2(x)

static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the symbol names below assume Abseil's inline namespace");

// Finds the library's implementation of a member of absl::<inline ns>::.
// `nested` is "_ZN" (or "_ZNK" for const members); `rest` is the mangled
// name after the namespaces.
void* FindReal(const char* nested, const char* rest) {
  const std::string ns = MATRIX_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name =
      std::string(nested) + "4absl" + std::to_string(ns.size()) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "[matrix] TSan Abseil shim: %s not found\n", name.c_str());
    std::abort();
  }
  return fn;
}

template <typename Fn>
Fn Real(const char* nested, const char* rest) {
  return reinterpret_cast<Fn>(FindReal(nested, rest));
}

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;
constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;

// The library calls some of its own wrapped entry points (the *WithTimeout()
// variants tail-call the *WithDeadline() ones): only the outermost wrapped
// call on a thread annotates.
thread_local int t_depth = 0;

class Scope {
 public:
  Scope() : outermost_(t_depth++ == 0) {}
  ~Scope() { --t_depth; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  bool outermost() const { return outermost_; }

 private:
  const bool outermost_;
};

// Runs `call` (which acquires `mu`) inside lock annotations.
template <typename Call>
auto Acquiring(void* mu, unsigned flags, Call call) {
  Scope scope;
  if (scope.outermost()) __tsan_mutex_pre_lock(mu, flags);
  auto result = call();
  if (scope.outermost()) __tsan_mutex_post_lock(mu, flags, 0);
  return result;
}

// Runs `call` (which releases `mu`) inside unlock annotations.
template <typename Call>
void Releasing(void* mu, unsigned flags, Call call) {
  Scope scope;
  if (scope.outermost()) __tsan_mutex_pre_unlock(mu, flags);
  call();
  if (scope.outermost()) __tsan_mutex_post_unlock(mu, flags);
}

// Runs `call`, which releases the held `mu` while it blocks and holds it
// again when it returns (Await(), CondVar waits).
template <typename Call>
auto ReleasingWhile(void* mu, Call call) {
  Scope scope;
  if (scope.outermost()) __tsan_mutex_pre_unlock(mu, 0);
  auto result = call();
  if (scope.outermost()) {
    __tsan_mutex_post_unlock(mu, 0);
    __tsan_mutex_pre_lock(mu, 0);
    __tsan_mutex_post_lock(mu, 0, 0);
  }
  return result;
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// Calls returning void are wrapped to return a dummy value.
#define MATRIX_TSAN_VOID(call) \
  [&] {                        \
    call;                      \
    return 0;                  \
  }

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex4LockEv");
  Acquiring(this, 0, MATRIX_TSAN_VOID(real(this)));
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex6UnlockEv");
  Releasing(this, 0, [&] { real(this); });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("_ZN", "5Mutex7TryLockEv");
  Scope scope;
  if (scope.outermost()) __tsan_mutex_pre_lock(this, kTry);
  const bool locked = real(this);
  if (scope.outermost()) __tsan_mutex_post_lock(this, kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex10ReaderLockEv");
  Acquiring(this, kRead, MATRIX_TSAN_VOID(real(this)));
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN", "5Mutex12ReaderUnlockEv");
  Releasing(this, kRead, [&] { real(this); });
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("_ZN", "5Mutex13ReaderTryLockEv");
  Scope scope;
  if (scope.outermost()) __tsan_mutex_pre_lock(this, kRead | kTry);
  const bool locked = real(this);
  if (scope.outermost()) {
    __tsan_mutex_post_lock(this, kRead | kTry | (locked ? 0 : kTryFailed), 0);
  }
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("_ZN", "5Mutex8LockWhenERKNS0_9ConditionE");
  Acquiring(this, 0, MATRIX_TSAN_VOID(real(this, cond)));
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_ZN", "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquiring(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_ZN", "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquiring(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>(
      "_ZN", "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquiring(this, kRead, MATRIX_TSAN_VOID(real(this, cond)));
}

void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("_ZN", "5Mutex5AwaitERKNS0_9ConditionE");
  ReleasingWhile(this, MATRIX_TSAN_VOID(real(this, cond)));
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "_ZN", "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleasingWhile(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "_ZN", "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleasingWhile(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("_ZN", "7CondVar4WaitEPNS0_5MutexE");
  ReleasingWhile(mu, MATRIX_TSAN_VOID(real(this, mu)));
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "_ZN", "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleasingWhile(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      "_ZN", "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleasingWhile(mu, [&] { return real(this, mu, deadline); });
}

#undef MATRIX_TSAN_VOID

// Notification's fast path reads an atomic inside the library, without the
// mutex: publish and observe the notification explicitly. (Its mutex calls
// inside the library reach the wrappers above through the PLT.)
void Notification::Notify() {
  static const auto real = Real<void (*)(Notification*)>("_ZN", "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real =
      Real<void (*)(const Notification*)>("_ZNK", "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<bool (*)(const Notification*, Duration)>(
      "_ZNK", "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, Time)>(
      "_ZNK", "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

#if defined(__clang__)
#pragma clang diagnostic pop
#endif
