// Timeline with a real writer thread: snapshots taken on another thread while
// the ring is written (and wraps) as fast as possible only ever contain whole
// events, each exactly as written. Run it under TSan too.

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "matrix/trace/timeline.h"

namespace {

using ::matrix::DispatchHeartbeat;
using ::matrix::DispatchInfo;
using ::matrix::FrameData;
using ::matrix::TimeTicks;
using ::matrix::Timeline;
using ::matrix::TimelineEvent;
using ::matrix::TimelineSnapshot;

constexpr const char* kLabels[] = {"a", "b", "c", "d", "e"};

// Event i of the writer: dispatch number k begins at k * 100 us and lasts
// k % 50 us; every third dispatch draws a frame numbered like it.
TimeTicks Begin(uint64_t k) { return TimeTicks() + absl::Microseconds(100 * (k + 1)); }

TEST(TimelineRealTest, SnapshotsWhileWriting_HoldOnlyWholeConsistentEvents) {
  DispatchHeartbeat heartbeat(16);
  Timeline timeline({.capacity = 32, .dispatches = &heartbeat});
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    for (uint64_t k = 0; !stop.load(std::memory_order_relaxed); ++k) {
      DispatchInfo info;
      info.label = kLabels[k % 5];
      const TimeTicks begin = Begin(k);
      heartbeat.Begin(begin, info);
      if (k % 3 == 0) {
        FrameData f;
        f.start = begin;
        f.end = begin + absl::Microseconds(k % 50);
        f.intended_frame_time = begin;
        f.frame_number = static_cast<int64_t>(k);
        f.SetPhaseCosts(absl::Microseconds(k % 7));
        f.dropped_frames = static_cast<int64_t>(k % 11) + 1;
        timeline.DoFrame(f);
      }
      heartbeat.End(begin + absl::Microseconds(k % 50));
      written.store(k + 1, std::memory_order_relaxed);
    }
  });

  int snapshots = 0;
  uint64_t events_checked = 0;
  uint64_t lost = 0;  // Slots found being rewritten: the threads did overlap.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (absl::Now() < deadline || snapshots < 100) {
    const TimelineSnapshot s =
        timeline.Snapshot(TimeTicks() + absl::Hours(1000), absl::Hours(1000));
    ++snapshots;
    lost += s.lost;
    for (size_t i = 0; i < s.events.size(); ++i) {
      const TimelineEvent& e = s.events[i];
      const uint64_t k = (e.begin - TimeTicks()) / absl::Microseconds(100) - 1;
      ASSERT_EQ(e.begin, Begin(k));
      if (i > 0) {
        // Oldest first; a frame right after the dispatch that drew it.
        const TimelineEvent& prev = s.events[i - 1];
        ASSERT_LE(prev.begin, e.begin);
        if (e.kind == TimelineEvent::Kind::kFrame && prev.begin == e.begin) {
          ASSERT_EQ(prev.kind, TimelineEvent::Kind::kDispatch);
        }
      }
      // The slot's words belong to the event its number names: dispatch k
      // is the heartbeat's number k + 1, and its frame the frame ring's k / 3.
      ASSERT_EQ(e.number, e.kind == TimelineEvent::Kind::kDispatch ? k + 1 : k / 3)
          << "a slot rewritten while it was copied";
      if (e.kind == TimelineEvent::Kind::kDispatch) {
        ASSERT_STREQ(e.label, kLabels[k % 5]) << "dispatch " << k;
        if (e.finished()) {
          ASSERT_EQ(e.end - e.begin, absl::Microseconds(k % 50)) << k;
        }
      } else {
        ASSERT_EQ(e.kind, TimelineEvent::Kind::kFrame);
        ASSERT_EQ(k % 3, 0u);
        ASSERT_EQ(e.frame_number, static_cast<int64_t>(k));
        ASSERT_EQ(e.end - e.begin, absl::Microseconds(k % 50));
        ASSERT_EQ(e.phases[0], absl::Microseconds(k % 7));
        ASSERT_EQ(e.dropped_frames, static_cast<int64_t>(k % 11) + 1);
      }
      ++events_checked;
    }
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(written.load(), 1000u);
  EXPECT_GT(events_checked, 1000u);
  std::printf("%d snapshots, %llu events checked, %llu slots skipped as rewritten\n", snapshots,
              static_cast<unsigned long long>(events_checked),
              static_cast<unsigned long long>(lost));
}

}  // namespace
