// Wait hooks of libmatrix-agent.so (wait_hooks.h): poll & co., and the
// other waits that may be the loop's own.

#include "wait_hooks.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>

#include "loop_wait_sites.h"
#include "present_hooks.h"  // Resolve, RealDlsym
#include "session.h"

#define MATRIX_AGENT_EXPORT extern "C" __attribute__((visibility("default")))

namespace matrix::agent {
namespace {

using PollFn = int (*)(struct pollfd*, nfds_t, int);
using PpollFn = int (*)(struct pollfd*, nfds_t, const struct timespec*, const sigset_t*);
using EpollWaitFn = int (*)(int, struct epoll_event*, int, int);
using EpollPwaitFn = int (*)(int, struct epoll_event*, int, int, const sigset_t*);
using SelectFn = int (*)(int, fd_set*, fd_set*, fd_set*, struct timeval*);
using PselectFn = int (*)(int, fd_set*, fd_set*, fd_set*, const struct timespec*,
                          const sigset_t*);
using CondWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*);
using CondTimedWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*, const struct timespec*);
using CondClockWaitFn = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t,
                                const struct timespec*);
using SemWaitFn = int (*)(sem_t*);
using SemTimedWaitFn = int (*)(sem_t*, const struct timespec*);
using SemClockWaitFn = int (*)(sem_t*, clockid_t, const struct timespec*);
using NanosleepFn = int (*)(const struct timespec*, struct timespec*);
using ClockNanosleepFn = int (*)(clockid_t, int, const struct timespec*, struct timespec*);
using UsleepFn = int (*)(useconds_t);
// syscall(2): glibc's takes the number and six register-sized arguments.
using SyscallFn = long (*)(long, long, long, long, long, long, long);
using ReadFn = ssize_t (*)(int, void*, size_t);
using ReadChkFn = ssize_t (*)(int, void*, size_t, size_t);

// The real functions are resolved (Resolve(), present_hooks.h) by
// ResolveWaits() in the agent's constructor, or on first use by a call that
// comes before it (e.g. from another library's constructor).

// pthread_cond_wait and pthread_cond_timedwait have two versions in glibc
// (GLIBC_2.2.5, the old condition variable, and GLIBC_2.3.2); plain dlsym may
// return the old one. The agent's wrappers are exported as GLIBC_2.3.2
// (agent.map), so programs bound to the old version never reach them.
template <typename Fn>
Fn ResolveVersioned(std::atomic<Fn>& slot, const char* name, const char* version) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, name, version));
    if (fn == nullptr) fn = reinterpret_cast<Fn>(RealDlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}
constexpr char kCondVersion[] = "GLIBC_2.3.2";

std::atomic<PollFn> g_poll{nullptr};
std::atomic<PpollFn> g_ppoll{nullptr};
std::atomic<EpollWaitFn> g_epoll_wait{nullptr};
std::atomic<EpollPwaitFn> g_epoll_pwait{nullptr};
std::atomic<SelectFn> g_select{nullptr};
std::atomic<PselectFn> g_pselect{nullptr};
std::atomic<CondWaitFn> g_cond_wait{nullptr};
std::atomic<CondTimedWaitFn> g_cond_timedwait{nullptr};
std::atomic<CondClockWaitFn> g_cond_clockwait{nullptr};
std::atomic<SemWaitFn> g_sem_wait{nullptr};
std::atomic<SemTimedWaitFn> g_sem_timedwait{nullptr};
std::atomic<SemClockWaitFn> g_sem_clockwait{nullptr};
std::atomic<NanosleepFn> g_nanosleep{nullptr};
std::atomic<ClockNanosleepFn> g_clock_nanosleep{nullptr};
std::atomic<UsleepFn> g_usleep{nullptr};
std::atomic<SyscallFn> g_syscall{nullptr};
std::atomic<ReadFn> g_read{nullptr};
std::atomic<ReadChkFn> g_read_chk{nullptr};

