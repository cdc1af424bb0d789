// AnrTracer on the fake clock: the looper thread's dispatches come from the
// foreign-loop hooks (or a real Message whose task lets the watchdog run), the
// watchdog and worker are background loopers of the TestEnvironment, the stack
// capture is injected and /proc is a fixture.

#include "matrix/trace/anr_tracer.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

// The "application": functions the looper thread is stuck in. Distinct bodies
// so that identical-code folding never merges them.
namespace app {
MATRIX_TEST_APP_FUNCTION(ReadConfigFile)
MATRIX_TEST_APP_FUNCTION(ParseConfig)
MATRIX_TEST_APP_FUNCTION(OnClick)
MATRIX_TEST_APP_FUNCTION(Unrelated)
MATRIX_TEST_APP_FUNCTION(NowMicros)
}  // namespace app

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using trace_test::FakeCapture;
using trace_test::IssueCollector;
using trace_test::ProcFixture;
using trace_test::ReturnAddressIn;

constexpr absl::Duration kLag = absl::Seconds(2);
constexpr absl::Duration kAnr = absl::Seconds(5);

void ExpectCall(const proto::MethodCall& call, int depth, const std::string& name, double cost_ms,
                bool unfinished) {
  EXPECT_EQ(call.depth(), depth) << name;
  EXPECT_EQ(call.name(), name);
  EXPECT_EQ(call.count(), 1) << name;
  EXPECT_NEAR(call.cost_ms(), cost_ms, 0.002) << name;
  EXPECT_EQ(call.unfinished(), unfinished) << name;
}

class AnrTracerTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  AnrTracerTest() : TracerRig(NoChoreographer()) {
    // The looper thread is stuck in ReadConfigFile, called from OnClick,
    // called from the loop.
    capture_.SetFrames({ReturnAddressIn(&app::ReadConfigFile), ReturnAddressIn(&app::OnClick),
                        ReturnAddressIn(&Looper::Loop)});
  }
  ~AnrTracerTest() override {
    anr_.reset();
    monitor_.reset();
    looper_monitor_.reset();
  }

  // Creates the monitors and the tracer and starts them. `foreign`: the test
  // drives dispatches with the foreign hooks; otherwise the main looper's
  // messages are the dispatches.
  void Start(bool foreign = true, bool report_with_debugger = false, bool cpu_sampler = false) {
    looper_monitor_ = foreign ? std::make_unique<LooperMonitor>(env_.clock())
                              : std::make_unique<LooperMonitor>(env_.looper());
    looper_monitor_->Start();
    UIThreadMonitor::Options monitor_options;
    monitor_options.method_tracer = method_tracer_.get();
    if (cpu_sampler) monitor_options.sampler_looper = watchdog_;
    monitor_options.wait_to_run = wait_to_run_;
    monitor_ = std::make_unique<UIThreadMonitor>(looper_monitor_.get(), nullptr, monitor_options);
    monitor_->Start();
    AnrTracer::Options options;
    Wire(&options, monitor_.get());
    options.anr_threshold = kAnr;
    options.lag_threshold = kLag;
    options.report_with_debugger = report_with_debugger;
    options.key_captures = key_captures_;
    anr_ = std::make_unique<AnrTracer>(std::move(options));
    anr_->OnStartTrace();
    env_.RunUntilIdle();  // The first check: the looper is idle.
  }

  void Begin(const char* label = "app-event") { looper_monitor_->DispatchBegin(label); }
  void End() {
    looper_monitor_->DispatchEnd();
    env_.RunUntilIdle();
  }

  // Off unless a test is about keys: the others count captures.
  int key_captures_ = 0;
  // The kernel's counters, as a test sets them (none unless set).
  StoppedTime::WaitToRunReader wait_to_run_;
  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<AnrTracer> anr_;
};

// A hang spinning in ReadConfigFile, which calls a clock helper now and then:
// the crossing's sample falls in the helper, the two taken 100 and 50 ms
// before it in ReadConfigFile itself. The key is the deepest frame all three
// share; the reported stack stays the crossing's.
TEST_F(AnrTracerTest, KeyCaptures_KeyOnTheFrameTheCapturesShare) {
  key_captures_ = 2;
  Start();
  const std::vector<uintptr_t> in_loop = {ReturnAddressIn(&app::ReadConfigFile),
                                          ReturnAddressIn(&app::OnClick),
                                          ReturnAddressIn(&Looper::Loop)};
  const std::vector<uintptr_t> in_helper = {ReturnAddressIn(&app::NowMicros),
                                            ReturnAddressIn(&app::ReadConfigFile),
                                            ReturnAddressIn(&app::OnClick),
                                            ReturnAddressIn(&Looper::Loop)};
  for (int i = 0; i < 2; ++i) capture_.QueueFrames(in_loop);    // Before the LAG crossing.
  capture_.QueueFrames(in_helper);                               // The LAG crossing.
  for (int i = 0; i < 2; ++i) capture_.QueueFrames(in_loop);    // Before the ANR crossing.
  capture_.QueueFrames(in_helper);                               // The ANR crossing.
  env_.FastForwardBy(absl::Milliseconds(300));
  const TimeTicks begin = env_.Now();
  Begin();
  env_.FastForwardBy(kAnr);
  const absl::Duration ms = absl::Milliseconds(1);
  EXPECT_THAT(capture_.times(),
              ElementsAre(begin + kLag - 100 * ms, begin + kLag - 50 * ms, begin + kLag,
                          begin + kAnr - 100 * ms, begin + kAnr - 50 * ms, begin + kAnr));
  const std::vector<Issue> anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  const proto::AnrReport& anr = anrs[0].proto().anr();
  EXPECT_EQ(anr.thread_stack().frames(0).function(), "app::NowMicros()");
  EXPECT_EQ(anr.stack_key(), "app::ReadConfigFile()");
  EXPECT_EQ(anrs[0].key(), "app::ReadConfigFile()");
  End();
}

