// EvilMethodTracer on the fake clock: real messages on the main looper whose
// tasks move the clock (the looper thread "works" for that long), the worker
// and the watchdog as background loopers.

#include "matrix/trace/evil_method_tracer.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/anr_tracer.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {
MATRIX_TEST_APP_FUNCTION(OnClick)
MATRIX_TEST_APP_FUNCTION(DecodeImage)
MATRIX_TEST_APP_FUNCTION(LogClick)
MATRIX_TEST_APP_FUNCTION(LoadThumbnails)
}  // namespace app

namespace matrix {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;
using trace_test::FakeCapture;
using trace_test::IssueCollector;
using trace_test::ProcFixture;
using trace_test::ReturnAddressIn;
using trace_test::RunLoopersFor;

struct StartOptions {
  bool with_anr_tracer = false;
  bool cpu_sampler = false;
  bool report_with_debugger = false;
  bool stack_sampling = false;
  int max_samples = 32;
};

class EvilMethodTracerTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  EvilMethodTracerTest() : TracerRig(EnvOptions()), handler_(env_.looper(), "app::UiHandler") {
    capture_.SetFrames({ReturnAddressIn(&app::DecodeImage)});
  }
  ~EvilMethodTracerTest() override {
    evil_.reset();
    anr_.reset();
    monitor_.reset();
    looper_monitor_.reset();
  }

  static testing::TestEnvironment::Options EnvOptions() {
    testing::TestEnvironment::Options options;
    options.auto_vsync = false;  // Frames are fired by hand.
    return options;
  }

  void Start(StartOptions start = {}) {
    looper_monitor_ = std::make_unique<LooperMonitor>(env_.looper());
    looper_monitor_->Start();
    UIThreadMonitor::Options monitor_options;
    monitor_options.method_tracer = method_tracer_.get();
    if (start.cpu_sampler) monitor_options.sampler_looper = watchdog_;
    monitor_ = std::make_unique<UIThreadMonitor>(looper_monitor_.get(), env_.choreographer(),
                                                 monitor_options);
    monitor_->Start();
    if (start.with_anr_tracer) {
      AnrTracer::Options anr;
      Wire(&anr, monitor_.get());
      anr_ = std::make_unique<AnrTracer>(std::move(anr));
      anr_->OnStartTrace();
    }
    EvilMethodTracer::Options options;
    Wire(&options, monitor_.get());
    options.anr_tracer = anr_.get();
    options.report_with_debugger = start.report_with_debugger;
    if (start.stack_sampling) {
      options.sampling.enabled = true;
      options.sampling.max_samples = start.max_samples;
      options.sampling.capture = capture_.AsFunction();
    }
    evil_ = std::make_unique<EvilMethodTracer>(std::move(options));
    evil_->OnStartTrace();
    env_.RunUntilIdle();
  }

  // Runs a message on the main looper that keeps the thread busy for `cost`
  // while the watchdog runs.
  void RunWatchedMessage(absl::Duration cost) {
    handler_.Post([this, cost] { RunLoopersFor(&env_, {watchdog_}, cost); });
    env_.RunUntilIdle();
  }

  // Runs a message on the main looper that keeps the thread busy for `cost`.
  void RunSlowMessage(absl::Duration cost) {
    handler_.Post([this, cost] { env_.AdvanceClock(cost); });
    env_.RunUntilIdle();
  }

  Handler handler_;
  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<AnrTracer> anr_;
  std::unique_ptr<EvilMethodTracer> evil_;
};


TEST_F(EvilMethodTracerTest, Threshold_699msNoReport_700msReport) {
  AppState::Get()->OnSceneShown("Gallery");
  Start();
  RunSlowMessage(absl::Milliseconds(699));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_EQ(evil_->evil_count(), 0);

  RunSlowMessage(absl::Milliseconds(700));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const Issue& issue = issues_.all()[0];
  EXPECT_EQ(issue.tag(), kTagEvilMethod);
  ASSERT_TRUE(issue.proto().has_evil_method());
  const proto::EvilMethodReport& report = issue.proto().evil_method();
  EXPECT_EQ(report.detail(), proto::NORMAL);
  EXPECT_DOUBLE_EQ(report.cost_ms(), 700);
  EXPECT_EQ(report.scene(), "Gallery");
  EXPECT_TRUE(report.is_process_foreground());
  EXPECT_EQ(report.cpu_usage(), -1);  // No sampler.
  EXPECT_FALSE(report.has_queue_costs());  // Not a frame.
  EXPECT_EQ(evil_->evil_count(), 1);
}

