// Real-time tests for SoftwareVsyncSource: ticks only when requested, at the
// requested rate (60 Hz by default, also 90/120/144 Hz), on a drift-free grid,
// and a rate change while running takes effect. A receiver that requests the
// next vsync from each OnVsync() keeps it running, as a Choreographer with
// continuous animation does.
//
// The delivered rate must be within 10% of the requested one. CI runs on a
// loaded 2-core VM, where the vsync thread can be descheduled for a whole
// interval; each measurement is therefore tried up to three times.

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/handler.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/tick_clock.h"
#include "matrix/core/vsync_source.h"
#include "matrix/testing/sanitizers.h"

// Rate precision is asserted in the plain build. Under a sanitizer the
// threads run several times slower and the machine is shared with the rest of
// the suite, so the measured rate says nothing about the source.
#if MATRIX_TESTING_ADDRESS_SANITIZER || MATRIX_TESTING_THREAD_SANITIZER
#define MATRIX_SKIP_RATE_UNDER_SANITIZER() GTEST_SKIP() << "rate precision is checked without sanitizers"
#else
#define MATRIX_SKIP_RATE_UNDER_SANITIZER() static_cast<void>(0)
#endif

namespace matrix {
namespace {

class Ticker : public VsyncSource::Receiver {
 public:
  struct Tick {
    TimeTicks timestamp;
    RefreshRate rate;
    int64_t frame_number;
  };

  explicit Ticker(VsyncSource* source, bool keep_running = true)
      : source_(source), keep_running_(keep_running) {}

  void OnVsync(TimeTicks timestamp, RefreshRate rate, int64_t frame_number) override {
    {
      absl::MutexLock lock(&mu_);
      ticks_.push_back({timestamp, rate, frame_number});
    }
    count_.fetch_add(1);
    if (after_detach_.load()) called_after_detach_.store(true);
    if (keep_running_.load()) source_->RequestVsync();
  }

  int64_t count() const { return count_.load(); }
  void Stop() { keep_running_.store(false); }
  void MarkDetached() { after_detach_.store(true); }
  bool called_after_detach() const { return called_after_detach_.load(); }
  std::vector<Tick> ticks() const {
    absl::MutexLock lock(&mu_);
    return ticks_;
  }

 private:
  VsyncSource* const source_;
  std::atomic<bool> keep_running_;
  std::atomic<int64_t> count_{0};
  std::atomic<bool> after_detach_{false};
  std::atomic<bool> called_after_detach_{false};
  mutable absl::Mutex mu_;
  std::vector<Tick> ticks_ ABSL_GUARDED_BY(mu_);
};

// Deliveries per second over `window` of real time, while `ticker` keeps the
// source running.
double MeasureRate(const Ticker& ticker, absl::Duration window) {
  const int64_t before = ticker.count();
  const TimeTicks start = MonotonicNow();
  absl::SleepFor(window);
  const int64_t delivered = ticker.count() - before;
  const absl::Duration elapsed = MonotonicNow() - start;
  return static_cast<double>(delivered) / absl::ToDoubleSeconds(elapsed);
}

// Measures up to three times, returning the first rate within 10% of `hz` or
// the last one measured.
double MeasureRateWithRetries(const Ticker& ticker, absl::Duration window, double hz) {
  double rate = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    rate = MeasureRate(ticker, window);
    if (std::abs(rate - hz) <= 0.1 * hz) break;
  }
  return rate;
}

// Consecutive timestamps lie on the rate's grid: whole intervals apart (to
// within the grid's 1 ns rounding). Returns how many are exactly one apart.
int CheckOnGrid(const std::vector<Ticker::Tick>& ticks, RefreshRate rate) {
  int one_apart = 0;
  for (size_t i = 1; i < ticks.size(); ++i) {
    if (ticks[i].rate != rate || ticks[i - 1].rate != rate) continue;
    const absl::Duration gap = ticks[i].timestamp - ticks[i - 1].timestamp;
    const int64_t n = rate.IntervalsIn(gap + absl::Nanoseconds(1));
    EXPECT_GE(n, 1) << "tick " << i;
    EXPECT_LE(absl::AbsDuration(gap - rate.Intervals(n)), absl::Nanoseconds(1)) << "tick " << i;
    if (n == 1) ++one_apart;
  }
  return one_apart;
}

TEST(SoftwareVsyncSourceTest, Default_Is60HzAndDeliversSixtyPerSecondWhenKeptRunning) {
  MATRIX_SKIP_RATE_UNDER_SANITIZER();
  SoftwareVsyncSource source;
  EXPECT_EQ(source.refresh_rate(), RefreshRate::FromHz(60));
  Ticker ticker(&source);
  source.SetReceiver(&ticker);
  source.RequestVsync();

  const double rate = MeasureRateWithRetries(ticker, absl::Seconds(1), 60);
  ticker.Stop();
  source.SetReceiver(nullptr);

  EXPECT_NEAR(rate, 60.0, 6.0);
  const std::vector<Ticker::Tick> ticks = ticker.ticks();
  ASSERT_GE(ticks.size(), 2u);
  const int one_apart = CheckOnGrid(ticks, RefreshRate::FromHz(60));
  EXPECT_GE(one_apart, static_cast<int>(ticks.size() / 2));
  for (size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_EQ(ticks[i].frame_number, ticks[i - 1].frame_number + 1);
    EXPECT_EQ(ticks[i].rate, RefreshRate::FromHz(60));
  }
}

class SoftwareVsyncRateTest : public ::testing::TestWithParam<int> {};

TEST_P(SoftwareVsyncRateTest, RequestedRate_IsDeliveredWithinTenPercent) {
  MATRIX_SKIP_RATE_UNDER_SANITIZER();
  const int hz = GetParam();
  SoftwareVsyncSource source(RefreshRate::FromHz(hz));
  Ticker ticker(&source);
  source.SetReceiver(&ticker);
  source.RequestVsync();

  const double rate = MeasureRateWithRetries(ticker, absl::Milliseconds(500), hz);
  ticker.Stop();
  source.SetReceiver(nullptr);

  EXPECT_NEAR(rate, hz, 0.1 * hz);
  const std::vector<Ticker::Tick> ticks = ticker.ticks();
  EXPECT_GE(CheckOnGrid(ticks, RefreshRate::FromHz(hz)), static_cast<int>(ticks.size() / 2));
}

INSTANTIATE_TEST_SUITE_P(HighRates, SoftwareVsyncRateTest, ::testing::Values(90, 120, 144),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Hz");
                         });

