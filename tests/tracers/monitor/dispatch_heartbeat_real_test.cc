// Real-thread test for DispatchHeartbeat: a reader on another thread never
// sees a torn snapshot while the writer publishes as fast as it can.

#include <atomic>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/looper_monitor.h"

namespace {

using ::matrix::DispatchHeartbeat;
using ::matrix::DispatchInfo;
using ::matrix::TimeTicks;

const char* const kLabels[2] = {"even", "odd"};

TEST(DispatchHeartbeatRealTest, ConcurrentReads_AreNeverTorn) {
  DispatchHeartbeat heartbeat;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::string line;
    for (uint64_t n = 1; !stop.load(std::memory_order_relaxed); ++n) {
      // Dispatch n begins at n us, labelled by parity, with an n-long line.
      DispatchInfo info;
      info.label = kLabels[n % 2];
      line.assign(n % 100, static_cast<char>('a' + n % 26));
      info.log_line = line;
      heartbeat.Begin(TimeTicks::FromNanoseconds(static_cast<int64_t>(n) * 1000), info);
      heartbeat.End(TimeTicks::FromNanoseconds(static_cast<int64_t>(n) * 1000 + 1));
    }
  });

  uint64_t reads = 0;
  uint64_t last_number = 0;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  while (absl::Now() < deadline || reads < 1000) {
    const DispatchHeartbeat::Snapshot s = heartbeat.Read();
    ++reads;
    if (s.dispatch_number == 0) continue;
    const uint64_t n = s.dispatch_number;
    ASSERT_GE(n, last_number);  // Never goes back.
    last_number = n;
    ASSERT_EQ(s.begin.ToNanoseconds(), static_cast<int64_t>(n) * 1000);
    ASSERT_STREQ(s.label, kLabels[n % 2]);
    ASSERT_EQ(s.log_line, std::string(n % 100, static_cast<char>('a' + n % 26)));
    if (!s.active) {
      // Ended: its own end, or (just begun again) never a later one.
      ASSERT_EQ(s.last_end.ToNanoseconds(), static_cast<int64_t>(n) * 1000 + 1);
    } else if (n > 1) {
      ASSERT_EQ(s.last_end.ToNanoseconds(), static_cast<int64_t>(n - 1) * 1000 + 1);
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(last_number, 0u);
}

}  // namespace