// The same stacks with key captures off: the one sample keys on the helper.
TEST_F(AnrTracerTest, KeyCaptures_Off_KeyOnTheCrossingsStackAlone) {
  Start();
  capture_.SetFrames({ReturnAddressIn(&app::NowMicros), ReturnAddressIn(&app::ReadConfigFile),
                      ReturnAddressIn(&app::OnClick), ReturnAddressIn(&Looper::Loop)});
  env_.FastForwardBy(absl::Milliseconds(300));
  Begin();
  env_.FastForwardBy(kAnr);
  const std::vector<Issue> anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  EXPECT_EQ(anrs[0].proto().anr().stack_key(), "app::NowMicros()");
  End();
}

// A dispatch that ends between its key captures and the crossing never
// lends them to the next dispatch's report.
TEST_F(AnrTracerTest, KeyCaptures_OfAnEndedDispatch_AreNotUsedForTheNext) {
  key_captures_ = 2;
  Start();
  capture_.SetFrames({ReturnAddressIn(&app::Unrelated), ReturnAddressIn(&Looper::Loop)});
  env_.FastForwardBy(absl::Milliseconds(300));
  Begin();
  env_.FastForwardBy(kLag - absl::Milliseconds(20));  // Both key captures taken.
  End();
  EXPECT_EQ(capture_.times().size(), 2u);
  capture_.SetFrames({ReturnAddressIn(&app::ReadConfigFile), ReturnAddressIn(&app::OnClick),
                      ReturnAddressIn(&Looper::Loop)});
  Begin();
  env_.FastForwardBy(kAnr);
  const std::vector<Issue> anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  EXPECT_EQ(anrs[0].proto().anr().stack_key(), "app::ReadConfigFile()");
  End();
}

TEST_F(AnrTracerTest, Anr_FiresExactlyAtThreshold_WithTheCrossingsEvidence) {
  AppState::Get()->OnSceneShown("Gallery");
  AppState::Get()->SetForeground(false);
  Start();
  env_.FastForwardBy(absl::Milliseconds(300));
  const TimeTicks begin = env_.Now();
  Begin("app-event");
  // The dispatch draws a frame: input took 100 ms, animation is running.
  monitor_->MarkFrame(begin, RefreshRate());
  monitor_->MarkPhase(UIThreadMonitor::Phase::kInput, begin);
  env_.FastForwardBy(absl::Milliseconds(100));
  monitor_->MarkPhase(UIThreadMonitor::Phase::kAnimation, env_.Now());

  env_.FastForwardBy(kAnr - absl::Milliseconds(100) - absl::Nanoseconds(1));
  EXPECT_THAT(issues_.WithDetail(proto::ANR), IsEmpty());
  env_.FastForwardBy(absl::Nanoseconds(1));
  ASSERT_THAT(issues_.all(), SizeIs(1));

  // The stack was captured once for the lag crossing and once for the ANR
  // crossing, of the looper thread, exactly at the crossings.
  EXPECT_THAT(capture_.times(), ElementsAre(begin + kLag, begin + kAnr));
  EXPECT_THAT(capture_.tids(), ElementsAre(ThreadHandle::Current().tid(),
                                           ThreadHandle::Current().tid()));
  const Issue& issue = issues_.all()[0];
  EXPECT_EQ(issue.tag(), kTagEvilMethod);
  ASSERT_TRUE(issue.proto().has_anr());
  const proto::AnrReport& anr = issue.proto().anr();
  EXPECT_EQ(anr.detail(), proto::ANR);
  EXPECT_DOUBLE_EQ(anr.cost_ms(), 5000);
  EXPECT_DOUBLE_EQ(anr.detection_delay_ms(), 0);
  EXPECT_EQ(anr.scene(), "Gallery");
  EXPECT_FALSE(anr.is_process_foreground());

  ASSERT_GE(anr.thread_stack().frames_size(), 3);
  EXPECT_EQ(anr.thread_stack().frames(0).function(), "app::ReadConfigFile()");
  EXPECT_EQ(anr.thread_stack().frames(1).function(), "app::OnClick()");
  EXPECT_EQ(anr.thread_stack().tid(), ThreadHandle::Current().tid());
  EXPECT_EQ(anr.thread_stack().thread_name(), ProcFixture::kThreadName);
  EXPECT_DOUBLE_EQ(anr.thread_stack().captured_at_ms(), 5000);
  // The innermost application frame (not traced: no method tracing) is the
  // key, and the issue is keyed by it.
  EXPECT_EQ(anr.stack_key(), "app::ReadConfigFile()");
  EXPECT_EQ(issue.key(), anr.stack_key());

  // Queue costs of the frame being drawn: input finished, animation running.
  EXPECT_DOUBLE_EQ(anr.queue_costs().input_ms(), 100);
  EXPECT_DOUBLE_EQ(anr.queue_costs().animation_ms(), 4900);
  EXPECT_DOUBLE_EQ(anr.queue_costs().traversal_ms(), 0);
  EXPECT_DOUBLE_EQ(anr.queue_costs().commit_ms(), 0);

  // Thread and memory from the (fixture) /proc.
  EXPECT_EQ(anr.thread().tid(), ThreadHandle::Current().tid());
  EXPECT_EQ(anr.thread().name(), ProcFixture::kThreadName);
  EXPECT_EQ(anr.thread().state(), "D (uninterruptible (disk) sleep)");
  EXPECT_EQ(anr.thread().priority(), ProcFixture::kPriority);
  EXPECT_EQ(anr.thread().nice(), ProcFixture::kNice);
  EXPECT_DOUBLE_EQ(anr.thread().cpu_time_ms(), ProcFixture::kThreadCpuMs);
  EXPECT_EQ(anr.memory().vm_size_kb(), ProcFixture::kVmSizeKb);
  EXPECT_EQ(anr.memory().vm_rss_kb(), ProcFixture::kVmRssKb);
  // The message: a foreign loop's label.
  EXPECT_EQ(anr.message().callback(), "app-event");
  // No method tracing: no call tree; no CPU sampler: no CPU usage.
  EXPECT_THAT(anr.stack(), IsEmpty());
  EXPECT_EQ(anr.cpu_usage(), -1);

  // Once per stuck dispatch, however long it stays stuck; no LAG either.
  env_.FastForwardBy(absl::Seconds(30));
  End();
  EXPECT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(anr_->anr_count(), 1);
  EXPECT_EQ(anr_->lag_count(), 0);
  EXPECT_EQ(anr_->last_claimed_dispatch(), monitor_->heartbeat().dispatch_number());
}

