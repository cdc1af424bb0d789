// TracePlugin's flight recorder in a TestEnvironment (fake clock, manual or
// automatic vsync): the config options, slow-method and frozen-frame FPS
// reports carrying the timeline, and none on a smooth FPS report.

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "../tracers/tracer_test_util.h"
#include "matrix/core/app_state.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/testing/test_environment.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::AppState;
using ::matrix::Choreographer;
using ::matrix::Issue;
using ::matrix::Looper;
using ::matrix::Matrix;
using ::matrix::PluginListener;
using ::matrix::TimeTicks;
using ::matrix::TraceConfig;
using ::matrix::TracePlugin;
using ::testing::HasSubstr;

class Listener : public PluginListener {
 public:
  void OnReportIssue(const Issue& issue) override { issues.push_back(issue); }
  std::vector<Issue> issues;
};

TEST(TraceConfigTimelineTest, DefaultsAndValidation) {
  absl::StatusOr<TraceConfig> config = TraceConfig::Builder().Build();
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->timeline_capacity, 4096u);
  // Before the issue's own span (an ANR's timeline is 5 + 5 s).
  EXPECT_EQ(config->timeline_window, absl::Seconds(5));

  for (size_t bad : {size_t{1}, size_t{15}, TraceConfig::kMaxTimelineCapacity + 1}) {
    config = TraceConfig::Builder().SetTimelineCapacity(bad).Build();
    ASSERT_FALSE(config.ok()) << bad;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr("timeline_capacity"));
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(std::to_string(bad)));
  }
  config = TraceConfig::Builder().SetTimelineWindow(absl::ZeroDuration()).Build();
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("timeline_window"));
  // Off: the window is not used.
  EXPECT_TRUE(TraceConfig::Builder()
                  .SetTimelineCapacity(0)
                  .SetTimelineWindow(absl::ZeroDuration())
                  .Build()
                  .ok());
}

class TracePluginTimelineTest : public ::testing::Test {
 protected:
  TracePluginTimelineTest() {
    AppState::Get()->ResetForTesting();
    watchdog_ = env_.CreateBackgroundLooper("matrix-watchdog");
    worker_ = env_.CreateBackgroundLooper("matrix-worker");
  }
  ~TracePluginTimelineTest() override {
    Matrix::Shutdown();
    AppState::Get()->ResetForTesting();
  }
  TracePlugin* InitWith(TraceConfig::Builder builder) {
    absl::StatusOr<TraceConfig> config = builder.Build();
    EXPECT_TRUE(config.ok()) << config.status();
    auto plugin = std::make_unique<TracePlugin>(*config);
    TracePlugin* ptr = plugin.get();
    EXPECT_TRUE(Matrix::Init(Matrix::Builder()
                                 .SetClock(env_.clock())
                                 .SetMainLooper(env_.looper())
                                 .SetWatchdogLooper(watchdog_)
                                 .SetWorkerLooper(worker_)
                                 .SetPluginListener(listener_)
                                 .AddPlugin(std::move(plugin))
                                 .Build())
                    .ok());
    EXPECT_TRUE(ptr->Start().ok());
    return ptr;
  }

  mt::TestEnvironment env_;
  Looper* watchdog_ = nullptr;
  Looper* worker_ = nullptr;
  std::shared_ptr<Listener> listener_ = std::make_shared<Listener>();
};

TEST_F(TracePluginTimelineTest, Start_PreloadsTheLooperStacksSymbolsOnTheWorker) {
  TracePlugin* plugin = InitWith(std::move(TraceConfig::Builder().EnableAnrTrace(true)));
  env_.FastForwardBy(absl::ZeroDuration());  // The worker runs the preload.
  // The looper thread's stack at start (this test, gtest, libc): at least
  // the test body and main.
  EXPECT_GE(plugin->preloaded_symbols(), 2);
}

TEST_F(TracePluginTimelineTest, Start_WithoutStackTracers_PreloadsNothing) {
  TracePlugin* plugin = InitWith(std::move(TraceConfig::Builder().EnableFps(true)));
  env_.FastForwardBy(absl::ZeroDuration());
  EXPECT_EQ(plugin->preloaded_symbols(), 0);
}

