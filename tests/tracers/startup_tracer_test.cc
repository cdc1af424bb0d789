// StartupTracer on the fake clock: the main looper with a Choreographer on a
// manual vsync source (auto-vsync draws frames while one is requested), the
// worker as a background looper, AppState events on the looper thread or
// from another thread.

#include "matrix/trace/startup_tracer.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/ui_thread_monitor.h"
#include "tracer_test_util.h"

namespace app {
MATRIX_TEST_APP_FUNCTION(LoadConfig)
MATRIX_TEST_APP_FUNCTION(OpenDatabase)
MATRIX_TEST_APP_FUNCTION(ReadSchema)
MATRIX_TEST_APP_FUNCTION(InflateDetail)
}  // namespace app

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using trace_test::IssueCollector;

class StartupTracerTest : public ::testing::Test, protected trace_test::TracerRig {
 protected:
  StartupTracerTest() : handler_(env_.looper(), "app::MainHandler"), process_start_(env_.Now()) {
    ResetStartupMarksForTesting();
  }
  ~StartupTracerTest() override {
    startup_.reset();
    monitor_.reset();
    looper_monitor_.reset();
    ResetStartupMarksForTesting();
  }

  void Start(std::vector<std::string> splash = {}, bool wait_for_frame = true) {
    looper_monitor_ = std::make_unique<LooperMonitor>(env_.looper());
    looper_monitor_->Start();
    UIThreadMonitor::Options monitor_options;
    monitor_options.method_tracer = method_tracer_.get();
    monitor_ = std::make_unique<UIThreadMonitor>(looper_monitor_.get(), env_.choreographer(),
                                                 monitor_options);
    monitor_->Start();
    StartupTracer::Options options;
    options.env.monitor = monitor_.get();
    options.env.worker_looper = worker_;
    options.looper = env_.looper();
    options.process_start = process_start_;
    options.splash_scenes = std::move(splash);
    options.wait_for_frame = wait_for_frame;
    options.env.report = issues_.callback();
    startup_ = std::make_unique<StartupTracer>(std::move(options));
    startup_->OnStartTrace();
    env_.RunUntilIdle();
  }

  // Requests a frame whose work takes `cost`, lets auto-vsync draw it and
  // returns the end of that frame's dispatch.
  TimeTicks DrawFrame(absl::Duration cost = absl::Milliseconds(8)) {
    TimeTicks end;
    env_.choreographer()->PostCallback(Choreographer::kTraversal, [&, cost] {
      env_.AdvanceClock(cost);
      end = env_.Now();  // Nothing runs after it in this frame's dispatch.
    });
    env_.FastForwardBy(absl::Milliseconds(40));
    EXPECT_FALSE(end.is_null()) << "no frame was drawn";
    return end;
  }

  double MsSinceStart(TimeTicks t) const { return absl::ToDoubleMilliseconds(t - process_start_); }

  std::vector<proto::StartupReport> StartupReports() const {
    std::vector<proto::StartupReport> out;
    for (const Issue& issue : issues_.WithTag(kTagStartup)) out.push_back(issue.proto().startup());
    return out;
  }

  Handler handler_;
  const TimeTicks process_start_;
  std::unique_ptr<LooperMonitor> looper_monitor_;
  std::unique_ptr<UIThreadMonitor> monitor_;
  std::unique_ptr<StartupTracer> startup_;
};

