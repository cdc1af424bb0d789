// The ends of a program that skip the agent's destructor (exit_hooks.h):
// _exit, _Exit, the exec functions and the forwarded termination signals.

#include "exit_hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>

#include "drain_watch.h"
#include "matrix/core/tick_clock.h"
#include "present_hooks.h"

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

using ExitFn = void (*)(int);
using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);
using PollFn = int (*)(struct pollfd*, nfds_t, int);

std::atomic<ExitFn> g_exit{nullptr};
std::atomic<ExitFn> g_big_exit{nullptr};
std::atomic<ExecveFn> g_execve{nullptr};
std::atomic<ExecvFn> g_execv{nullptr};
std::atomic<ExecvFn> g_execvp{nullptr};
std::atomic<ExecveFn> g_execvpe{nullptr};
std::atomic<FexecveFn> g_fexecve{nullptr};
// The real poll, resolved before any hook can wait with it (the agent's own
// would time the wait as the main thread's).
PollFn g_real_poll = nullptr;

// The signals matrix-run forwards to the program.
constexpr int kDrainSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// A hook writes a request (two bytes: 'M' for "stop on the main thread's
// behalf" or 'F' for "flush", then the ProcessEnd) to g_request_write; the
// drain thread serves it, counting its steps in g_drain_progress, and writes
// a byte to g_done_write, which nobody reads: g_done_read stays readable for
// every hook that waits.
int g_request_read = -1;
std::atomic<int> g_request_write{-1};
int g_done_read = -1;
int g_done_write = -1;
pid_t g_drain_pid = 0;  // The monitored process (set before g_request_write).
pthread_t g_drain_thread;
std::atomic<uint32_t> g_drain_progress{0};

// The process's drain: none asked yet; being asked (the request being
// written); asked (the drain thread serves it or has); or none to come
// (not monitoring, or the request could not be written).
enum DrainState : int { kNoDrain, kAsking, kAsked, kNoneToCome };
std::atomic<int> g_drain{kNoDrain};

// Whether a termination signal is being (or was) handled: the first drains,
// the others are absorbed.
std::atomic<bool> g_signal_taken{false};

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "read in signal handlers");

void* DrainThread(void*) {
  char request[2];
  size_t got = 0;
  while (got < sizeof(request)) {
    const ssize_t n = read(g_request_read, request + got, sizeof(request) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      return nullptr;
    }
  }
  NoteDrainProgress();  // Taken: under load, this alone may come late.
  const auto end = static_cast<ProcessEnd>(request[1]);
  if (request[0] == 'M') {
    StopMonitoring(end);
  } else {
    FlushBeforeProcessEnd(end);
  }
  const char done = 1;
  (void)!write(g_done_write, &done, 1);
  return nullptr;
}

// Waits until the drain thread is done, or has not advanced for kDrainStall,
// or no drain is to come. Async-signal-safe.
void WaitForDrain() {
  DrainWatch watch(kDrainStall, /*slice=*/absl::Milliseconds(50), MonotonicNow(),
                   g_drain_progress.load(std::memory_order_acquire));
  struct pollfd done = {g_done_read, POLLIN, 0};
  for (;;) {
    const int ready = g_real_poll(&done, 1, watch.NextWaitMs(MonotonicNow()));
    if (ready > 0 || (ready < 0 && errno != EINTR)) return;
    if (g_drain.load(std::memory_order_acquire) == kNoneToCome) return;
    if (!watch.KeepWaiting(MonotonicNow(), g_drain_progress.load(std::memory_order_acquire))) {
      return;
    }
  }
}

// Sends the termination signal that landed on another thread than the main
// one on to the main thread (its tid is the pid), whose dispatch in progress
// the drain ends, and waits until the main thread takes it. (The kernel
// passes over a main thread that has a signal pending already, such as a
// stack sample's; on a matrix thread, the drain would wait for this very
// thread.) False when the main thread does not take it within kDrainStall
// (it has exited, or blocks the signal): this thread takes it then.
bool HandOverToMainThread(int signal_number) {
  syscall(SYS_tgkill, g_drain_pid, g_drain_pid, signal_number);
  const TimeTicks give_up = MonotonicNow() + kDrainStall;
  while (!g_signal_taken.load(std::memory_order_acquire) && MonotonicNow() < give_up) {
    g_real_poll(nullptr, 0, 5);
  }
  return g_signal_taken.load(std::memory_order_acquire);
}

// Async-signal-safe: sigaction, raise, tgkill, the real poll, and
// DrainBeforeProcessEnd().
void OnTerminationSignal(int signal_number) {
  const int saved_errno = errno;
  // A fork or vfork child (which shares our memory) touches nothing: it
  // takes the default action at once.
  if (getpid() == g_drain_pid) {
    const bool handed_over = !OnMainThread() && MonitoringThisProcess() &&
                             !g_signal_taken.load(std::memory_order_acquire) &&
                             HandOverToMainThread(signal_number);
    if (handed_over || g_signal_taken.exchange(true)) {
      // Taken by the main thread; or the same end again (timeout(1)'s
      // signal to the process group and matrix-run's forwarded one), or
      // another termination signal, during the first's drain: absorbed.
      // The first handler ends the process with its signal.
      errno = saved_errno;
      return;
    }
    DrainBeforeProcessEnd(ProcessEnd::kSignal);
  }
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  // Blocked until the handler returns, then the default action.
  raise(signal_number);
  errno = saved_errno;
}

