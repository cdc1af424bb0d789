// File: matrix/render_loop/render_loop_monitor.h
//
// Reports a game/render loop (SDL, GLFW, raw GLX/EGL, Vulkan: any loop that
// polls events, updates, renders and swaps a buffer each iteration) to
// matrix-cpp. Each loop iteration is one dispatch that draws one frame; FPS
// (with per-phase costs), LAG, ANR (with the loop thread's native stack) and
// slow method then work on the loop. Toolkit-free: the caller does the swap.
//
//   auto config = matrix::TraceConfig::Builder()
//       .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
//       .UseChoreographer(false)
//       .EnableFps(true).EnableAnrTrace(true).EnableEvilMethodTrace(true)
//       .Build();
//   ...                                  // Matrix::Init, plugin->Start() on the loop thread
//   auto loop = *matrix::RenderLoopMonitor::Attach(plugin, {.scene = "Level1"});
//   while (running) {
//     loop->FrameBegin();                // 1: the iteration (dispatch, frame) starts
//     PollEvents();                      //    input
//     loop->MarkUpdate();                //    (optional phase markers)
//     Update();                          //    animation
//     loop->MarkRender();
//     Render();                          //    traversal
//     loop->Swap([&] { glfwSwapBuffers(window); });   // 2: commit; the frame ends
//   }
//   loop.reset();                        // detach, before Matrix::Shutdown()
//
// Phases (UIThreadMonitor::Phase), each from its marker to the next:
//
//   FrameBegin() / MarkInput()  -> kInput      (event polling)
//   MarkUpdate()                -> kAnimation  (game update, animation)
//   MarkRender()                -> kTraversal  (drawing)
//   MarkSwap() / Swap()         -> kCommit     (the buffer swap, until FrameEnd())
//
// The markers are optional and go forward only: a marker for a phase the frame
// has already passed is ignored. A frame with no marker between FrameBegin()
// and the swap counts its work as kTraversal (rendering), not as input.
// FrameEnd() without a swap marker ends the frame with the last phase running
// (use it when the swap stays outside the frame).
//
// Vsync: the refresh interval comes from Options::refresh_rate (60 Hz by
// default; SetRefreshRate() when the display changes). The intended vsync of a
// frame is the time it began, except when the swap is inside the frame
// (Swap()/MarkSwap()) and waits for the vsync (Options::swap_waits_for_vsync,
// e.g. a swap interval of 1): then the previous frame's end was a vsync and
// the frame is meant for the next tick on that grid (begin rounded up to the
// grid; the first frame, with no grid yet, one interval after it began), so
// the wait for the vsync is not counted as a dropped frame.
//
// Scene: Options::scene, when not empty, is set as AppState's visible scene at
// attach; NameScene() renames it later, unless the application has shown its
// own scene through AppState since (then the application's scene stands).
//
// Per frame the adapter adds one clock read (vDSO) per hook called
// (FrameBegin, each marker, FrameEnd) and no allocation, lock, syscall or log
// line.
//
// Thread safety: bound to the loop thread (the thread that started the
// plugin): every method and the destructor run there.

#ifndef MATRIX_RENDER_LOOP_RENDER_LOOP_MONITOR_H_
#define MATRIX_RENDER_LOOP_RENDER_LOOP_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "matrix/core/app_state.h"
#include "matrix/core/check.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

class TracePlugin;

// The label of each render-loop dispatch (DispatchInfo::label), by default.
inline constexpr char kRenderLoopDispatchLabel[] = "render-loop";

// What RenderLoopMonitor::Attach() is told about the loop.
struct RenderLoopOptions {
  // Shown as AppState's visible scene at attach; empty: leave it alone.
  std::string scene;
  // The display's refresh rate (60 Hz unless set).
  RefreshRate refresh_rate;
  // True when the swap blocks until the next vsync (swap interval >= 1).
  bool swap_waits_for_vsync = false;
  // Each dispatch's label; must outlive the monitor (a string literal).
  const char* label = kRenderLoopDispatchLabel;
};

class RenderLoopMonitor {
 public:
  using Options = RenderLoopOptions;

