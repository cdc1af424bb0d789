// Method tracing costs (docs/method-tracing.md).
//
// The machine is shared and noisy, so every cost is measured against a
// baseline in the same benchmark run: each iteration times a chunk of calls
// to PlainLeaf() (built without hooks) and a chunk of the same work with
// tracing, alternately, and reports per call:
//   plain_ns   the uninstrumented call,
//   traced_ns  the same call with the hooks / record writes,
//   delta_ns   traced_ns - plain_ns (what tracing adds per call, enter+exit),
//   ratio      traced_ns / plain_ns.
//
//   BM_TracedCall/looper_thread   InstrumentedLeaf() on the traced thread
//   BM_TracedCall/other_thread    InstrumentedLeaf() while another thread is traced
//   BM_TracedCall/no_tracer       InstrumentedLeaf() with no tracer at all
//   BM_TracedCall/empty_hooks_floor  the same call shape calling two empty
//                                 hooks: what any -finstrument-functions hook
//                                 costs before doing anything
//   BM_TracedCall/patched_*       PatchableLeaf() (patchable entries, patched
//                                 with wrapping stubs) on the traced thread, on
//                                 another thread, with no tracer
//   BM_TracedCall/return_sites_*  the same, patched with return sites
//   BM_TracedCall/auto_looper_thread  the same, patched with what Patch()'s
//                                 measurement chose (counter return_sites: 1
//                                 when it chose return sites)
//   BM_TracedCall/unpatched       PatchableLeaf() not patched (five nops and
//                                 -pg's call to an empty __fentry__)
// BM_TracedCall rows also time the floor in the same iteration (floor_ns,
// vs_floor): see RunAgainstFloor().
//   BM_RecordPerCall/<source>     what an enter+exit record pair costs if the
//                                 hook read <source> per event (written inline
//                                 into a local ring, like the real hook)
//   BM_TimeSource/<source>        one read of the time source

#include <time.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/patchable_entries.h"
#include "workload.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define MATRIX_BENCH_HAVE_RDTSC 1
#endif

namespace {

namespace wl = ::matrix_test_workload;

constexpr int kChunk = 32768;  // ~50-150 us: clock quantum negligible.

// The CPU's model name, from /proc/cpuinfo, in the benchmark's context
// ("cpu: ..." in its header, "cpu" in its JSON): a traced call's cost differs
// between CPUs (docs/performance.md gives the figures of each).
std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
  }
  return "unknown";
}
const bool kCpuInContext = [] {
  benchmark::AddCustomContext("cpu", CpuModel());
  return true;
}();

int64_t NowNs() { return matrix::MonotonicNow().ToNanoseconds(); }

// Times `plain` and `traced` chunks alternately; each runs kChunk calls.
// The per-call numbers come from the fastest chunk of each kind (the one
// least disturbed by other processes on a shared machine); the *_mean_ns
// counters use all chunks.
template <typename Plain, typename Traced>
void RunPaired(benchmark::State& state, Plain plain, Traced traced) {
  int64_t plain_ns = 0;
  int64_t traced_ns = 0;
  int64_t plain_min = INT64_MAX;
  int64_t traced_min = INT64_MAX;
  int64_t chunks = 0;
  for (auto _ : state) {
    const int64_t t0 = NowNs();
    plain();
    const int64_t t1 = NowNs();
    traced();
    const int64_t t2 = NowNs();
    plain_ns += t1 - t0;
    traced_ns += t2 - t1;
    plain_min = std::min(plain_min, t1 - t0);
    traced_min = std::min(traced_min, t2 - t1);
    ++chunks;
  }
  if (chunks == 0) return;
  const double p = static_cast<double>(plain_min) / kChunk;
  const double t = static_cast<double>(traced_min) / kChunk;
  state.counters["plain_ns"] = p;
  state.counters["traced_ns"] = t;
  state.counters["delta_ns"] = t - p;
  state.counters["ratio"] = p > 0 ? t / p : 0;
  const double calls = static_cast<double>(chunks) * kChunk;
  state.counters["delta_mean_ns"] = (traced_ns - plain_ns) / calls;
}

MATRIX_BENCH_ALIGNED void PlainChunk() {
  int sink = 0;
  for (int i = 0; i < kChunk; ++i) sink += wl::PlainLeaf(i);
  benchmark::DoNotOptimize(sink);
}

