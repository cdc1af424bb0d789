#include "matrix/trace/signal_anr_tracer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

constexpr char kDumpByte = 'd';
constexpr char kQuitByte = 'q';

// Read by the signal handler: plain atomics and a copy of the previous action.
std::atomic<int> g_write_fd{-1};
std::atomic<bool> g_chain{false};
struct sigaction g_previous;
// Handlers running now (ours and the one it chains to), so the dump can let
// the interrupted thread leave them before capturing it.
std::atomic<int> g_handlers_running{0};

void OnSignal(int signo, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  g_handlers_running.fetch_add(1, std::memory_order_acq_rel);
  const int fd = g_write_fd.load(std::memory_order_acquire);
  if (fd >= 0) {
    const char byte = kDumpByte;
    // Non-blocking: if the pipe is full a dump is already pending.
    [[maybe_unused]] ssize_t n = write(fd, &byte, 1);
  }
  if (g_chain.load(std::memory_order_acquire)) {
    if (g_previous.sa_flags & SA_SIGINFO) {
      g_previous.sa_sigaction(signo, info, context);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
      g_previous.sa_handler(signo);
    }
  }
  g_handlers_running.fetch_sub(1, std::memory_order_release);
  errno = saved_errno;
}

// How long a dump waits for the signal handler to return.
constexpr absl::Duration kHandlerWait = absl::Milliseconds(200);

}  // namespace