TEST_F(AnrTracerTest, Anr_CpuUsageSinceTheSamplersFirstLook) {
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  Begin();
  // The sampler (every 50 ms on the watchdog) reads the CPU clock once at
  // +50 ms; then the thread uses 2475 ms of CPU in 4950 ms.
  env_.FastForwardBy(absl::Milliseconds(50));
  env_.clock()->AdvanceThreadCpuTime(absl::Milliseconds(2475));
  env_.FastForwardBy(kAnr - absl::Milliseconds(50));
  ASSERT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cpu_usage(), 50);
  End();
}

TEST_F(AnrTracerTest, Anr_FailedCapture_ReportsTheErrorAndFallsBackToUnknownKey) {
  capture_.SetStatus(absl::DeadlineExceededError("thread did not answer"));
  Start();
  Begin();
  env_.FastForwardBy(kAnr);
  ASSERT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
  const proto::AnrReport& anr = issues_.all()[0].proto().anr();
  EXPECT_THAT(anr.thread_stack().frames(), IsEmpty());
  EXPECT_THAT(anr.thread_stack().error(), ::testing::HasSubstr("thread did not answer"));
  EXPECT_EQ(anr.thread_stack().tid(), ThreadHandle::Current().tid());
  EXPECT_EQ(anr.stack_key(), "unknown");
  End();
}

TEST_F(AnrTracerTest, Anr_RealMessage_ReportsTargetAndPostLocation) {
  Start(/*foreign=*/false);
  Handler handler(env_.looper(), "app::NetHandler");
  const Location from = MATRIX_FROM_HERE;
  // The task is stuck for 6 s; the watchdog and the worker run meanwhile.
  handler.Post(
      [&] { trace_test::RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(6)); }, from);
  env_.RunUntilIdle();

  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::AnrReport& anr = issues_.all()[0].proto().anr();
  EXPECT_EQ(anr.detail(), proto::ANR);
  EXPECT_DOUBLE_EQ(anr.cost_ms(), 5000);
  EXPECT_EQ(anr.message().target(), handler.ToString());
  EXPECT_EQ(anr.message().callback(), from.ToString());
  EXPECT_EQ(anr.message().what(), 0);
}

TEST_F(AnrTracerTest, Lag_HandlerDestroyedBeforeTheReportIsBuilt_MessageInfoSurvives) {
  Start(/*foreign=*/false);
  Handler main(env_.looper());
  auto one_shot = std::make_unique<Handler>(env_.looper(), "app::OneShotHandler");
  const std::string target = one_shot->ToString();
  one_shot->Post([&] {
    trace_test::RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(3));
    // Runs right after this dispatch, before the LAG report is built (the
    // main looper runs first among messages due at the same time).
    main.Post([&] { one_shot.reset(); });
  });
  env_.RunUntilIdle();
  ASSERT_EQ(one_shot, nullptr);
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_EQ(issues_.all()[0].proto().anr().message().target(), target);
}