TEST_F(EvilMethodTracerTest, DebuggerAttached_SuppressesReports_UnlessConfigured) {
  Start();
  proc_.SetTracerPid(4321);  // A breakpoint makes any dispatch slow.
  RunSlowMessage(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_EQ(evil_->suppressed_by_debugger(), 1);
  proc_.SetTracerPid(0);
  RunSlowMessage(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), SizeIs(1));
}

TEST_F(EvilMethodTracerTest, DebuggerAttached_ReportWithDebugger_StillReports) {
  StartOptions start;
  start.report_with_debugger = true;
  Start(start);
  proc_.SetTracerPid(4321);
  RunSlowMessage(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(evil_->suppressed_by_debugger(), 0);
}

TEST_F(EvilMethodTracerTest, ModifyEvilThreshold_AtRunTimeFromAnotherThread) {
  Start();
  std::thread other([this] { evil_->ModifyEvilThreshold(absl::Milliseconds(300)); });
  other.join();
  EXPECT_EQ(evil_->evil_threshold(), absl::Milliseconds(300));
  // A non-positive threshold is ignored.
  evil_->ModifyEvilThreshold(absl::ZeroDuration());
  EXPECT_EQ(evil_->evil_threshold(), absl::Milliseconds(300));

  RunSlowMessage(absl::Milliseconds(299));
  EXPECT_THAT(issues_.all(), IsEmpty());
  RunSlowMessage(absl::Milliseconds(300));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_DOUBLE_EQ(issues_.all()[0].proto().evil_method().cost_ms(), 300);

  evil_->ModifyEvilThreshold(absl::Seconds(1));
  RunSlowMessage(absl::Milliseconds(999));
  EXPECT_THAT(issues_.all(), SizeIs(1));
}

TEST_F(EvilMethodTracerTest, CpuUsage_FromTheSamplerOverTheSampledWindow) {
  Start({.cpu_sampler = true});
  // The sampler polls every 50 ms on the watchdog; the dispatch lets it run
  // for 50 ms (one sample: CPU 0 at +50 ms), then uses 600 ms of CPU in
  // 750 ms of wall time.
  // (The watchdog keeps running meanwhile: time it does not run would be
  // time the process was stopped.)
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_}, absl::Milliseconds(50));
    env_.clock()->AdvanceThreadCpuTime(absl::Milliseconds(600));
    RunLoopersFor(&env_, {watchdog_}, absl::Milliseconds(750));
  });
  env_.FastForwardBy(absl::Milliseconds(100));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_DOUBLE_EQ(report.cost_ms(), 800);
  EXPECT_DOUBLE_EQ(report.cpu_usage(), 80);
}

TEST_F(EvilMethodTracerTest, FrameDispatch_ReportsItsQueueCosts) {
  Start();
  Choreographer* choreographer = env_.choreographer();
  choreographer->PostCallback(Choreographer::kInput,
                              [this] { env_.AdvanceClock(absl::Milliseconds(100)); });
  choreographer->PostCallback(Choreographer::kAnimation,
                              [this] { env_.AdvanceClock(absl::Milliseconds(200)); });
  choreographer->PostCallback(Choreographer::kTraversal,
                              [this] { env_.AdvanceClock(absl::Milliseconds(300)); });
  choreographer->PostCallback(Choreographer::kCommit,
                              [this] { env_.AdvanceClock(absl::Milliseconds(150)); });
  ASSERT_TRUE(env_.FireVsync());
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_DOUBLE_EQ(report.cost_ms(), 750);
  ASSERT_TRUE(report.has_queue_costs());
  EXPECT_DOUBLE_EQ(report.queue_costs().input_ms(), 100);
  EXPECT_DOUBLE_EQ(report.queue_costs().animation_ms(), 200);
  EXPECT_DOUBLE_EQ(report.queue_costs().traversal_ms(), 300);
  EXPECT_DOUBLE_EQ(report.queue_costs().commit_ms(), 150);

  // The next slow dispatch is not a frame: no queue costs from the last one.
  RunSlowMessage(absl::Milliseconds(800));
  ASSERT_THAT(issues_.all(), SizeIs(2));
  EXPECT_FALSE(issues_.all()[1].proto().evil_method().has_queue_costs());
}