  // Attach()
  //
  // Monitors a render loop running on this thread, reporting to `plugin`,
  // which must be configured with SetLooperSource(LooperMonitor::Source::kForeign)
  // and started on this thread. Destroy the result before Matrix::Shutdown().
  // Errors: InvalidArgument (null plugin, invalid refresh rate, null label),
  // FailedPrecondition (plugin not started, or not a foreign-loop plugin).
  // Loop thread.
  static absl::StatusOr<std::unique_ptr<RenderLoopMonitor>> Attach(TracePlugin* plugin,
                                                                   Options options = {});
  // The same, reporting to a foreign-source `looper_monitor` and the
  // `ui_monitor` built on it (not owned; both must outlive the result).
  static absl::StatusOr<std::unique_ptr<RenderLoopMonitor>> Attach(LooperMonitor* looper_monitor,
                                                                   UIThreadMonitor* ui_monitor,
                                                                   Options options = {});

  // Ends a frame in progress. Loop thread.
  ~RenderLoopMonitor();
  RenderLoopMonitor(const RenderLoopMonitor&) = delete;
  RenderLoopMonitor& operator=(const RenderLoopMonitor&) = delete;

  // FrameBegin()
  //
  // Starts one loop iteration: a dispatch that draws a frame, in the input
  // phase. Call it at the top of the loop, before polling events. A frame still
  // in progress (no FrameEnd() since the last FrameBegin()) ends here first.
  void FrameBegin();

  // Phase markers (optional): the named phase starts now.
  void MarkInput() { Mark(UIThreadMonitor::Phase::kInput); }
  void MarkUpdate() { Mark(UIThreadMonitor::Phase::kAnimation); }
  void MarkRender() { Mark(UIThreadMonitor::Phase::kTraversal); }
  void MarkSwap() { Mark(UIThreadMonitor::Phase::kCommit); }

  // FrameEnd()
  //
  // Ends the iteration (the dispatch and its frame). Call it right after the
  // swap. Without a FrameBegin() in progress it does nothing.
  void FrameEnd();

  // Swap()
  //
  // MarkSwap(), then `swap()` (the caller's buffer swap, e.g.
  // SDL_GL_SwapWindow, glfwSwapBuffers, eglSwapBuffers, vkQueuePresentKHR),
  // then FrameEnd(). Returns what `swap` returns.
  template <typename SwapFn>
  decltype(auto) Swap(SwapFn&& swap) {
    MarkSwap();
    struct EndFrame {
      RenderLoopMonitor* monitor;
      ~EndFrame() { monitor->FrameEnd(); }
    } end_frame{this};
    return std::forward<SwapFn>(swap)();
  }

  // The display's refresh rate, from the next frame on. An invalid rate is
  // ignored (returns false).
  bool SetRefreshRate(RefreshRate rate);
  void SetSwapWaitsForVsync(bool waits) { swap_waits_for_vsync_ = waits; }

  // NameScene()
  //
  // Shows `scene` as AppState's visible scene, unless the application has
  // shown another scene through AppState since this monitor last named one
  // (then returns false and leaves it).
  bool NameScene(std::string scene);

  RefreshRate refresh_rate() const { return refresh_rate_; }
  bool swap_waits_for_vsync() const { return swap_waits_for_vsync_; }
  bool in_frame() const { return in_frame_; }
  // Frames begun since attach.
  int64_t frame_count() const { return frame_count_; }
  // The intended vsync of the frame in progress (or the last one).
  TimeTicks intended_vsync() const { return intended_vsync_; }
  // The scene this monitor named (empty when none).
  const std::string& scene() const { return scene_; }
  UIThreadMonitor* ui_monitor() const { return ui_monitor_; }

 private:
  RenderLoopMonitor(LooperMonitor* looper_monitor, UIThreadMonitor* ui_monitor, Options options);
  void Mark(UIThreadMonitor::Phase phase);
  void EndAt(TimeTicks end);
  TimeTicks IntendedVsync(TimeTicks begin) const;

  LooperMonitor* const looper_monitor_;
  UIThreadMonitor* const ui_monitor_;
  const char* const label_;
  RefreshRate refresh_rate_;
  bool swap_waits_for_vsync_;
  bool in_frame_ = false;
  // The frame in progress: its begin, the last phase marked (-1: none yet).
  TimeTicks begin_;
  int phase_ = -1;
  bool swap_marked_ = false;
  // The previous frame: its end, and whether the swap was inside it.
  TimeTicks last_end_;
  bool last_swap_in_frame_ = false;
  TimeTicks intended_vsync_;
  int64_t frame_count_ = 0;
  std::string scene_;
  SceneId scene_id_ = AppState::kDefaultScene;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_RENDER_LOOP_RENDER_LOOP_MONITOR_H_
