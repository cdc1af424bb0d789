// Wait hooks of libmatrix-agent.so: the main thread's waits are its
// dispatches' boundaries (see docs/matrix-run.md, "Dispatches", "The loop's
// own waits").
//
// wait_hooks.cc interposes the blocking waits poll, ppoll, epoll_wait,
// epoll_pwait, select and pselect (and the fortified __poll_chk,
// __ppoll_chk): on the main thread a blocking call is a dispatch boundary
// and its call site the loop's poll site; a zero-timeout call from that same
// site is one too (the loop polling without sleeping while it has work). It
// also interposes pthread_cond_{,timed,clock}wait (the GLIBC_2.3.2 versions,
// agent.map), sem_{,timed,clock}wait, nanosleep, clock_nanosleep, usleep,
// read, __read_chk and futex waits made through syscall(): on the main
// thread such a wait is a boundary only when LoopWaitSites learned its call
// site as the loop's wait; any other is work, timed inside the dispatch.
// Other threads' calls go to the real function after one relaxed load and
// pthread_self().
//
// Thread safety: the wrappers may be called from any thread; only the main
// thread's calls touch the session (session.h).

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_WAIT_HOOKS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_WAIT_HOOKS_H_

namespace matrix::agent {

// Looks up the real wait functions (the wrappers also look one up on first
// use, for calls made before the agent's constructor). Any thread; the
// constructor calls it.
void ResolveWaits();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_WAIT_HOOKS_H_
