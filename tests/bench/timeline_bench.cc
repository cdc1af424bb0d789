// The flight recorder's cost on the looper thread (docs/performance.md,
// "Timeline"): recording one dispatch (begin + end: the heartbeat's record,
// which the timeline reads) and one frame, against a baseline measured in the
// same run: the same calls on an observer that does nothing (the price of the
// virtual calls alone). And a snapshot of a full 4096-dispatch ring with the
// 5 s window, which runs on the watchdog or worker.

#include <benchmark/benchmark.h>

#include "absl/time/time.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

using matrix::DispatchData;
using matrix::DispatchInfo;
using matrix::FrameData;
using matrix::LooperObserver;
using matrix::TimeTicks;

class NoopObserver : public LooperObserver {
 public:
  void DispatchBegin(const DispatchData& d) override { benchmark::DoNotOptimize(&d); }
  void DoFrame(const FrameData& f) override { benchmark::DoNotOptimize(&f); }
  void DispatchEnd(const DispatchData& d) override { benchmark::DoNotOptimize(&d); }
};

// Through a pointer the compiler cannot see through, as the monitor calls it.
void RunDispatches(benchmark::State& state, LooperObserver* observer) {
  benchmark::DoNotOptimize(observer);
  DispatchInfo info;
  info.label = "bench";
  DispatchData d;
  d.info = &info;
  int64_t t = 1'000'000'000;
  for (auto _ : state) {
    d.begin = TimeTicks::FromNanoseconds(t);
    observer->DispatchBegin(d);
    d.end = TimeTicks::FromNanoseconds(t + 500);
    observer->DispatchEnd(d);
    t += 1000;
  }
}

void RunFrames(benchmark::State& state, LooperObserver* observer) {
  benchmark::DoNotOptimize(observer);
  FrameData f;
  f.is_vsync_frame = true;
  f.SetPhaseCosts(absl::Microseconds(100), absl::Microseconds(900), absl::Milliseconds(5));
  int64_t t = 1'000'000'000;
  for (auto _ : state) {
    f.intended_frame_time = TimeTicks::FromNanoseconds(t);
    f.start = TimeTicks::FromNanoseconds(t + 1000);
    f.end = TimeTicks::FromNanoseconds(t + 7'000'000);
    ++f.frame_number;
    observer->DoFrame(f);
    t += 16'666'667;
  }
}

void BM_TimelineBaseline_NoopObserverDispatch(benchmark::State& state) {
  NoopObserver noop;
  RunDispatches(state, &noop);
}
BENCHMARK(BM_TimelineBaseline_NoopObserverDispatch);

// The heartbeat's record is the timeline's dispatch: written once.
void BM_Timeline_RecordDispatch(benchmark::State& state) {
  matrix::DispatchHeartbeat heartbeat(4096);
  matrix::DispatchHeartbeat* hb = &heartbeat;
  benchmark::DoNotOptimize(hb);
  DispatchInfo info;
  info.label = "bench";
  int64_t t = 1'000'000'000;
  for (auto _ : state) {
    hb->Begin(TimeTicks::FromNanoseconds(t), info);
    hb->End(TimeTicks::FromNanoseconds(t + 500));
    t += 1000;
  }
}
BENCHMARK(BM_Timeline_RecordDispatch);

void BM_TimelineBaseline_NoopObserverFrame(benchmark::State& state) {
  NoopObserver noop;
  RunFrames(state, &noop);
}
BENCHMARK(BM_TimelineBaseline_NoopObserverFrame);

void BM_Timeline_RecordFrame(benchmark::State& state) {
  matrix::Timeline timeline;
  RunFrames(state, &timeline);
}
BENCHMARK(BM_Timeline_RecordFrame);

// A full default ring (4096 events, 1 ms apart: all inside the 5 s window).
void BM_Timeline_SnapshotFullRing(benchmark::State& state) {
  matrix::DispatchHeartbeat heartbeat(4096);
  matrix::Timeline timeline({.capacity = 4096, .dispatches = &heartbeat});
  DispatchInfo info;
  info.label = "bench";
  TimeTicks end;
  for (int i = 0; i < 4096; ++i) {
    const TimeTicks begin =
        TimeTicks::FromNanoseconds(int64_t{1'000'000'000} + i * int64_t{1'000'000});
    heartbeat.Begin(begin, info);
    end = begin + absl::Microseconds(500);
    heartbeat.End(end);
  }
  const TimeTicks now = end;
  for (auto _ : state) {
    matrix::TimelineSnapshot s = timeline.Snapshot(now, absl::Seconds(5));
    benchmark::DoNotOptimize(s.events.data());
  }
}
BENCHMARK(BM_Timeline_SnapshotFullRing)->Unit(benchmark::kMicrosecond);

}  // namespace
