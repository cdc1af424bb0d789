// Helpers shared by the tracer tests (header-only: tests/tracers/*_test.cc
// are built one binary per file).
//
//   IssueCollector      the tracers' IssueCallback, keeping what they report.
//   ProcFixture         a fake /proc tree (status, thread stat) for proc_root.
//   FakeCapture         an injected stack capture that returns return addresses
//                       of real functions, so reports carry symbolized names,
//                       and records when (in fake time) it was called.
//   RunLoopersFor()     advances the fake clock running only the given
//                       (background) loopers: the watchdog and the worker run
//                       "while" the looper thread is stuck in a dispatch or an
//                       idle handler on the test thread.
//   RecordingDispatchListener
//                       a LooperDispatchListener that keeps every callback
//                       (LooperMonitor's and the loop adapters' tests).
//   TracerRig           what every tracer fixture builds around its tracer:
//                       the fake-clock environment, the watchdog and worker
//                       loopers, the fake /proc, capture and issue collector,
//                       and the method tracer driven by hand. The tracer tests
//                       and the toolkit tests that reach a tracer derive from it.
//   MATRIX_TEST_APP_FUNCTION(name)
//                       defines `void name()`, a function of "the application"
//                       for captured stacks and call trees to name.
//
// Thread safety: test thread only.

#ifndef MATRIX_TESTS_TRACERS_TRACER_TEST_UTIL_H_
#define MATRIX_TESTS_TRACERS_TRACER_TEST_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/core/looper.h"
#include "matrix/core/app_state.h"
#include "matrix/core/thread_handle.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/tracer.h"
#include "matrix/trace/ui_thread_monitor.h"

// The -finstrument-functions hooks (matrix::trace defines them), which
// TracerRig::Enter/Exit call as instrumented code would.
extern "C" void __cyg_profile_func_enter(void* this_fn, void* call_site);
extern "C" void __cyg_profile_func_exit(void* this_fn, void* call_site);

namespace matrix::trace_test {

// The detail of an ANR-family or evil-method report, DETAIL_UNSPECIFIED for
// others.
inline proto::Detail DetailOf(const Issue& issue) {
  if (issue.proto().has_anr()) return issue.proto().anr().detail();
  if (issue.proto().has_evil_method()) return issue.proto().evil_method().detail();
  return proto::DETAIL_UNSPECIFIED;
}

class IssueCollector {
 public:
  IssueCallback callback() {
    return [this](Issue issue) { issues_.push_back(std::move(issue)); };
  }
  const std::vector<Issue>& all() const { return issues_; }
  size_t size() const { return issues_.size(); }
  std::vector<Issue> WithDetail(proto::Detail detail) const {
    std::vector<Issue> out;
    for (const Issue& issue : issues_) {
      if (DetailOf(issue) == detail) out.push_back(issue);
    }
    return out;
  }
  std::vector<Issue> WithTag(const std::string& tag) const {
    std::vector<Issue> out;
    for (const Issue& issue : issues_) {
      if (issue.tag() == tag) out.push_back(issue);
    }
    return out;
  }
  void Clear() { issues_.clear(); }

 private:
  std::vector<Issue> issues_;
};

// A fake procfs root for ProcReader(proc_root): /<pid>/status and the looper
// thread's /<pid>/task/<tid>/stat. Removed on destruction.
class ProcFixture {
 public:
  static constexpr int64_t kVmSizeKb = 123456;
  static constexpr int64_t kVmRssKb = 7890;
  static constexpr const char* kThreadName = "ui-main";
  static constexpr int kPriority = 30;
  static constexpr int kNice = 10;
  // utime 250 + stime 50 ticks at 100 Hz.
  static constexpr double kThreadCpuMs = 3000;

  explicit ProcFixture(pid_t looper_tid) : tid_(looper_tid) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = absl::StrCat(::testing::TempDir(), "/proc-fixture-", getpid(), "-",
                         info != nullptr ? info->name() : "none");
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(absl::StrCat(root_, "/", getpid(), "/task/", tid_));
    SetTracerPid(0);
    Write(absl::StrCat(getpid(), "/task/", tid_, "/stat"),
          absl::StrCat(tid_, " (", kThreadName, ") D 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 ",
                       kPriority, " ", kNice, " 3 0 12345 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0"));
  }
  ~ProcFixture() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  ProcFixture(const ProcFixture&) = delete;
  ProcFixture& operator=(const ProcFixture&) = delete;

  const std::string& root() const { return root_; }