// Runs `real` (poll & co.) from call site `site` on the main thread. A
// blocking call is a dispatch boundary, and its site becomes the loop's poll
// site. A call with a zero timeout is a boundary too when it comes from that
// same site (return address and stack depth): the loop polling without
// sleeping because it has more work (GLib with idle sources pending, libuv
// with idle handles), one iteration per poll. From anywhere else it is work
// inside the dispatch.
template <typename Call>
inline auto TimedWait(bool blocking, const LoopWaitSites::CallSite& site, Call&& real) {
  if (blocking) {
    if (!MainThreadMonitoring()) return real();
    Session& s = *g_session;
    if (!s.in_swap) {
      const bool same =
          site.return_address == s.loop_poll.return_address && site.frame == s.loop_poll.frame;
      s.loop_poll_repeats = same ? s.loop_poll_repeats + 1 : 1;
      s.loop_poll = site;
      s.dispatch_from_loop_poll = true;
    }
    return BoundaryWait(site.frame, real);
  }
  if (g_state.load(std::memory_order_relaxed) != kRunning ||
      !pthread_equal(pthread_self(), g_main_thread)) {
    return real();
  }
  const Session& s = *g_session;
  if (s.in_swap || site.return_address != s.loop_poll.return_address ||
      site.frame != s.loop_poll.frame) {
    return real();
  }
  g_session->dispatch_from_loop_poll = true;
  ++g_session->loop_poll_repeats;
  return BoundaryWait(site.frame, real);
}

inline int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall.
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Whether a wait that reports errors as -1 and errno returned early because a
// signal handler ran.
template <typename Result>
inline bool FailedWithEintr(Result result) {
  return result == -1 && errno == EINTR;
}

// A wait that is not poll & co. (condition variable, semaphore, sleep, read
// of a wake fd) from call site `site`: a dispatch boundary when the site is
// the loop's wait (the first one starts Matrix, as poll does); otherwise
// work inside the dispatch, timed (two vDSO clock reads) and counted towards
// learning the site when `count` says the wait may be the loop's (a read:
// its fd is a wake fd). A wait that `interrupted` says a signal handler cut
// short (EINTR) is not counted: its caller usually waits again from the same
// site for the rest of the time (Python's time.sleep,
// std::this_thread::sleep_for), and the agent's own stack captures are such
// signals, 50 ms apart in a slow dispatch, so one long sleep in a handler
// would otherwise count as several blocked waits and be learned as the loop's
// wait, ending the dispatch before its LAG or ANR. Main thread only; other
// threads call `real` directly.
template <typename Count, typename Call, typename Interrupted>
inline auto SiteWait(const LoopWaitSites::CallSite& site, Count&& count, Call&& real,
                     Interrupted&& interrupted) {
  LoopWaitSites& sites = g_session->wait_sites;
  if (sites.IsLoopWait(site) && MainThreadMonitoring()) {
    g_session->dispatch_from_loop_poll = false;
    return BoundaryWait(site.frame, real);
  }
  if (g_session->in_swap) return real();  // The driver's waits belong to the present.
  const int64_t begin = MonotonicNanos();
  auto result = real();
  const int saved_errno = errno;
  const bool cut_short = interrupted(result);
  const int64_t waited = MonotonicNanos() - begin;
  if (!cut_short && count(waited)) {
    const Session& s = *g_session;
    const bool poll_loop = s.dispatch_from_loop_poll && s.loop_poll_repeats >= 2;
    sites.CountWait(site, waited, poll_loop ? s.loop_poll.frame : 0);
  }
  errno = saved_errno;
  return result;
}

// The same for a wait that reports errors as -1 and errno (every wait but
// clock_nanosleep; the condition variables never return EINTR).
template <typename Count, typename Call>
inline auto SiteWait(const LoopWaitSites::CallSite& site, Count&& count, Call&& real) {
  return SiteWait(site, count, real, [](auto result) { return FailedWithEintr(result); });
}

// A read() of `fd` may be the loop's wait when `fd` is a pipe, FIFO, socket,
// eventfd/timerfd/signalfd (anonymous inodes have no file type) or character
// device; a regular file, directory or block device never is. One fstat,
// only after a read that lasted kWakeReadNanos from a site not known yet
// (a millisecond or more spent in the read already: the fstat adds little).
constexpr int64_t kWakeReadNanos = 1'000'000;
bool IsWakeFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISBLK(st.st_mode);
}

// read() on the main thread: only a read of a wake fd that blocked (or
// from a site already being learned for that fd) counts towards the loop's
// wait; ordinary reads pay two table scans and two vDSO clock reads.
template <typename Call>
inline ssize_t ReadWait(const LoopWaitSites::CallSite& site, Call&& real) {
  const LoopWaitSites& sites = g_session->wait_sites;
  return SiteWait(
      site,
      [&](int64_t waited) {
        if (sites.Knows(site)) return true;
        return waited >= kWakeReadNanos && IsWakeFd(site.fd);
      },
      real);
}

// The wrapper's call site: its return address and its frame (the caller's
// stack depth). Used in the exported wrappers themselves.
#define MATRIX_AGENT_CALL_SITE(fd)                                            \
  ::matrix::agent::LoopWaitSites::CallSite {                                 \
    reinterpret_cast<uintptr_t>(__builtin_return_address(0)),                \
        reinterpret_cast<uintptr_t>(__builtin_frame_address(0)), (fd)       \
  }

