// The per-dispatch cost of matrix::glib: the same GMainContext iterations with
// and without the adapter, in one run. Each iteration is one
// g_main_context_iteration(context, FALSE) on a private context kept busy by
// an idle source (so the poll never blocks): prepare, a non-blocking poll,
// check, dispatch of the idle callback. With the adapter each iteration is one
// dispatch reported to a foreign LooperMonitor (no listeners: the adapter's
// own cost and the monitor's bookkeeping).
//
//   ./build/tests/bench/toolkits/matrix_glib_bench --benchmark_min_time=0.2 --benchmark_repetitions=3

#include <glib.h>

#include <memory>

#include "benchmark/benchmark.h"
#include "matrix/core/tick_clock.h"
#include "matrix/glib/glib_monitor.h"
#include "matrix/trace/looper_monitor.h"

namespace {

class BusyContext {
 public:
  BusyContext() : context_(g_main_context_new()) {
    GSource* source = g_idle_source_new();
    g_source_set_callback(
        source, [](gpointer) -> gboolean { return G_SOURCE_CONTINUE; }, nullptr, nullptr);
    g_source_attach(source, context_);
    g_source_unref(source);
  }
  ~BusyContext() { g_main_context_unref(context_); }
  GMainContext* context() { return context_; }

 private:
  GMainContext* context_;
};

void BM_GlibIteration_Baseline(benchmark::State& state) {
  BusyContext busy;
  for (auto _ : state) g_main_context_iteration(busy.context(), FALSE);
}
BENCHMARK(BM_GlibIteration_Baseline);

void BM_GlibIteration_Attached(benchmark::State& state) {
  BusyContext busy;
  matrix::LooperMonitor looper_monitor(matrix::TickClock::Default());
  looper_monitor.Start();
  auto monitor = matrix::glib::Attach(busy.context(), &looper_monitor);
  if (!monitor.ok()) {
    state.SkipWithError(monitor.status().ToString().c_str());
    return;
  }
  for (auto _ : state) g_main_context_iteration(busy.context(), FALSE);
  state.counters["dispatches"] = static_cast<double>((*monitor)->dispatch_count());
  monitor->reset();
}
BENCHMARK(BM_GlibIteration_Attached);

}  // namespace

BENCHMARK_MAIN();
