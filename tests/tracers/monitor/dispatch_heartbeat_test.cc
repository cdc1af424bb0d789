// Tests for DispatchHeartbeat: what the looper thread publishes about the
// dispatch in progress, fed by a LooperMonitor of each source.

#include "matrix/trace/dispatch_heartbeat.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/looper_monitor.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::DispatchHeartbeat;
using ::matrix::DispatchInfo;
using ::matrix::Handler;
using ::matrix::LooperMonitor;
using ::matrix::ObserverRegistration;
using ::matrix::TimeTicks;
using ::testing::EndsWith;
using ::testing::StartsWith;

// Publishes the monitor's dispatches to a heartbeat, as UIThreadMonitor does.
class HeartbeatFeeder : public matrix::LooperDispatchListener {
 public:
  explicit HeartbeatFeeder(DispatchHeartbeat* heartbeat) : heartbeat_(heartbeat) {}
  void OnDispatchBegin(TimeTicks begin, const DispatchInfo& info) override {
    heartbeat_->Begin(begin, info);
  }
  void OnDispatchEnd(TimeTicks, TimeTicks end) override { heartbeat_->End(end); }

 private:
  DispatchHeartbeat* heartbeat_;
};

class DispatchHeartbeatTest : public ::testing::Test {
 protected:
  void Start(LooperMonitor::Source source) {
    LooperMonitor::Options options;
    options.source = source;
    monitor_ = std::make_unique<LooperMonitor>(env_.looper(), options);
    monitor_->Start();
    registration_ = monitor_->AddListener(&feeder_);
  }
  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  mt::TestEnvironment env_;
  Handler handler_{env_.looper(), "matrix::HeartbeatTest$Ui"};
  DispatchHeartbeat heartbeat_;
  HeartbeatFeeder feeder_{&heartbeat_};
  std::unique_ptr<LooperMonitor> monitor_;
  ObserverRegistration registration_;
};

TEST_F(DispatchHeartbeatTest, Read_BeforeAnyDispatch_IsInactive) {
  const DispatchHeartbeat::Snapshot s = heartbeat_.Read();
  EXPECT_FALSE(s.active);
  EXPECT_EQ(s.dispatch_number, 0u);
  EXPECT_EQ(heartbeat_.dispatch_number(), 0u);
  EXPECT_TRUE(s.begin.is_null());
}

TEST_F(DispatchHeartbeatTest, Read_DuringAndAfterDispatch_ReflectsBeginEndAndTheMessage) {
  Start(LooperMonitor::Source::kDispatchObserver);
  const TimeTicks t0 = env_.Now();
  DispatchHeartbeat::Snapshot during;
  const int post_line = __LINE__ + 1;
  handler_.Post([&] {
    env_.AdvanceClock(absl::Milliseconds(30));
    during = heartbeat_.Read();
    env_.AdvanceClock(absl::Milliseconds(10));
  });
  RunPending();
  const DispatchHeartbeat::Snapshot after = heartbeat_.Read();

  EXPECT_TRUE(during.active);
  EXPECT_EQ(during.dispatch_number, 1u);
  EXPECT_EQ(during.begin, t0);
  EXPECT_TRUE(during.has_callback);
  EXPECT_EQ(during.posted_from.line_number(), post_line);
  EXPECT_THAT(during.posted_from.file_name(), EndsWith("dispatch_heartbeat_test.cc"));
  ASSERT_NE(during.target_name, nullptr);
  EXPECT_EQ(*during.target_name, "matrix::HeartbeatTest$Ui");
  EXPECT_EQ(during.target_address, reinterpret_cast<uintptr_t>(&handler_));
  EXPECT_EQ(during.TargetString(), handler_.ToString());

  EXPECT_FALSE(after.active);
  EXPECT_EQ(after.dispatch_number, 1u);
  EXPECT_EQ(after.begin, t0);
  EXPECT_EQ(after.last_end, t0 + absl::Milliseconds(40));
}

