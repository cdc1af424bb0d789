// Which of the main thread's waits is its event loop's own wait, for waits
// that are not poll/epoll/select: condition variables, semaphores, sleeps,
// reads of an eventfd or pipe. See docs/matrix-run.md, "The loop's own
// waits".
//
// A wait is identified by its call site: the return address of the agent's
// wrapper (the instruction after the call) and the wrapper's frame address
// (how deep in the main thread's stack the call was made), plus the fd for
// read(). Calls at the same depth whose return addresses are within
// kSameFunctionBytes of each other are one site: the same function, in
// practice. Tcl waits in pthread_cond_wait with no timer pending (and for
// each zero-time poll: frequent, short) and in pthread_cond_timedwait with
// one (maybe made only once or twice before a long idle): together they are
// the loop's wait. The rule:
//   - A site becomes the loop's wait once its waits blocked
//     kBlockedWaitsToLearn times more than they did not, with no shallower
//     dispatch boundary between them. A wait blocked when it lasted kBlockedNanos or more (the
//     thread slept until another thread or a timer woke it). The balance
//     (+1 blocked, -1 not, never below 0) keeps a semaphore used as a lock
//     in a busy handler from being learned when the scheduler preempts a few
//     of its thousands of uncontended waits; a loop that idles blocks in a
//     row. From then on the site's waits are dispatch boundaries, like poll.
//   - While a loop wait is known, a site deeper in the stack is not learned
//     (it waits inside the loop's dispatches: a handler's retry loop of
//     timed waits recurs and blocks too), unless it is in the same function
//     as a learned one: the same loop run nested (a modal dialog).
//   - In a dispatch that an established poll loop's own poll began (its
//     site was a boundary twice in a row), a site deeper than that poll is
//     not learned either: it waits inside the poll loop's dispatch.
//   - Any other wait is work: it stays inside the dispatch (a sleep in a slow
//     handler still gives its ANR).
//   - The wrappers count no wait a signal handler cut short (EINTR): its caller
//     waits again from the same site (time.sleep, sleep_for), and the agent's
//     own stack captures, 50 ms apart in a slow dispatch, would otherwise make
//     one long sleep in a handler several blocked waits and the loop's wait.
//   - A boundary (a poll-family wait, the loop's wait, a buffer swap) at some
//     depth forgets every site deeper in the stack: a site that waited inside
//     the loop's dispatches is a handler's, not the loop's; even one learned
//     before (a nested loop that ended) starts over.
// Why the frame address: a helper that every wait goes through (Tcl's
// Tcl_ConditionWait, libstdc++'s sleep_for, Python's lock acquire) gives one
// return address for the loop's wait and for a handler's; the handler's is
// deeper in the stack. Two call sites in the same function (Tcl calls
// pthread_cond_wait and pthread_cond_timedwait) have the same depth: both
// can be the loop's.
//
//   LoopWaitSites sites;
//   const LoopWaitSites::CallSite site{return_address, frame_address};
//   if (sites.IsLoopWait(site)) { sites.OnBoundary(site.frame); /* boundary */ }
//   else { /* wait */ sites.CountWait(site, waited_ns); }
//
// Fixed size (kCapacity sites, a full table replaces its not-learned sites in
// turn): no allocation, lock or syscall; each call scans at most kCapacity
// entries.
//
// Thread safety: not thread-safe; the agent uses it on the main thread only.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_LOOP_WAIT_SITES_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_LOOP_WAIT_SITES_H_

#include <cstdint>

namespace matrix::agent {

class LoopWaitSites {
 public:
  static constexpr int kCapacity = 16;
  // Blocked waits from one site, beyond its waits that did not block, with no
  // shallower boundary between, that make it the loop's wait.
  static constexpr int kBlockedWaitsToLearn = 3;
  // A wait this long blocked: the thread slept in the kernel until another
  // thread or a timer woke it (two context switches, a few microseconds at
  // least). An uncontended semaphore or lock (a semaphore used as a mutex)
  // returns in well under a microsecond and is never the loop's; Tcl's
  // zero-time polls, a round trip to its notifier thread, take 6-300 us
  // (6-8 us on a fast machine), and may be all a Tk program does before it
  // idles.
  static constexpr int64_t kBlockedNanos = 2'000;
  // Calls at the same depth this close to each other (the same function, in
  // practice: Tcl_WaitForEvent is 1.5 KiB) are one site.
  static constexpr uintptr_t kSameFunctionBytes = 2048;

  struct CallSite {
    uintptr_t return_address = 0;
    uintptr_t frame = 0;  // The stack grows down: a lower address is deeper.
    int fd = -1;          // read(): the fd read; -1 for the other waits.
  };

  // Whether waits from `site` are the loop's (dispatch boundaries).
  bool IsLoopWait(const CallSite& site) const;

  // Whether `site` is in the table (learned or being learned).
  bool Knows(const CallSite& site) const { return Find(site) != nullptr; }

  // A wait from `site` that is not the loop's returned after `waited_ns`:
  // counts it (adding the site when new) and learns the site when its
  // balance of blocked waits reaches kBlockedWaitsToLearn, unless
  // `poll_loop_frame` (0: none) is the frame of a poll loop's own poll site
  // that began the dispatch in progress and the site is deeper: a handler
  // of that loop waits there (an asyncio coroutine in time.sleep, a GLib
  // callback waiting for worker results), however often.
  void CountWait(const CallSite& site, int64_t waited_ns, uintptr_t poll_loop_frame = 0);

  // A dispatch boundary made at `frame`: sites deeper than it waited inside
  // the loop's dispatches; their count starts over (learned ones too).
  void OnBoundary(uintptr_t frame);

  // How many sites are the loop's (for the agent's exit line and tests).
  int LoopWaitCount() const;

 private:
  struct Entry {
    CallSite site;
    // Since the site was added or last forgotten: +1 per blocked wait, -1
    // per wait that did not block, never below 0.
    int blocked_balance = 0;
    bool loop = false;  // Learned: the loop's wait.
    bool used = false;
  };

  // A site deeper in the stack than a learned loop wait runs inside the
  // loop's dispatches (a handler's wait, or a handler's retry loop of timed
  // waits): it is not learned, unless it is that loop's own wait run again
  // nested (the same function: a modal dialog's loop).
  bool MayBeLoop(const CallSite& site) const;
  const Entry* Find(const CallSite& site) const;
  Entry* Find(const CallSite& site) {
    return const_cast<Entry*>(static_cast<const LoopWaitSites*>(this)->Find(site));
  }
  Entry* Add(const CallSite& site);

  Entry entries_[kCapacity];
  int used_ = 0;
  int next_replaced_ = 0;  // A full table replaces not-learned entries in turn.
};

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_LOOP_WAIT_SITES_H_