TEST_F(AnrTracerTest, Lag_StackFromTheCrossing_ReportedAtDispatchEndWithRealCost) {
  Start();
  const TimeTicks begin = env_.Now();
  Begin();
  env_.FastForwardBy(kLag);
  // Captured at the crossing; nothing reported while the dispatch runs.
  EXPECT_THAT(capture_.times(), ElementsAre(begin + kLag));
  env_.FastForwardBy(absl::Milliseconds(900));
  EXPECT_THAT(issues_.all(), IsEmpty());

  // The thread moved on: the report must still show the crossing's stack.
  capture_.SetFrames({ReturnAddressIn(&app::Unrelated)});
  End();  // 2.9 s.
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const Issue& issue = issues_.all()[0];
  const proto::AnrReport& lag = issue.proto().anr();
  EXPECT_EQ(lag.detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(lag.cost_ms(), 2900);
  EXPECT_DOUBLE_EQ(lag.detection_delay_ms(), 0);
  EXPECT_DOUBLE_EQ(lag.thread_stack().captured_at_ms(), 2000);
  ASSERT_GE(lag.thread_stack().frames_size(), 1);
  EXPECT_EQ(lag.thread_stack().frames(0).function(), "app::ReadConfigFile()");
  EXPECT_EQ(lag.stack_key(), "app::ReadConfigFile()");
  EXPECT_EQ(issue.key(), lag.stack_key());
  EXPECT_EQ(capture_.times().size(), 1u);
  EXPECT_EQ(anr_->lag_count(), 1);
  EXPECT_EQ(anr_->anr_count(), 0);
}

TEST_F(AnrTracerTest, Lag_DispatchEndingWhileTheWatchdogCaptures_IsStillReported) {
  Start();
  const TimeTicks begin = env_.Now();
  Begin();
  // The looper thread finishes the dispatch while the watchdog is taking the
  // lag evidence, before it has published the pending LAG.
  capture_.RunDuringNextCapture([this] { looper_monitor_->DispatchEnd(); });
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(capture_.times(), ElementsAre(begin + kLag));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cost_ms(), 2000);
}

// A slow capture (a loaded machine, ThreadSanitizer): the dispatch ends while
// the watchdog is still taking the evidence, and others run after it. The LAG
// carries the dispatch's own end (2030 ms), not the crossing's time.
TEST_F(AnrTracerTest, Lag_DispatchEndingDuringASlowCapture_CostsUntilItsOwnEnd) {
  Start();
  Begin("slow");
  capture_.RunDuringNextCapture([this] {
    env_.AdvanceClock(absl::Milliseconds(30));
    looper_monitor_->DispatchEnd();
    for (const char* label : {"next-1", "next-2"}) {
      looper_monitor_->DispatchBegin(label);
      env_.AdvanceClock(absl::Milliseconds(5));
      looper_monitor_->DispatchEnd();
    }
  });
  env_.FastForwardBy(absl::Seconds(10));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cost_ms(), 2030);
}

TEST_F(AnrTracerTest, Lag_DispatchEndingJustBeforeAnr_YieldsOnlyTheLag) {
  Start();
  Begin();
  env_.FastForwardBy(kAnr - absl::Nanoseconds(1));
  End();
  env_.FastForwardBy(absl::Seconds(20));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_NEAR(issues_.all()[0].proto().anr().cost_ms(), 5000 - 1e-6, 1e-9);
}

TEST_F(AnrTracerTest, Lag_DispatchReachingAnr_YieldsOnlyTheAnr) {
  Start();
  Begin();
  env_.FastForwardBy(kAnr + absl::Seconds(2));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::ANR);
  EXPECT_EQ(anr_->lag_count(), 0);
}

TEST_F(AnrTracerTest, ShortDispatch_NoCaptureNoReport) {
  Start();
  Begin();
  env_.FastForwardBy(kLag - absl::Nanoseconds(1));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
}

TEST_F(AnrTracerTest, IdleWatchdog_DispatchStartingWhileItSleeps_DetectedAtBeginPlusThreshold) {
  Start();
  // The idle watchdog sleeps one lag threshold; the dispatch begins just
  // before it wakes, so both crossings fall between its wake-ups.
  env_.FastForwardBy(absl::Milliseconds(1700));
  const TimeTicks begin = env_.Now();
  Begin();
  env_.FastForwardBy(kAnr);
  EXPECT_THAT(capture_.times(), ElementsAre(begin + kLag, begin + kAnr));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().detection_delay_ms(), 0);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cost_ms(), 5000);
  End();
}

TEST_F(AnrTracerTest, DispatchesInSequence_EachJudgedOnItsOwnBegin) {
  Start();
  struct Step {
    absl::Duration gap;
    absl::Duration length;
  };
  // Short, lagging, hung, short, lagging again: begins and gaps chosen so
  // that crossings never coincide with the idle watchdog's wake-ups.
  const std::vector<Step> steps = {{absl::Milliseconds(300), absl::Seconds(1)},
                                   {absl::Milliseconds(10), absl::Milliseconds(2500)},
                                   {absl::Milliseconds(777), absl::Seconds(6)},
                                   {absl::ZeroDuration(), absl::Milliseconds(100)},
                                   {absl::Milliseconds(1), absl::Milliseconds(3100)}};
  std::vector<TimeTicks> expected_captures;
  for (const Step& step : steps) {
    env_.FastForwardBy(step.gap);
    const TimeTicks begin = env_.Now();
    if (step.length >= kLag) expected_captures.push_back(begin + kLag);
    if (step.length >= kAnr) expected_captures.push_back(begin + kAnr);
    Begin();
    env_.FastForwardBy(step.length);
    End();
  }
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_EQ(capture_.times(), expected_captures);
  ASSERT_THAT(issues_.all(), SizeIs(3));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().cost_ms(), 2500);
  EXPECT_EQ(issues_.all()[1].proto().anr().detail(), proto::ANR);
  EXPECT_DOUBLE_EQ(issues_.all()[1].proto().anr().cost_ms(), 5000);
  EXPECT_EQ(issues_.all()[2].proto().anr().detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(issues_.all()[2].proto().anr().cost_ms(), 3100);
  for (const Issue& issue : issues_.all()) {
    EXPECT_DOUBLE_EQ(issue.proto().anr().detection_delay_ms(), 0);
  }
}