SignalAnrTracer::SignalAnrTracer(Options options) : options_(std::move(options)) {
  MATRIX_CHECK(options_.env.monitor != nullptr, "SignalAnrTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.worker_looper != nullptr, "SignalAnrTracer needs a worker looper");
  worker_handler_ =
      std::make_unique<Handler>(options_.env.worker_looper, "matrix::SignalAnrTracer");
}

SignalAnrTracer::~SignalAnrTracer() {
  OnCloseTrace();
  worker_handler_.reset();
}

void SignalAnrTracer::OnAlive() {
  MATRIX_CHECK(g_write_fd.load() < 0, "only one SignalAnrTracer may run per process");
  if (pipe2(pipe_, O_CLOEXEC) != 0) {
    Logger()->error("SignalAnrTracer: pipe2 failed: {}", errno);
    return;
  }
  fcntl(pipe_[1], F_SETFL, O_NONBLOCK);
  dumper_ = std::thread([this] { DumperLoop(); });
  // Capturing other threads needs the capture handler before the dump.
  if (absl::Status status = StackCapturer::Get()->Install(); !status.ok()) {
    Logger()->warn("SignalAnrTracer: stack capture unavailable: {}", status.ToString());
  }

  struct sigaction action {};
  action.sa_sigaction = OnSignal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  g_write_fd.store(pipe_[1], std::memory_order_release);
  if (sigaction(options_.signal_number, &action, &previous_) != 0) {
    Logger()->error("SignalAnrTracer: sigaction({}) failed: {}", options_.signal_number, errno);
    g_write_fd.store(-1);
    return;
  }
  g_previous = previous_;
  const bool function_handler = (previous_.sa_flags & SA_SIGINFO)
                                    ? previous_.sa_sigaction != nullptr
                                    : (previous_.sa_handler != SIG_DFL &&
                                       previous_.sa_handler != SIG_IGN);
  g_chain.store(function_handler, std::memory_order_release);
  installed_ = true;
  // The signal may be blocked in this thread; make sure some thread takes it.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, options_.signal_number);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void SignalAnrTracer::OnDead() {
  if (installed_) {
    sigaction(options_.signal_number, &previous_, nullptr);  // Restore.
    installed_ = false;
  }
  g_chain.store(false);
  g_write_fd.store(-1);
  if (dumper_.joinable()) {
    const char byte = kQuitByte;
    [[maybe_unused]] ssize_t n = write(pipe_[1], &byte, 1);
    dumper_.join();
  }
  for (int& fd : pipe_) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void SignalAnrTracer::RequestDump() {
  if (pipe_[1] < 0) return;
  const char byte = kDumpByte;
  [[maybe_unused]] ssize_t n = write(pipe_[1], &byte, 1);
}

void SignalAnrTracer::DumperLoop() {
  SetCurrentThreadName("matrix-sigdump");
  for (;;) {
    char byte;
    const ssize_t n = read(pipe_[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || byte == kQuitByte) return;
    Dump();
  }
}

void SignalAnrTracer::Dump() {
  dumps_.fetch_add(1);
  // The byte that woke us was written by the handler, which may still be
  // running on the interrupted thread (often the looper thread): captured
  // now, that thread's stack would start in our handler, or in a slow
  // handler it chains to, which would then be the stack key. Let it return.
  const absl::Time give_up = absl::Now() + kHandlerWait;
  while (g_handlers_running.load(std::memory_order_acquire) > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const TickClock* clock = options_.env.monitor->clock();
  const TimeTicks now = clock->NowTicks();
  const DispatchHeartbeat::Snapshot dispatch = options_.env.monitor->heartbeat().Read();
  // Now: the snapshot points into the message's Handler, which may be gone
  // by the time the worker builds the report.
  proto::MessageInfo message;
  if (dispatch.active) FillMessageInfo(dispatch, &message);
  std::optional<MessageQueue::HeadInfo> head;
  if (options_.looper != nullptr) head = options_.looper->queue()->PeekHead();
  auto threads = std::make_shared<std::vector<ThreadStack>>(StackCapturer::Get()->CaptureAllThreads());
  const bool foreground = options_.env.app_state->is_foreground();
  const SceneId scene = options_.env.app_state->visible_scene_id();
  const pid_t looper_tid = options_.env.monitor->looper_thread().tid();

  worker_handler_->Post([this, now, dispatch, message, head, threads, foreground, scene,
                         looper_tid] {
    proto::AnrReport report;
    report.set_detail(proto::SIGNAL_ANR);
    report.set_signal(options_.signal_number);
    report.set_scene(std::string(options_.env.app_state->SceneName(scene)));
    report.set_is_process_foreground(foreground);
    absl::Duration overdue = -absl::InfiniteDuration();
    if (head) {
      report.set_queue_head(head->description);
      report.set_queue_head_overdue_ms(absl::ToDoubleMilliseconds(head->overdue));
      overdue = head->overdue;
    }
    if (dispatch.active) {
      const absl::Duration running = now - dispatch.begin;
      report.set_cost_ms(absl::ToDoubleMilliseconds(running));
      *report.mutable_message() = message;
      overdue = std::max(overdue, running);
    }
    const absl::Duration limit =
        foreground ? options_.foreground_overdue : options_.background_overdue;
    report.set_confirmed_hang(overdue > limit);

    SymbolizedStack looper_stack;
    for (const ThreadStack& thread : *threads) {
      proto::ThreadStack* out = report.add_all_threads();
      SymbolizedStack symbolized = FillCapturedStack(thread.stack, thread.status, thread.tid, out);
      out->set_thread_name(thread.name);
      if (thread.tid == looper_tid) {
        *report.mutable_thread_stack() = *out;
        looper_stack = std::move(symbolized);
      }
    }
    report.set_stack_key(HangStackKey(looper_stack, nullptr, {}, absl::ZeroDuration()));
    FillThreadInfo(ProcReader(), looper_tid, report.mutable_thread());
    FillMemoryInfo(ProcReader(), report.mutable_memory());

    Issue issue;
    issue.mutable_proto()->set_tag(kTagEvilMethod);
    issue.mutable_proto()->set_key(report.stack_key());
    *issue.mutable_proto()->mutable_anr() = std::move(report);
    if (options_.env.report) options_.env.report(std::move(issue));
  });
}

}  // namespace matrix