// Stack space for an exec*l() argument list (glibc's own do the same).
#define MATRIX_COLLECT_ARGS(first, argv, extra)                                   \
  size_t argc = 1;                                                                \
  {                                                                               \
    va_list count;                                                                \
    va_start(count, first);                                                       \
    while (va_arg(count, char*) != nullptr) ++argc;                               \
    va_end(count);                                                                \
  }                                                                               \
  char** argv = static_cast<char**>(__builtin_alloca((argc + 1) * sizeof(char*))); \
  argv[0] = const_cast<char*>(first);                                             \
  va_list args;                                                                   \
  va_start(args, first);                                                          \
  for (size_t i = 1; i <= argc; ++i) argv[i] = va_arg(args, char*);               \
  extra;                                                                          \
  va_end(args)

}  // namespace

const char* ProcessEndName(ProcessEnd end) {
  switch (end) {
    case ProcessEnd::kExit: return "exit";
    case ProcessEnd::kUnderscoreExit: return "_exit";
    case ProcessEnd::kExec: return "exec";
    case ProcessEnd::kSignal: return "a termination signal";
  }
  return "end";
}

void StartDrainThread() {
  static bool started = false;
  if (started) return;
  started = true;
  g_real_poll = reinterpret_cast<PollFn>(RealDlsym(RTLD_NEXT, "poll"));
  int request[2];
  int done[2];
  if (g_real_poll == nullptr || pipe2(request, O_CLOEXEC) != 0) return;
  if (pipe2(done, O_CLOEXEC) != 0) {
    close(request[0]);
    close(request[1]);
    return;
  }
  g_request_read = request[0];
  g_done_read = done[0];
  g_done_write = done[1];
  g_drain_pid = getpid();
  // The drain thread never takes the signals it serves.
  sigset_t blocked, previous;
  sigemptyset(&blocked);
  for (int s : kDrainSignals) sigaddset(&blocked, s);
  pthread_sigmask(SIG_BLOCK, &blocked, &previous);
  pthread_t thread;
  const bool created = pthread_create(&thread, nullptr, &DrainThread, nullptr) == 0;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (!created) return;
  pthread_detach(thread);
  pthread_setname_np(thread, "matrix-drain");
  g_drain_thread = thread;
  g_request_write.store(request[1], std::memory_order_release);
  for (int s : kDrainSignals) {
    struct sigaction current;
    if (sigaction(s, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0 ||
        current.sa_handler != SIG_DFL) {
      continue;  // The program handles or ignores it.
    }
    struct sigaction action = {};
    action.sa_handler = &OnTerminationSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(s, &action, nullptr);
  }
}

void DrainBeforeProcessEnd(ProcessEnd end) {
  // First: a vfork child shares our memory, and must not touch it.
  if (g_request_write.load(std::memory_order_acquire) < 0 || getpid() != g_drain_pid) return;
  int state = kNoDrain;
  if (g_drain.compare_exchange_strong(state, kAsking, std::memory_order_acq_rel)) {
    const char request[2] = {OnMainThread() ? 'M' : 'F', static_cast<char>(end)};
    const bool asked =
        MonitoringThisProcess() && write(g_request_write.load(std::memory_order_relaxed), request,
                                         sizeof(request)) == static_cast<ssize_t>(sizeof(request));
    g_drain.store(asked ? kAsked : kNoneToCome, std::memory_order_release);
    if (!asked) return;
  } else if (state == kNoneToCome) {
    return;
  }
  // The drain thread itself (a hook called while it drains) would wait for
  // itself.
  if (pthread_equal(pthread_self(), g_drain_thread)) return;
  WaitForDrain();
}

void NoteDrainProgress() { g_drain_progress.fetch_add(1, std::memory_order_release); }

}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT void _exit(int status) {
  const ma::ExitFn real = ma::Resolve(ma::g_exit, "_exit");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kUnderscoreExit);
  real(status);
  __builtin_unreachable();
}

MATRIX_AGENT_EXPORT void _Exit(int status) {
  const ma::ExitFn real = ma::Resolve(ma::g_big_exit, "_Exit");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kUnderscoreExit);
  real(status);
  __builtin_unreachable();
}

MATRIX_AGENT_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  const ma::ExecveFn real = ma::Resolve(ma::g_execve, "execve");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kExec);
  return real(path, argv, envp);
}

MATRIX_AGENT_EXPORT int execv(const char* path, char* const argv[]) {
  const ma::ExecvFn real = ma::Resolve(ma::g_execv, "execv");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kExec);
  return real(path, argv);
}

MATRIX_AGENT_EXPORT int execvp(const char* file, char* const argv[]) {
  const ma::ExecvFn real = ma::Resolve(ma::g_execvp, "execvp");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kExec);
  return real(file, argv);
}

MATRIX_AGENT_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  const ma::ExecveFn real = ma::Resolve(ma::g_execvpe, "execvpe");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kExec);
  return real(file, argv, envp);
}

MATRIX_AGENT_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  const ma::FexecveFn real = ma::Resolve(ma::g_fexecve, "fexecve");
  ma::DrainBeforeProcessEnd(ma::ProcessEnd::kExec);
  return real(fd, argv, envp);
}

MATRIX_AGENT_EXPORT int execl(const char* path, const char* arg, ...) {
  MATRIX_COLLECT_ARGS(arg, argv, (void)0);
  return execv(path, argv);
}

MATRIX_AGENT_EXPORT int execlp(const char* file, const char* arg, ...) {
  MATRIX_COLLECT_ARGS(arg, argv, (void)0);
  return execvp(file, argv);
}

MATRIX_AGENT_EXPORT int execle(const char* path, const char* arg, ...) {
  char* const* envp = nullptr;
  MATRIX_COLLECT_ARGS(arg, argv, envp = va_arg(args, char* const*));
  return execve(path, argv, envp);
}