MATRIX_BENCH_ALIGNED void EmptyHooksChunk() {
  int sink = 0;
  for (int i = 0; i < kChunk; ++i) sink += wl::LeafWithEmptyHooks(i);
  benchmark::DoNotOptimize(sink);
}

MATRIX_BENCH_ALIGNED void InstrumentedChunk() {
  int sink = 0;
  for (int i = 0; i < kChunk; ++i) sink += wl::InstrumentedLeaf(i);
  benchmark::DoNotOptimize(sink);
}

// --- BM_TracedCall: every mechanism against the plain call and the floor ---
//
// Each iteration times a chunk of plain calls, a chunk of calls with two
// empty hooks (the floor of -finstrument-functions) and a chunk of the
// traced call, so every row carries its own baseline:
//   plain_ns, floor_ns, traced_ns  per call (fastest chunk of each),
//   delta_ns        traced_ns - plain_ns (what tracing adds, enter + exit),
//   floor_delta_ns  floor_ns - plain_ns,
//   ratio           traced_ns / plain_ns,
//   vs_floor        delta_ns / floor_delta_ns (< 1: cheaper than any hook).
template <typename Traced>
void RunAgainstFloor(benchmark::State& state, Traced traced) {
  int64_t plain_min = INT64_MAX;
  int64_t floor_min = INT64_MAX;
  int64_t traced_min = INT64_MAX;
  int64_t plain_sum = 0;
  int64_t traced_sum = 0;
  int64_t chunks = 0;
  for (auto _ : state) {
    const int64_t t0 = NowNs();
    PlainChunk();
    const int64_t t1 = NowNs();
    EmptyHooksChunk();
    const int64_t t2 = NowNs();
    traced();
    const int64_t t3 = NowNs();
    plain_min = std::min(plain_min, t1 - t0);
    floor_min = std::min(floor_min, t2 - t1);
    traced_min = std::min(traced_min, t3 - t2);
    plain_sum += t1 - t0;
    traced_sum += t3 - t2;
    ++chunks;
  }
  if (chunks == 0) return;
  const double p = static_cast<double>(plain_min) / kChunk;
  const double f = static_cast<double>(floor_min) / kChunk;
  const double t = static_cast<double>(traced_min) / kChunk;
  state.counters["plain_ns"] = p;
  state.counters["floor_ns"] = f;
  state.counters["traced_ns"] = t;
  state.counters["delta_ns"] = t - p;
  state.counters["floor_delta_ns"] = f - p;
  state.counters["ratio"] = p > 0 ? t / p : 0;
  state.counters["vs_floor"] = f > p ? (t - p) / (f - p) : 0;
  const double calls = static_cast<double>(chunks) * kChunk;
  state.counters["delta_mean_ns"] = (traced_sum - plain_sum) / calls;
}

MATRIX_BENCH_ALIGNED void PatchableChunk() {
  int sink = 0;
  for (int i = 0; i < kChunk; ++i) sink += wl::PatchableLeaf(i);
  benchmark::DoNotOptimize(sink);
}

// Runs `body` on this thread with a tracer (and an open dispatch) on it.
template <typename Body>
void OnLooper(benchmark::State& state, Body body) {
  auto tracer = matrix::MethodTracer::Start();  // Default: 8 MiB, 1 ms ticker.
  tracer->DispatchBegin(matrix::MonotonicNow());
  body();
  tracer->DispatchEnd(matrix::MonotonicNow());
  state.counters["records"] = static_cast<double>(tracer->Mark());
}

// Runs `body` on this thread while another thread is traced.
template <typename Body>
void WhileOtherThreadTraced(Body body) {
  absl::Notification started;
  absl::Notification done;
  std::thread looper([&] {
    auto tracer = matrix::MethodTracer::Start();
    started.Notify();
    done.WaitForNotification();
  });
  started.WaitForNotification();
  body();
  done.Notify();
  looper.join();
}

// Patches with `mechanism` for the duration of `body`.
template <typename Body>
void Patched(benchmark::State& state, matrix::PatchableEntries::Mechanism mechanism, Body body) {
  matrix::PatchableEntries::Options options;
  options.mechanism = mechanism;
  auto stats = matrix::PatchableEntries::Patch(options);
  if (!stats.ok() || stats->patched == 0 ||
      (mechanism != matrix::PatchableEntries::Mechanism::kAuto && stats->mechanism != mechanism)) {
    state.SkipWithError("patchable entries (with this mechanism) unavailable");
    return;
  }
  body();
  state.counters["return_sites"] =
      stats->mechanism == matrix::PatchableEntries::Mechanism::kReturnSites ? 1 : 0;
  (void)matrix::PatchableEntries::Unpatch();
}