TEST_F(EvilMethodTracerTest, WithoutMethodTracing_KeyIsThePostLocation_MessageInfoReported) {
  Start();
  const Location from = MATRIX_FROM_HERE;
  handler_.Post([this] { env_.AdvanceClock(absl::Milliseconds(900)); }, from);
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const Issue& issue = issues_.all()[0];
  const proto::EvilMethodReport& report = issue.proto().evil_method();
  EXPECT_EQ(report.stack_key(), from.ToString());
  EXPECT_EQ(issue.key(), from.ToString());
  EXPECT_THAT(report.stack(), IsEmpty());
  EXPECT_EQ(report.message().target(), handler_.ToString());
  EXPECT_EQ(report.message().callback(), from.ToString());
}

TEST_F(EvilMethodTracerTest, HandlerDestroyedBeforeTheReportIsBuilt_MessageInfoSurvives) {
  Start();
  auto one_shot = std::make_unique<Handler>(env_.looper(), "app::OneShotHandler");
  const std::string target = one_shot->ToString();
  one_shot->Post([&] {
    env_.AdvanceClock(absl::Milliseconds(800));
    // Right after this dispatch, before the worker builds the report (the
    // main looper runs first among messages due at the same time).
    handler_.Post([&] { one_shot.reset(); });
  });
  env_.RunUntilIdle();
  ASSERT_EQ(one_shot, nullptr);
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().evil_method().message().target(), target);
}

// A dispatch held 7 s by SIGSTOP or a breakpoint: the watchdog's CPU sampler
// runs every 50 ms while the process runs, and its first poll after the
// resume is late by the stop.
TEST_F(EvilMethodTracerTest, StoppedTime_IsLeftOutOfTheCostAndReportedApart) {
  Start({.cpu_sampler = true});
  env_.FastForwardBy(absl::Milliseconds(500));
  // 300 ms of work, stopped 7 s, 300 ms more: 600 ms of work, not slow.
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(300));
    env_.AdvanceClock(absl::Seconds(7));  // Stopped: nothing runs.
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(300));
  });
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_EQ(evil_->suppressed_as_stopped(), 1);

  // The same with 700 ms after the stop: 1 s of work, reported without the stop.
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(300));
    env_.AdvanceClock(absl::Seconds(7));
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(700));
  });
  env_.FastForwardBy(absl::Seconds(1));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  // The stop is known from the first poll due after it began (50 ms grain).
  EXPECT_NEAR(report.stopped_ms(), 7000, 50);
  EXPECT_NEAR(report.cost_ms(), 1000, 50);
  EXPECT_DOUBLE_EQ(report.cost_ms() + report.stopped_ms(), 8000);
}

TEST_F(EvilMethodTracerTest, DispatchEndedBeforeTheSamplerSawTheStop_IsJudgedOnceItHas) {
  // The stop ends the dispatch: the process is continued and the looper
  // finishes before the watchdog's sampler runs. The worker waits for it.
  Start({.cpu_sampler = true});
  env_.FastForwardBy(absl::Milliseconds(500));
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(300));
    env_.AdvanceClock(absl::Seconds(7));
  });
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_EQ(evil_->suppressed_as_stopped(), 1);
}

TEST_F(EvilMethodTracerTest, ASamplerStarvedAfterTheStop_IsWaitedFor) {
  // On a loaded machine the watchdog's thread may wait for a CPU long after
  // the process is continued: the worker waits for the sampler's first poll
  // after the dispatch (up to 2 s), not for a number of polls.
  Start({.cpu_sampler = true});
  env_.FastForwardBy(absl::Milliseconds(500));
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(300));
    env_.AdvanceClock(absl::Seconds(7));
  });
  // The next message runs 600 ms while the watchdog still waits for a CPU.
  handler_.Post([this] { RunLoopersFor(&env_, {worker_}, absl::Milliseconds(600)); });
  env_.FastForwardBy(absl::Seconds(1));
  env_.FastForwardBy(absl::Seconds(3));  // From the dispatch's end (the clock passed 8 s).
  EXPECT_THAT(issues_.all(), IsEmpty());
  EXPECT_EQ(evil_->suppressed_as_stopped(), 1);
}

