// SignalAnrTracer in this process, with real signals and its real dumper
// thread; time (dispatch begin, queue head) comes from the fake clock, and
// the report is built on a background looper the test runs. Real time is
// only spent waiting for the dumper thread.

#include "matrix/trace/signal_anr_tracer.h"

#include <signal.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {

// The looper thread asks for a dump and waits in here until the dumper
// thread has handed the report to the worker, so the dump sees it here.
__attribute__((noinline)) bool RequestDumpAndWait(matrix::SignalAnrTracer* tracer,
                                                  matrix::Looper* worker, bool by_signal) {
  if (by_signal) {
    raise(SIGQUIT);
  } else {
    tracer->RequestDump();
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (worker->queue()->PendingCount() == 0) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  asm volatile("" ::: "memory");
  return true;
}

std::atomic<int> g_own_handler_calls{0};
void OwnHandler(int) { g_own_handler_calls.fetch_add(1); }

// A handler that takes its time (100 ms).
__attribute__((noinline)) void SlowOwnHandler(int) {
  const timespec delay = {0, 100'000'000};
  nanosleep(&delay, nullptr);
  g_own_handler_calls.fetch_add(1);
}

}  // namespace app

namespace matrix {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using trace_test::IssueCollector;

class SignalAnrTracerRealTest : public ::testing::Test {
 protected:
  SignalAnrTracerRealTest()
      : env_(EnvOptions()),
        worker_(env_.CreateBackgroundLooper("matrix-worker")),
        looper_monitor_(env_.clock()),
        monitor_(&looper_monitor_, nullptr, UIThreadMonitor::Options()) {
    AppState::Get()->ResetForTesting();
    sigaction(SIGQUIT, nullptr, &saved_);
    monitor_.Start();
  }
  ~SignalAnrTracerRealTest() override {
    tracer_.reset();
    sigaction(SIGQUIT, &saved_, nullptr);
    AppState::Get()->ResetForTesting();
  }

  static testing::TestEnvironment::Options EnvOptions() {
    testing::TestEnvironment::Options options;
    options.choreographer = false;
    return options;
  }

  void Start(UIThreadMonitor* monitor = nullptr) {
    SignalAnrTracer::Options options;
    options.env.monitor = monitor != nullptr ? monitor : &monitor_;
    options.looper = env_.looper();
    options.env.worker_looper = worker_;
    options.env.report = issues_.callback();
    tracer_ = std::make_unique<SignalAnrTracer>(std::move(options));
    tracer_->OnStartTrace();
  }

  // Dumps (by request or by SIGQUIT) and builds the report.
  const proto::AnrReport& Dump(bool by_signal = false) {
    const size_t before = issues_.size();
    EXPECT_TRUE(app::RequestDumpAndWait(tracer_.get(), worker_, by_signal));
    env_.RunUntilIdle();
    EXPECT_THAT(issues_.all(), SizeIs(before + 1));
    return issues_.all().back().proto().anr();
  }

