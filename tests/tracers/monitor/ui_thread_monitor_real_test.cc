// Real-thread tests for UIThreadMonitor: the CPU sampler on a real watchdog
// HandlerThread, and SnapshotFrame() read from another thread.

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/looper_monitor.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace {

using ::matrix::DispatchData;
using ::matrix::HandlerThread;
using ::matrix::LooperMonitor;
using ::matrix::LooperObserver;
using ::matrix::ObserverRegistration;
using ::matrix::TickClock;
using ::matrix::UIThreadMonitor;

class EndRecorder : public LooperObserver {
 public:
  void DispatchEnd(const DispatchData& d) override { last = d; }
  DispatchData last;
};

// Burns this thread's CPU for `d` (real time).
void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

TEST(UIThreadMonitorRealTest, LongDispatch_IsCpuSampledByARealWatchdog) {
  HandlerThread watchdog("matrix-watchdog");
  watchdog.Start();
  LooperMonitor loop(TickClock::Default());
  UIThreadMonitor::Options options;
  options.sampler_looper = watchdog.GetLooper();
  options.cpu_sample_period = absl::Milliseconds(5);
  UIThreadMonitor monitor(&loop, nullptr, options);
  monitor.Start();
  EndRecorder recorder;
  ObserverRegistration r = monitor.AddObserver(&recorder);

  // Busy for 300 ms: the 5 ms sampler must catch it (generous margin).
  loop.DispatchBegin("busy");
  Spin(absl::Milliseconds(300));
  loop.DispatchEnd();

  ASSERT_TRUE(recorder.last.cpu_sampled);
  EXPECT_GT(recorder.last.cpu_wall, absl::ZeroDuration());
  EXPECT_LE(recorder.last.cpu_wall, absl::Milliseconds(300) + absl::Milliseconds(50));
  // A spinning thread uses CPU, but on a loaded machine maybe little of
  // the wall time: only bounds that hold under any load.
  EXPECT_GT(recorder.last.cpu_time, absl::ZeroDuration());
  EXPECT_GT(recorder.last.CpuUsagePercent(), 0.0);
  EXPECT_LE(recorder.last.CpuUsagePercent(), 105.0);
}

TEST(UIThreadMonitorRealTest, StartStopWhileTheSamplerPolls_IsSafe) {
  // A sampler polling as fast as it can on a real thread, while the looper
  // thread keeps starting and stopping the monitor: stopping must never
  // free the sampler under a poll in progress (run under ASan and TSan).
  HandlerThread watchdog("matrix-watchdog");
  watchdog.Start();
  LooperMonitor loop(TickClock::Default());
  UIThreadMonitor::Options options;
  options.sampler_looper = watchdog.GetLooper();
  options.cpu_sample_period = absl::Microseconds(1);
  UIThreadMonitor monitor(&loop, nullptr, options);
  EndRecorder recorder;
  ObserverRegistration r = monitor.AddObserver(&recorder);
  int sampled = 0;
  for (int i = 0; i < 300; ++i) {
    monitor.Start();
    loop.DispatchBegin("work");
    Spin(absl::Microseconds(200));
    loop.DispatchEnd();
    sampled += recorder.last.cpu_sampled ? 1 : 0;
    monitor.Stop();
  }
  EXPECT_GT(sampled, 0);
}

// A real clock whose thread-CPU read blocks, so a test can stop the monitor
// while the sampler is inside a poll.
class BlockingCpuClock : public TickClock {
 public:
  matrix::TimeTicks NowTicks() const override { return TickClock::Default()->NowTicks(); }
  absl::Duration ThreadCpuTime(const matrix::ThreadHandle&) const override {
    if (!in_read.HasBeenNotified()) {
      in_read.Notify();
      absl::SleepFor(absl::Milliseconds(100));
      read_returned.store(true);
    }
    return absl::Milliseconds(1);
  }
  mutable absl::Notification in_read;
  mutable std::atomic<bool> read_returned{false};
};

TEST(UIThreadMonitorRealTest, Stop_WaitsForASamplerPollInProgress) {
  BlockingCpuClock clock;
  HandlerThread watchdog("matrix-watchdog", &clock);
  watchdog.Start();
  LooperMonitor loop(&clock);
  UIThreadMonitor::Options options;
  options.sampler_looper = watchdog.GetLooper();
  options.cpu_sample_period = absl::Milliseconds(1);
  UIThreadMonitor monitor(&loop, nullptr, options);
  monitor.Start();
  loop.DispatchBegin("long");
  ASSERT_TRUE(clock.in_read.WaitForNotificationWithTimeout(absl::Seconds(10)));
  monitor.Stop();  // The sampler is mid-poll: Stop must not free it under the poll.
  EXPECT_TRUE(clock.read_returned.load());
  loop.DispatchEnd();
}

TEST(UIThreadMonitorRealTest, SnapshotFrame_ReadFromAnotherThreadMidFrame) {
  LooperMonitor loop(TickClock::Default());
  UIThreadMonitor monitor(&loop, nullptr, {});
  monitor.Start();
  const matrix::TimeTicks t0 = TickClock::Default()->NowTicks();
  loop.DispatchBegin(t0, "frame");
  monitor.MarkFrame(t0, matrix::RefreshRate::FromHz(60));
  monitor.MarkPhase(UIThreadMonitor::Phase::kInput, t0);
  monitor.MarkPhase(UIThreadMonitor::Phase::kAnimation, t0 + absl::Milliseconds(4));

  UIThreadMonitor::FrameSnapshot snapshot;
  std::thread reader([&] { snapshot = monitor.SnapshotFrame(t0 + absl::Milliseconds(10)); });
  reader.join();
  loop.DispatchEnd(t0 + absl::Milliseconds(12));

  EXPECT_TRUE(snapshot.in_frame);
  EXPECT_EQ(snapshot.phase_costs[0], absl::Milliseconds(4));
  EXPECT_EQ(snapshot.phase_costs[1], absl::Milliseconds(6));
  EXPECT_FALSE(monitor.SnapshotFrame(t0 + absl::Milliseconds(20)).in_frame);
}

}  // namespace