// Every call of the other waits may be the loop's.
inline bool AlwaysCount(int64_t) { return true; }

inline bool Blocking(const struct timespec* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_nsec != 0;
}
inline bool Blocking(const struct timeval* t) {
  return t == nullptr || t->tv_sec != 0 || t->tv_usec != 0;
}

}  // namespace

void ResolveWaits() {
  Resolve(g_poll, "poll");
  Resolve(g_ppoll, "ppoll");
  Resolve(g_epoll_wait, "epoll_wait");
  Resolve(g_epoll_pwait, "epoll_pwait");
  Resolve(g_select, "select");
  Resolve(g_pselect, "pselect");
  ResolveVersioned(g_cond_wait, "pthread_cond_wait", kCondVersion);
  ResolveVersioned(g_cond_timedwait, "pthread_cond_timedwait", kCondVersion);
  Resolve(g_cond_clockwait, "pthread_cond_clockwait");
  Resolve(g_sem_wait, "sem_wait");
  Resolve(g_sem_timedwait, "sem_timedwait");
  Resolve(g_sem_clockwait, "sem_clockwait");
  Resolve(g_nanosleep, "nanosleep");
  Resolve(g_clock_nanosleep, "clock_nanosleep");
  Resolve(g_usleep, "usleep");
  Resolve(g_syscall, "syscall");
  Resolve(g_read, "read");
  Resolve(g_read_chk, "__read_chk");
}

}  // namespace matrix::agent

namespace ma = matrix::agent;

MATRIX_AGENT_EXPORT int poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  const ma::PollFn real = ma::Resolve(ma::g_poll, "poll");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(fds, nfds, timeout); });
}

MATRIX_AGENT_EXPORT int __poll_chk(struct pollfd* fds, nfds_t nfds, int timeout, size_t) {
  return poll(fds, nfds, timeout);
}

MATRIX_AGENT_EXPORT int ppoll(struct pollfd* fds, nfds_t nfds, const struct timespec* timeout,
                              const sigset_t* sigmask) {
  const ma::PpollFn real = ma::Resolve(ma::g_ppoll, "ppoll");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(fds, nfds, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int __ppoll_chk(struct pollfd* fds, nfds_t nfds,
                                    const struct timespec* timeout, const sigset_t* sigmask,
                                    size_t) {
  return ppoll(fds, nfds, timeout, sigmask);
}

MATRIX_AGENT_EXPORT int epoll_wait(int epfd, struct epoll_event* events, int maxevents,
                                   int timeout) {
  const ma::EpollWaitFn real = ma::Resolve(ma::g_epoll_wait, "epoll_wait");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(epfd, events, maxevents, timeout); });
}

MATRIX_AGENT_EXPORT int epoll_pwait(int epfd, struct epoll_event* events, int maxevents,
                                    int timeout, const sigset_t* sigmask) {
  const ma::EpollPwaitFn real = ma::Resolve(ma::g_epoll_pwait, "epoll_pwait");
  return ma::TimedWait(timeout != 0, MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(epfd, events, maxevents, timeout, sigmask); });
}

MATRIX_AGENT_EXPORT int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                               struct timeval* timeout) {
  const ma::SelectFn real = ma::Resolve(ma::g_select, "select");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1),
                       [&] { return real(nfds, readfds, writefds, exceptfds, timeout); });
}

MATRIX_AGENT_EXPORT int pselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                                const struct timespec* timeout, const sigset_t* sigmask) {
  const ma::PselectFn real = ma::Resolve(ma::g_pselect, "pselect");
  return ma::TimedWait(ma::Blocking(timeout), MATRIX_AGENT_CALL_SITE(-1), [&] {
    return real(nfds, readfds, writefds, exceptfds, timeout, sigmask);
  });
}

// The other waits (docs/matrix-run.md, "The loop's own waits"): on the main
// thread, the loop's wait when their call site was learned as such
// (LoopWaitSites), else work. Other threads: the real call after one relaxed
// load and pthread_self().
MATRIX_AGENT_EXPORT int pthread_cond_wait(pthread_cond_t* cond, pthread_mutex_t* mutex) {
  const ma::CondWaitFn real =
      ma::ResolveVersioned(ma::g_cond_wait, "pthread_cond_wait", ma::kCondVersion);
  if (!ma::MainThreadWatched()) return real(cond, mutex);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex); });
}

MATRIX_AGENT_EXPORT int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                               const struct timespec* abstime) {
  const ma::CondTimedWaitFn real =
      ma::ResolveVersioned(ma::g_cond_timedwait, "pthread_cond_timedwait", ma::kCondVersion);
  if (!ma::MainThreadWatched()) return real(cond, mutex, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex, abstime); });
}

