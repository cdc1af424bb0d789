// sdl-sample: an SDL2 game loop (SDL_Renderer) monitored by matrix-cpp with one
// line to attach and two in the loop. Frame 120 renders 80 ms slowly (janky
// frames in the FPS report), frame 200 stalls 1.5 s in LoadLevel (an ANR with
// the loop's stack), frame 300 runs a 250 ms SlowPathfinding (a slow method).
//
//   xvfb-run -a ./build/samples/sdl/sdl-sample      (or on a desktop; Esc quits)

#include <SDL.h>

#include <cstdio>
#include <memory>

#include "absl/time/clock.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/sdl/sdl_monitor.h"

namespace {

__attribute__((no_instrument_function)) void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}
// Built without tracing on purpose, so the ANR finds it on the native stack.
__attribute__((noinline, no_instrument_function)) void LoadLevel() {
  absl::SleepFor(absl::Milliseconds(1500));
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void SlowPathfinding() { Spin(absl::Milliseconds(250)); }

class Console : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    std::printf("[issue] %s\n", matrix::SummarizeIssue(issue).c_str());
    std::fflush(stdout);
  }
};

}  // namespace

int main() {
  if (SDL_Init(SDL_INIT_VIDEO) != 0) {
    std::fprintf(stderr, "SDL_Init: %s\n", SDL_GetError());
    return 1;
  }
  auto config = matrix::TraceConfig::Builder()
                    .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
                    .UseChoreographer(false)
                    .EnableFps(true)
                    .SetFpsTimeSlice(absl::Seconds(2))
                    .EnableAnrTrace(true)
                    .SetLagThreshold(absl::Milliseconds(500))
                    .SetAnrThreshold(absl::Seconds(1))
                    .EnableEvilMethodTrace(true)
                    .SetEvilThreshold(absl::Milliseconds(200))
                    .Build();
  if (!config.ok()) return 1;
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                .AddPlugin(std::move(trace))
                                .SetPluginListener(std::make_shared<Console>())
                                .Build())
           .ok() ||
      !plugin->Start().ok()) {
    return 1;
  }
  SDL_Window* window = SDL_CreateWindow("Level1", SDL_WINDOWPOS_UNDEFINED,
                                        SDL_WINDOWPOS_UNDEFINED, 320, 240, 0);
  SDL_Renderer* renderer = window != nullptr ? SDL_CreateRenderer(window, -1, 0) : nullptr;
  if (renderer == nullptr) {
    std::fprintf(stderr, "SDL: %s\n", SDL_GetError());
    return 1;
  }

  auto monitor = matrix::sdl::Attach(window, plugin);  // The line to attach.
  if (!monitor.ok()) {
    std::fprintf(stderr, "%s\n", monitor.status().ToString().c_str());
    return 1;
  }
  std::printf("[sdl-sample] scene %s at %s\n", (*monitor)->scene().c_str(),
              (*monitor)->refresh_rate().ToString().c_str());
  bool running = true;
  for (int frame = 0; running && frame < 420; ++frame) {
    (*monitor)->FrameBegin();  // + 1
    SDL_Event event;
    while (SDL_PollEvent(&event)) {
      if (event.type == SDL_QUIT ||
          (event.type == SDL_KEYDOWN && event.key.keysym.sym == SDLK_ESCAPE)) {
        running = false;
      }
    }
    (*monitor)->MarkUpdate();  // Optional phase markers.
    if (frame == 200) LoadLevel();
    if (frame == 300) SlowPathfinding();
    (*monitor)->MarkRender();
    SDL_SetRenderDrawColor(renderer, static_cast<Uint8>(frame), 80, 160, 255);
    SDL_RenderClear(renderer);
    Spin(frame == 120 ? absl::Milliseconds(80) : absl::Milliseconds(2));
    (*monitor)->RenderPresent(renderer);  // + 2, instead of SDL_RenderPresent.
    SDL_Delay(14);  // Pacing (vsync off), outside the frame.
  }
  plugin->GetFrameTracer()->FlushReports();
  absl::SleepFor(absl::Milliseconds(300));  // Let the worker deliver the last reports.
  monitor->reset();
  SDL_DestroyRenderer(renderer);
  SDL_DestroyWindow(window);
  SDL_Quit();
  matrix::Matrix::Shutdown();
  std::printf("[sdl-sample] done\n");
  return 0;
}