TEST_F(DispatchHeartbeatTest, Read_ForAWhatMessage_GivesWhatAndNoCallback) {
  Start(LooperMonitor::Source::kDispatchObserver);
  DispatchHeartbeat::Snapshot during;
  class WhatHandler : public Handler {
   public:
    WhatHandler(matrix::Looper* looper, DispatchHeartbeat* hb, DispatchHeartbeat::Snapshot* out)
        : Handler(looper, "WhatHandler"), hb_(hb), out_(out) {}
    void HandleMessage(matrix::Message&) override { *out_ = hb_->Read(); }

   private:
    DispatchHeartbeat* hb_;
    DispatchHeartbeat::Snapshot* out_;
  } what_handler(env_.looper(), &heartbeat_, &during);

  handler_.Post([] {});
  RunPending();
  what_handler.SendEmptyMessage(77);
  RunPending();

  EXPECT_TRUE(during.active);
  EXPECT_EQ(during.dispatch_number, 2u);
  EXPECT_EQ(during.what, 77);
  EXPECT_FALSE(during.has_callback);
  EXPECT_EQ(during.TargetString(), what_handler.ToString());
}

TEST_F(DispatchHeartbeatTest, TargetName_StaysValidAfterTheHandlerIsGone) {
  Start(LooperMonitor::Source::kDispatchObserver);
  DispatchHeartbeat::Snapshot kept;
  {
    Handler short_lived(env_.looper(), "matrix::HeartbeatTest$ShortLived");
    short_lived.Post([&] { kept = heartbeat_.Read(); });
    RunPending();
  }
  // A watchdog may still hold the snapshot: the name is interned.
  ASSERT_NE(kept.target_name, nullptr);
  EXPECT_EQ(*kept.target_name, "matrix::HeartbeatTest$ShortLived");
}

TEST_F(DispatchHeartbeatTest, DispatchNumber_CountsEveryOutermostDispatch) {
  Start(LooperMonitor::Source::kDispatchObserver);
  for (int i = 0; i < 5; ++i) handler_.Post([] {});
  RunPending();
  EXPECT_EQ(heartbeat_.dispatch_number(), 5u);
  EXPECT_EQ(heartbeat_.Read().dispatch_number, 5u);
}

TEST_F(DispatchHeartbeatTest, PrinterSource_PublishesTheBeginLine) {
  Start(LooperMonitor::Source::kPrinter);
  DispatchHeartbeat::Snapshot during;
  handler_.Post([&] { during = heartbeat_.Read(); });
  RunPending();

  EXPECT_TRUE(during.active);
  EXPECT_THAT(during.log_line, StartsWith(">>>>> Dispatching to Handler (matrix::HeartbeatTest$Ui)"));
  EXPECT_EQ(during.target_name, nullptr);  // Text only.
  EXPECT_EQ(during.TargetString(), "");
  EXPECT_FALSE(during.posted_from.has_source_info());
}

TEST_F(DispatchHeartbeatTest, PrinterSource_LongLine_KeepsTheFirst128Bytes) {
  Start(LooperMonitor::Source::kPrinter);
  const std::string long_name(300, 'x');
  Handler long_handler(env_.looper(), long_name);
  DispatchHeartbeat::Snapshot during;
  long_handler.Post([&] { during = heartbeat_.Read(); });
  RunPending();

  ASSERT_EQ(during.log_line.size(), 128u);
  EXPECT_EQ(during.log_line, (">>>>> Dispatching to Handler (" + long_name).substr(0, 128));
}

TEST(DispatchHeartbeatForeignTest, ForeignSource_PublishesTheLabel) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  DispatchHeartbeat heartbeat;
  HeartbeatFeeder feeder(&heartbeat);
  ObserverRegistration registration = monitor.AddListener(&feeder);

  const TimeTicks t0 = TimeTicks::FromNanoseconds(7'000'000'000);
  monitor.DispatchBegin(t0, "qt-event");
  const DispatchHeartbeat::Snapshot during = heartbeat.Read();
  monitor.DispatchEnd(t0 + absl::Milliseconds(3));
  const DispatchHeartbeat::Snapshot after = heartbeat.Read();

  EXPECT_TRUE(during.active);
  EXPECT_STREQ(during.label, "qt-event");
  EXPECT_EQ(during.begin, t0);
  EXPECT_TRUE(during.log_line.empty());
  EXPECT_FALSE(after.active);
  EXPECT_EQ(after.last_end, t0 + absl::Milliseconds(3));
}

}  // namespace