MATRIX_AGENT_EXPORT int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                               clockid_t clock, const struct timespec* abstime) {
  const ma::CondClockWaitFn real = ma::Resolve(ma::g_cond_clockwait, "pthread_cond_clockwait");
  if (!ma::MainThreadWatched()) return real(cond, mutex, clock, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(cond, mutex, clock, abstime); });
}

MATRIX_AGENT_EXPORT int sem_wait(sem_t* sem) {
  const ma::SemWaitFn real = ma::Resolve(ma::g_sem_wait, "sem_wait");
  if (!ma::MainThreadWatched()) return real(sem);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount, [&] { return real(sem); });
}

MATRIX_AGENT_EXPORT int sem_timedwait(sem_t* sem, const struct timespec* abstime) {
  const ma::SemTimedWaitFn real = ma::Resolve(ma::g_sem_timedwait, "sem_timedwait");
  if (!ma::MainThreadWatched()) return real(sem, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(sem, abstime); });
}

MATRIX_AGENT_EXPORT int sem_clockwait(sem_t* sem, clockid_t clock,
                                      const struct timespec* abstime) {
  const ma::SemClockWaitFn real = ma::Resolve(ma::g_sem_clockwait, "sem_clockwait");
  if (!ma::MainThreadWatched()) return real(sem, clock, abstime);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(sem, clock, abstime); });
}

MATRIX_AGENT_EXPORT int nanosleep(const struct timespec* duration, struct timespec* remaining) {
  const ma::NanosleepFn real = ma::Resolve(ma::g_nanosleep, "nanosleep");
  if (!ma::MainThreadWatched()) return real(duration, remaining);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(duration, remaining); });
}

MATRIX_AGENT_EXPORT int clock_nanosleep(clockid_t clock, int flags,
                                        const struct timespec* request,
                                        struct timespec* remaining) {
  const ma::ClockNanosleepFn real = ma::Resolve(ma::g_clock_nanosleep, "clock_nanosleep");
  if (!ma::MainThreadWatched()) return real(clock, flags, request, remaining);
  // clock_nanosleep returns the error number itself.
  return ma::SiteWait(
      MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
      [&] { return real(clock, flags, request, remaining); },
      [](int result) { return result == EINTR; });
}

MATRIX_AGENT_EXPORT int usleep(useconds_t usec) {
  const ma::UsleepFn real = ma::Resolve(ma::g_usleep, "usleep");
  if (!ma::MainThreadWatched()) return real(usec);
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount, [&] { return real(usec); });
}

// A futex wait through syscall(SYS_futex, ...): what C++20's
// std::atomic<T>::wait does in libstdc++, and loops built on raw futexes.
// glibc's own waits (mutexes, condition variables, semaphores) make the
// system call inline and never come here. Every other system call passes
// through after one comparison.
MATRIX_AGENT_EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  // glibc's syscall() reads six arguments whatever the call: so do we.
  long a[6];
  for (long& arg : a) arg = va_arg(ap, long);
  va_end(ap);
  const ma::SyscallFn real = ma::Resolve(ma::g_syscall, "syscall");
  const int command = static_cast<int>(a[1]) & FUTEX_CMD_MASK;
  if (number != SYS_futex || (command != FUTEX_WAIT && command != FUTEX_WAIT_BITSET) ||
      !ma::MainThreadWatched()) {
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  }
  return ma::SiteWait(MATRIX_AGENT_CALL_SITE(-1), ma::AlwaysCount,
                      [&] { return real(number, a[0], a[1], a[2], a[3], a[4], a[5]); });
}

MATRIX_AGENT_EXPORT ssize_t read(int fd, void* buf, size_t count) {
  const ma::ReadFn real = ma::Resolve(ma::g_read, "read");
  if (!ma::MainThreadWatched()) return real(fd, buf, count);
  return ma::ReadWait(MATRIX_AGENT_CALL_SITE(fd), [&] { return real(fd, buf, count); });
}

// The fortified read (_FORTIFY_SOURCE): glibc's checks the buffer size.
MATRIX_AGENT_EXPORT ssize_t __read_chk(int fd, void* buf, size_t count, size_t buf_size) {
  const ma::ReadChkFn real = ma::Resolve(ma::g_read_chk, "__read_chk");
  if (!ma::MainThreadWatched()) return real(fd, buf, count, buf_size);
  return ma::ReadWait(MATRIX_AGENT_CALL_SITE(fd), [&] { return real(fd, buf, count, buf_size); });
}
