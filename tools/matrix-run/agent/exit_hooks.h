// Exit hooks of libmatrix-agent.so: the reports already detected reach the
// report file however the program ends (docs/matrix-run.md, "How a program
// ends").
//
//   exit()           the agent's destructor stops monitoring on the main
//                    thread: it ends the dispatch in progress, publishes the
//                    FPS statistics so far and shuts Matrix down, which
//                    analyses and writes what was detected (a slow dispatch
//                    that just ended, a hang being captured) within its drain
//                    timeout.
//   _exit(), _Exit() skip destructors, and exec*() replace the program: the
//                    agent interposes them. Called on the main thread, they
//                    wait while the drain thread stops monitoring as the
//                    destructor does, on the main thread's behalf; on another
//                    thread, while it delivers the reports in flight and logs
//                    the exit line. They wait for as long as the drain
//                    advances (DrainWatch: kDrainStall at most per step). If
//                    an exec fails, the program goes on unmonitored (the log
//                    line says "at exec"). A hook called while another's
//                    drain runs waits for that drain.
//   SIGINT, SIGTERM, SIGHUP, SIGQUIT (the signals matrix-run forwards), when
//                    the program leaves them at their default action at the
//                    session's start: the agent's handler drains as _exit
//                    does on the main thread (one the kernel gives to another
//                    thread is handed over to the main thread), then the
//                    signal takes its default action. The same end may
//                    come as two signals or more (timeout(1) signals
//                    matrix-run, which forwards it, and then the whole
//                    process group; docs/matrix-run.md): the first drains,
//                    and the ones that arrive during its drain are absorbed;
//                    the process dies of the first. A handler the program
//                    installs later replaces the agent's.
//
// The hooks run in any context, signal handlers included (a handler that
// calls _exit is common): they only write to a pipe and poll another, and the
// drain thread does the work. A fork or vfork child never drains.
//
// Thread safety: every function may be called from any thread.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_EXIT_HOOKS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_EXIT_HOOKS_H_

#include "absl/time/time.h"

namespace matrix::agent {

enum class ProcessEnd { kExit, kUnderscoreExit, kExec, kSignal };
const char* ProcessEndName(ProcessEnd end);

// How long the reports in flight may take at the end of the process (as
// Matrix's default shutdown drain timeout), and how long an exit hook waits
// for one step of the drain thread (drain_watch.h): the hook gives up only
// when the drain stops advancing.
inline constexpr absl::Duration kShutdownDrainTimeout = absl::Seconds(1);
inline constexpr absl::Duration kDrainStall = absl::Seconds(2);

// Defined in agent.cc.
// Whether this is the monitored process (not a fork child) and the agent
// monitors it now. Async-signal-safe.
bool MonitoringThisProcess();
// Whether the caller is the program's main thread. Async-signal-safe.
bool OnMainThread();
// Stops monitoring for `end`, once: ends the dispatch in progress, flushes
// FPS, delivers the reports in flight (at exit by shutting Matrix down; at
// the other ends, where the process image goes anyway, without freeing
// anything) and logs one line. Call it on the main thread, or on the drain
// thread while the main thread waits in a hook.
void StopMonitoring(ProcessEnd end);
// Delivers the reports in flight without stopping (TracePlugin::
// FlushReportsFor, within kShutdownDrainTimeout) and logs one line, for a
// process that ends on another thread than the main one (which may still
// run its dispatch). Once; nothing when not monitoring. The drain thread.
void FlushBeforeProcessEnd(ProcessEnd end);
// The program's Qt event loop returned (QCoreApplication::exec(), qml_hooks.cc):
// its teardown follows, which frees the compiled JavaScript the last
// dispatches' QML frames name. Ends the dispatch in progress (a handler that
// quit the loop; the teardown is the next one) and delivers the reports in
// flight (TracePlugin::FlushReportsFor, within kShutdownDrainTimeout), so
// their stacks are resolved while the engines still live. Monitoring goes on
// (a program may run the loop again). Main thread; nothing elsewhere or when
// not monitoring.
void FlushAtLoopReturn();

// Defined in exit_hooks.cc.
// Starts the drain thread and installs the handler of each forwarded
// termination signal left at its default action. Once, at the session's
// start (main thread).
void StartDrainThread();
// What an exit hook does before the real call: has the drain thread stop
// monitoring (main thread) or flush (other threads), once per process, and
// waits for it while it advances (kDrainStall per step). A later call, while
// or after that drain runs, waits for it too. Async-signal-safe.
void DrainBeforeProcessEnd(ProcessEnd end);
// One more step of the drain done (DrainWatch's progress). The drain thread;
// async-signal-safe.
void NoteDrainProgress();

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_EXIT_HOOKS_H_