  // Rewrites /<pid>/status; a non-zero TracerPid means a debugger.
  void SetTracerPid(pid_t tracer) {
    Write(absl::StrCat(getpid(), "/status"),
          absl::StrCat("Name:\tmatrix-test\nState:\tS (sleeping)\nTracerPid:\t", tracer,
                       "\nVmSize:\t  ", kVmSizeKb, " kB\nVmRSS:\t    ", kVmRssKb, " kB\n"));
  }

 private:
  void Write(const std::string& relative, const std::string& contents) {
    std::ofstream out(absl::StrCat(root_, "/", relative), std::ios::trunc);
    out << contents;
    ASSERT_TRUE(out.good()) << relative;
  }

  const pid_t tid_;
  std::string root_;
};

// The return address of a call made from inside `fn` (as a stack frame of a
// function that called something holds).
template <typename Fn>
uintptr_t ReturnAddressIn(Fn* fn) {
  return reinterpret_cast<uintptr_t>(fn) + 5;
}

// A stack capture that returns `frames` (innermost first), records the fake
// time and the thread of each call, and can be made to fail.
class FakeCapture {
 public:
  explicit FakeCapture(const TickClock* clock) : clock_(clock) {}

  void SetFrames(std::vector<uintptr_t> frames) { frames_ = std::move(frames); }
  // The frames of the next captures, one entry each, before SetFrames' ones.
  void QueueFrames(std::vector<uintptr_t> frames) { queued_.push_back(std::move(frames)); }
  void SetStatus(absl::Status status) { status_ = std::move(status); }
  // Runs inside the next capture (as the looper thread would, meanwhile).
  void RunDuringNextCapture(std::function<void()> fn) { during_next_ = std::move(fn); }

  AnrTracer::CaptureFn AsFunction() {
    return [this](const ThreadHandle& thread, RawStack* out) {
      times_.push_back(clock_->NowTicks());
      tids_.push_back(thread.tid());
      if (during_next_) std::exchange(during_next_, nullptr)();
      out->depth = 0;
      if (!status_.ok()) return status_;
      out->tid = thread.tid();
      out->exact_top_pc = false;
      out->captured_at = clock_->NowTicks();
      std::vector<uintptr_t> frames = frames_;
      if (!queued_.empty()) {
        frames = std::move(queued_.front());
        queued_.pop_front();
      }
      for (uintptr_t pc : frames) out->pcs[static_cast<size_t>(out->depth++)] = pc;
      return absl::OkStatus();
    };
  }

  // When each capture ran (fake clock), and of which thread.
  const std::vector<TimeTicks>& times() const { return times_; }
  const std::vector<pid_t>& tids() const { return tids_; }

 private:
  const TickClock* const clock_;
  std::vector<uintptr_t> frames_;
  std::deque<std::vector<uintptr_t>> queued_;
  absl::Status status_;
  std::function<void()> during_next_;
  std::vector<TimeTicks> times_;
  std::vector<pid_t> tids_;
};

// Advances the fake clock by `delta`, running the messages of `loopers` (and
// only those) in due order on the way. Call it from inside a dispatch or an
// idle handler of the main looper to let the watchdog and the worker run
// while the looper thread is busy.
inline void RunLoopersFor(testing::TestEnvironment* env, std::initializer_list<Looper*> loopers,
                          absl::Duration delta) {
  const TimeTicks target = env->Now() + delta;
  for (;;) {
    Looper* earliest = nullptr;
    TimeTicks earliest_when;
    for (Looper* looper : loopers) {
      const std::optional<TimeTicks> when = looper->queue()->NextRunnableTime();
      if (when && *when <= target && (earliest == nullptr || *when < earliest_when)) {
        earliest = looper;
        earliest_when = *when;
      }
    }
    if (earliest == nullptr) break;
    if (earliest_when > env->Now()) env->clock()->SetNowTicks(earliest_when);
    earliest->PollOnce(absl::ZeroDuration());
  }
  if (target > env->Now()) env->clock()->SetNowTicks(target);
}

// Records every LooperMonitor dispatch callback: as text ("L.begin",
// "L.end", with the listener's name), its times, the message's what, the
// Printer line and the foreign label, and each dispatch's duration.
class RecordingDispatchListener : public LooperDispatchListener {
 public:
  explicit RecordingDispatchListener(std::string name = "L") : name_(std::move(name)) {}

