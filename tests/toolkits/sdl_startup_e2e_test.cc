// StartupTracer through matrix::sdl on SDL's dummy video driver (no display),
// with real matrix threads: the program creates its window (the adapter names
// the scene from its title), then loads for 300 ms before drawing its first
// frame. The cold start ends at the end of that first frame, as on a
// Choreographer loop, so the report covers the 300 ms of loading.

#include <SDL.h>
#include <stdlib.h>

#include <memory>

#include "absl/time/clock.h"
#include "e2e_util.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/tick_clock.h"
#include "matrix/core/time_ticks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/sdl/sdl_monitor.h"
#include "matrix/trace/proc_stats.h"

namespace {

const matrix::proto::StartupReport* FindStartup(const std::vector<matrix::Issue>& issues) {
  for (const auto& issue : issues) {
    if (issue.proto().has_startup()) return &issue.proto().startup();
  }
  return nullptr;
}

double MsSince(matrix::TimeTicks from, matrix::TimeTicks to) {
  return absl::ToDoubleMilliseconds(to - from);
}

TEST(SdlStartupE2ETest, ColdStartEndsAtTheFirstFrameAfterLoading) {
  setenv("SDL_VIDEODRIVER", "dummy", 1);
  ASSERT_EQ(SDL_Init(SDL_INIT_VIDEO), 0) << SDL_GetError();
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableStartup(true)
                    .Build();
  ASSERT_TRUE(config.ok()) << config.status();
  e2e::TracedProgram traced(*config, e2e::MainLooper::kNone);
  ASSERT_TRUE(traced.status().ok()) << traced.status();
  matrix::TracePlugin* plugin = traced.plugin();
  e2e::CollectingListener* listener = &traced.listener();
  ASSERT_NE(plugin->GetStartupTracer(), nullptr);
  auto process_start = matrix::ProcReader().ReadProcessStartTime();
  ASSERT_TRUE(process_start.ok()) << process_start.status();

  SDL_Window* window = SDL_CreateWindow("Level1", 0, 0, 64, 48, 0);
  ASSERT_NE(window, nullptr) << SDL_GetError();
  auto monitor = matrix::sdl::Attach(window, plugin);  // Shows scene "Level1".
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "Level1");

  absl::SleepFor(absl::Milliseconds(300));  // Loading, before the first frame.
  const matrix::TimeTicks loaded = matrix::MonotonicNow();
  EXPECT_FALSE(plugin->GetStartupTracer()->cold_start_done());  // No frame drawn yet.

  matrix::TimeTicks first_frame_end;
  for (int i = 0; i < 3; ++i) {
    (*monitor)->FrameBegin();
    (*monitor)->MarkRender();
    (*monitor)->Swap([] {});
    if (i == 0) first_frame_end = matrix::MonotonicNow();
  }
  EXPECT_TRUE(plugin->GetStartupTracer()->cold_start_done());

  ASSERT_TRUE(listener->WaitFor(
      [](const auto& issues) { return FindStartup(issues) != nullptr; }, absl::Seconds(10)));
  const std::vector<matrix::Issue> issues = listener->issues();
  const matrix::proto::StartupReport* startup = FindStartup(issues);
  EXPECT_FALSE(startup->is_warm_start_up());
  EXPECT_EQ(startup->first_scene(), "Level1");
  ASSERT_EQ(startup->scenes_size(), 1);
  EXPECT_EQ(startup->scenes(0), "Level1");
  // Process start to the end of the first frame: after the 300 ms of loading.
  EXPECT_GE(startup->startup_duration_ms(), MsSince(*process_start, loaded));
  EXPECT_LE(startup->startup_duration_ms(), MsSince(*process_start, first_frame_end) + 1);
  EXPECT_DOUBLE_EQ(startup->first_scene_create_ms(), startup->startup_duration_ms());

  monitor->reset();
  SDL_DestroyWindow(window);
  SDL_Quit();
}

}  // namespace