  testing::TestEnvironment env_;
  Looper* const worker_;
  LooperMonitor looper_monitor_;
  UIThreadMonitor monitor_;
  IssueCollector issues_;
  std::unique_ptr<SignalAnrTracer> tracer_;
  struct sigaction saved_ {};
};

TEST_F(SignalAnrTracerRealTest, Dump_HasEveryThreadAndTheLooperStack) {
  AppState::Get()->OnSceneShown("Inbox");
  Start();
  const proto::AnrReport& report = Dump();
  EXPECT_EQ(report.detail(), proto::SIGNAL_ANR);
  EXPECT_EQ(report.signal(), SIGQUIT);
  EXPECT_EQ(report.scene(), "Inbox");
  EXPECT_TRUE(report.is_process_foreground());
  EXPECT_FALSE(report.confirmed_hang());  // Idle looper, empty queue.
  EXPECT_TRUE(report.queue_head().empty());
  EXPECT_EQ(tracer_->dump_count(), 1);

  // The looper (this) thread, waiting in RequestDumpAndWait, is the key.
  EXPECT_EQ(report.thread_stack().tid(), ThreadHandle::Current().tid());
  bool named = false;
  for (const auto& frame : report.thread_stack().frames()) {
    named |= absl::StrContains(frame.function(), "app::RequestDumpAndWait");
  }
  EXPECT_TRUE(named) << report.thread_stack().DebugString();
  EXPECT_THAT(report.stack_key(), HasSubstr("app::RequestDumpAndWait"));
  // Every thread: this one and the dumper at least.
  bool has_dumper = false;
  for (const auto& thread : report.all_threads()) {
    has_dumper |= thread.thread_name() == "matrix-sigdump";
  }
  EXPECT_TRUE(has_dumper);
  EXPECT_GE(report.all_threads_size(), 2);
  EXPECT_EQ(report.thread().tid(), ThreadHandle::Current().tid());
}

struct OverdueCase {
  const char* name;
  bool foreground;
  absl::Duration running;
  bool confirmed;
};

void PrintTo(const OverdueCase& c, std::ostream* os) { *os << c.name; }

class SignalAnrConfirmTest : public SignalAnrTracerRealTest,
                             public ::testing::WithParamInterface<OverdueCase> {};

TEST_P(SignalAnrConfirmTest, RunningDispatch_ConfirmedWhenOverdueByMoreThanTheLimit) {
  const OverdueCase c = GetParam();
  AppState::Get()->SetForeground(c.foreground);
  Start();
  looper_monitor_.DispatchBegin("app-event");
  env_.AdvanceClock(c.running);
  const proto::AnrReport& report = Dump();
  EXPECT_EQ(report.confirmed_hang(), c.confirmed);
  EXPECT_DOUBLE_EQ(report.cost_ms(), absl::ToDoubleMilliseconds(c.running));
  EXPECT_EQ(report.message().callback(), "app-event");
  EXPECT_EQ(report.is_process_foreground(), c.foreground);
  looper_monitor_.DispatchEnd();
}

INSTANTIATE_TEST_SUITE_P(
    ForegroundAndBackground, SignalAnrConfirmTest,
    ::testing::Values(
        OverdueCase{"ForegroundAt2s", true, absl::Seconds(2), false},
        OverdueCase{"ForegroundOver2s", true, absl::Seconds(2) + absl::Nanoseconds(1), true},
        OverdueCase{"Background9s", false, absl::Seconds(9), false},
        OverdueCase{"BackgroundAt10s", false, absl::Seconds(10), false},
        OverdueCase{"BackgroundOver10s", false, absl::Seconds(10) + absl::Nanoseconds(1), true}),
    [](const ::testing::TestParamInfo<OverdueCase>& info) { return info.param.name; });

TEST_F(SignalAnrTracerRealTest, OverdueQueueHead_ConfirmsWithoutARunningDispatch) {
  Start();
  Handler handler(env_.looper(), "app::SyncHandler");
  handler.Post([] {});
  env_.AdvanceClock(absl::Seconds(3));  // Due, and not run for 3 s.
  const proto::AnrReport& report = Dump();
  EXPECT_TRUE(report.confirmed_hang());
  EXPECT_DOUBLE_EQ(report.queue_head_overdue_ms(), 3000);
  EXPECT_THAT(report.queue_head(), HasSubstr("app::SyncHandler"));
  env_.RunUntilIdle();
}

TEST_F(SignalAnrTracerRealTest, HandlerDestroyedBeforeTheReportIsBuilt_MessageInfoSurvives) {
  // Real messages of the main looper are the dispatches here.
  LooperMonitor looper_monitor(env_.looper());
  looper_monitor.Start();
  UIThreadMonitor monitor(&looper_monitor, nullptr, UIThreadMonitor::Options());
  monitor.Start();
  Start(&monitor);
  Handler main(env_.looper());
  auto one_shot = std::make_unique<Handler>(env_.looper(), "app::OneShotHandler");
  const std::string target = one_shot->ToString();
  bool dumped = false;
  one_shot->Post([&] {
    dumped = app::RequestDumpAndWait(tracer_.get(), worker_, /*by_signal=*/false);
    // Runs before the worker builds the report (the main looper runs first
    // among messages due at the same time).
    main.Post([&] { one_shot.reset(); });
  });
  env_.RunUntilIdle();
  ASSERT_TRUE(dumped);
  ASSERT_EQ(one_shot, nullptr);
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().message().target(), target);
  tracer_.reset();
}

TEST_F(SignalAnrTracerRealTest, Sigquit_DefaultActionReplaced_ProcessSurvives) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGQUIT, &dfl, nullptr);
  Start();
  const proto::AnrReport& report = Dump(/*by_signal=*/true);
  EXPECT_EQ(report.detail(), proto::SIGNAL_ANR);
  tracer_->OnCloseTrace();
  struct sigaction now {};
  sigaction(SIGQUIT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // Restored (and not raised again).
}

TEST_F(SignalAnrTracerRealTest, Sigquit_EarlierHandlerStillRuns_AndIsRestoredOnStop) {
  app::g_own_handler_calls.store(0);
  struct sigaction own {};
  own.sa_handler = app::OwnHandler;
  sigemptyset(&own.sa_mask);
  sigaction(SIGQUIT, &own, nullptr);
  Start();
  Dump(/*by_signal=*/true);
  EXPECT_EQ(app::g_own_handler_calls.load(), 1);

  tracer_->OnCloseTrace();
  struct sigaction now {};
  sigaction(SIGQUIT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, app::OwnHandler);
  raise(SIGQUIT);  // Only the program's own handler now.
  EXPECT_EQ(app::g_own_handler_calls.load(), 2);
  EXPECT_EQ(tracer_->dump_count(), 1);
}

TEST_F(SignalAnrTracerRealTest, Sigquit_TheLooperStackIsCapturedAfterTheHandlersReturn) {
  app::g_own_handler_calls.store(0);
  struct sigaction slow {};
  slow.sa_handler = app::SlowOwnHandler;
  sigemptyset(&slow.sa_mask);
  sigaction(SIGQUIT, &slow, nullptr);
  Start();
  // raise() runs the handlers on this (the looper) thread; the dumper wakes
  // while the chained handler still sleeps.
  const proto::AnrReport& report = Dump(/*by_signal=*/true);
  EXPECT_EQ(app::g_own_handler_calls.load(), 1);
  std::string frames;
  for (const auto& frame : report.thread_stack().frames()) frames += frame.function() + "\n";
  EXPECT_THAT(frames, ::testing::Not(HasSubstr("SlowOwnHandler")));
  EXPECT_THAT(frames, ::testing::Not(HasSubstr("OnSignal")));
  EXPECT_THAT(report.stack_key(), HasSubstr("app::RequestDumpAndWait")) << frames;
}

TEST_F(SignalAnrTracerRealTest, Restart_InstallsAgainAndDumps) {
  Start();
  Dump(/*by_signal=*/true);
  tracer_->OnCloseTrace();
  tracer_->OnStartTrace();
  Dump(/*by_signal=*/true);
  EXPECT_EQ(tracer_->dump_count(), 2);
}

}  // namespace
}  // namespace matrix