TEST_F(EvilMethodTracerTest, DispatchClaimedByAnrTracer_IsNotReportedAgain) {
  Start({.with_anr_tracer = true});
  // 1.5 s: slow, not a lag: an evil method.
  handler_.Post([this] { RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(1500)); });
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(trace_test::DetailOf(issues_.all()[0]), proto::NORMAL);

  // 3 s: a LAG, and only that.
  handler_.Post([this] { RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(3)); });
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(2));
  EXPECT_EQ(trace_test::DetailOf(issues_.all()[1]), proto::LAG);

  // 6 s: an ANR, and only that.
  handler_.Post([this] { RunLoopersFor(&env_, {watchdog_, worker_}, absl::Seconds(6)); });
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(3));
  EXPECT_EQ(trace_test::DetailOf(issues_.all()[2]), proto::ANR);
  EXPECT_EQ(evil_->evil_count(), 1);
}

TEST_F(EvilMethodTracerTest, WithMethodTracing_KeyIsTheCostliestDeepCall_TreeOfTheDispatch) {
  StartMethodTracer();
  Start();
  Enter(&app::LogClick);  // Before the dispatch: not in its tree.
  Exit(&app::LogClick);
  handler_.Post([this] {
    Enter(&app::OnClick);
    env_.AdvanceClock(absl::Milliseconds(100));
    Enter(&app::DecodeImage);
    env_.AdvanceClock(absl::Milliseconds(600));
    Exit(&app::DecodeImage);
    Exit(&app::OnClick);
    Enter(&app::LogClick);
    env_.AdvanceClock(absl::Milliseconds(50));
    Exit(&app::LogClick);
  });
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const Issue& issue = issues_.all()[0];
  const proto::EvilMethodReport& report = issue.proto().evil_method();
  EXPECT_DOUBLE_EQ(report.cost_ms(), 750);
  EXPECT_EQ(report.stack_key(), "app::DecodeImage()");
  EXPECT_EQ(issue.key(), "app::DecodeImage()");
  ASSERT_EQ(report.stack_size(), 4) << report.stack_text();
  struct Expected {
    int depth;
    const char* name;
    double cost_ms;
  };
  const Expected expected[] = {{0, "dispatch", 750},
                               {1, "app::OnClick()", 700},
                               {2, "app::DecodeImage()", 600},
                               {1, "app::LogClick()", 50}};
  for (int i = 0; i < 4; ++i) {
    const proto::MethodCall& call = report.stack(i);
    EXPECT_EQ(call.depth(), expected[i].depth) << i;
    EXPECT_EQ(call.name(), expected[i].name) << i;
    EXPECT_NEAR(call.cost_ms(), expected[i].cost_ms, 0.002) << i;  // 1.024 us records.
    EXPECT_FALSE(call.unfinished()) << i;
  }
  EXPECT_FALSE(report.stack_truncated());
  EXPECT_THAT(report.stack_text(), ::testing::HasSubstr("2,app::DecodeImage(),1,"));
}

TEST_F(EvilMethodTracerTest, WithMethodTracing_NoTracedCall_KeyFallsBackToThePostLocation) {
  StartMethodTracer();
  Start();
  const Location from = MATRIX_FROM_HERE;
  handler_.Post([this] { env_.AdvanceClock(absl::Milliseconds(800)); }, from);
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_EQ(report.stack_key(), from.ToString());
  ASSERT_EQ(report.stack_size(), 1);
  EXPECT_EQ(report.stack(0).name(), "dispatch");
}

TEST_F(EvilMethodTracerTest, Sampling_CrossingStackThenSamplesUntilTheEnd) {
  Start({.stack_sampling = true});
  capture_.SetFrames({ReturnAddressIn(&app::DecodeImage), ReturnAddressIn(&app::OnClick)});
  const TimeTicks begin = env_.Now();
  RunWatchedMessage(absl::Milliseconds(1200));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  // The crossing at 700 ms, then every 50 ms up to the end.
  ASSERT_THAT(capture_.times(), SizeIs(11));
  for (size_t i = 0; i < capture_.times().size(); ++i) {
    EXPECT_EQ(capture_.times()[i] - begin, absl::Milliseconds(700 + 50 * static_cast<int>(i)));
  }
  EXPECT_EQ(report.sample_count(), 11);
  EXPECT_EQ(evil_->stack_samples(), 11);
  EXPECT_DOUBLE_EQ(report.thread_stack().captured_at_ms(), 700);
  EXPECT_DOUBLE_EQ(report.detection_delay_ms(), 0);
  ASSERT_GE(report.thread_stack().frames_size(), 2);
  EXPECT_EQ(report.thread_stack().frames(0).function(), "app::DecodeImage()");
  EXPECT_EQ(report.stack_key(), "app::DecodeImage()");
  EXPECT_EQ(issues_.all()[0].key(), "app::DecodeImage()");
  // The samples' tree: from the crossing to the end, 500 ms.
  EXPECT_EQ(report.stack_text(), "0,app::OnClick(),11,500.000\n1,app::DecodeImage(),11,500.000\n");
}