  void OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) override {
    events.push_back(name_ + ".begin");
    begins.push_back(begin);
    if (info.message != nullptr) whats.push_back(info.message->what);
    if (!info.log_line.empty()) lines.push_back(std::string(info.log_line));
    if (info.label != nullptr) labels.push_back(info.label);
    if (on_begin) on_begin();
  }
  void OnDispatchEnd(TimeTicks begin, TimeTicks end) override {
    events.push_back(name_ + ".end");
    end_begins.push_back(begin);
    ends.push_back(end);
    durations.push_back(end - begin);
    if (on_end) on_end();
  }

  std::vector<std::string> events;
  std::vector<TimeTicks> begins;
  std::vector<TimeTicks> end_begins;
  std::vector<TimeTicks> ends;
  std::vector<absl::Duration> durations;
  std::vector<int> whats;
  std::vector<std::string> lines;
  std::vector<std::string> labels;
  std::function<void()> on_begin;
  std::function<void()> on_end;

 private:
  std::string name_;
};

// The set-up every tracer fixture shares. A fixture derives from it and
// builds its monitors and tracer with the members below:
//
//   class AnrTracerTest : public ::testing::Test, protected TracerRig {
//    protected:
//     AnrTracerTest() : TracerRig(NoChoreographer()) {}
//     void Start() {
//       AnrTracer::Options options;
//       Wire(&options, monitor_.get());  // monitor, loopers, capture, /proc, report
//       ...
//
// AppState is reset before and after each test. Members are destroyed after
// the fixture's own (its tracers and monitors go first).
class TracerRig {
 protected:
  explicit TracerRig(testing::TestEnvironment::Options env_options = {})
      : env_(env_options),
        watchdog_(env_.CreateBackgroundLooper("matrix-watchdog")),
        worker_(env_.CreateBackgroundLooper("matrix-worker")),
        proc_(ThreadHandle::Current().tid()),
        capture_(env_.clock()) {
    AppState::Get()->ResetForTesting();
  }
  ~TracerRig() {
    method_tracer_.reset();
    AppState::Get()->ResetForTesting();
  }
  TracerRig(const TracerRig&) = delete;
  TracerRig& operator=(const TracerRig&) = delete;

  // An environment without matrix's Choreographer (a foreign loop, or a test
  // without frames).
  static testing::TestEnvironment::Options NoChoreographer() {
    testing::TestEnvironment::Options options;
    options.choreographer = false;
    return options;
  }

  // Fills what a tracer's Options take from the rig: the monitor, the
  // watchdog and worker loopers, the fake capture and /proc, and the issue
  // collector as the report callback (each only if the Options have it).
  template <typename TracerOptions>
  void Wire(TracerOptions* options, UIThreadMonitor* monitor) {
    options->env.monitor = monitor;
    options->env.report = issues_.callback();
    options->env.watchdog_looper = watchdog_;
    options->env.worker_looper = worker_;
    if constexpr (requires { options->capture; }) options->capture = capture_.AsFunction();
    if constexpr (requires { options->proc_root; }) options->proc_root = proc_.root();
  }

  // A method tracer whose time the test keeps (the fake clock, no ticker).
  void StartMethodTracer() {
    MethodTracer::Options options;
    options.tick_period = absl::ZeroDuration();
    options.clock = env_.clock();
    options.buffer_bytes = 1 << 16;
    method_tracer_ = MethodTracer::Start(options);
  }
  // A traced function's enter and exit, stamped with the fake time.
  void Enter(void (*fn)()) {
    method_tracer_->UpdateTime(env_.Now());
    __cyg_profile_func_enter(reinterpret_cast<void*>(fn), nullptr);
  }
  void Exit(void (*fn)()) {
    method_tracer_->UpdateTime(env_.Now());
    __cyg_profile_func_exit(reinterpret_cast<void*>(fn), nullptr);
  }

  testing::TestEnvironment env_;
  Looper* const watchdog_;
  Looper* const worker_;
  ProcFixture proc_;
  FakeCapture capture_;
  IssueCollector issues_;
  std::unique_ptr<MethodTracer> method_tracer_;
};

// Where the functions of MATRIX_TEST_APP_FUNCTION write.
inline volatile int g_app_function_sink = 0;

}  // namespace matrix::trace_test

// Defines `void name()`, never inlined, with a body of its own (it stores its
// line) so that identical-code folding never merges two of them into one
// address, and a compiler barrier so that the call is not dropped.
#define MATRIX_TEST_APP_FUNCTION(name)                          \
  __attribute__((noinline)) void name() {                       \
    ::matrix::trace_test::g_app_function_sink = __LINE__;       \
    asm volatile("" ::: "memory");                              \
  }

#endif  // MATRIX_TESTS_TRACERS_TRACER_TEST_UTIL_H_