// Slow dispatches back to back through the foreign hooks (the GLib e2e
// sequence): after the first LAG the watchdog must not sleep until that
// dispatch's ANR deadline, or every dispatch ending before it goes unwatched.
TEST_F(AnrTracerTest, LaggingDispatchesInARow_EachGetsItsOwnLag) {
  Start();
  constexpr int kDispatches = 4;
  const absl::Duration kLength = absl::Milliseconds(2200);
  std::vector<TimeTicks> expected_captures;
  for (int i = 0; i < kDispatches; ++i) {
    env_.FastForwardBy(absl::Milliseconds(10));
    expected_captures.push_back(env_.Now() + kLag);
    Begin();
    env_.FastForwardBy(kLength);
    End();
  }
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_EQ(capture_.times(), expected_captures);
  ASSERT_THAT(issues_.WithDetail(proto::LAG), SizeIs(kDispatches));
  for (const Issue& issue : issues_.all()) {
    EXPECT_EQ(issue.proto().anr().detail(), proto::LAG);
    EXPECT_DOUBLE_EQ(issue.proto().anr().cost_ms(), 2200);
    EXPECT_DOUBLE_EQ(issue.proto().anr().detection_delay_ms(), 0);
  }
  EXPECT_EQ(anr_->lag_count(), kDispatches);
}

// The same when the lagging dispatch ends while the watchdog captures (the
// watchdog reports the LAG itself) and the next slow one follows at once.
TEST_F(AnrTracerTest, LagEndingDuringCapture_NextSlowDispatchStillWatched) {
  Start();
  Begin();
  capture_.RunDuringNextCapture([this] {
    looper_monitor_->DispatchEnd();
    looper_monitor_->DispatchBegin("second");
  });
  const TimeTicks second_begin = env_.Now() + kLag;
  env_.FastForwardBy(kLag + absl::Milliseconds(2200));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  ASSERT_THAT(issues_.WithDetail(proto::LAG), SizeIs(2));
  EXPECT_EQ(capture_.times().back(), second_begin + kLag);
  EXPECT_DOUBLE_EQ(issues_.all()[1].proto().anr().detection_delay_ms(), 0);
}

// With a debugger attached nothing is reported, but a suppressed LAG must not
// leave the watchdog asleep until the ANR deadline either: once the debugger
// goes, the next slow dispatch is reported on time.
TEST_F(AnrTracerTest, SuppressedLag_DoesNotDelayTheNextDispatchesWatch) {
  proc_.SetTracerPid(4242);
  Start();
  Begin();
  env_.FastForwardBy(absl::Milliseconds(2200));
  End();
  EXPECT_EQ(anr_->suppressed_by_debugger(), 1);
  proc_.SetTracerPid(0);
  env_.FastForwardBy(absl::Milliseconds(10));
  const TimeTicks begin = env_.Now();
  Begin();
  env_.FastForwardBy(absl::Milliseconds(2200));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  ASSERT_THAT(issues_.WithDetail(proto::LAG), SizeIs(1));
  EXPECT_EQ(capture_.times().back(), begin + kLag);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().detection_delay_ms(), 0);
}

TEST_F(AnrTracerTest, NewDispatchRightAfterAReportedOne_IsWatchedFromItsOwnBegin) {
  Start();
  Begin();
  env_.FastForwardBy(absl::Seconds(6));
  looper_monitor_->DispatchEnd();
  const TimeTicks second_begin = env_.Now();
  Begin();  // Same instant: the watchdog never sees the looper idle.
  env_.FastForwardBy(kAnr);
  ASSERT_THAT(issues_.WithDetail(proto::ANR), SizeIs(2));
  EXPECT_EQ(capture_.times().back(), second_begin + kAnr);
  EXPECT_DOUBLE_EQ(issues_.all()[1].proto().anr().cost_ms(), 5000);
  EXPECT_DOUBLE_EQ(issues_.all()[1].proto().anr().detection_delay_ms(), 0);
  End();
}

TEST_F(AnrTracerTest, StoppedProcess_StoppedTimeIsLeftOutOfTheHangAndReportedApart) {
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  env_.FastForwardBy(absl::Milliseconds(500));
  const TimeTicks begin = env_.Now();
  Begin();
  // The process is stopped (SIGSTOP, a breakpoint) 10 s: time passes and the
  // watchdog does not run. Its CPU sampler's poll due 50 ms in runs at the
  // resume: stopped from then on.
  env_.AdvanceClock(absl::Seconds(10));
  const TimeTicks resumed = env_.Now();
  env_.RunUntilIdle();
  // The sampler's poll saw the stop first; the ANR check, late for the same
  // stop, is late only from the poll's wake-up on.
  EXPECT_EQ(anr_->late_wakeups(), 0);
  EXPECT_EQ(monitor_->stopped_time().Within(begin, resumed),
            absl::Seconds(10) - absl::Milliseconds(50));
  EXPECT_THAT(capture_.times(), IsEmpty());  // 50 ms of running time: no LAG.
  EXPECT_THAT(issues_.all(), IsEmpty());

  // Still stuck: the ANR comes when it has run 5 s, not counting the stop.
  const TimeTicks anr_at = resumed + kAnr - absl::Milliseconds(50);
  env_.FastForwardBy(anr_at - env_.Now() - absl::Nanoseconds(1));
  EXPECT_THAT(issues_.WithDetail(proto::ANR), IsEmpty());
  env_.FastForwardBy(absl::Nanoseconds(1));
  const auto anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  const proto::AnrReport& anr = anrs[0].proto().anr();
  EXPECT_EQ(capture_.times().back(), anr_at);
  EXPECT_DOUBLE_EQ(anr.cost_ms(), 5000);
  EXPECT_DOUBLE_EQ(anr.stopped_ms(), 9950);
  EXPECT_DOUBLE_EQ(anr.detection_delay_ms(), 0);
  End();
}

