// What BlockCanaryPlugin costs the looper thread per dispatched message, on
// each LooperMonitor source, against the same loop without it. The watchdog
// and worker loopers are never run: only the looper thread's share is
// measured. Numbers are in docs/blockcanary.md.

#include <memory>
#include <optional>
#include <string>

#include "benchmark/benchmark.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/plugins/block_canary_plugin.h"

namespace {

// A plugin on the calling thread's looper (prepared once for the whole
// binary: a thread has one looper).
class Setup {
 public:
  explicit Setup(std::optional<matrix::LooperMonitor::Source> source) {
    looper_ = matrix::Looper::MyLooper();
    if (looper_ == nullptr) looper_ = matrix::Looper::Prepare();
    if (!source) return;
    watchdog_ = matrix::Looper::Create(matrix::TickClock::Default());
    worker_ = matrix::Looper::Create(matrix::TickClock::Default());
    auto context = matrix::BlockCanaryContext::Builder()
                       .SetLogPath("")
                       .SetLooperSource(*source)
                       .DisplayNotification(false)
                       .Build();
    plugin_ = std::make_unique<matrix::BlockCanaryPlugin>(*context);
    matrix::PluginContext c;
    c.main_looper = looper_;
    c.watchdog_looper = watchdog_.get();
    c.worker_looper = worker_.get();
    plugin_->Init(c).IgnoreError();
    plugin_->Start().IgnoreError();
  }
  ~Setup() {
    if (plugin_) plugin_->Destroy().IgnoreError();
  }
  matrix::Looper* looper() const { return looper_; }
  matrix::BlockCanaryPlugin* plugin() const { return plugin_.get(); }

 private:
  matrix::Looper* looper_ = nullptr;
  std::unique_ptr<matrix::Looper> watchdog_;
  std::unique_ptr<matrix::Looper> worker_;
  std::unique_ptr<matrix::BlockCanaryPlugin> plugin_;
};

// Post + dispatch of an empty task: the whole per-message path.
void RunDispatches(benchmark::State& state, Setup& setup) {
  matrix::Handler handler(setup.looper());
  for (auto _ : state) {
    handler.Post([] {});
    setup.looper()->PollOnce(absl::ZeroDuration());
  }
}

void BM_Dispatch_NoMonitor(benchmark::State& state) {
  Setup setup(std::nullopt);
  RunDispatches(state, setup);
}
BENCHMARK(BM_Dispatch_NoMonitor)->Name("BM_BlockCanaryDispatch/none");

void BM_Dispatch_Observer(benchmark::State& state) {
  Setup setup(matrix::LooperMonitor::Source::kDispatchObserver);
  RunDispatches(state, setup);
}
BENCHMARK(BM_Dispatch_Observer)->Name("BM_BlockCanaryDispatch/dispatch_observer");

void BM_Dispatch_Printer(benchmark::State& state) {
  Setup setup(matrix::LooperMonitor::Source::kPrinter);
  RunDispatches(state, setup);
}
BENCHMARK(BM_Dispatch_Printer)->Name("BM_BlockCanaryDispatch/printer");

// The foreign hooks with a caller's timestamp: LooperMonitor plus the
// plugin's listener, nothing else.
void BM_ForeignHooks(benchmark::State& state) {
  Setup setup(matrix::LooperMonitor::Source::kForeign);
  matrix::LooperMonitor* monitor = setup.plugin()->GetLooperMonitor();
  matrix::TimeTicks t = matrix::MonotonicNow();
  for (auto _ : state) {
    monitor->DispatchBegin(t, "event");
    t += absl::Nanoseconds(100);
    monitor->DispatchEnd(t);
  }
}
BENCHMARK(BM_ForeignHooks)->Name("BM_BlockCanaryListener/foreign_hooks");

void BM_ForeignHooks_NoListener(benchmark::State& state) {
  matrix::LooperMonitor monitor(matrix::TickClock::Default());
  matrix::TimeTicks t = matrix::MonotonicNow();
  for (auto _ : state) {
    monitor.DispatchBegin(t, "event");
    t += absl::Nanoseconds(100);
    monitor.DispatchEnd(t);
  }
}
BENCHMARK(BM_ForeignHooks_NoListener)->Name("BM_BlockCanaryListener/foreign_hooks_floor");

}  // namespace