TEST_F(EvilMethodTracerTest, Sampling_KeyIsWhatHeldTheThreadMost_NotWhereTheCrossingFell) {
  Start({.stack_sampling = true});
  // The crossing and the next sample fall in LogClick (100 ms); the rest of
  // the dispatch (400 ms) is LoadThumbnails.
  capture_.QueueFrames({ReturnAddressIn(&app::LogClick), ReturnAddressIn(&app::OnClick)});
  capture_.QueueFrames({ReturnAddressIn(&app::LogClick), ReturnAddressIn(&app::OnClick)});
  capture_.SetFrames({ReturnAddressIn(&app::LoadThumbnails), ReturnAddressIn(&app::OnClick)});
  RunWatchedMessage(absl::Milliseconds(1200));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_EQ(report.thread_stack().frames(0).function(), "app::LogClick()");
  EXPECT_EQ(report.stack_key(), "app::LoadThumbnails()");
  EXPECT_EQ(report.stack_text(),
            "0,app::OnClick(),11,500.000\n"
            "1,app::LogClick(),2,100.000\n"
            "1,app::LoadThumbnails(),9,400.000\n");
}

TEST_F(EvilMethodTracerTest, Sampling_DispatchesUnderTheThresholdAreNeverCaptured) {
  Start({.stack_sampling = true});
  for (int i = 0; i < 5; ++i) RunWatchedMessage(absl::Milliseconds(699));
  env_.FastForwardBy(absl::Seconds(10));  // Idle.
  EXPECT_THAT(capture_.times(), IsEmpty());
  EXPECT_THAT(issues_.all(), IsEmpty());
}

TEST_F(EvilMethodTracerTest, Sampling_ALongDispatchKeepsEveryOtherSample_AndStillSpansIt) {
  Start({.stack_sampling = true, .max_samples = 4});
  const TimeTicks begin = env_.Now();
  RunWatchedMessage(absl::Milliseconds(1300));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  std::vector<int64_t> at;
  for (TimeTicks t : capture_.times()) at.push_back(absl::ToInt64Milliseconds(t - begin));
  // Full at 850: thinned to 700, 800 and sampled every 100 ms, then every 200.
  EXPECT_THAT(at, ::testing::ElementsAre(700, 750, 800, 850, 900, 1000, 1100, 1300));
  EXPECT_EQ(issues_.all()[0].proto().evil_method().sample_count(), 4);  // 700 900 1100 1300.
}

TEST_F(EvilMethodTracerTest, Sampling_StopsWhenTheAnrTracerTakesTheDispatch) {
  Start({.with_anr_tracer = true, .stack_sampling = true});
  const TimeTicks begin = env_.Now();
  RunWatchedMessage(absl::Milliseconds(3000));
  // Every 50 ms from 700 ms until the LAG took it at 2000 ms (the sampler's
  // check at 2000 ms may run before or after the AnrTracer's), none after.
  EXPECT_GE(evil_->stack_samples(), 26);
  EXPECT_LE(evil_->stack_samples(), 27);
  for (TimeTicks t : capture_.times()) EXPECT_LE(t - begin, absl::Milliseconds(2000));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().anr().detail(), proto::LAG);
}

TEST_F(EvilMethodTracerTest, Sampling_DebuggerAttached_NothingIsCaptured) {
  Start({.stack_sampling = true});
  proc_.SetTracerPid(4321);
  RunWatchedMessage(absl::Seconds(1));
  EXPECT_THAT(capture_.times(), IsEmpty());
  proc_.SetTracerPid(0);
  RunWatchedMessage(absl::Seconds(1));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  EXPECT_EQ(issues_.all()[0].proto().evil_method().sample_count(), 7);  // 700..1000.
}

TEST_F(EvilMethodTracerTest, Sampling_AFailedCrossingCapture_SaysWhy) {
  Start({.stack_sampling = true});
  capture_.SetStatus(absl::DeadlineExceededError("the looper thread did not answer"));
  RunWatchedMessage(absl::Milliseconds(800));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_THAT(report.thread_stack().error(), ::testing::HasSubstr("did not answer"));
  EXPECT_EQ(report.sample_count(), 0);
  // No stack names it: keyed by where the message was posted from.
  EXPECT_THAT(report.stack_key(), ::testing::HasSubstr("evil_method_tracer_test.cc"));
}