TEST_F(AnrTracerTest, StoppedWhileTheLagCaptureWaits_IsStoppedTimeBeyondTheCapturesBound) {
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  env_.FastForwardBy(absl::Milliseconds(500));
  const TimeTicks begin = env_.Now();
  Begin();
  // SIGSTOP lands while the LAG crossing's capture waits for the looper
  // thread: the capture returns 3 s later. The sampler's poll due meanwhile
  // runs after the check, late only from its end; the check itself is late
  // beyond the most a capture takes (300 ms).
  capture_.RunDuringNextCapture([this] { env_.AdvanceClock(absl::Seconds(3)); });
  env_.FastForwardBy(kLag);
  ASSERT_THAT(capture_.times(), SizeIs(1));
  const TimeTicks lag_at = begin + kLag;
  EXPECT_EQ(capture_.times()[0], lag_at);
  EXPECT_EQ(monitor_->stopped_time().Within(begin, env_.Now()),
            absl::Seconds(3) - StackCapturer::kLongestWait);
  EXPECT_EQ(monitor_->stopped_time().Within(lag_at, lag_at + StackCapturer::kLongestWait),
            absl::ZeroDuration());
  env_.FastForwardBy(absl::Milliseconds(10));
  End();
}

TEST_F(AnrTracerTest, ThrottledProcess_TheWaitToRunIsHangTime_AndReportedApart) {
  // A CPU quota (or a busy machine): the whole process, watchdog included,
  // waits to run. The cgroup's throttled time says so, so the late wake-up
  // is not a stop: the hang is reported when it is due, and the throttled
  // time is part of its cost.
  StoppedTime::WaitToRun counters;
  wait_to_run_ = [&counters] { return std::optional<StoppedTime::WaitToRun>(counters); };
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  env_.FastForwardBy(absl::Milliseconds(500));
  const TimeTicks begin = env_.Now();
  Begin();
  // 6 s pass in which the watchdog runs only at the end; the quota
  // throttled the process 5.4 s of them, the looper thread ran the rest.
  env_.AdvanceClock(absl::Seconds(6));
  counters.throttled += absl::Milliseconds(5400);
  counters.ran += absl::Milliseconds(600);
  env_.RunUntilIdle();
  EXPECT_EQ(anr_->late_wakeups(), 0);
  EXPECT_EQ(monitor_->stopped_time().Within(begin, env_.Now()), absl::ZeroDuration());
  const auto anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  const proto::AnrReport& anr = anrs[0].proto().anr();
  EXPECT_DOUBLE_EQ(anr.cost_ms(), 6000);
  EXPECT_DOUBLE_EQ(anr.stopped_ms(), 0);
  EXPECT_DOUBLE_EQ(anr.throttled_ms(), 5400);
  // The capture came a second after the crossing, and says so.
  EXPECT_DOUBLE_EQ(anr.detection_delay_ms(), 1000);
  End();
}

TEST_F(AnrTracerTest, StoppedProcess_CountersThatDidNotMove_StillMeanAStop) {
  // SIGSTOP, a frozen cgroup, a debugger: the looper thread neither ran nor
  // waited to run, and nothing was throttled.
  StoppedTime::WaitToRun counters;
  wait_to_run_ = [&counters] { return std::optional<StoppedTime::WaitToRun>(counters); };
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  env_.FastForwardBy(absl::Milliseconds(500));
  Begin();
  env_.AdvanceClock(absl::Seconds(7));
  counters.ran += absl::Milliseconds(1);
  env_.RunUntilIdle();
  env_.FastForwardBy(absl::Milliseconds(300));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_GE(monitor_->stopped_time().total(), absl::Milliseconds(6900));
}

TEST_F(AnrTracerTest, StoppedProcess_ShortHangAroundTheStop_GivesNoAnr) {
  // A dispatch held 7 s at a breakpoint that then finishes gives no LAG or
  // ANR: it ran 50 ms plus 300 ms.
  Start(/*foreign=*/true, /*report_with_debugger=*/false, /*cpu_sampler=*/true);
  env_.FastForwardBy(absl::Milliseconds(500));
  Begin();
  env_.AdvanceClock(absl::Seconds(7));
  env_.RunUntilIdle();
  env_.FastForwardBy(absl::Milliseconds(300));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
}

TEST_F(AnrTracerTest, SlowCapture_TheDelayIsWhenTheStackWasTaken) {
  // The looper thread takes the capture's signal 30 ms after the watchdog
  // asked (a loaded machine): the report's delay and stack time say so.
  Start();
  Begin();
  capture_.RunDuringNextCapture([this] { env_.AdvanceClock(absl::Milliseconds(30)); });
  env_.FastForwardBy(kLag + absl::Milliseconds(500));
  End();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::AnrReport& lag = issues_.all()[0].proto().anr();
  EXPECT_EQ(lag.detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(lag.detection_delay_ms(), 30);
  EXPECT_DOUBLE_EQ(lag.thread_stack().captured_at_ms(), 2030);
  EXPECT_DOUBLE_EQ(lag.cost_ms(), 2500);  // A LAG's cost runs to the dispatch's end.
}

TEST_F(AnrTracerTest, LateWatchdog_WithinTolerance_IsNotLate) {
  Start();
  Begin();
  // 100 ms late is still "on time" (StoppedTime::kTolerance).
  env_.AdvanceClock(kLag + absl::Milliseconds(100));
  env_.RunUntilIdle();
  EXPECT_EQ(anr_->late_wakeups(), 0);
  EXPECT_THAT(capture_.times(), SizeIs(1));
  End();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().anr().detection_delay_ms(), 100);
}

