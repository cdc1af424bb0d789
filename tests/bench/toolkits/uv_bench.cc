// The per-dispatch cost of matrix::uv: the same libuv loop turns with and
// without the adapter, in one run. Each iteration is one turn of
// uv_run(UV_RUN_NOWAIT) on a private loop kept busy by an idle handle (so the
// poll never blocks): timers, idle callback, prepare, a non-blocking
// epoll_wait, check. With the adapter each turn is one dispatch reported to a
// foreign LooperMonitor (no listeners: the adapter's own cost and the
// monitor's bookkeeping).
//
//   ./build/tests/bench/toolkits/matrix_uv_bench --benchmark_min_time=0.2 --benchmark_repetitions=3

#include <uv.h>

#include <memory>

#include "benchmark/benchmark.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/uv/uv_monitor.h"

namespace {

class BusyLoop {
 public:
  BusyLoop() {
    uv_loop_init(&loop_);
    uv_idle_init(&loop_, &idle_);
    uv_idle_start(&idle_, [](uv_idle_t* idle) { benchmark::DoNotOptimize(idle->data); });
  }
  ~BusyLoop() {
    uv_close(reinterpret_cast<uv_handle_t*>(&idle_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }
  uv_loop_t* loop() { return &loop_; }

 private:
  uv_loop_t loop_;
  uv_idle_t idle_;
};

void BM_UvTurn_Baseline(benchmark::State& state) {
  BusyLoop busy;
  for (auto _ : state) uv_run(busy.loop(), UV_RUN_NOWAIT);
}
BENCHMARK(BM_UvTurn_Baseline);

void BM_UvTurn_Attached(benchmark::State& state) {
  BusyLoop busy;
  matrix::LooperMonitor looper_monitor(matrix::TickClock::Default());
  looper_monitor.Start();
  matrix::uv::Options options;
  options.name_scene = false;
  auto monitor = matrix::uv::Attach(busy.loop(), &looper_monitor, options);
  if (!monitor.ok()) {
    state.SkipWithError(monitor.status().ToString().c_str());
    return;
  }
  for (auto _ : state) uv_run(busy.loop(), UV_RUN_NOWAIT);
  state.counters["dispatches"] = static_cast<double>((*monitor)->dispatch_count());
  monitor->reset();
}
BENCHMARK(BM_UvTurn_Attached);

}  // namespace

BENCHMARK_MAIN();
