// matrix::sdl with SDL's dummy video driver (no display): the window title as
// scene, the refresh rate fallback, the vsync read from the renderer, the
// display-change watch, and clear errors. Frames are timed by the
// RenderLoopMonitor tests; here a started TracePlugin receives them.

#include "matrix/sdl/sdl_monitor.h"

#include <SDL.h>
#include <stdlib.h>

#include <memory>

#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"

namespace {

class SdlMonitorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("SDL_VIDEODRIVER", "dummy", 1);
    ASSERT_EQ(SDL_Init(SDL_INIT_VIDEO), 0) << SDL_GetError();
  }
  static void TearDownTestSuite() { SDL_Quit(); }

  void SetUp() override {
    auto config = matrix::TraceConfig::Builder()
                      .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                      .UseChoreographer(false)
                      .EnableFps(true)
                      .Build();
    ASSERT_TRUE(config.ok()) << config.status();
    auto trace = std::make_unique<matrix::TracePlugin>(*config);
    plugin_ = trace.get();
    ASSERT_TRUE(
        matrix::Matrix::Init(matrix::Matrix::Builder().AddPlugin(std::move(trace)).Build()).ok());
    ASSERT_TRUE(plugin_->Start().ok());
    matrix::AppState::Get()->ResetForTesting();
    window_ = SDL_CreateWindow("MatrixSdlTest", 0, 0, 64, 48, 0);
    ASSERT_NE(window_, nullptr) << SDL_GetError();
  }
  void TearDown() override {
    if (window_ != nullptr) SDL_DestroyWindow(window_);
    matrix::Matrix::Shutdown();
  }

  matrix::TracePlugin* plugin_ = nullptr;
  SDL_Window* window_ = nullptr;
};

TEST_F(SdlMonitorTest, SceneFromTheWindowTitleRefreshRateFallbackAndFrames) {
  auto monitor = matrix::sdl::Attach(window_, plugin_);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  EXPECT_EQ((*monitor)->scene(), "MatrixSdlTest");
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "MatrixSdlTest");
  // The dummy driver reports 0 Hz: 60 Hz.
  EXPECT_EQ((*monitor)->refresh_rate(), matrix::sdl::WindowRefreshRate(window_));
  EXPECT_FALSE((*monitor)->loop()->swap_waits_for_vsync());  // No GL context, no renderer.

  int swaps = 0;
  for (int i = 0; i < 3; ++i) {
    (*monitor)->FrameBegin();
    EXPECT_TRUE(plugin_->GetLooperMonitor()->is_dispatching());
    (*monitor)->MarkUpdate();
    (*monitor)->MarkRender();
    (*monitor)->Swap([&] { ++swaps; });
    EXPECT_FALSE(plugin_->GetLooperMonitor()->is_dispatching());
  }
  EXPECT_EQ(swaps, 3);
  EXPECT_EQ((*monitor)->frame_count(), 3);
  EXPECT_EQ(plugin_->GetUIThreadMonitor()->heartbeat().dispatch_number(), 3u);

  SDL_SetWindowTitle(window_, "Level2");  // SDL sends no event: Refresh() reads it.
  (*monitor)->Refresh();
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "Level2");
  matrix::AppState::Get()->OnSceneShown("Inventory");  // The application's scene stands.
  SDL_SetWindowTitle(window_, "Level3");
  (*monitor)->Refresh();
  EXPECT_EQ(matrix::AppState::Get()->visible_scene(), "Inventory");
}

TEST_F(SdlMonitorTest, SceneOptionAndUntitledWindow) {
  matrix::sdl::Options options;
  options.scene = "Level1";
  auto named = matrix::sdl::Attach(window_, plugin_, options);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ((*named)->scene(), "Level1");
  named->reset();
  matrix::AppState::Get()->ResetForTesting();
  SDL_SetWindowTitle(window_, "");
  auto untitled = matrix::sdl::Attach(window_, plugin_);
  ASSERT_TRUE(untitled.ok()) << untitled.status();
  EXPECT_EQ((*untitled)->scene(), "SDL_Window");
}

TEST_F(SdlMonitorTest, VsyncFromTheRendererAndTheOption) {
  SDL_Renderer* renderer =
      SDL_CreateRenderer(window_, -1, SDL_RENDERER_SOFTWARE | SDL_RENDERER_PRESENTVSYNC);
  ASSERT_NE(renderer, nullptr) << SDL_GetError();
  SDL_RendererInfo info{};
  ASSERT_EQ(SDL_GetRendererInfo(renderer, &info), 0);
  {
    auto monitor = matrix::sdl::Attach(window_, plugin_);
    ASSERT_TRUE(monitor.ok()) << monitor.status();
    EXPECT_EQ((*monitor)->loop()->swap_waits_for_vsync(),
              (info.flags & SDL_RENDERER_PRESENTVSYNC) != 0);
    (*monitor)->FrameBegin();
    (*monitor)->RenderPresent(renderer);
    EXPECT_FALSE((*monitor)->loop()->in_frame());
  }
  matrix::sdl::Options options;
  options.swap_waits_for_vsync = true;
  auto forced = matrix::sdl::Attach(window_, plugin_, options);
  ASSERT_TRUE(forced.ok());
  EXPECT_TRUE((*forced)->loop()->swap_waits_for_vsync());
  forced->reset();
  SDL_DestroyRenderer(renderer);
}

TEST_F(SdlMonitorTest, ADisplayEventRereadsTheRefreshRateAtTheNextFrame) {
  auto monitor = matrix::sdl::Attach(window_, plugin_);
  ASSERT_TRUE(monitor.ok());
  (*monitor)->loop()->SetRefreshRate(matrix::RefreshRate::FromHz(30));  // Stale.
  SDL_Event event{};
  event.type = SDL_WINDOWEVENT;
  event.window.windowID = SDL_GetWindowID(window_);
  event.window.event = SDL_WINDOWEVENT_DISPLAY_CHANGED;
  SDL_PushEvent(&event);
  EXPECT_EQ((*monitor)->refresh_rate(), matrix::RefreshRate::FromHz(30));
  (*monitor)->FrameBegin();
  EXPECT_EQ((*monitor)->refresh_rate(), matrix::sdl::WindowRefreshRate(window_));
  (*monitor)->FrameEnd();
  // Another window's event does not count.
  (*monitor)->loop()->SetRefreshRate(matrix::RefreshRate::FromHz(30));
  event.window.windowID = SDL_GetWindowID(window_) + 100;
  SDL_PushEvent(&event);
  (*monitor)->FrameBegin();
  EXPECT_EQ((*monitor)->refresh_rate(), matrix::RefreshRate::FromHz(30));
  (*monitor)->FrameEnd();
  SDL_FlushEvents(SDL_FIRSTEVENT, SDL_LASTEVENT);
}

TEST_F(SdlMonitorTest, ClearErrors) {
  EXPECT_EQ(matrix::sdl::Attach(nullptr, plugin_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(matrix::sdl::Attach(window_, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .Build();
  ASSERT_TRUE(config.ok());
  matrix::TracePlugin not_started(*config);
  EXPECT_EQ(matrix::sdl::Attach(window_, &not_started).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