TEST_F(AnrTracerTest, Restart_AfterALongStop_IsNotALateWakeup) {
  Start();
  anr_->OnCloseTrace();
  env_.FastForwardBy(absl::Seconds(60));
  const TimeTicks begin = env_.Now();
  Begin();
  env_.FastForwardBy(absl::Seconds(1));
  anr_->OnStartTrace();
  env_.FastForwardBy(kAnr - absl::Seconds(1));
  EXPECT_EQ(anr_->late_wakeups(), 0);
  // The dispatch that was running at the restart is watched from its begin.
  ASSERT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
  EXPECT_EQ(capture_.times().back(), begin + kAnr);
  End();
}

TEST_F(AnrTracerTest, Closed_ReportsNothing) {
  Start();
  anr_->OnCloseTrace();
  Begin();
  env_.FastForwardBy(absl::Seconds(10));
  End();
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
}

TEST_F(AnrTracerTest, DebuggerAttached_SuppressesLagAndAnr) {
  proc_.SetTracerPid(4242);
  Start();
  Begin();
  env_.FastForwardBy(absl::Seconds(6));
  End();
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_THAT(capture_.times(), IsEmpty());
  EXPECT_EQ(anr_->suppressed_by_debugger(), 2);  // The lag and the ANR crossing.
  EXPECT_EQ(anr_->anr_count(), 0);

  // Detached again: the next hang is reported.
  proc_.SetTracerPid(0);
  Begin();
  env_.FastForwardBy(absl::Seconds(6));
  End();
  EXPECT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
}

TEST_F(AnrTracerTest, DebuggerAttached_ReportWithDebugger_Reports) {
  proc_.SetTracerPid(4242);
  Start(/*foreign=*/true, /*report_with_debugger=*/true);
  Begin();
  env_.FastForwardBy(absl::Seconds(6));
  End();
  EXPECT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
  EXPECT_EQ(anr_->suppressed_by_debugger(), 0);
}

TEST_F(AnrTracerTest, MethodTracing_AnrCarriesTheCallTreeSinceTheDispatchBegan) {
  StartMethodTracer();
  Start();
  // Before the dispatch: not part of its tree.
  Enter(&app::Unrelated);
  env_.FastForwardBy(absl::Milliseconds(50));
  Exit(&app::Unrelated);

  Begin();
  Enter(&app::OnClick);
  env_.FastForwardBy(absl::Milliseconds(100));
  Enter(&app::ParseConfig);
  env_.FastForwardBy(absl::Milliseconds(200));
  Exit(&app::ParseConfig);
  Enter(&app::ReadConfigFile);  // Stuck here (traced).
  env_.FastForwardBy(absl::Milliseconds(4700));
  method_tracer_->UpdateTime(env_.Now());

  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::AnrReport& anr = issues_.all()[0].proto().anr();
  EXPECT_EQ(anr.detail(), proto::ANR);
  // Method records carry time in 1.024 us units: costs are exact to 2 us.
  ASSERT_EQ(anr.stack_size(), 4) << anr.stack_text();
  ExpectCall(anr.stack(0), 0, "dispatch", 5000, /*unfinished=*/true);
  ExpectCall(anr.stack(1), 1, "app::OnClick()", 5000, /*unfinished=*/true);
  ExpectCall(anr.stack(2), 2, "app::ParseConfig()", 200, /*unfinished=*/false);
  ExpectCall(anr.stack(3), 2, "app::ReadConfigFile()", 4700, /*unfinished=*/true);
  EXPECT_FALSE(anr.stack_truncated());
  EXPECT_THAT(anr.stack_text(), ::testing::HasSubstr("\n2,app::ReadConfigFile(),1,4700.0"));
  // The stuck function is traced and costs 94% of the hang: it is the key.
  EXPECT_EQ(anr.stack_key(), "app::ReadConfigFile()");
  EXPECT_EQ(issues_.all()[0].key(), "app::ReadConfigFile()");
  End();
  Exit(&app::ReadConfigFile);
  Exit(&app::OnClick);
}

TEST_F(AnrTracerTest, MethodTracing_LagTreeCoversTheWholeDispatch) {
  StartMethodTracer();
  Start();
  Begin();
  Enter(&app::OnClick);
  env_.FastForwardBy(absl::Milliseconds(2500));
  Exit(&app::OnClick);
  Enter(&app::ParseConfig);
  env_.FastForwardBy(absl::Milliseconds(500));
  Exit(&app::ParseConfig);
  End();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::AnrReport& lag = issues_.all()[0].proto().anr();
  EXPECT_EQ(lag.detail(), proto::LAG);
  EXPECT_DOUBLE_EQ(lag.cost_ms(), 3000);
  // Calls made after the crossing are there too, and nothing is running.
  ASSERT_EQ(lag.stack_size(), 3) << lag.stack_text();
  ExpectCall(lag.stack(0), 0, "dispatch", 3000, /*unfinished=*/false);
  ExpectCall(lag.stack(1), 1, "app::OnClick()", 2500, /*unfinished=*/false);
  ExpectCall(lag.stack(2), 1, "app::ParseConfig()", 500, /*unfinished=*/false);
}