constexpr auto kWrap = matrix::PatchableEntries::Mechanism::kWrap;
constexpr auto kReturnSites = matrix::PatchableEntries::Mechanism::kReturnSites;
constexpr auto kAuto = matrix::PatchableEntries::Mechanism::kAuto;

// -finstrument-functions (the fallback).
void BM_TracedCall_LooperThread(benchmark::State& state) {
  OnLooper(state, [&] { RunAgainstFloor(state, InstrumentedChunk); });
}
BENCHMARK(BM_TracedCall_LooperThread)->Name("BM_TracedCall/looper_thread");

void BM_TracedCall_OtherThread(benchmark::State& state) {
  WhileOtherThreadTraced([&] { RunAgainstFloor(state, InstrumentedChunk); });
}
BENCHMARK(BM_TracedCall_OtherThread)->Name("BM_TracedCall/other_thread");

void BM_TracedCall_NoTracer(benchmark::State& state) {
  RunAgainstFloor(state, InstrumentedChunk);
}
BENCHMARK(BM_TracedCall_NoTracer)->Name("BM_TracedCall/no_tracer");

// The floor itself: the same call shape with two empty out-of-line hooks.
void BM_TracedCall_EmptyHooksFloor(benchmark::State& state) {
  RunAgainstFloor(state, EmptyHooksChunk);
}
BENCHMARK(BM_TracedCall_EmptyHooksFloor)->Name("BM_TracedCall/empty_hooks_floor");

// Patchable entries (matrix_trace_methods(PATCHABLE)).
void BM_TracedCall_PatchedLooperThread(benchmark::State& state) {
  Patched(state, kWrap, [&] { OnLooper(state, [&] { RunAgainstFloor(state, PatchableChunk); }); });
}
BENCHMARK(BM_TracedCall_PatchedLooperThread)->Name("BM_TracedCall/patched_looper_thread");

void BM_TracedCall_PatchedOtherThread(benchmark::State& state) {
  Patched(state, kWrap,
          [&] { WhileOtherThreadTraced([&] { RunAgainstFloor(state, PatchableChunk); }); });
}
BENCHMARK(BM_TracedCall_PatchedOtherThread)->Name("BM_TracedCall/patched_other_thread");

void BM_TracedCall_PatchedNoTracer(benchmark::State& state) {
  Patched(state, kWrap, [&] { RunAgainstFloor(state, PatchableChunk); });
}
BENCHMARK(BM_TracedCall_PatchedNoTracer)->Name("BM_TracedCall/patched_no_tracer");

// Patched with return sites.
void BM_TracedCall_ReturnSitesLooperThread(benchmark::State& state) {
  Patched(state, kReturnSites,
          [&] { OnLooper(state, [&] { RunAgainstFloor(state, PatchableChunk); }); });
}
BENCHMARK(BM_TracedCall_ReturnSitesLooperThread)->Name("BM_TracedCall/return_sites_looper_thread");

void BM_TracedCall_ReturnSitesOtherThread(benchmark::State& state) {
  Patched(state, kReturnSites,
          [&] { WhileOtherThreadTraced([&] { RunAgainstFloor(state, PatchableChunk); }); });
}
BENCHMARK(BM_TracedCall_ReturnSitesOtherThread)->Name("BM_TracedCall/return_sites_other_thread");

void BM_TracedCall_ReturnSitesNoTracer(benchmark::State& state) {
  Patched(state, kReturnSites, [&] { RunAgainstFloor(state, PatchableChunk); });
}
BENCHMARK(BM_TracedCall_ReturnSitesNoTracer)->Name("BM_TracedCall/return_sites_no_tracer");

// Patched with what Patch() measured to be the cheaper.
void BM_TracedCall_AutoLooperThread(benchmark::State& state) {
  Patched(state, kAuto, [&] { OnLooper(state, [&] { RunAgainstFloor(state, PatchableChunk); }); });
}
BENCHMARK(BM_TracedCall_AutoLooperThread)->Name("BM_TracedCall/auto_looper_thread");

