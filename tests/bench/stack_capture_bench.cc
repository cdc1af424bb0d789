// Cost of stack capture, symbolization and /proc reads (docs/stacks.md).
//
//   BM_CaptureOtherThread/<frames>/<spinning>  signal + unwind + wake, target
//       `frames` deep, either spinning (on CPU) or sleeping in a futex wait
//   BM_CaptureCurrentThread/<depth>            unwind of the calling thread (the
//       share the target thread pays inside the signal handler)
//   BM_SymbolizeStack_Warm / _Cold /<lines>    names for a ~35-frame stack,
//       cached vs a fresh Symbolizer (loads every module's symbol table, and
//       with lines=1 opens its DWARF with libdw); lines=0 is the ELF
//       symbol-table reader alone (the baseline, as before libdw)
//   BM_SymbolizeStack_Uncached/<lines>         modules loaded, per-pc cache
//       empty: one lookup per frame (symbol table, and line table + scopes)
//   BM_Read*                                   one /proc file read + parse

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "benchmark/benchmark.h"
#include "matrix/core/thread_handle.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/stopped_time.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

__attribute__((noinline)) void SpinOrWait(bool spin, std::atomic<bool>* stop, std::mutex* mu,
                                          std::condition_variable* cv) {
  if (spin) {
    while (!stop->load(std::memory_order_relaxed)) asm volatile("" ::: "memory");
    return;
  }
  std::unique_lock<std::mutex> lock(*mu);
  cv->wait(lock, [stop] { return stop->load(); });
}

__attribute__((noinline)) int Recurse(int depth, bool spin, std::atomic<bool>* stop,
                                      std::mutex* mu, std::condition_variable* cv) {
  if (depth <= 0) {
    SpinOrWait(spin, stop, mu, cv);
    return 0;
  }
  int result = Recurse(depth - 1, spin, stop, mu, cv);
  asm volatile("" ::: "memory");
  return result + 1;
}

// A thread sitting `depth` frames deep, spinning or waiting.
class Target {
 public:
  Target(int depth, bool spin)
      : thread_([this, depth, spin] {
          handle_ = ThreadHandle::Current();
          ready_.store(true);
          Recurse(depth, spin, &stop_, &mu_, &cv_);
        }) {
    while (!ready_.load()) std::this_thread::yield();
  }
  ~Target() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    cv_.notify_all();
    thread_.join();
  }
  const ThreadHandle& handle() const { return handle_; }

 private:
  std::atomic<bool> ready_{false};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  ThreadHandle handle_;
  std::thread thread_;
};