TEST_F(TracePluginTimelineTest, CapacityZero_NoTimeline) {
  TracePlugin* plugin = InitWith(std::move(TraceConfig::Builder().SetTimelineCapacity(0)));
  EXPECT_EQ(plugin->GetTimeline(), nullptr);
}

TEST_F(TracePluginTimelineTest, SlowMethod_CarriesTheTimelineDetectedAtTheDispatchEnd) {
  TracePlugin* plugin = InitWith(std::move(TraceConfig::Builder()
                                               .EnableEvilMethodTrace(true)
                                               .SetEvilThreshold(absl::Milliseconds(700))));
  ASSERT_NE(plugin->GetTimeline(), nullptr);
  matrix::Handler handler(env_.looper(), "app::Slow");
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(20)); });
  env_.FastForwardBy(absl::Milliseconds(100));
  const TimeTicks slow_begin = env_.Now();
  // Busy 900 ms while the watchdog runs (time it does not run would be time
  // the process was stopped, left out of the cost).
  handler.Post([this] { matrix::trace_test::RunLoopersFor(&env_, {watchdog_}, absl::Milliseconds(900)); });
  env_.FastForwardBy(absl::Milliseconds(100));

  ASSERT_EQ(listener_->issues.size(), 1u);
  const matrix::proto::Issue& issue = listener_->issues[0].proto();
  ASSERT_TRUE(issue.has_evil_method());
  ASSERT_TRUE(issue.has_timeline());
  const matrix::proto::Timeline& t = issue.timeline();
  EXPECT_EQ(t.detected_by(), "slow-method check at dispatch end");
  ASSERT_GE(t.dispatches_size(), 2);
  const auto& slow = t.dispatches(t.dispatches_size() - 1);
  EXPECT_EQ(slow.target(), "app::Slow");
  EXPECT_EQ(slow.dur_us(), 900000);
  EXPECT_EQ(TimeTicks::FromNanoseconds(t.start_ns()) + absl::Microseconds(slow.ts_us()),
            slow_begin);
  EXPECT_EQ(t.detected_at_us(), slow.ts_us() + slow.dur_us());
  EXPECT_EQ(t.dispatches(t.dispatches_size() - 2).dur_us(), 20000);
}

TEST_F(TracePluginTimelineTest, FpsReport_CarriesTheTimelineOnlyWithFrozenFrames) {
  InitWith(std::move(TraceConfig::Builder().EnableFps(true).SetFpsTimeSlice(absl::Seconds(1))));
  AppState::Get()->OnSceneCreated("Gallery");
  AppState::Get()->OnSceneShown("Gallery");
  Choreographer* c = env_.choreographer();
  // A smooth second of frames: an FPS report without a timeline.
  bool animating = true;
  std::function<void(TimeTicks)> animate = [&](TimeTicks) {
    if (animating) c->PostFrameCallback(animate);
  };
  c->PostFrameCallback(animate);
  env_.FastForwardBy(absl::Milliseconds(1100));
  ASSERT_EQ(listener_->issues.size(), 1u);
  EXPECT_FALSE(listener_->issues[0].proto().has_timeline());

  // One frozen frame (800 ms at 60 Hz drops 47 vsyncs, frozen is 42).
  bool frozen_done = false;
  c->PostCallback(Choreographer::kTraversal, [&] {
    if (!frozen_done) env_.AdvanceClock(absl::Milliseconds(800));
    frozen_done = true;
  });
  env_.FastForwardBy(absl::Milliseconds(1500));
  animating = false;
  env_.FastForwardBy(absl::Milliseconds(100));
  ASSERT_GE(listener_->issues.size(), 2u);
  const matrix::proto::Issue& issue = listener_->issues[1].proto();
  ASSERT_TRUE(issue.has_frame());
  ASSERT_GT(issue.frame().drop_level().frozen(), 0);
  ASSERT_TRUE(issue.has_timeline());
  EXPECT_EQ(issue.timeline().detected_by(), "FPS report (frozen frames)");
  int64_t worst_dropped = 0;
  for (const auto& f : issue.timeline().frames()) {
    worst_dropped = std::max(worst_dropped, f.dropped_frames());
  }
  EXPECT_GE(worst_dropped, 42);
}

}  // namespace
