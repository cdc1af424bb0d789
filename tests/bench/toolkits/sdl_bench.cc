// The cost matrix::sdl adds per loop iteration (one dispatch drawing one
// frame) of an SDL2 loop, against the same loop without it, in one run. The
// loop runs on SDL's dummy video driver with a software SDL_Renderer on a
// small window: poll events, clear, present. With the monitor, the iteration
// also calls FrameBegin(), MarkUpdate(), MarkRender() and presents through
// RenderPresent(), reporting to a TracePlugin with FPS, ANR and slow method on.
// BM_RenderLoopHooks measures the toolkit-free hooks alone around an empty
// iteration (the cost over a no-op frame).
//
//   ./matrix_sdl_bench --benchmark_min_time=0.2 --benchmark_repetitions=3

#include <SDL.h>
#include <stdlib.h>

#include <memory>

#include "benchmark/benchmark.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/render_loop/render_loop_monitor.h"
#include "matrix/sdl/sdl_monitor.h"
#include "monitoring.h"

namespace {

using bench::Monitoring;

// Arg 0: the loop alone; 1: with matrix::sdl attached.
void BM_SdlLoopFrame(benchmark::State& state) {
  setenv("SDL_VIDEODRIVER", "dummy", 1);
  if (SDL_Init(SDL_INIT_VIDEO) != 0) {
    state.SkipWithError(SDL_GetError());
    return;
  }
  SDL_Window* window = SDL_CreateWindow("bench", 0, 0, 64, 48, 0);
  SDL_Renderer* renderer = SDL_CreateRenderer(window, -1, SDL_RENDERER_SOFTWARE);
  const bool monitored = state.range(0) == 1;
  std::unique_ptr<Monitoring> monitoring;
  std::unique_ptr<matrix::sdl::SdlMonitor> monitor;
  if (monitored) {
    monitoring = std::make_unique<Monitoring>();
    monitor = *matrix::sdl::Attach(window, monitoring->plugin());
  }
  SDL_Event event;
  int frame = 0;
  for (auto _ : state) {
    if (monitored) monitor->FrameBegin();
    while (SDL_PollEvent(&event)) {
    }
    if (monitored) monitor->MarkUpdate();
    ++frame;
    if (monitored) monitor->MarkRender();
    SDL_SetRenderDrawColor(renderer, static_cast<Uint8>(frame), 80, 160, 255);
    SDL_RenderClear(renderer);
    if (monitored) {
      monitor->RenderPresent(renderer);
    } else {
      SDL_RenderPresent(renderer);
    }
  }
  monitor.reset();
  monitoring.reset();
  SDL_DestroyRenderer(renderer);
  SDL_DestroyWindow(window);
  SDL_Quit();
}
BENCHMARK(BM_SdlLoopFrame)->Arg(0)->Arg(1);

// Arg 0: an empty iteration; 1: FrameBegin, three markers, Swap around it.
void BM_RenderLoopHooks(benchmark::State& state) {
  const bool monitored = state.range(0) == 1;
  std::unique_ptr<Monitoring> monitoring;
  std::unique_ptr<matrix::RenderLoopMonitor> loop;
  if (monitored) {
    monitoring = std::make_unique<Monitoring>();
    loop = *matrix::RenderLoopMonitor::Attach(monitoring->plugin());
  }
  int swaps = 0;
  for (auto _ : state) {
    if (monitored) {
      loop->FrameBegin();
      loop->MarkUpdate();
      loop->MarkRender();
      loop->Swap([&] { benchmark::DoNotOptimize(++swaps); });
    } else {
      benchmark::DoNotOptimize(++swaps);
    }
  }
  loop.reset();
  monitoring.reset();
}
BENCHMARK(BM_RenderLoopHooks)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