// A foreign loop that reports a dispatch only after it began (libuv's I/O
// callbacks run before the adapter's check handle): its provisional source.
class FakeProvisionalSource : public ProvisionalDispatchSource {
 public:
  explicit FakeProvisionalSource(const TickClock* clock) : clock_(clock) {}
  TimeTicks ProvisionalBegin() const override {
    ++calls_;
    return waiting_ ? clock_->NowTicks() : begin_;
  }
  void Wait() { waiting_ = true; }
  void Returned(TimeTicks at) {
    waiting_ = false;
    begin_ = at;
  }
  void Gone() { Returned(TimeTicks()); }
  int calls() const { return calls_; }

 private:
  const TickClock* const clock_;
  bool waiting_ = true;
  TimeTicks begin_;
  mutable int calls_ = 0;
};

TEST_F(AnrTracerTest, Provisional_WaitingIsIdle_AHangBeforeTheBeginIsOneAnrTakenLive) {
  Start();
  FakeProvisionalSource source(env_.clock());
  ObserverRegistration registration = looper_monitor_->SetProvisionalSource(&source, "uv-like");
  env_.FastForwardBy(absl::Seconds(20));  // Waiting: the answer is always "now".
  EXPECT_GT(source.calls(), 0);
  EXPECT_EQ(anr_->lag_count() + anr_->anr_count(), 0);
  EXPECT_TRUE(capture_.times().empty());

  const TimeTicks returned = env_.Now();  // The wait returns; the loop hangs.
  source.Returned(returned);
  env_.FastForwardBy(kAnr);  // The heartbeat shows no dispatch all along.
  EXPECT_FALSE(monitor_->heartbeat().Read().active);
  EXPECT_EQ(anr_->anr_count(), 1);
  ASSERT_THAT(capture_.times(), SizeIs(2));  // The LAG's, then the ANR's, each at its crossing.
  EXPECT_EQ(capture_.times()[0], returned + kLag);
  EXPECT_EQ(capture_.times()[1], returned + kAnr);

  // The loop reports it now, with the same begin: the same dispatch.
  looper_monitor_->DispatchBegin(returned, "uv-like");
  env_.FastForwardBy(absl::Seconds(6));
  End();
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(anr_->anr_count(), 1);
  EXPECT_EQ(anr_->lag_count(), 0);
  const std::vector<Issue> anrs = issues_.WithDetail(proto::ANR);
  ASSERT_THAT(anrs, SizeIs(1));
  const proto::AnrReport& anr = anrs[0].proto().anr();
  EXPECT_DOUBLE_EQ(anr.cost_ms(), absl::ToDoubleMilliseconds(kAnr));
  EXPECT_DOUBLE_EQ(anr.detection_delay_ms(), 0);
  EXPECT_EQ(anr.message().callback(), "uv-like");
}

TEST_F(AnrTracerTest, Provisional_LagEndsWithTheReportedDispatch) {
  Start();
  FakeProvisionalSource source(env_.clock());
  ObserverRegistration registration = looper_monitor_->SetProvisionalSource(&source);
  env_.FastForwardBy(absl::Seconds(3));
  const TimeTicks returned = env_.Now();
  source.Returned(returned);
  env_.FastForwardBy(kLag + absl::Milliseconds(500));
  ASSERT_THAT(capture_.times(), SizeIs(1));
  EXPECT_EQ(capture_.times()[0], returned + kLag);
  looper_monitor_->DispatchBegin(returned);
  source.Wait();
  env_.FastForwardBy(absl::Milliseconds(100));
  End();
  env_.FastForwardBy(absl::Seconds(10));
  EXPECT_EQ(anr_->anr_count(), 0);
  ASSERT_THAT(issues_.WithDetail(proto::LAG), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.WithDetail(proto::LAG)[0].proto().anr().cost_ms(), 2600);
}

TEST_F(AnrTracerTest, Provisional_NeverReported_TheNextDispatchIsJudgedAlone) {
  Start();
  FakeProvisionalSource source(env_.clock());
  ObserverRegistration registration = looper_monitor_->SetProvisionalSource(&source);
  source.Returned(env_.Now());
  env_.FastForwardBy(kLag + absl::Milliseconds(1));  // A LAG captured for it...
  ASSERT_THAT(capture_.times(), SizeIs(1));
  registration.Reset();  // ...but it is never reported (the adapter detached).
  env_.FastForwardBy(kAnr);
  EXPECT_EQ(anr_->anr_count(), 0);
  // The next dispatch carries the number the provisional one had.
  const TimeTicks begin = env_.Now();
  Begin("next");
  env_.FastForwardBy(kAnr);
  EXPECT_EQ(anr_->anr_count(), 1);
  End();
  EXPECT_EQ(anr_->lag_count(), 0);
  ASSERT_THAT(capture_.times(), SizeIs(3));  // Its own LAG and ANR crossings.
  EXPECT_EQ(capture_.times()[1], begin + kLag);
  EXPECT_EQ(capture_.times()[2], begin + kAnr);
  ASSERT_THAT(issues_.WithDetail(proto::ANR), SizeIs(1));
  EXPECT_EQ(issues_.WithDetail(proto::ANR)[0].proto().anr().message().callback(), "next");
  EXPECT_DOUBLE_EQ(issues_.WithDetail(proto::ANR)[0].proto().anr().cost_ms(),
                   absl::ToDoubleMilliseconds(kAnr));
}

}  // namespace
}  // namespace matrix
