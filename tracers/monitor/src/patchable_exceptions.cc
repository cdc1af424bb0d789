// Exceptions through functions patched with return sites
// (PatchableEntries::Mechanism::kReturnSites; docs/method-tracing.md,
// "Patchable entries"). Their method-out records are written at their return
// sites, which an exception unwinding through them never reaches. So a throw
// on a traced thread notes the traced frames on the stack (each function's
// entry and the frame's CFA), and the catch writes the method-out records of
// those its frame outlived (CFA at or below its own), innermost first.
//
// Both are weak definitions of the C++ runtime's entry points, forwarding to
// the runtime's own: where a program links the runtime statically its
// definitions win, ReturnSiteExceptionsCovered() says so, and Patch() then
// wraps instead. Sanitizer builds leave the entry points to the sanitizer's
// own interceptors (and wrap).

#include <cxxabi.h>
#include <dlfcn.h>
#include <unwind.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <typeinfo>
#include <vector>

#include "matrix/core/check.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/patchable_entries.h"
#include "patchable_internal.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MATRIX_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define MATRIX_SANITIZER_BUILD 1
#endif
#endif

#if defined(MATRIX_PATCHABLE_SUPPORTED) && !defined(MATRIX_SANITIZER_BUILD)

namespace matrix::internal {
namespace {

// The entries patched with return sites, sorted: replaced whole under
// Patch()'s mutex and never freed (a throw on another thread may read one).
std::atomic<const std::vector<uintptr_t>*> g_return_site_entries{nullptr};

// A traced frame a throw found on the stack.
struct UnwoundFrame {
  uintptr_t cfa;
  uintptr_t entry;
  uint64_t throw_number;
};
constexpr size_t kMaxFrames = 64;
struct PendingFrames {
  UnwoundFrame frames[kMaxFrames] = {};
  size_t count = 0;
  uint64_t throws = 0;  // The number of the last throw noted.
};
thread_local constinit PendingFrames tls_pending;

// The entry of the function holding `pc`, if patched with return sites.
uintptr_t ReturnSiteEntryOf(uintptr_t pc) {
  const std::vector<uintptr_t>* entries = g_return_site_entries.load(std::memory_order_acquire);
  return entries == nullptr ? 0 : EntryOfFunctionAt(pc, *entries);
}

// _Unwind_Backtrace's callback. At frame k the context's CFA is frame k's
// stack pointer at its call, which is the CFA of frame k - 1 (its callee):
// a traced frame is noted when its caller is reached.
struct Walk {
  uintptr_t callee_entry = 0;  // The frame before, if traced.
};

MATRIX_NO_INSTRUMENT _Unwind_Reason_Code NoteFrame(_Unwind_Context* context, void* arg) {
  auto* walk = static_cast<Walk*>(arg);
  PendingFrames& p = tls_pending;
  const auto cfa = static_cast<uintptr_t>(_Unwind_GetCFA(context));
  if (walk->callee_entry != 0) {
    bool known = false;  // Noted by an earlier throw.
    for (size_t i = 0; i < p.count && !known; ++i) known = p.frames[i].cfa == cfa;
    if (!known && p.count < kMaxFrames) p.frames[p.count++] = {cfa, walk->callee_entry, p.throws};
  }
  const uintptr_t ip = _Unwind_GetIP(context);
  walk->callee_entry = ip == 0 ? 0 : ReturnSiteEntryOf(ip - 1);
  return _URC_NO_REASON;
}

// On a throw: the traced frames now on the stack.
MATRIX_NO_INSTRUMENT void NoteTracedFrames() {
  if (g_return_site_entries.load(std::memory_order_relaxed) == nullptr) return;
  if (*static_cast<void* const*>(CurrentThreadWriterState()) == nullptr) return;  // No ring.
  ++tls_pending.throws;
  Walk walk;
  _Unwind_Backtrace(&NoteFrame, &walk);
}

// On a catch whose frame's CFA is above `cfa`: the method-out records of the
// noted frames it outlived, innermost (lowest CFA) first. The last throw's
// frames it did not outlive return as usual and are forgotten; an earlier
// throw's stay noted (a throw caught inside a destructor that another
// exception's unwinding runs).
MATRIX_NO_INSTRUMENT void CloseUnwoundFrames(uintptr_t cfa) {
  PendingFrames& p = tls_pending;
  if (p.count == 0) return;
  std::sort(p.frames, p.frames + p.count,
            [](const UnwoundFrame& a, const UnwoundFrame& b) { return a.cfa < b.cfa; });
  size_t kept = 0;
  for (size_t i = 0; i < p.count; ++i) {
    const UnwoundFrame& f = p.frames[i];
    if (f.cfa <= cfa) {
      AppendMethodRecord(/*exit=*/true, reinterpret_cast<void*>(f.entry));
    } else if (f.throw_number != p.throws) {
      p.frames[kept++] = f;
    }
  }
  p.count = kept;
}

template <typename Fn>
Fn Next(const char* name, Fn self) {
  auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  MATRIX_CHECK(next != nullptr && next != self, "the C++ runtime's entry point is missing");
  return next;
}

}  // namespace

void PublishReturnSiteEntries(std::vector<uintptr_t> entries) {
  std::sort(entries.begin(), entries.end());
  auto* published = new std::vector<uintptr_t>(std::move(entries));
  g_return_site_entries.store(published->empty() ? nullptr : published, std::memory_order_release);
}

}  // namespace matrix::internal