// Not patched: five nops and -pg's call at the entry, a nop before the return.
void BM_TracedCall_Unpatched(benchmark::State& state) { RunAgainstFloor(state, PatchableChunk); }
BENCHMARK(BM_TracedCall_Unpatched)->Name("BM_TracedCall/unpatched");

// --- Time sources ---------------------------------------------------------

int64_t ReadMonotonic() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1'000'000'000 + ts.tv_nsec;
}

int64_t ReadMonotonicCoarse() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return ts.tv_sec * 1'000'000'000 + ts.tv_nsec;
}

#if defined(MATRIX_BENCH_HAVE_RDTSC)
int64_t ReadRdtsc() { return static_cast<int64_t>(__rdtsc()); }
#endif

// A cached clock refreshed every 1 ms by a ticker thread, as MethodTracer does.
class CachedClock {
 public:
  CachedClock() : now_(ReadMonotonic()) {
    ticker_ = std::thread([this] {
      while (!done_.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
        now_.store(ReadMonotonic(), std::memory_order_relaxed);
      }
    });
  }
  ~CachedClock() {
    done_.Notify();
    ticker_.join();
  }
  int64_t Read() const { return now_.load(std::memory_order_relaxed); }

 private:
  alignas(64) std::atomic<int64_t> now_;
  absl::Notification done_;
  std::thread ticker_;
};

template <typename Source>
void BM_TimeSource(benchmark::State& state, Source source) {
  for (auto _ : state) benchmark::DoNotOptimize(source());
}
BENCHMARK_CAPTURE(BM_TimeSource, clock_gettime_monotonic, ReadMonotonic);
BENCHMARK_CAPTURE(BM_TimeSource, clock_gettime_monotonic_coarse, ReadMonotonicCoarse);
#if defined(MATRIX_BENCH_HAVE_RDTSC)
BENCHMARK_CAPTURE(BM_TimeSource, rdtsc, ReadRdtsc);
#endif
void BM_TimeSource_Cached(benchmark::State& state) {
  CachedClock clock;
  for (auto _ : state) benchmark::DoNotOptimize(clock.Read());
}
BENCHMARK(BM_TimeSource_Cached)->Name("BM_TimeSource/cached_1ms_ticker");

// --- Record writes with each time source ------------------------------------
//
// The real hook's write path, inlined around PlainLeaf(): pack a record with
// the time from `source`, store it into a power-of-two ring, publish the
// index. Compared with the bare PlainLeaf() loop in the same run.

class Ring {
 public:
  Ring() : slots_(new std::atomic<uint64_t>[kSize]()) {}
  inline void Write(uint64_t kind, uintptr_t fn, int64_t now_ns) {
    if (__builtin_expect(matrix::RecordEpoch(now_ns) != epoch_, 0)) {
      epoch_ = matrix::RecordEpoch(now_ns);
      Store(matrix::EncodeTimeRecord(matrix::record::kTimeSubkindTick, now_ns));
    }
    Store(matrix::EncodeFunctionRecord(kind, fn, now_ns));
  }

 private:
  static constexpr uint64_t kSize = uint64_t{1} << 20;
  inline void Store(uint64_t record) {
    slots_[next_ & (kSize - 1)].store(record, std::memory_order_release);
    ++next_;
    published_.store(next_, std::memory_order_release);
  }
  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
  uint64_t next_ = 0;
  uint64_t epoch_ = 0;
  std::atomic<uint64_t> published_{0};
};

template <typename Source>
void RecordPerCall(benchmark::State& state, Source source) {
  Ring ring;
  const uintptr_t fn = reinterpret_cast<uintptr_t>(&wl::PlainLeaf);
  auto traced = [&] {
    int sink = 0;
    for (int i = 0; i < kChunk; ++i) {
      ring.Write(matrix::record::kKindEnter, fn, source());
      sink += wl::PlainLeaf(i);
      ring.Write(matrix::record::kKindExit, fn, source());
    }
    benchmark::DoNotOptimize(sink);
  };
  RunPaired(state, PlainChunk, traced);
}