TEST_F(StartupTracerTest, ColdStart_WithMarks_ShownIsTheEndOfTheFirstFrameAfterShown) {
  MarkApplicationCreateBeginAt(process_start_ + absl::Milliseconds(200));
  MarkApplicationCreateEndAt(process_start_ + absl::Milliseconds(1200));
  // The first call of each mark counts.
  MarkApplicationCreateEndAt(process_start_ + absl::Milliseconds(1250));
  env_.FastForwardBy(absl::Milliseconds(1300));
  Start();
  env_.FastForwardBy(absl::Milliseconds(200));
  AppState::Get()->OnSceneCreated("Home");  // 1500 ms.
  // A frame drawn before the scene is shown does not count, nor does a
  // message that is not a frame after it.
  DrawFrame();
  env_.FastForwardBy(absl::Milliseconds(100));
  AppState::Get()->OnSceneShown("Home");
  handler_.Post([this] { env_.AdvanceClock(absl::Milliseconds(30)); });
  env_.RunUntilIdle();
  EXPECT_FALSE(startup_->cold_start_done());
  const TimeTicks shown = DrawFrame(absl::Milliseconds(25));
  EXPECT_TRUE(startup_->cold_start_done());

  ASSERT_THAT(issues_.all(), SizeIs(1));  // 2 s: no STARTUP evil report.
  const Issue& issue = issues_.all()[0];
  EXPECT_EQ(issue.tag(), kTagStartup);
  EXPECT_EQ(issue.key(), "cold:Home");
  const proto::StartupReport& report = issue.proto().startup();
  EXPECT_FALSE(report.is_warm_start_up());
  EXPECT_DOUBLE_EQ(report.startup_duration_ms(), MsSinceStart(shown));
  EXPECT_DOUBLE_EQ(report.application_create_begin_ms(), 200);
  EXPECT_DOUBLE_EQ(report.application_create_ms(), 1200);
  EXPECT_EQ(report.application_create_scene(), "marks");
  EXPECT_DOUBLE_EQ(report.first_scene_created_ms(), 1500);
  EXPECT_DOUBLE_EQ(report.first_scene_create_ms(), MsSinceStart(shown));
  EXPECT_EQ(report.first_scene(), "Home");
  EXPECT_THAT(report.scenes(), ElementsAre("Home"));
}

TEST_F(StartupTracerTest, ColdStart_WithoutMarks_ApplicationCreateEndsAtTheFirstDispatch) {
  Start();
  env_.FastForwardBy(absl::Milliseconds(700));
  handler_.Post([this] {
    env_.AdvanceClock(absl::Milliseconds(50));
    AppState::Get()->OnSceneCreated("Home");
    AppState::Get()->OnSceneShown("Home");
  });
  env_.RunUntilIdle();
  const TimeTicks shown = DrawFrame();
  ASSERT_THAT(StartupReports(), SizeIs(1));
  const proto::StartupReport report = StartupReports()[0];
  EXPECT_EQ(report.application_create_scene(), "first_dispatch");
  EXPECT_DOUBLE_EQ(report.application_create_ms(), 700);
  EXPECT_DOUBLE_EQ(report.application_create_begin_ms(), 0);  // No mark.
  EXPECT_DOUBLE_EQ(report.first_scene_created_ms(), 750);
  EXPECT_DOUBLE_EQ(report.startup_duration_ms(), MsSinceStart(shown));
}

TEST_F(StartupTracerTest, WithoutWaitingForFrames_ShownIsTheEndOfTheDispatchThatShowedIt) {
  Start({}, /*wait_for_frame=*/false);
  env_.FastForwardBy(absl::Milliseconds(400));
  TimeTicks dispatch_end;
  handler_.Post([&] {
    AppState::Get()->OnSceneCreated("Home");
    AppState::Get()->OnSceneShown("Home");
    env_.AdvanceClock(absl::Milliseconds(60));  // Still this dispatch.
    dispatch_end = env_.Now();
  });
  env_.RunUntilIdle();
  ASSERT_THAT(StartupReports(), SizeIs(1));
  EXPECT_DOUBLE_EQ(StartupReports()[0].startup_duration_ms(), MsSinceStart(dispatch_end));
  EXPECT_DOUBLE_EQ(StartupReports()[0].startup_duration_ms(), 460);
}

TEST_F(StartupTracerTest, WithoutWaitingForFrames_ShownOutsideADispatch_IsNow) {
  Start({}, /*wait_for_frame=*/false);
  env_.FastForwardBy(absl::Milliseconds(400));
  AppState::Get()->OnSceneCreated("Home");
  AppState::Get()->OnSceneShown("Home");
  env_.RunUntilIdle();
  ASSERT_THAT(StartupReports(), SizeIs(1));
  EXPECT_DOUBLE_EQ(StartupReports()[0].startup_duration_ms(), 400);
}