TEST(SoftwareVsyncSourceTest, SetRefreshRate_WhileRunning_TakesEffect) {
  MATRIX_SKIP_RATE_UNDER_SANITIZER();
  SoftwareVsyncSource source(RefreshRate::FromHz(60));
  Ticker ticker(&source);
  source.SetReceiver(&ticker);
  source.RequestVsync();
  const double before = MeasureRateWithRetries(ticker, absl::Milliseconds(500), 60);

  source.SetRefreshRate(RefreshRate::FromHz(120));
  EXPECT_EQ(source.refresh_rate(), RefreshRate::FromHz(120));
  absl::SleepFor(absl::Milliseconds(50));  // Let the change reach the next ticks.
  const double after = MeasureRateWithRetries(ticker, absl::Milliseconds(500), 120);
  ticker.Stop();
  source.SetReceiver(nullptr);

  EXPECT_NEAR(before, 60.0, 6.0);
  EXPECT_NEAR(after, 120.0, 12.0);
  const std::vector<Ticker::Tick> ticks = ticker.ticks();
  ASSERT_FALSE(ticks.empty());
  EXPECT_EQ(ticks.front().rate, RefreshRate::FromHz(60));
  EXPECT_EQ(ticks.back().rate, RefreshRate::FromHz(120));
  // Timestamps never go backwards across the change.
  for (size_t i = 1; i < ticks.size(); ++i) {
    EXPECT_GT(ticks[i].timestamp, ticks[i - 1].timestamp) << "tick " << i;
  }
  CheckOnGrid(ticks, RefreshRate::FromHz(120));
}

TEST(SoftwareVsyncSourceTest, WithoutRequest_DeliversNothing) {
  SoftwareVsyncSource source;
  Ticker ticker(&source, /*keep_running=*/false);
  source.SetReceiver(&ticker);

  absl::SleepFor(absl::Milliseconds(100));  // Six intervals at 60 Hz.
  EXPECT_EQ(ticker.count(), 0);

  source.RequestVsync();
  source.RequestVsync();  // Coalesces with the first.
  // The tick comes within an interval, or later on a loaded machine.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (ticker.count() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  absl::SleepFor(absl::Milliseconds(100));  // Six more intervals: no second tick.
  source.SetReceiver(nullptr);

  EXPECT_EQ(ticker.count(), 1);
}