void BM_RecordPerCall_Monotonic(benchmark::State& state) { RecordPerCall(state, ReadMonotonic); }
BENCHMARK(BM_RecordPerCall_Monotonic)->Name("BM_RecordPerCall/clock_gettime_monotonic");
void BM_RecordPerCall_Coarse(benchmark::State& state) { RecordPerCall(state, ReadMonotonicCoarse); }
BENCHMARK(BM_RecordPerCall_Coarse)->Name("BM_RecordPerCall/clock_gettime_monotonic_coarse");
#if defined(MATRIX_BENCH_HAVE_RDTSC)
void BM_RecordPerCall_Rdtsc(benchmark::State& state) { RecordPerCall(state, ReadRdtsc); }
BENCHMARK(BM_RecordPerCall_Rdtsc)->Name("BM_RecordPerCall/rdtsc");
#endif
void BM_RecordPerCall_Cached(benchmark::State& state) {
  CachedClock clock;
  RecordPerCall(state, [&clock] { return clock.Read(); });
}
BENCHMARK(BM_RecordPerCall_Cached)->Name("BM_RecordPerCall/cached_1ms_ticker");

}  // namespace

// --- Analysis ---------------------------------------------------------------
//
// Building and trimming the call tree of a full default buffer (1 Mi
// records), on the analysing thread. Budget: an issue for a full buffer in
// 50 ms (docs/performance.md, "Budgets").

namespace {

// 1 Mi records shaped like a busy UI thread: dispatches of a few hundred
// calls, nesting up to 8 deep, over 4096 distinct functions.
std::vector<uint64_t> FullBufferRecords() {
  constexpr size_t kRecords = size_t{1} << 20;
  std::vector<uint64_t> records;
  records.reserve(kRecords + 64);
  int64_t now = int64_t{1} << 40;
  uint64_t epoch = matrix::RecordEpoch(now);
  records.push_back(matrix::EncodeTimeRecord(matrix::record::kTimeSubkindTick, now));
  uint32_t rng = 12345;
  auto next = [&rng] { return rng = rng * 1664525u + 1013904223u; };
  std::vector<uintptr_t> stack;
  auto emit = [&](uint64_t kind, uintptr_t fn) {
    now += 20'000 + (next() % 200'000);  // 20-220 us per event.
    if (matrix::RecordEpoch(now) != epoch) {
      epoch = matrix::RecordEpoch(now);
      records.push_back(matrix::EncodeTimeRecord(matrix::record::kTimeSubkindTick, now));
    }
    records.push_back(matrix::EncodeFunctionRecord(kind, fn, now));
  };
  while (records.size() < kRecords) {
    records.push_back(matrix::EncodeTimeRecord(matrix::record::kTimeSubkindDispatchBegin, now));
    epoch = matrix::RecordEpoch(now);
    for (int i = 0; i < 300 && records.size() < kRecords; ++i) {
      if (!stack.empty() && (stack.size() >= 8 || next() % 2 == 0)) {
        emit(matrix::record::kKindExit, stack.back());
        stack.pop_back();
      } else {
        const uintptr_t fn = 0x400000 + (next() % 4096) * 64;
        emit(matrix::record::kKindEnter, fn);
        stack.push_back(fn);
      }
    }
    while (!stack.empty()) {
      emit(matrix::record::kKindExit, stack.back());
      stack.pop_back();
    }
    records.push_back(matrix::EncodeTimeRecord(matrix::record::kTimeSubkindDispatchEnd, now));
  }
  return records;
}

void BM_CallTree_FullBuffer(benchmark::State& state) {
  const std::vector<uint64_t> records = FullBufferRecords();
  size_t nodes = 0;
  for (auto _ : state) {
    matrix::CallTree tree = matrix::CallTree::Build(records);
    nodes = tree.size();
    tree.Trim(matrix::CallTree::kDefaultTargetCount);
    benchmark::DoNotOptimize(tree.KeyIndex(absl::ZeroDuration()));
  }
  state.counters["records"] = static_cast<double>(records.size());
  state.counters["nodes_before_trim"] = static_cast<double>(nodes);
}
BENCHMARK(BM_CallTree_FullBuffer)->Unit(benchmark::kMillisecond);

// The report path: trim while building, so only 30 calls are materialized.
void BM_CallTree_FullBufferTrimWhileBuilding(benchmark::State& state) {
  const std::vector<uint64_t> records = FullBufferRecords();
  matrix::CallTree::Options options;
  options.trim_to = matrix::CallTree::kDefaultTargetCount;
  for (auto _ : state) {
    matrix::CallTree tree = matrix::CallTree::Build(records, options);
    benchmark::DoNotOptimize(tree.KeyIndex(absl::ZeroDuration()));
  }
}
BENCHMARK(BM_CallTree_FullBufferTrimWhileBuilding)->Unit(benchmark::kMillisecond);

}  // namespace