TEST_F(StartupTracerTest, SplashScenes_DelayTheEndToTheFirstRealScene) {
  Start({"Splash", "Ad"});
  env_.FastForwardBy(absl::Milliseconds(300));
  AppState::Get()->OnSceneCreated("Splash");
  AppState::Get()->OnSceneShown("Splash");
  const TimeTicks splash_shown = DrawFrame();
  env_.FastForwardBy(absl::Seconds(1));
  AppState::Get()->OnSceneCreated("Ad");
  AppState::Get()->OnSceneShown("Ad");
  DrawFrame();
  EXPECT_FALSE(startup_->cold_start_done());
  EXPECT_THAT(issues_.all(), IsEmpty());

  env_.FastForwardBy(absl::Seconds(2));
  AppState::Get()->OnSceneCreated("Home");
  AppState::Get()->OnSceneDestroyed("Splash");
  AppState::Get()->OnSceneShown("Home");
  const TimeTicks home_shown = DrawFrame();
  EXPECT_TRUE(startup_->cold_start_done());
  ASSERT_THAT(issues_.all(), SizeIs(1));
  const proto::StartupReport& report = issues_.all()[0].proto().startup();
  EXPECT_DOUBLE_EQ(report.startup_duration_ms(), MsSinceStart(home_shown));
  EXPECT_EQ(report.first_scene(), "Splash");
  EXPECT_DOUBLE_EQ(report.first_scene_create_ms(), MsSinceStart(splash_shown));
  EXPECT_DOUBLE_EQ(report.first_scene_created_ms(), 300);
  EXPECT_THAT(report.scenes(), ElementsAre("Splash", "Ad", "Home"));
  EXPECT_EQ(issues_.all()[0].key(), "cold:Home");  // The scene that ended it.
}

TEST_F(StartupTracerTest, WarmStart_AllScenesGoneThenASceneCreatedAndShown) {
  Start();
  AppState::Get()->OnSceneCreated("Home");
  AppState::Get()->OnSceneShown("Home");
  DrawFrame();
  ASSERT_THAT(StartupReports(), SizeIs(1));

  // Another scene while Home is alive: not a warm start.
  AppState::Get()->OnSceneCreated("Settings");
  AppState::Get()->OnSceneShown("Settings");
  DrawFrame();
  AppState::Get()->OnSceneDestroyed("Settings");
  EXPECT_EQ(startup_->warm_start_count(), 0);

  // Every scene goes away (the app went to the background), then comes back.
  AppState::Get()->OnSceneDestroyed("Home");
  env_.FastForwardBy(absl::Seconds(30));
  const TimeTicks created = env_.Now();
  AppState::Get()->OnSceneCreated("Detail");
  env_.FastForwardBy(absl::Milliseconds(500));
  AppState::Get()->OnSceneShown("Detail");
  const TimeTicks shown = DrawFrame(absl::Milliseconds(20));
  EXPECT_EQ(startup_->warm_start_count(), 1);

  ASSERT_THAT(StartupReports(), SizeIs(2));
  const Issue warm_issue = issues_.WithTag(kTagStartup)[1];
  EXPECT_EQ(warm_issue.key(), "warm:Detail");
  const proto::StartupReport& warm = warm_issue.proto().startup();
  EXPECT_TRUE(warm.is_warm_start_up());
  EXPECT_DOUBLE_EQ(warm.startup_duration_ms(), absl::ToDoubleMilliseconds(shown - created));
  EXPECT_DOUBLE_EQ(warm.first_scene_create_ms(), absl::ToDoubleMilliseconds(shown - created));
  EXPECT_EQ(warm.first_scene(), "Detail");
  EXPECT_THAT(warm.scenes(), ElementsAre("Detail"));
  EXPECT_THAT(issues_.WithTag(kTagEvilMethod), IsEmpty());

  // Shown again without going away: nothing new.
  AppState::Get()->OnSceneShown("Detail");
  DrawFrame();
  EXPECT_THAT(issues_.all(), SizeIs(2));
}

struct ThresholdCase {
  const char* name;
  bool warm;
  absl::Duration cost;
  bool slow;
};

void PrintTo(const ThresholdCase& c, std::ostream* os) { *os << c.name; }

class StartupThresholdTest : public StartupTracerTest,
                             public ::testing::WithParamInterface<ThresholdCase> {};