void BM_CaptureOtherThread(benchmark::State& state) {
  Target target(static_cast<int>(state.range(0)), state.range(1) != 0);
  StackCapturer* capturer = StackCapturer::Get();
  RawStack raw;
  (void)capturer->Capture(target.handle(), &raw, absl::Seconds(5));  // Install + warm up.
  int64_t frames = 0;
  for (auto _ : state) {
    absl::Status status = capturer->Capture(target.handle(), &raw, absl::Seconds(5));
    if (!status.ok()) {
      state.SkipWithError("capture failed");
      break;
    }
    frames += raw.depth;
  }
  state.counters["frames"] =
      benchmark::Counter(static_cast<double>(frames), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_CaptureOtherThread)
    ->ArgNames({"depth", "spinning"})
    ->Args({0, 1})
    ->Args({30, 1})
    ->Args({30, 0})
    ->Args({120, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

__attribute__((noinline)) int UnwindAtDepth(int depth, RawStack* raw) {
  if (depth <= 0) {
    StackCapturer::CaptureCurrentThread(raw);
    return raw->depth;
  }
  int result = UnwindAtDepth(depth - 1, raw);
  asm volatile("" ::: "memory");
  return result;
}

// The unwind alone, on the calling thread: about what the target thread
// (the looper) spends inside the capture signal handler.
void BM_CaptureCurrentThread(benchmark::State& state) {
  RawStack raw;
  for (auto _ : state) benchmark::DoNotOptimize(UnwindAtDepth(static_cast<int>(state.range(0)), &raw));
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_CaptureCurrentThread)->ArgName("depth")->Arg(0)->Arg(30)->Arg(120)->Unit(
    benchmark::kMicrosecond);

RawStack CaptureDeepStack() {
  Target target(30, false);
  RawStack raw;
  (void)StackCapturer::Get()->Capture(target.handle(), &raw, absl::Seconds(5));
  return raw;
}

SymbolizerOptions LinesOption(const benchmark::State& state) {
  SymbolizerOptions options;
  options.source_lines = state.range(0) != 0;
  return options;
}

void BM_SymbolizeStack_Warm(benchmark::State& state) {
  RawStack raw = CaptureDeepStack();
  Symbolizer symbolizer(LinesOption(state));
  (void)SymbolizeStack(raw, &symbolizer);
  for (auto _ : state) benchmark::DoNotOptimize(SymbolizeStack(raw, &symbolizer));
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_SymbolizeStack_Warm)->ArgName("lines")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_SymbolizeStack_Uncached(benchmark::State& state) {
  RawStack raw = CaptureDeepStack();
  Symbolizer symbolizer(LinesOption(state));
  (void)SymbolizeStack(raw, &symbolizer);  // Loads the modules.
  for (auto _ : state) {
    symbolizer.ClearCache();
    benchmark::DoNotOptimize(SymbolizeStack(raw, &symbolizer));
  }
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_SymbolizeStack_Uncached)
    ->ArgName("lines")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

void BM_SymbolizeStack_Cold(benchmark::State& state) {
  RawStack raw = CaptureDeepStack();
  for (auto _ : state) {
    Symbolizer symbolizer(LinesOption(state));  // Empty caches: maps modules, loads tables.
    benchmark::DoNotOptimize(SymbolizeStack(raw, &symbolizer));
  }
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_SymbolizeStack_Cold)
    ->ArgName("lines")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// The first report of a process run with --symbolize=off (raw frames: the
// module scan with its build ids, no symbol table or DWARF read), against
// BM_SymbolizeStack_Cold, what in-process naming costs then.
void BM_SymbolizeStack_ColdRaw(benchmark::State& state) {
  RawStack raw = CaptureDeepStack();
  for (auto _ : state) {
    Symbolizer symbolizer;
    symbolizer.SetRawFrames(true);
    benchmark::DoNotOptimize(SymbolizeStack(raw, &symbolizer));
  }
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_SymbolizeStack_ColdRaw)->Unit(benchmark::kMillisecond)->Iterations(5);

// The first report's symbolization when the program's modules were loaded
// at start (Symbolizer::PreloadModules on the worker, untimed), against
// _Cold (nothing loaded) and _Uncached (everything loaded before).
void BM_SymbolizeStack_FirstAfterPreload(benchmark::State& state) {
  RawStack raw = CaptureDeepStack();
  for (auto _ : state) {
    state.PauseTiming();
    auto symbolizer = std::make_unique<Symbolizer>(LinesOption(state));
    symbolizer->PreloadModules();
    state.ResumeTiming();
    benchmark::DoNotOptimize(SymbolizeStack(raw, symbolizer.get()));
    state.PauseTiming();
    symbolizer.reset();
    state.ResumeTiming();
  }
  state.counters["frames"] = raw.depth;
}
BENCHMARK(BM_SymbolizeStack_FirstAfterPreload)
    ->ArgName("lines")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

// What PreloadModules() itself costs (on the worker, at start).
void BM_Symbolizer_PreloadModules(benchmark::State& state) {
  for (auto _ : state) {
    Symbolizer symbolizer(LinesOption(state));
    benchmark::DoNotOptimize(symbolizer.PreloadModules());
  }
}
BENCHMARK(BM_Symbolizer_PreloadModules)
    ->ArgName("lines")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);

void BM_ReadProcessStat(benchmark::State& state) {
  ProcReader proc;
  for (auto _ : state) benchmark::DoNotOptimize(proc.ReadProcessStat());
}
BENCHMARK(BM_ReadProcessStat)->Unit(benchmark::kMicrosecond);

void BM_ReadSystemCpuTimes(benchmark::State& state) {
  ProcReader proc;
  for (auto _ : state) benchmark::DoNotOptimize(proc.ReadSystemCpuTimes());
}
BENCHMARK(BM_ReadSystemCpuTimes)->Unit(benchmark::kMicrosecond);

void BM_ReadProcessMemory(benchmark::State& state) {
  ProcReader proc;
  for (auto _ : state) benchmark::DoNotOptimize(proc.ReadProcessMemory());
}
BENCHMARK(BM_ReadProcessMemory)->Unit(benchmark::kMicrosecond);

// What the watchdog reads at each wake-up to tell a stop from a wait to run.
void BM_ReadWaitToRun(benchmark::State& state) {
  StoppedTime::WaitToRunReader reader = SystemWaitToRunReader(ThreadHandle::Current().tid());
  for (auto _ : state) benchmark::DoNotOptimize(reader());
}
BENCHMARK(BM_ReadWaitToRun)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace matrix
