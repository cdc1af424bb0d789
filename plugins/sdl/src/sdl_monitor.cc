#include "matrix/sdl/sdl_monitor.h"

#include <utility>

#include "absl/status/status.h"
#include "matrix/plugins/trace_plugin.h"

namespace matrix::sdl {

namespace {

constexpr char kUntitledScene[] = "SDL_Window";

}  // namespace

RefreshRate WindowRefreshRate(SDL_Window* window) {
  SDL_DisplayMode mode{};
  const int display = SDL_GetWindowDisplayIndex(window);
  if (display >= 0 && SDL_GetCurrentDisplayMode(display, &mode) == 0 && mode.refresh_rate > 0) {
    return RefreshRate::FromHz(mode.refresh_rate);
  }
  mode = SDL_DisplayMode{};
  if (SDL_GetWindowDisplayMode(window, &mode) == 0 && mode.refresh_rate > 0) {
    return RefreshRate::FromHz(mode.refresh_rate);
  }
  return RefreshRate::FromHz(60);
}

SdlMonitor::SdlMonitor(SDL_Window* window, std::unique_ptr<RenderLoopMonitor> loop,
                       Options options)
    : window_(window),
      window_id_(SDL_GetWindowID(window)),
      options_(std::move(options)),
      loop_(std::move(loop)) {
  ReadDisplay();
  ReadVsync();
  ReadTitle();
  SDL_AddEventWatch(&OnEvent, this);
}

SdlMonitor::~SdlMonitor() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  SDL_DelEventWatch(&OnEvent, this);
  loop_.reset();  // Ends a frame in progress.
}

void SdlMonitor::SwapWindow() {
  loop_->Swap([this] { SDL_GL_SwapWindow(window_); });
}

void SdlMonitor::RenderPresent(SDL_Renderer* renderer) {
  loop_->Swap([renderer] { SDL_RenderPresent(renderer); });
}

void SdlMonitor::Refresh() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  ReadDisplay();
  ReadVsync();
  ReadTitle();
}

void SdlMonitor::ReadDisplay() {
  display_changed_.store(false, std::memory_order_relaxed);
  loop_->SetRefreshRate(WindowRefreshRate(window_));
}

void SdlMonitor::ReadVsync() {
  if (options_.swap_waits_for_vsync.has_value()) {
    loop_->SetSwapWaitsForVsync(*options_.swap_waits_for_vsync);
    return;
  }
  bool waits = false;
  if (SDL_GL_GetCurrentWindow() == window_ && SDL_GL_GetCurrentContext() != nullptr) {
    waits = SDL_GL_GetSwapInterval() != 0;  // 1 (vsync) or -1 (adaptive vsync).
  } else if (SDL_Renderer* renderer = SDL_GetRenderer(window_); renderer != nullptr) {
    SDL_RendererInfo info{};
    waits = SDL_GetRendererInfo(renderer, &info) == 0 &&
            (info.flags & SDL_RENDERER_PRESENTVSYNC) != 0;
  }
  loop_->SetSwapWaitsForVsync(waits);
}

void SdlMonitor::ReadTitle() {
  if (!options_.name_scene || !options_.scene.empty()) return;  // Named at attach.
  const char* title = SDL_GetWindowTitle(window_);
  loop_->NameScene(title != nullptr && title[0] != '\0' ? title : kUntitledScene);
}

int SdlMonitor::OnEvent(void* self, SDL_Event* event) {
  auto* monitor = static_cast<SdlMonitor*>(self);
  const bool changed =
      event->type == SDL_DISPLAYEVENT ||
      (event->type == SDL_WINDOWEVENT && event->window.windowID == monitor->window_id_ &&
       event->window.event == SDL_WINDOWEVENT_DISPLAY_CHANGED);
  if (changed) monitor->display_changed_.store(true, std::memory_order_relaxed);
  return 1;
}

absl::StatusOr<std::unique_ptr<SdlMonitor>> Attach(SDL_Window* window, TracePlugin* plugin,
                                                   Options options) {
  if (SDL_WasInit(SDL_INIT_VIDEO) == 0) {
    return absl::FailedPreconditionError(
        "matrix::sdl::Attach: SDL video is not initialized (SDL_Init(SDL_INIT_VIDEO) first)");
  }
  if (window == nullptr || SDL_GetWindowID(window) == 0) {
    return absl::InvalidArgumentError("matrix::sdl::Attach: not a valid SDL_Window");
  }
  if (plugin == nullptr) return absl::InvalidArgumentError("matrix::sdl::Attach: null plugin");
  RenderLoopMonitor::Options loop_options;
  if (options.name_scene) loop_options.scene = options.scene;
  loop_options.label = kDispatchLabel;
  absl::StatusOr<std::unique_ptr<RenderLoopMonitor>> loop =
      RenderLoopMonitor::Attach(plugin, std::move(loop_options));
  if (!loop.ok()) return loop.status();
  return std::unique_ptr<SdlMonitor>(new SdlMonitor(window, *std::move(loop), std::move(options)));
}

}  // namespace matrix::sdl