TEST_P(StartupThresholdTest, StrictlyOverTheThreshold_AddsAStartupEvilReport) {
  const ThresholdCase c = GetParam();
  // Exact times: the scene is shown outside a dispatch, without a frame.
  Start({}, /*wait_for_frame=*/false);
  TimeTicks begin = process_start_;
  if (c.warm) {
    AppState::Get()->OnSceneCreated("Home");
    AppState::Get()->OnSceneShown("Home");
    AppState::Get()->OnSceneDestroyed("Home");
    env_.FastForwardBy(absl::Seconds(1));
    begin = env_.Now();
  }
  AppState::Get()->OnSceneCreated("Home");
  env_.FastForwardBy(c.cost);
  AppState::Get()->OnSceneShown("Home");
  env_.RunUntilIdle();

  std::vector<Issue> startups = issues_.WithTag(kTagStartup);
  ASSERT_THAT(startups, SizeIs(c.warm ? 2 : 1));
  EXPECT_EQ(startups.back().proto().startup().is_warm_start_up(), c.warm);
  EXPECT_DOUBLE_EQ(startups.back().proto().startup().startup_duration_ms(),
                   absl::ToDoubleMilliseconds(env_.Now() - begin));
  std::vector<Issue> slow = issues_.WithDetail(proto::STARTUP);
  if (!c.slow) {
    EXPECT_THAT(slow, IsEmpty());
    return;
  }
  ASSERT_THAT(slow, SizeIs(1));
  EXPECT_EQ(slow[0].tag(), kTagEvilMethod);
  const proto::EvilMethodReport& evil = slow[0].proto().evil_method();
  EXPECT_EQ(evil.sub_type(), c.warm ? 2 : 1);
  EXPECT_DOUBLE_EQ(evil.cost_ms(), absl::ToDoubleMilliseconds(c.cost));
  EXPECT_EQ(evil.scene(), "Home");
  // Without method tracing: no tree, a generic key.
  EXPECT_THAT(evil.stack(), IsEmpty());
  EXPECT_EQ(evil.stack_key(), c.warm ? "warm_startup" : "cold_startup");
  EXPECT_EQ(slow[0].key(), evil.stack_key());
}

INSTANTIATE_TEST_SUITE_P(
    ColdAndWarm, StartupThresholdTest,
    ::testing::Values(
        ThresholdCase{"ColdAtThreshold", false, absl::Seconds(10), false},
        ThresholdCase{"ColdOver", false, absl::Seconds(10) + absl::Nanoseconds(1), true},
        ThresholdCase{"WarmAtThreshold", true, absl::Seconds(4), false},
        ThresholdCase{"WarmOver", true, absl::Seconds(4) + absl::Nanoseconds(1), true}),
    [](const ::testing::TestParamInfo<ThresholdCase>& info) { return info.param.name; });

TEST_F(StartupTracerTest, SlowColdStart_WithMethodTracing_ReportsTheTreeAndKey) {
  StartMethodTracer();
  Enter(&app::InflateDetail);  // Before the begin mark: not part of startup.
  Exit(&app::InflateDetail);
  MarkApplicationCreateBeginAt(env_.Now());
  Enter(&app::LoadConfig);
  env_.FastForwardBy(absl::Seconds(3));
  Exit(&app::LoadConfig);
  Enter(&app::OpenDatabase);
  env_.FastForwardBy(absl::Milliseconds(500));
  Enter(&app::ReadSchema);
  env_.FastForwardBy(absl::Milliseconds(7000));
  Exit(&app::ReadSchema);
  Exit(&app::OpenDatabase);
  MarkApplicationCreateEndAt(env_.Now());
  Start({}, /*wait_for_frame=*/false);
  AppState::Get()->OnSceneCreated("Home");
  AppState::Get()->OnSceneShown("Home");  // 10.5 s.
  env_.RunUntilIdle();

  std::vector<Issue> slow = issues_.WithDetail(proto::STARTUP);
  ASSERT_THAT(slow, SizeIs(1));
  const proto::EvilMethodReport& evil = slow[0].proto().evil_method();
  EXPECT_EQ(evil.sub_type(), 1);
  EXPECT_DOUBLE_EQ(evil.cost_ms(), 10500);
  // ReadSchema: 7 s of 10.5 at depth 1 outweighs LoadConfig's 3 s at depth 0.
  EXPECT_EQ(evil.stack_key(), "app::ReadSchema()");
  EXPECT_EQ(slow[0].key(), "app::ReadSchema()");
  std::vector<std::string> calls;
  for (const proto::MethodCall& call : evil.stack()) {
    calls.push_back(absl::StrCat(call.depth(), ",", call.name()));
  }
  EXPECT_THAT(calls, ElementsAre("0,app::LoadConfig()", "0,app::OpenDatabase()",
                                 "1,app::ReadSchema()"));
  ASSERT_EQ(evil.stack_size(), 3);
  EXPECT_NEAR(evil.stack(0).cost_ms(), 3000, 0.002);
  EXPECT_NEAR(evil.stack(1).cost_ms(), 7500, 0.002);
  EXPECT_NEAR(evil.stack(2).cost_ms(), 7000, 0.002);
  EXPECT_THAT(issues_.WithTag(kTagStartup), SizeIs(1));
}