TEST_F(EvilMethodTracerTest, Sampling_AStopInsideASampledDispatch_IsStillAStop) {
  // The sampler's check due in the stop runs first after it and captures
  // (marking the watchdog busy): it records the stop itself, so the CPU
  // sampler's late poll does not hide it.
  Start({.cpu_sampler = true, .stack_sampling = true});
  env_.FastForwardBy(absl::Milliseconds(500));
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(800));
    env_.AdvanceClock(absl::Seconds(4));  // Stopped: nothing runs.
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(200));
  });
  env_.FastForwardBy(absl::Seconds(1));
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_GE(report.stopped_ms(), 3900);
  EXPECT_LE(report.cost_ms(), 1100);
}

TEST_F(EvilMethodTracerTest, Sampling_AStopWhileACaptureWaits_IsStillAStop) {
  // SIGSTOP lands while a sample's capture waits for the looper thread, and
  // the capture returns after the continue. A capture waits at most 300 ms
  // (its timeout and a late handler's unwind): the rest of the wait is the
  // watchdog's own lateness, a stop, not busy time that hides one.
  Start({.cpu_sampler = true, .stack_sampling = true});
  env_.FastForwardBy(absl::Milliseconds(500));
  handler_.Post([this] {
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(720));  // Crossed at 700.
    // The next sample's capture, at 750 ms, returns 4 s later; the dispatch
    // ends then, at 4.75 s.
    capture_.RunDuringNextCapture([this] { env_.AdvanceClock(absl::Seconds(4)); });
    RunLoopersFor(&env_, {watchdog_, worker_}, absl::Milliseconds(200));
  });
  env_.FastForwardBy(absl::Seconds(1));
  env_.FastForwardBy(absl::Seconds(3));  // From the dispatch's end (the clock passed 5 s).
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  // Stopped from 300 ms into the wait (the capture's bound) to its end.
  EXPECT_NEAR(report.stopped_ms(), 3700, 60);
  EXPECT_NEAR(report.cost_ms(), 1050, 60);
  EXPECT_NEAR(report.cost_ms() + report.stopped_ms(), 4750, 1);
}

TEST_F(EvilMethodTracerTest, Sampling_WithAMethodTraceThatNamesTheCall_KeepsItsTreeAndKey) {
  // The method trace explains the dispatch: its tree and key stay, and the
  // report adds the crossing's stack (the samples are counted, not drawn).
  StartMethodTracer();
  Start({.stack_sampling = true});
  capture_.SetFrames({ReturnAddressIn(&app::LogClick), ReturnAddressIn(&app::OnClick)});
  handler_.Post([this] {
    Enter(&app::DecodeImage);
    RunLoopersFor(&env_, {watchdog_}, absl::Milliseconds(900));
    Exit(&app::DecodeImage);
  });
  env_.RunUntilIdle();
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::EvilMethodReport& report = issues_.all()[0].proto().evil_method();
  EXPECT_EQ(report.stack_key(), "app::DecodeImage()");
  EXPECT_THAT(report.stack_text(), ::testing::HasSubstr("app::DecodeImage()"));
  EXPECT_THAT(report.stack_text(), ::testing::Not(::testing::HasSubstr("app::LogClick()")));
  EXPECT_EQ(report.sample_count(), 5);  // 700, 750, 800, 850, 900 ms.
  ASSERT_GE(report.thread_stack().frames_size(), 1);
  EXPECT_EQ(report.thread_stack().frames(0).function(), "app::LogClick()");
}

TEST_F(EvilMethodTracerTest, Sampling_Closed_CapturesNothing) {
  Start({.stack_sampling = true});
  evil_->OnCloseTrace();
  RunWatchedMessage(absl::Seconds(1));
  EXPECT_THAT(capture_.times(), IsEmpty());
  EXPECT_THAT(issues_.all(), IsEmpty());
}

TEST_F(EvilMethodTracerTest, Closed_ReportsNothing) {
  Start();
  evil_->OnCloseTrace();
  RunSlowMessage(absl::Seconds(1));
  EXPECT_THAT(issues_.all(), IsEmpty());
}

}  // namespace
}  // namespace matrix