TEST(SoftwareVsyncSourceTest, Delivery_TimestampIsAGridTickNotInTheFuture) {
  SoftwareVsyncSource source;
  Ticker ticker(&source, /*keep_running=*/false);
  source.SetReceiver(&ticker);

  const TimeTicks requested = MonotonicNow();
  source.RequestVsync();
  for (int i = 0; i < 2000 && ticker.count() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  const TimeTicks seen = MonotonicNow();
  source.SetReceiver(nullptr);

  const std::vector<Ticker::Tick> ticks = ticker.ticks();
  ASSERT_EQ(ticks.size(), 1u);
  EXPECT_GT(ticks[0].timestamp, requested);
  EXPECT_LE(ticks[0].timestamp, seen);
}

TEST(SoftwareVsyncSourceTest, SetReceiver_Null_StopsDeliveriesOnceItReturns) {
  SoftwareVsyncSource source(RefreshRate::FromHz(144));
  Ticker ticker(&source);
  source.SetReceiver(&ticker);
  source.RequestVsync();
  for (int i = 0; i < 2000 && ticker.count() < 3; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(ticker.count(), 3);

  source.SetReceiver(nullptr);
  ticker.MarkDetached();
  source.RequestVsync();
  absl::SleepFor(absl::Milliseconds(100));

  EXPECT_FALSE(ticker.called_after_detach());
}

TEST(SoftwareVsyncSourceTest, Destructor_WhileRunning_StopsTheThreadPromptly) {
  const TimeTicks start = MonotonicNow();
  {
    SoftwareVsyncSource source(RefreshRate::FromHz(1));  // A tick a second.
    source.RequestVsync();
  }
  EXPECT_LT(MonotonicNow() - start, absl::Milliseconds(900));
}

// The whole path on real threads: vsyncs from the source's thread become
// asynchronous frame messages on a looper thread, where a self-reposting
// frame callback animates at the display rate.
TEST(ChoreographerRealTest, FrameCallback_OnALooperThreadWithSoftwareVsync_RunsAtTheRate) {
  MATRIX_SKIP_RATE_UNDER_SANITIZER();
  HandlerThread ui("matrix-test-ui");
  ui.Start();
  Handler handler(ui.GetLooper());
  constexpr int kFrames = 30;  // Half a second at 60 Hz.
  std::vector<TimeTicks> frame_times;  // Looper thread only until `done`.
  TimeTicks first_run;
  TimeTicks last_run;
  absl::Notification done;
  std::function<void(TimeTicks)> animate = [&](TimeTicks frame_time) {
    Choreographer* choreographer = Choreographer::GetInstance();
    frame_times.push_back(frame_time);
    if (frame_times.size() == 1) first_run = MonotonicNow();
    if (frame_times.size() < kFrames) {
      choreographer->PostFrameCallback(animate);
    } else {
      last_run = MonotonicNow();
      handler.Post([&] {
        Choreographer::ReleaseForTesting();  // Stops its vsync thread, after the frame.
        done.Notify();
      });
    }
  };
  handler.Post([&] {
    Choreographer* choreographer = Choreographer::GetInstance();  // 60 Hz software vsync.
    EXPECT_EQ(choreographer->refresh_rate(), RefreshRate::FromHz(60));
    choreographer->PostFrameCallback(animate);
  });

  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  ASSERT_EQ(frame_times.size(), static_cast<size_t>(kFrames));
  const RefreshRate rate = RefreshRate::FromHz(60);
  int one_apart = 0;
  for (size_t i = 1; i < frame_times.size(); ++i) {
    const absl::Duration gap = frame_times[i] - frame_times[i - 1];
    // The nearest whole number of intervals. Every tick is rounded down to a
    // nanosecond, and a frame that skipped late vsyncs counts its time from
    // its vsync's tick (rounded again): two frame times differ from whole
    // intervals by at most 2 ns, and never drift.
    const int64_t n = rate.IntervalsIn(gap + rate.Interval() / 2);
    EXPECT_GE(n, 1) << "frame " << i;  // Frame times only move forward, on the grid.
    EXPECT_LE(absl::AbsDuration(gap - rate.Intervals(n)), absl::Nanoseconds(2)) << "frame " << i;
    if (n == 1) ++one_apart;
  }
  // Each callback posts the next for the next vsync; a loaded machine makes
  // the looper thread miss some (any number: the next frame is then on a
  // later vsync of the grid), but one that always skipped one is a defect.
  EXPECT_GE(one_apart, 1);
  // 29 intervals take 483 ms at 60 Hz; allow a loaded machine to drop some.
  EXPECT_GE(last_run - first_run, absl::Milliseconds(450));
  EXPECT_LE(last_run - first_run, absl::Seconds(5));
}

}  // namespace
}  // namespace matrix