extern "C" {

[[noreturn]] void matrix_cxa_throw(void* object, std::type_info* type, void (*destructor)(void*));
[[noreturn]] void matrix_cxa_rethrow();
void* matrix_cxa_begin_catch(void* exception) noexcept;

using CxaThrow = void (*)(void*, std::type_info*, void (*)(void*));
using CxaRethrow = void (*)();
using CxaBeginCatch = void* (*)(void*);

[[noreturn]] __attribute__((visibility("hidden"))) MATRIX_NO_INSTRUMENT void matrix_cxa_throw(
    void* object, std::type_info* type, void (*destructor)(void*)) {
  static const CxaThrow next = matrix::internal::Next<CxaThrow>("__cxa_throw", &matrix_cxa_throw);
  matrix::internal::NoteTracedFrames();
  next(object, type, destructor);
  __builtin_unreachable();
}

[[noreturn]] __attribute__((visibility("hidden"))) MATRIX_NO_INSTRUMENT void matrix_cxa_rethrow() {
  static const CxaRethrow next =
      matrix::internal::Next<CxaRethrow>("__cxa_rethrow", &matrix_cxa_rethrow);
  matrix::internal::NoteTracedFrames();
  next();
  __builtin_unreachable();
}

__attribute__((visibility("hidden"))) MATRIX_NO_INSTRUMENT void* matrix_cxa_begin_catch(
    void* exception) noexcept {
  static const CxaBeginCatch next =
      matrix::internal::Next<CxaBeginCatch>("__cxa_begin_catch", &matrix_cxa_begin_catch);
  matrix::internal::CloseUnwoundFrames(reinterpret_cast<uintptr_t>(__builtin_dwarf_cfa()));
  return next(exception);
}

// The runtime's own declarations (cxxabi.h), defined here as weak aliases.
namespace __cxxabiv1 {
__attribute__((weak, alias("matrix_cxa_throw"))) void __cxa_throw(void*, std::type_info*,
                                                                  void (*)(void*));
__attribute__((weak, alias("matrix_cxa_rethrow"))) void __cxa_rethrow();
__attribute__((weak, alias("matrix_cxa_begin_catch"))) void* __cxa_begin_catch(void*) noexcept;
}  // namespace __cxxabiv1

}  // extern "C"

namespace matrix::internal {

bool ReturnSiteExceptionsCovered() {
  return dlsym(RTLD_DEFAULT, "__cxa_throw") == reinterpret_cast<void*>(&matrix_cxa_throw) &&
         dlsym(RTLD_DEFAULT, "__cxa_rethrow") == reinterpret_cast<void*>(&matrix_cxa_rethrow) &&
         dlsym(RTLD_DEFAULT, "__cxa_begin_catch") ==
             reinterpret_cast<void*>(&matrix_cxa_begin_catch);
}

}  // namespace matrix::internal

#else  // MATRIX_PATCHABLE_SUPPORTED && !MATRIX_SANITIZER_BUILD

namespace matrix::internal {

void PublishReturnSiteEntries(std::vector<uintptr_t>) {}
bool ReturnSiteExceptionsCovered() { return false; }

}  // namespace matrix::internal

#endif  // MATRIX_PATCHABLE_SUPPORTED && !MATRIX_SANITIZER_BUILD
