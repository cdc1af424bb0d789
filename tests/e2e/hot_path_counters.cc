#include "hot_path_counters.h"

#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"

namespace matrix_test {
namespace {

thread_local bool tls_counting = false;
thread_local int64_t tls_allocations = 0;
thread_local int64_t tls_locks = 0;
thread_local int64_t tls_syscalls = 0;
thread_local long tls_syscall_numbers[8];

}  // namespace
}  // namespace matrix_test

// ---- The syscall gadget: the only instruction allowed to make syscalls. ----
extern "C" long matrix_test_raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                                        long a6);
extern "C" char matrix_test_syscall_return[];
asm(R"(
  .text
  .globl matrix_test_raw_syscall
  .type matrix_test_raw_syscall, @function
matrix_test_raw_syscall:
  movq %rdi, %rax
  movq %rsi, %rdi
  movq %rdx, %rsi
  movq %rcx, %rdx
  movq %r8, %r10
  movq %r9, %r8
  movq 8(%rsp), %r9
  syscall
  .globl matrix_test_syscall_return
matrix_test_syscall_return:
  ret
  .size matrix_test_raw_syscall, .-matrix_test_raw_syscall
)");

namespace matrix_test {
namespace {

void OnSigsys(int, siginfo_t* info, void* context) {
  auto* uc = static_cast<ucontext_t*>(context);
  greg_t* r = uc->uc_mcontext.gregs;
  const long nr = info->si_syscall;
  if (tls_counting) {
    if (tls_syscalls < 8) tls_syscall_numbers[tls_syscalls] = nr;
    ++tls_syscalls;
  }
  r[REG_RAX] = matrix_test_raw_syscall(nr, r[REG_RDI], r[REG_RSI], r[REG_RDX], r[REG_R10],
                                       r[REG_R8], r[REG_R9]);
}

}  // namespace

bool HotPathCounters::InstallSyscallTrap() {
  struct sigaction action {};
  action.sa_sigaction = OnSigsys;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGSYS, &action, nullptr) != 0) return false;

  const uint64_t allowed_ip = reinterpret_cast<uint64_t>(matrix_test_syscall_return);
  const uint32_t ip_lo = static_cast<uint32_t>(allowed_ip);
  const uint32_t ip_hi = static_cast<uint32_t>(allowed_ip >> 32);
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      // rt_sigreturn ends the SIGSYS handler itself.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 5, 0),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip_lo, 0, 2),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, instruction_pointer) + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip_hi, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  // Without SECCOMP_FILTER_FLAG_TSYNC the filter applies to this thread only.
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
}

void HotPathCounters::Start() {
  tls_allocations = tls_locks = tls_syscalls = 0;
  tls_counting = true;
}

HotPathCounts HotPathCounters::Stop() {
  tls_counting = false;
  HotPathCounts counts;
  counts.allocations = tls_allocations;
  counts.locks = tls_locks;
  counts.syscalls = tls_syscalls;
  for (int64_t i = 0; i < tls_syscalls && i < 8; ++i) {
    absl::StrAppend(&counts.syscall_numbers, i ? "," : "", tls_syscall_numbers[i]);
  }
  return counts;
}

}  // namespace matrix_test

// ---- Allocation counting: every operator new of this binary. ----
void* operator new(size_t size) {
  if (matrix_test::tls_counting) ++matrix_test::tls_allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  if (matrix_test::tls_counting) ++matrix_test::tls_allocations;
  return std::malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t& t) noexcept { return operator new(size, t); }
void* operator new(size_t size, std::align_val_t align) {
  if (matrix_test::tls_counting) ++matrix_test::tls_allocations;
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<size_t>(align), size ? size : 1) != 0) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t size, std::align_val_t align) { return operator new(size, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

// ---- Lock counting: interpose the lock entry points, forward to the real ones. ----
namespace {

#define MATRIX_STR2(x) #x
#define MATRIX_STR(x) MATRIX_STR2(x)

void* Real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) std::abort();
  return fn;
}

std::string AbslName(const char* rest) {
  const std::string ns = MATRIX_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
}

void CountLock() {
  if (matrix_test::tls_counting) ++matrix_test::tls_locks;
}

}  // namespace

extern "C" int pthread_mutex_lock(pthread_mutex_t* m) {
  static auto* real = reinterpret_cast<int (*)(pthread_mutex_t*)>(Real("pthread_mutex_lock"));
  CountLock();
  return real(m);
}
extern "C" int pthread_mutex_trylock(pthread_mutex_t* m) {
  static auto* real = reinterpret_cast<int (*)(pthread_mutex_t*)>(Real("pthread_mutex_trylock"));
  CountLock();
  return real(m);
}

namespace absl {
inline namespace ABSL_OPTION_INLINE_NAMESPACE_NAME {
void Mutex::Lock() {
  static auto* real =
      reinterpret_cast<void (*)(Mutex*)>(Real(AbslName("5Mutex4LockEv").c_str()));
  CountLock();
  real(this);
}
void Mutex::ReaderLock() {
  static auto* real =
      reinterpret_cast<void (*)(Mutex*)>(Real(AbslName("5Mutex10ReaderLockEv").c_str()));
  CountLock();
  real(this);
}
bool Mutex::TryLock() {
  static auto* real =
      reinterpret_cast<bool (*)(Mutex*)>(Real(AbslName("5Mutex7TryLockEv").c_str()));
  CountLock();
  return real(this);
}
void Mutex::LockWhen(const Condition& cond) {
  static auto* real = reinterpret_cast<void (*)(Mutex*, const Condition&)>(
      Real(AbslName("5Mutex8LockWhenERKNS0_9ConditionE").c_str()));
  CountLock();
  real(this, cond);
}
}  // namespace ABSL_OPTION_INLINE_NAMESPACE_NAME
}  // namespace absl
