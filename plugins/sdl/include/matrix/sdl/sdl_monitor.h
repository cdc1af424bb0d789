// File: matrix/sdl/sdl_monitor.h
//
// Reports an SDL2 game loop to matrix-cpp: each loop iteration is one
// dispatch that draws one frame of `window` (matrix::RenderLoopMonitor), with
// the refresh rate, the vsync behaviour and the scene read from SDL. Two
// lines in a typical loop:
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableFps(true).EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   ...                                          // Matrix::Init, plugin->Start() on this thread
//   auto monitor = *matrix::sdl::Attach(window, plugin);   // after SDL_CreateWindow
//   while (running) {
//     monitor->FrameBegin();                     // + line 1
//     while (SDL_PollEvent(&event)) Handle(event);
//     monitor->MarkUpdate();                     //   (optional phase markers)
//     Update();
//     monitor->MarkRender();
//     Render();
//     monitor->SwapWindow();                     // + line 2, instead of SDL_GL_SwapWindow(window)
//   }                                            //   (RenderPresent(renderer) with SDL_Renderer)
//   monitor.reset();                             // before Matrix::Shutdown()
//
// Phases as in RenderLoopMonitor: event polling = kInput, update =
// kAnimation, render = kTraversal, swap = kCommit (a frame with no markers
// counts its work as kTraversal).
//
// Refresh rate: the current display mode of the window's display
// (SDL_GetCurrentDisplayMode, then SDL_GetWindowDisplayMode), 60 Hz when SDL
// reports 0 (Xvfb does). It is read again at the next FrameBegin() after the
// window moves to another display or a display changes (an SDL event watch
// sets a flag; the watch does nothing else). Vsync: the swap waits for the
// vsync when the window's current GL context has a swap interval other than
// 0, or its SDL_Renderer has SDL_RENDERER_PRESENTVSYNC (read at attach and by
// Refresh(); Options::swap_waits_for_vsync overrides).
//
// Scene: Options::scene when set; otherwise the window's title ("SDL_Window"
// when untitled), set as AppState's visible scene at attach and by Refresh(),
// unless the application has shown its own scene through AppState since.
//
// Per frame the adapter adds one clock read per hook and a relaxed atomic
// load; no allocation, lock, syscall or log line.
//
// Thread safety: the thread that runs the loop (created the window and
// started the plugin): Attach(), every method and the destructor.

#ifndef MATRIX_SDL_SDL_MONITOR_H_
#define MATRIX_SDL_SDL_MONITOR_H_

#include <SDL.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "matrix/core/check.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/render_loop/render_loop_monitor.h"

namespace matrix {
class TracePlugin;
}

namespace matrix::sdl {

// The label of each SDL loop iteration (DispatchInfo::label).
inline constexpr char kDispatchLabel[] = "sdl-frame";

struct Options {
  // The scene's name; empty: the window's title.
  std::string scene;
  // False: leave AppState's scene alone.
  bool name_scene = true;
  // Set: whether the swap waits for the vsync; unset: ask SDL.
  std::optional<bool> swap_waits_for_vsync;
};

class SdlMonitor {
 public:
  // Removes the event watch and ends a frame in progress. Loop thread.
  ~SdlMonitor();
  SdlMonitor(const SdlMonitor&) = delete;
  SdlMonitor& operator=(const SdlMonitor&) = delete;

  // Starts the iteration (see RenderLoopMonitor::FrameBegin()).
  void FrameBegin() {
    if (display_changed_.load(std::memory_order_relaxed)) ReadDisplay();
    loop_->FrameBegin();
  }
  void MarkInput() { loop_->MarkInput(); }
  void MarkUpdate() { loop_->MarkUpdate(); }
  void MarkRender() { loop_->MarkRender(); }
  void MarkSwap() { loop_->MarkSwap(); }
  void FrameEnd() { loop_->FrameEnd(); }

  // SDL_GL_SwapWindow(window) as the frame's commit phase, then FrameEnd().
  void SwapWindow();
  // SDL_RenderPresent(renderer) as the frame's commit phase, then FrameEnd().
  void RenderPresent(SDL_Renderer* renderer);
  // Any other swap (e.g. vkQueuePresentKHR): see RenderLoopMonitor::Swap().
  template <typename SwapFn>
  decltype(auto) Swap(SwapFn&& swap) {
    return loop_->Swap(std::forward<SwapFn>(swap));
  }

  // Reads the window's title (scene), refresh rate and vsync again, e.g. after
  // SDL_SetWindowTitle or SDL_GL_SetSwapInterval. Not on every frame: it asks
  // the video driver. Loop thread.
  void Refresh();

  SDL_Window* window() const { return window_; }
  RenderLoopMonitor* loop() const { return loop_.get(); }
  RefreshRate refresh_rate() const { return loop_->refresh_rate(); }
  int64_t frame_count() const { return loop_->frame_count(); }
  // The scene this monitor named (empty when none).
  const std::string& scene() const { return loop_->scene(); }

 private:
  friend absl::StatusOr<std::unique_ptr<SdlMonitor>> Attach(SDL_Window* window,
                                                           TracePlugin* plugin, Options options);

  SdlMonitor(SDL_Window* window, std::unique_ptr<RenderLoopMonitor> loop, Options options);
  void ReadDisplay();
  void ReadVsync();
  void ReadTitle();
  static int OnEvent(void* self, SDL_Event* event);

  SDL_Window* const window_;
  const Uint32 window_id_;
  const Options options_;
  std::unique_ptr<RenderLoopMonitor> loop_;
  // Set by the event watch (any thread SDL pushes events on).
  std::atomic<bool> display_changed_{false};
  MATRIX_THREAD_CHECKER(thread_checker_);
};

// Attach()
//
// Monitors the loop that draws `window` (not owned; destroy the monitor
// before the window) and reports it to `plugin`, a TracePlugin configured with
// SetLooperSource(LooperMonitor::Source::kForeign) and started on this thread.
// Errors: InvalidArgument (null or invalid window, null plugin),
// FailedPrecondition (SDL video not initialized, plugin not started or not a
// foreign-loop plugin). Loop thread.
absl::StatusOr<std::unique_ptr<SdlMonitor>> Attach(SDL_Window* window, TracePlugin* plugin,
                                                   Options options = {});

// The display's refresh rate for `window` as SDL reports it, or 60 Hz when
// SDL does not know it (0 Hz).
RefreshRate WindowRefreshRate(SDL_Window* window);

}  // namespace matrix::sdl

#endif  // MATRIX_SDL_SDL_MONITOR_H_
