// File: matrix/trace/signal_anr_tracer.h
//
// SignalAnrTracer turns a signal (SIGQUIT unless configured otherwise) into a
// dump, as Matrix's SignalAnrTracer turns Android's ANR SIGQUIT into one: a
// supervisor, a test harness or a user (`kill -QUIT <pid>`, Ctrl-\) asks a
// program that seems stuck what it is doing. The dump becomes a
// Trace_EvilMethod issue with detail SIGNAL_ANR holding every thread's stack,
// the looper's pending queue head and how overdue it is, and the dispatch in
// progress. It is a confirmed hang when the queue head (or the running
// dispatch) is overdue by more than 2 s in the foreground or 10 s in the
// background (Matrix's empirical thresholds).
//
// The signal handler is async-signal-safe: it writes one byte to a pipe and
// returns; a dumper thread does the work. The handler chains to the handler
// installed before it (a function handler runs as before; the default action,
// which for SIGQUIT would kill the process, and "ignore" do not), and Stop
// restores that handler.
//
//   matrix::SignalAnrTracer signal_anr({.monitor = &ui_monitor, .looper = main_looper,
//                                       .worker_looper = worker, .report = publish});
//   signal_anr.OnStartTrace();
//   // $ kill -QUIT <pid>   ->   a SIGNAL_ANR issue
//
// One instance per process (the signal disposition is process-wide).
//
// Thread safety: OnStartTrace()/OnCloseTrace() from one thread at a time;
// dumps happen on the tracer's own thread; reports are built on the worker.

#ifndef MATRIX_TRACE_SIGNAL_ANR_TRACER_H_
#define MATRIX_TRACE_SIGNAL_ANR_TRACER_H_

#include <csignal>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class Handler;
class Looper;

class SignalAnrTracer : public Tracer {
 public:
  struct Options {
    // Required: monitor (heartbeat, looper thread), worker_looper, report.
    TracerEnv env;
    Looper* looper = nullptr;  // The monitored looper (queue head); may be null.
    int signal_number = SIGQUIT;
    absl::Duration foreground_overdue = absl::Seconds(2);
    absl::Duration background_overdue = absl::Seconds(10);
  };

  explicit SignalAnrTracer(Options options);
  ~SignalAnrTracer() override;

  // Dumps now, as if the signal had arrived (any thread).
  void RequestDump();
  int64_t dump_count() const { return dumps_.load(); }

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  void DumperLoop();
  void Dump();

  Options options_;
  std::unique_ptr<Handler> worker_handler_;
  int pipe_[2] = {-1, -1};
  std::thread dumper_;
  struct sigaction previous_{};
  bool installed_ = false;
  std::atomic<int64_t> dumps_{0};
};

}  // namespace matrix

#endif  // MATRIX_TRACE_SIGNAL_ANR_TRACER_H_