TEST_F(StartupTracerTest, SlowWarmStart_WithMethodTracing_TreeOfTheWarmStartOnly) {
  StartMethodTracer();
  Start({}, /*wait_for_frame=*/false);
  AppState::Get()->OnSceneCreated("Home");
  Enter(&app::LoadConfig);  // During the cold start: not part of the warm one.
  env_.FastForwardBy(absl::Milliseconds(100));
  Exit(&app::LoadConfig);
  AppState::Get()->OnSceneShown("Home");
  AppState::Get()->OnSceneDestroyed("Home");
  env_.FastForwardBy(absl::Seconds(5));

  // A call just before the warm start: the calls right after it share its
  // time epoch, so their records carry no time record of their own.
  Enter(&app::LoadConfig);
  Exit(&app::LoadConfig);
  AppState::Get()->OnSceneCreated("Detail");
  Enter(&app::InflateDetail);
  env_.FastForwardBy(absl::Milliseconds(4500));
  Exit(&app::InflateDetail);
  AppState::Get()->OnSceneShown("Detail");
  env_.RunUntilIdle();

  std::vector<Issue> slow = issues_.WithDetail(proto::STARTUP);
  ASSERT_THAT(slow, SizeIs(1));
  const proto::EvilMethodReport& evil = slow[0].proto().evil_method();
  EXPECT_EQ(evil.sub_type(), 2);
  EXPECT_DOUBLE_EQ(evil.cost_ms(), 4500);
  EXPECT_EQ(evil.stack_key(), "app::InflateDetail()");
  ASSERT_EQ(evil.stack_size(), 1);
  EXPECT_EQ(evil.stack(0).name(), "app::InflateDetail()");
  EXPECT_NEAR(evil.stack(0).cost_ms(), 4500, 0.002);
  EXPECT_THAT(issues_.WithTag(kTagStartup), SizeIs(2));
}

TEST_F(StartupTracerTest, AppStateEventsFromAnotherThread_AreHandledOnTheLooper) {
  Start();
  env_.FastForwardBy(absl::Seconds(1));
  std::thread ui_framework([] {
    AppState::Get()->OnSceneCreated("Home");
    AppState::Get()->OnSceneShown("Home");
  });
  ui_framework.join();
  // Reported at 1 s, handled when the looper gets to them (1.5 s).
  env_.AdvanceClock(absl::Milliseconds(500));
  EXPECT_FALSE(startup_->cold_start_done());
  env_.RunUntilIdle();
  const TimeTicks shown = DrawFrame();
  EXPECT_TRUE(startup_->cold_start_done());
  ASSERT_THAT(StartupReports(), SizeIs(1));
  EXPECT_DOUBLE_EQ(StartupReports()[0].first_scene_created_ms(), 1500);
  EXPECT_DOUBLE_EQ(StartupReports()[0].startup_duration_ms(), MsSinceStart(shown));
}

TEST_F(StartupTracerTest, WarmStartEventsFromAnotherThread_AreHandledOnTheLooper) {
  Start({}, /*wait_for_frame=*/false);
  AppState::Get()->OnSceneCreated("Home");
  AppState::Get()->OnSceneShown("Home");
  env_.RunUntilIdle();
  ASSERT_TRUE(startup_->cold_start_done());
  std::thread ui_framework([] {
    AppState::Get()->OnSceneDestroyed("Home");
    AppState::Get()->OnSceneCreated("Detail");
  });
  ui_framework.join();
  env_.FastForwardBy(absl::Milliseconds(200));
  std::thread shown([] { AppState::Get()->OnSceneShown("Detail"); });
  shown.join();
  env_.FastForwardBy(absl::Milliseconds(300));
  EXPECT_EQ(startup_->warm_start_count(), 1);
  ASSERT_THAT(StartupReports(), SizeIs(2));
  // Created and shown were handled when the looper ran them (at 0 and 200 ms).
  EXPECT_DOUBLE_EQ(StartupReports()[1].startup_duration_ms(), 200);
}

}  // namespace
}  // namespace matrix
