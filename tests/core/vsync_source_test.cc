// Tests for ManualVsyncSource, the deterministic VsyncSource: it fires only
// when a vsync was requested, with exactly the timestamp the test gives.
// SoftwareVsyncSource's real-time behaviour is in vsync_source_real_test.cc.

#include "matrix/testing/manual_vsync_source.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"
#include "matrix/core/vsync_source.h"

namespace matrix::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Vsync {
  TimeTicks timestamp;
  RefreshRate rate;
  int64_t frame_number;
  friend bool operator==(const Vsync& a, const Vsync& b) {
    return a.timestamp == b.timestamp && a.rate == b.rate && a.frame_number == b.frame_number;
  }
};

class RecordingReceiver : public VsyncSource::Receiver {
 public:
  void OnVsync(TimeTicks timestamp, RefreshRate rate, int64_t frame_number) override {
    vsyncs.push_back({timestamp, rate, frame_number});
  }
  std::vector<Vsync> vsyncs;
};

const TimeTicks kT1 = TimeTicks::FromNanoseconds(1'000'000'000);
const TimeTicks kT2 = TimeTicks::FromNanoseconds(1'016'666'666);

TEST(ManualVsyncSourceTest, Fire_WithoutRequest_DeliversNothing) {
  ManualVsyncSource source;
  RecordingReceiver receiver;
  source.SetReceiver(&receiver);

  EXPECT_FALSE(source.vsync_requested());
  EXPECT_FALSE(source.Fire(kT1));

  EXPECT_THAT(receiver.vsyncs, IsEmpty());
  EXPECT_EQ(source.frames_fired(), 0);
}

TEST(ManualVsyncSourceTest, Fire_AfterRequest_DeliversTheGivenTimestampOnce) {
  ManualVsyncSource source;
  RecordingReceiver receiver;
  source.SetReceiver(&receiver);

  source.RequestVsync();
  EXPECT_TRUE(source.vsync_requested());
  EXPECT_TRUE(source.Fire(kT1));
  EXPECT_FALSE(source.vsync_requested());
  EXPECT_FALSE(source.Fire(kT2));  // One vsync per request.

  EXPECT_THAT(receiver.vsyncs, ElementsAre(Vsync{kT1, RefreshRate::FromHz(60), 1}));
}

TEST(ManualVsyncSourceTest, RequestVsync_RepeatedBeforeTheTick_Coalesces) {
  ManualVsyncSource source;
  RecordingReceiver receiver;
  source.SetReceiver(&receiver);

  source.RequestVsync();
  source.RequestVsync();
  source.RequestVsync();
  source.Fire(kT1);
  source.Fire(kT2);

  EXPECT_EQ(receiver.vsyncs.size(), 1u);
}

TEST(ManualVsyncSourceTest, Fire_Repeatedly_NumbersFramesAndReportsTheCurrentRate) {
  ManualVsyncSource source(RefreshRate::FromHz(90));
  RecordingReceiver receiver;
  source.SetReceiver(&receiver);
  EXPECT_EQ(source.refresh_rate(), RefreshRate::FromHz(90));

  source.RequestVsync();
  source.Fire(kT1);
  source.SetRefreshRate(RefreshRate::FromHz(144));
  source.RequestVsync();
  source.Fire(kT2);

  EXPECT_THAT(receiver.vsyncs, ElementsAre(Vsync{kT1, RefreshRate::FromHz(90), 1},
                                           Vsync{kT2, RefreshRate::FromHz(144), 2}));
  EXPECT_EQ(source.frames_fired(), 2);
}

TEST(ManualVsyncSourceTest, SetReceiver_Null_DetachesAndKeepsTheRequest) {
  ManualVsyncSource source;
  RecordingReceiver receiver;
  source.SetReceiver(&receiver);
  source.RequestVsync();

  source.SetReceiver(nullptr);
  EXPECT_FALSE(source.Fire(kT1));
  EXPECT_TRUE(source.vsync_requested());

  RecordingReceiver second;
  source.SetReceiver(&second);
  EXPECT_TRUE(source.Fire(kT2));
  EXPECT_THAT(receiver.vsyncs, IsEmpty());
  ASSERT_EQ(second.vsyncs.size(), 1u);
  EXPECT_EQ(second.vsyncs[0].timestamp, kT2);
}

TEST(ManualVsyncSourceTest, RequestVsync_FromInsideOnVsync_ArmsTheNextFire) {
  ManualVsyncSource source;
  class Rearming : public VsyncSource::Receiver {
   public:
    explicit Rearming(ManualVsyncSource* source) : source_(source) {}
    void OnVsync(TimeTicks, RefreshRate, int64_t) override {
      ++count;
      source_->RequestVsync();
    }
    int count = 0;

   private:
    ManualVsyncSource* source_;
  } receiver(&source);
  source.SetReceiver(&receiver);
  source.RequestVsync();

  EXPECT_TRUE(source.Fire(kT1));
  EXPECT_TRUE(source.Fire(kT2));

  EXPECT_EQ(receiver.count, 2);
  EXPECT_TRUE(source.vsync_requested());
}

}  // namespace
}  // namespace matrix::testing
