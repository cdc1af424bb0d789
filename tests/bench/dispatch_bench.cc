// The cost of monitoring per dispatched message and per drawn frame: the same
// loop with monitoring off (the runtime alone) and with TracePlugin running
// every tracer, in one run, so the difference is what matrix-cpp adds. The
// same with slow-dispatch stack sampling (matrix-run's default) shows what
// sampling costs a healthy program: nothing is sampled under the threshold.
// Two more rows give context: FrameTracer alone (TracePlugin with only FPS on), and the
// baseline Matrix and BlockCanary stand on in Android, a Printer that receives
// Android's ">>>>> Dispatching to ..." text lines for every message. Each
// benchmark iteration is one message dispatched by Looper::Loop() (the
// message itself advances the benchmark and posts the next), as a program
// runs.
//
//   ./matrix_bench --benchmark_filter='BM_Dispatch|BM_Frame'

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/testing/manual_vsync_source.h"

namespace {

class NullListener : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue&) override {}
};

// What watches the loop. The benchmark argument.
enum Mode : int64_t {
  kOff = 0,          // the runtime alone
  kAllTracers = 1,   // TracePlugin, every tracer on
  kFrameTracer = 2,  // TracePlugin, FrameTracer only
  kPrinterText = 3,  // no Matrix; a Printer receiving Android's text lines
  kAllSampled = 4,   // every tracer on, slow dispatches' stacks sampled
};

const char* ModeLabel(int64_t mode) {
  switch (mode) {
    case kAllTracers:
      return "all tracers";
    case kFrameTracer:
      return "FrameTracer only";
    case kPrinterText:
      return "Printer text lines";
    case kAllSampled:
      return "all tracers, slow-dispatch stacks";
    default:
      return "monitoring off";
  }
}

// Matrix's LooperPrinter in Android: look at the first character of each line.
class FirstCharPrinter : public matrix::Printer {
 public:
  void Println(std::string_view line) override {
    begins_ += !line.empty() && line[0] == '>';
    benchmark::DoNotOptimize(begins_);
  }

 private:
  int64_t begins_ = 0;
};

// A main looper with a Choreographer on a manual vsync, watched as `mode`
// says. Torn down after each benchmark so other benchmarks start clean.
class Program {
 public:
  explicit Program(int64_t mode) {
    // Both configurations run as Matrix::Init leaves the process: without
    // Abseil's mutex deadlock detection (see Matrix::Builder).
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    // A looper that may quit (the main looper cannot), monitored as the main one.
    looper_ = matrix::Looper::Prepare();
    auto source = std::make_unique<matrix::testing::ManualVsyncSource>();
    vsync_ = source.get();
    choreographer_ = matrix::Choreographer::Install(std::move(source));
    handler_ = std::make_unique<matrix::Handler>(looper_);
    if (mode == kPrinterText) {
      looper_->SetMessageLogging(&printer_);
      return;
    }
    if (mode != kAllTracers && mode != kFrameTracer && mode != kAllSampled) return;
    const bool all = mode == kAllTracers || mode == kAllSampled;
    auto config = matrix::TraceConfig::Builder()
                      .EnableFps(true)
                      .EnableEvilMethodTrace(all)
                      .EnableAnrTrace(all)
                      .EnableStartup(all)
                      .EnableIdleHandlerTrace(all)
                      .EnableTouchEventTrace(all)
                      .EnableEvilMethodStacks(mode == kAllSampled)
                      .Build();
    auto trace = std::make_unique<matrix::TracePlugin>(*config);
    matrix::TracePlugin* plugin = trace.get();
    (void)matrix::Matrix::Init(matrix::Matrix::Builder()
                                   .AddPlugin(std::move(trace))
                                   .SetPluginListener(std::make_shared<NullListener>())
                                   .SetMainLooper(looper_)
                                   .Build());
    (void)plugin->Start();
  }
  ~Program() {
    looper_->SetMessageLogging(nullptr);
    matrix::Matrix::Shutdown();
    handler_.reset();
    matrix::Choreographer::ReleaseForTesting();
    matrix::Looper::ReleaseForTesting();
  }

  void Drain() {
    while (looper_->PollOnce(absl::ZeroDuration()) == matrix::Looper::PollResult::kDispatched) {
    }
  }
  void DispatchOne() {
    handler_->Post([] {});
    Drain();
  }
  void DrawOne() {
    choreographer_->PostFrameCallback([](matrix::TimeTicks) {});
    vsync_->Fire(matrix::MonotonicNow());
    Drain();
  }
  // One message per benchmark iteration, dispatched by Looper::Loop().
  void LoopMessages(benchmark::State& state) {
    state_ = &state;
    NextMessage();
    matrix::Looper::Loop();
  }
  void LoopFrames(benchmark::State& state) {
    state_ = &state;
    NextFrame();
    matrix::Looper::Loop();
  }

 private:
  void NextMessage() {
    if (state_->KeepRunning()) {
      handler_->Post([this] { NextMessage(); });
    } else {
      looper_->Quit();
    }
  }
  void NextFrame() {
    if (state_->KeepRunning()) {
      choreographer_->PostFrameCallback([this](matrix::TimeTicks) { NextFrame(); });
      vsync_->Fire(matrix::MonotonicNow());
    } else {
      looper_->Quit();
    }
  }
  benchmark::State* state_ = nullptr;
  matrix::Looper* looper_ = nullptr;
  matrix::testing::ManualVsyncSource* vsync_ = nullptr;
  matrix::Choreographer* choreographer_ = nullptr;
  std::unique_ptr<matrix::Handler> handler_;
  FirstCharPrinter printer_;
};

void BM_DispatchMessage(benchmark::State& state) {
  Program program(state.range(0));
  for (int i = 0; i < 10000; ++i) program.DispatchOne();  // Warm up.
  program.LoopMessages(state);
  state.SetLabel(ModeLabel(state.range(0)));
}
BENCHMARK(BM_DispatchMessage)
    ->ArgName("mode")
    ->Arg(kOff)
    ->Arg(kAllTracers)
    ->Arg(kFrameTracer)
    ->Arg(kPrinterText)
    ->Arg(kAllSampled)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

void BM_FrameDraw(benchmark::State& state) {
  Program program(state.range(0));
  for (int i = 0; i < 2000; ++i) program.DrawOne();
  program.LoopFrames(state);
  state.SetLabel(ModeLabel(state.range(0)));
}
BENCHMARK(BM_FrameDraw)
    ->ArgName("mode")
    ->Arg(kOff)
    ->Arg(kAllTracers)
    ->Arg(kFrameTracer)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace
