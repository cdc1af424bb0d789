// MethodTracer with real threads and real time: copies racing a writer that
// keeps wrapping the buffer, and the ticker's busy/idle behaviour. Sleeps,
// hence "real" in the file name; margins are generous.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"

extern "C" void __cyg_profile_func_enter(void* this_fn, void* call_site);

namespace matrix {
namespace {

// A one-shot event on std::mutex, which ThreadSanitizer sees through (the
// system Abseil is not built with TSan, so absl::Notification is opaque).
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

TEST(MethodTracerRealTest, Copy_WhileWriterWraps_NeverReturnsOverwrittenRecords) {
  std::atomic<MethodTracer*> tracer_ptr{nullptr};
  std::atomic<bool> stop{false};
  Event started;
  std::thread writer([&] {
    MethodTracer::Options options;
    options.buffer_bytes = 256 * 8;
    options.tick_period = absl::ZeroDuration();  // No time records: addresses only.
    auto tracer = MethodTracer::Start(options);
    tracer_ptr.store(tracer.get());
    started.Notify();
    // Record i carries address i * 16, so every copied record can be checked
    // against its absolute index.
    for (uintptr_t i = 1; !stop.load(std::memory_order_acquire); ++i) {
      __cyg_profile_func_enter(reinterpret_cast<void*>(i * 16), nullptr);
    }
  });
  started.Wait();
  MethodTracer* tracer = tracer_ptr.load();
  ASSERT_EQ(tracer->capacity(), 256u);

  int truncated = 0;
  int intact = 0;
  int64_t checked = 0;
  RecordCopy copy;
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  for (int round = 0; absl::Now() < deadline || truncated == 0 || intact == 0; ++round) {
    const uint64_t end = tracer->Mark();
    // Alternate: ranges already partly overwritten, ranges at the edge of
    // the buffer (overwritten during the copy), and short recent ranges.
    const uint64_t span = (round % 3 == 0) ? 1000 : (round % 3 == 1) ? 255 : 16;
    const uint64_t from = end > span ? end - span : 1;
    tracer->CopyInto(from, end, &copy);
    bool ok =
        copy.records.size() <= tracer->capacity() - 1 && copy.end_index() == std::max(from, end);
    for (size_t k = 0; ok && k < copy.records.size(); ++k) {
      ok = GetRecordKind(copy.records[k]) == RecordKind::kEnter &&
           GetRecordAddress(copy.records[k]) == (copy.first_index + k) * 16;
    }
    if (!ok) {
      ADD_FAILURE() << "garbage in round " << round << ": first_index " << copy.first_index
                    << " size " << copy.records.size() << " requested [" << from << ", " << end
                    << ")";
      break;
    }
    checked += copy.records.size();
    (copy.truncated() ? truncated : intact)++;
    if (round > 10'000'000) break;  // Never spin forever.
  }
  stop.store(true, std::memory_order_release);  // The writer destroys the tracer.
  writer.join();
  EXPECT_GT(truncated, 0);
  EXPECT_GT(intact, 0);
  EXPECT_GT(checked, 1000);
}

TEST(MethodTracerRealTest, Ticker_FineWhileBusyOrInDispatch_SlowWhenIdle) {
  int64_t busy_wakeups = 0;
  absl::Duration busy_lag;
  std::atomic<MethodTracer*> tracer_ptr{nullptr};
  Event idle_started;
  Event dispatch_started;
  Event sampled;
  std::thread traced([&] {
    MethodTracer::Options options;
    options.tick_period = absl::Milliseconds(1);
    options.idle_after = absl::Milliseconds(30);
    options.idle_tick_period = absl::Milliseconds(100);
    auto tracer = MethodTracer::Start(options);
    tracer_ptr.store(tracer.get());

    // Busy in uninstrumented code (no records): the CPU time keeps the
    // ticker at its fine period.
    const int64_t w0 = tracer->ticker_wakeups();
    const TimeTicks busy_end = MonotonicNow() + absl::Milliseconds(200);
    while (MonotonicNow() < busy_end) {
    }
    busy_wakeups = tracer->ticker_wakeups() - w0;
    busy_lag = MonotonicNow() - tracer->CachedTime();

    // Idle: blocked, no CPU, no dispatch.
    idle_started.Notify();
    absl::SleepFor(absl::Milliseconds(800));

    // Inside a dispatch, even blocked: fine again.
    tracer->DispatchBegin(MonotonicNow());
    dispatch_started.Notify();
    absl::SleepFor(absl::Milliseconds(600));
    tracer->DispatchEnd(MonotonicNow());
    sampled.Wait();  // Destroy only after the other thread's last read.
  });
  // This thread samples the ticker while the traced thread sleeps.
  idle_started.Wait();
  MethodTracer* tracer = tracer_ptr.load();
  absl::SleepFor(absl::Milliseconds(200));  // idle_after plus slack.
  int64_t w0 = tracer->ticker_wakeups();
  absl::SleepFor(absl::Milliseconds(500));
  const int64_t idle_wakeups = tracer->ticker_wakeups() - w0;
  dispatch_started.Wait();
  absl::SleepFor(absl::Milliseconds(150));  // At most one slow poll.
  w0 = tracer->ticker_wakeups();
  absl::SleepFor(absl::Milliseconds(300));
  const int64_t dispatch_wakeups = tracer->ticker_wakeups() - w0;
  sampled.Notify();
  traced.join();

  // 200 ms at 1 ms would be ~200 wakeups; 500 ms at 100 ms ~5.
  EXPECT_GT(busy_wakeups, 60);
  EXPECT_LT(busy_lag, absl::Milliseconds(30));
  EXPECT_LT(idle_wakeups, 15);
  EXPECT_GT(dispatch_wakeups, 90);
}

}  // namespace
}  // namespace matrix
