// The ends of a program that skip the agent's destructor (exit_hooks.h):
// _exit, _Exit, the exec functions and the forwarded termination signals.

#include "exit_hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstddef>

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
// drain thread serves it and writes a byte to g_done_write.
int g_request_read = -1;
std::atomic<int> g_request_write{-1};
int g_done_read = -1;
int g_done_write = -1;
std::atomic<bool> g_drain_requested{false};

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
  const auto end = static_cast<ProcessEnd>(request[1]);
  if (request[0] == 'M') {
    StopMonitoring(end);
  } else {
    FlushReportsFor(kShutdownDrainTimeout);
  }
  const char done = 1;
  (void)!write(g_done_write, &done, 1);
  return nullptr;
}

// Async-signal-safe: sigaction and raise, and DrainBeforeProcessEnd().
void OnTerminationSignal(int signal_number) {
  const int saved_errno = errno;
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);  // A second one kills.
  DrainBeforeProcessEnd(ProcessEnd::kSignal);
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
  if (!MonitoringThisProcess()) return;
  const int fd = g_request_write.load(std::memory_order_acquire);
  if (fd < 0 || g_drain_requested.exchange(true)) return;
  const char request[2] = {OnMainThread() ? 'M' : 'F', static_cast<char>(end)};
  if (write(fd, request, sizeof(request)) != static_cast<ssize_t>(sizeof(request))) return;
  struct pollfd done = {g_done_read, POLLIN, 0};
  const int wait_ms = static_cast<int>(absl::ToInt64Milliseconds(kDrainWait));
  while (g_real_poll(&done, 1, wait_ms) < 0 && errno == EINTR) {
  }
}

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
