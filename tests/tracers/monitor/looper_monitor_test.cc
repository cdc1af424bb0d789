// Tests for LooperMonitor: the three dispatch sources (dispatch observers,
// Android-style Printer lines, foreign-loop hooks), nesting, and listeners
// that change the listener set from inside their callbacks.

#include "matrix/trace/looper_monitor.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/observer_list.h"
#include "matrix/testing/test_environment.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "../tracer_test_util.h"

namespace {

namespace mt = ::matrix::testing;
using ::matrix::DispatchInfo;
using ::matrix::Handler;
using ::matrix::Looper;
using ::matrix::LooperDispatchListener;
using ::matrix::LooperIdleListener;
using ::matrix::LooperMonitor;
using ::matrix::ObserverRegistration;
using ::matrix::Printer;
using ::matrix::TimeTicks;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

using RecordingListener = matrix::trace_test::RecordingDispatchListener;

// A printer installed by "another component". With `chain`, it forwards to
// the printer it replaced, as a well-behaved third party does.
class RecordingPrinter : public Printer {
 public:
  explicit RecordingPrinter(Printer* chain = nullptr) : chain_(chain) {}
  void Println(std::string_view line) override {
    lines.emplace_back(line);
    if (chain_ != nullptr) chain_->Println(line);
  }
  std::vector<std::string> lines;

 private:
  Printer* chain_;
};

class LooperMonitorTest : public ::testing::Test {
 protected:
  // Runs everything due now. FastForwardBy(0) rather than RunUntilIdle(),
  // so that a message posted after moving the clock by hand is not missed.
  void RunPending() { env_.FastForwardBy(absl::ZeroDuration()); }

  // Posts a message that takes `cost` of fake time and runs it.
  void Dispatch(absl::Duration cost = absl::Milliseconds(1)) {
    handler_.Post([this, cost] { env_.AdvanceClock(cost); });
    RunPending();
  }

  mt::TestEnvironment env_;
  Handler handler_{env_.looper(), "matrix::LooperMonitorTest"};
};

// --- Dispatch-observer source ------------------------------------------------

TEST_F(LooperMonitorTest, DispatchObserver_WhenMessageRuns_DeliversBeginAndEndWithLooperTimes) {
  LooperMonitor monitor(env_.looper());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = env_.Now();
  handler_.SendEmptyMessage(42);
  handler_.Post([this] { env_.AdvanceClock(absl::Milliseconds(7)); });
  RunPending();

  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end", "L.begin", "L.end"));
  EXPECT_THAT(listener.whats, ElementsAre(42, 0));
  EXPECT_EQ(listener.begins[1], t0);
  EXPECT_EQ(listener.end_begins[1], t0);
  EXPECT_EQ(listener.ends[1], t0 + absl::Milliseconds(7));
  EXPECT_EQ(monitor.source(), LooperMonitor::Source::kDispatchObserver);
}

TEST_F(LooperMonitorTest, DispatchObserver_BeforeStartAndAfterStop_DeliversNothing) {
  LooperMonitor monitor(env_.looper());
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  Dispatch();
  EXPECT_THAT(listener.events, IsEmpty());

  monitor.Start();
  EXPECT_TRUE(monitor.is_started());
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));

  monitor.Stop();
  EXPECT_FALSE(monitor.is_started());
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
}

TEST_F(LooperMonitorTest, DispatchObserver_StartedMidDispatch_NoEndWithoutBegin) {
  LooperMonitor monitor(env_.looper());
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  handler_.Post([&] { monitor.Start(); });
  RunPending();
  EXPECT_THAT(listener.events, IsEmpty());

  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
}

TEST_F(LooperMonitorTest, DispatchObserver_StoppedMidDispatch_EndsTheDispatchOnce) {
  LooperMonitor monitor(env_.looper());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = env_.Now();
  handler_.Post([&] {
    env_.AdvanceClock(absl::Milliseconds(3));
    monitor.Stop();
    env_.AdvanceClock(absl::Milliseconds(3));
  });
  RunPending();
  Dispatch();

  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(3));
}

// --- Printer source ---------------------------------------------------------

LooperMonitor::Options PrinterOptions(absl::Duration check = absl::Seconds(60)) {
  LooperMonitor::Options options;
  options.source = LooperMonitor::Source::kPrinter;
  options.printer_check_interval = check;
  return options;
}

TEST_F(LooperMonitorTest, Printer_WhenMessageRuns_DeliversBeginAndEndWithTheLogLine) {
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = env_.Now();
  handler_.Post([this] { env_.AdvanceClock(absl::Milliseconds(9)); });
  RunPending();

  EXPECT_TRUE(monitor.printer_valid());
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  ASSERT_THAT(listener.lines, SizeIs(1));
  EXPECT_THAT(listener.lines[0], StartsWith(">>>>> Dispatching to Handler (matrix::LooperMonitorTest)"));
  EXPECT_EQ(listener.begins[0], t0);
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(9));
  EXPECT_THAT(listener.whats, IsEmpty());  // The printer source knows only text.
}

TEST_F(LooperMonitorTest, Printer_ExistingPrinter_KeepsReceivingEveryLineAndIsRestoredOnStop) {
  RecordingPrinter existing;
  env_.looper()->SetMessageLogging(&existing);
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  EXPECT_NE(env_.looper()->GetMessageLogging(), &existing);
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  Dispatch();
  Dispatch();

  ASSERT_THAT(existing.lines, SizeIs(4));
  EXPECT_THAT(existing.lines[0], StartsWith(">>>>> Dispatching to "));
  EXPECT_THAT(existing.lines[1], StartsWith("<<<<< Finished to "));
  EXPECT_THAT(existing.lines[2], StartsWith(">>>>> Dispatching to "));
  EXPECT_THAT(existing.lines[3], StartsWith("<<<<< Finished to "));
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end", "L.begin", "L.end"));

  monitor.Stop();
  EXPECT_EQ(env_.looper()->GetMessageLogging(), &existing);
  Dispatch();
  EXPECT_THAT(existing.lines, SizeIs(6));
  EXPECT_THAT(listener.events, SizeIs(4));
}

TEST_F(LooperMonitorTest, Printer_StoppedWithoutPriorPrinter_RemovesOurs) {
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  EXPECT_NE(env_.looper()->GetMessageLogging(), nullptr);
  monitor.Stop();
  EXPECT_EQ(env_.looper()->GetMessageLogging(), nullptr);
}

TEST_F(LooperMonitorTest, Printer_InvalidFirstLine_DisablesDispatchesButStillForwards) {
  RecordingPrinter existing;
  env_.looper()->SetMessageLogging(&existing);
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  // A loop that prints its own format first: Matrix decides on the first line.
  env_.looper()->GetMessageLogging()->Println("Dispatching message 1");
  Dispatch();
  Dispatch();

  EXPECT_FALSE(monitor.printer_valid());
  EXPECT_THAT(listener.events, IsEmpty());
  EXPECT_THAT(existing.lines, SizeIs(5));
  EXPECT_EQ(existing.lines[0], "Dispatching message 1");
}

TEST_F(LooperMonitorTest, Printer_ValidFirstLine_LaterOddLinesAreIgnored) {
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  Dispatch();
  env_.looper()->GetMessageLogging()->Println("some other text");
  Dispatch();

  EXPECT_TRUE(monitor.printer_valid());
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end", "L.begin", "L.end"));
}

TEST_F(LooperMonitorTest, Printer_StartedMidDispatch_IgnoresTheUnmatchedEndLine) {
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  handler_.Post([&] { monitor.Start(); });
  RunPending();
  EXPECT_THAT(listener.events, IsEmpty());
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
}

TEST_F(LooperMonitorTest, Printer_ReplacedByAnother_ReinstalledOnIdleCheckAfterInterval) {
  LooperMonitor monitor(env_.looper(), PrinterOptions(absl::Seconds(10)));
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);
  Dispatch();
  ASSERT_THAT(listener.events, SizeIs(2));

  // Another component replaces the printer without chaining ours.
  RecordingPrinter other;
  env_.looper()->SetMessageLogging(&other);
  Dispatch();
  EXPECT_THAT(other.lines, SizeIs(2));
  EXPECT_THAT(listener.events, SizeIs(2));  // We are blind until the check.

  // Just before the interval, the idle check does nothing.
  handler_.PostDelayed([] {}, absl::Seconds(9));
  env_.FastForwardBy(absl::Seconds(9));
  EXPECT_EQ(monitor.printer_reinstall_count(), 0);
  EXPECT_EQ(env_.looper()->GetMessageLogging(), &other);

  // At the interval, the looper's next idle time re-installs ours, chaining theirs.
  handler_.PostDelayed([] {}, absl::Seconds(1));
  env_.FastForwardBy(absl::Seconds(1));
  EXPECT_EQ(monitor.printer_reinstall_count(), 1);
  EXPECT_NE(env_.looper()->GetMessageLogging(), &other);

  const size_t other_before = other.lines.size();
  listener.events.clear();
  Dispatch();
  Dispatch();
  EXPECT_EQ(other.lines.size(), other_before + 4);  // Theirs still sees every line.
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end", "L.begin", "L.end"));
}

TEST_F(LooperMonitorTest, Printer_ReplacedByChainingPrinter_BeginAndEndArriveExactlyOnce) {
  RecordingPrinter original;
  env_.looper()->SetMessageLogging(&original);
  LooperMonitor monitor(env_.looper(), PrinterOptions(absl::Seconds(10)));
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  // A third party wraps whatever was installed (ours).
  RecordingPrinter other(env_.looper()->GetMessageLogging());
  env_.looper()->SetMessageLogging(&other);
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));  // Through their chain.

  handler_.PostDelayed([] {}, absl::Seconds(10));
  env_.FastForwardBy(absl::Seconds(10));
  ASSERT_EQ(monitor.printer_reinstall_count(), 1);

  // Now: ours -> theirs -> our old (detached) printer -> the original.
  listener.events.clear();
  other.lines.clear();
  original.lines.clear();
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_THAT(other.lines, SizeIs(2));
  EXPECT_THAT(original.lines, SizeIs(2));
}

TEST_F(LooperMonitorTest, Printer_CheckPrinterNow_ReinstallsWithoutWaiting) {
  LooperMonitor monitor(env_.looper(), PrinterOptions());
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);
  RecordingPrinter other;
  env_.looper()->SetMessageLogging(&other);

  monitor.CheckPrinter();
  EXPECT_EQ(monitor.printer_reinstall_count(), 1);
  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_THAT(other.lines, SizeIs(2));

  monitor.CheckPrinter();  // Still ours: nothing to do.
  EXPECT_EQ(monitor.printer_reinstall_count(), 1);
}

// --- Foreign source -----------------------------------------------------------

TEST(LooperMonitorForeignTest, Hooks_WithTimestamps_DeliverBeginAndEnd) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  EXPECT_EQ(monitor.source(), LooperMonitor::Source::kForeign);
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = TimeTicks::FromNanoseconds(5'000'000'000);
  monitor.DispatchBegin(t0, "sdl-event");
  EXPECT_TRUE(monitor.is_dispatching());
  monitor.DispatchEnd(t0 + absl::Milliseconds(12));
  EXPECT_FALSE(monitor.is_dispatching());

  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_THAT(listener.labels, ElementsAre("sdl-event"));
  EXPECT_EQ(listener.begins[0], t0);
  EXPECT_EQ(listener.end_begins[0], t0);
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(12));
}

TEST(LooperMonitorForeignTest, Hooks_WithoutTimestamps_ReadTheClock) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = clock.NowTicks();
  monitor.DispatchBegin();
  clock.Advance(absl::Milliseconds(4));
  monitor.DispatchEnd();

  EXPECT_EQ(listener.begins[0], t0);
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(4));
  EXPECT_THAT(listener.labels, IsEmpty());
}

TEST(LooperMonitorForeignTest, EndWithoutBegin_IsIgnored) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);
  monitor.DispatchEnd();
  EXPECT_THAT(listener.events, IsEmpty());
  monitor.DispatchBegin();
  monitor.DispatchEnd();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
}

// --- Nesting ------------------------------------------------------------------

TEST(LooperMonitorForeignTest, NestedDispatches_OnlyTheOutermostIsReported) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = clock.NowTicks();
  monitor.DispatchBegin(t0, "outer");
  monitor.DispatchBegin(t0 + absl::Milliseconds(1), "inner");
  monitor.DispatchBegin(t0 + absl::Milliseconds(2), "innermost");
  monitor.DispatchEnd(t0 + absl::Milliseconds(3));
  monitor.DispatchEnd(t0 + absl::Milliseconds(4));
  EXPECT_THAT(listener.events, ElementsAre("L.begin"));
  monitor.DispatchEnd(t0 + absl::Milliseconds(5));

  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_THAT(listener.labels, ElementsAre("outer"));
  EXPECT_EQ(listener.end_begins[0], t0);
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(5));
}

class LooperMonitorNestedTest : public LooperMonitorTest,
                                public ::testing::WithParamInterface<LooperMonitor::Source> {};

TEST_P(LooperMonitorNestedTest, NestedLooperDispatch_OnlyTheOutermostIsReported) {
  LooperMonitor::Options options;
  options.source = GetParam();
  LooperMonitor monitor(env_.looper(), options);
  monitor.Start();
  RecordingListener listener;
  ObserverRegistration registration = monitor.AddListener(&listener);

  const TimeTicks t0 = env_.Now();
  bool inner_ran = false;
  handler_.Post([&] {
    env_.AdvanceClock(absl::Milliseconds(2));
    handler_.Post([&] {
      inner_ran = true;
      env_.AdvanceClock(absl::Milliseconds(3));
    });
    // A modal loop inside a message: dispatches the inner message.
    ASSERT_EQ(env_.looper()->PollOnce(absl::ZeroDuration()), Looper::PollResult::kDispatched);
    env_.AdvanceClock(absl::Milliseconds(1));
  });
  RunPending();

  EXPECT_TRUE(inner_ran);
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end"));
  EXPECT_EQ(listener.begins[0], t0);
  EXPECT_EQ(listener.ends[0], t0 + absl::Milliseconds(6));

  Dispatch();
  EXPECT_THAT(listener.events, ElementsAre("L.begin", "L.end", "L.begin", "L.end"));
}

INSTANTIATE_TEST_SUITE_P(Sources, LooperMonitorNestedTest,
                         ::testing::Values(LooperMonitor::Source::kDispatchObserver,
                                           LooperMonitor::Source::kPrinter),
                         [](const auto& info) {
                           return std::string(LooperMonitor::SourceName(info.param)) ==
                                          "printer"
                                      ? std::string("Printer")
                                      : std::string("DispatchObserver");
                         });

// --- Listeners changing the set during callbacks -----------------------------

class LooperMonitorListenerTest : public ::testing::Test {
 protected:
  mt::FakeTickClock clock_;
  LooperMonitor monitor_{&clock_};

  void Dispatch() {
    monitor_.DispatchBegin();
    clock_.Advance(absl::Milliseconds(1));
    monitor_.DispatchEnd();
  }
};

TEST_F(LooperMonitorListenerTest, ListenerRemovingItselfInBegin_GetsNoEndAndNothingAfter) {
  RecordingListener a("A"), b("B");
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rb = monitor_.AddListener(&b);
  a.on_begin = [&] { ra.Reset(); };

  Dispatch();
  Dispatch();

  EXPECT_THAT(a.events, ElementsAre("A.begin"));
  EXPECT_THAT(b.events, ElementsAre("B.begin", "B.end", "B.begin", "B.end"));
}

TEST_F(LooperMonitorListenerTest, ListenerRemovingItselfInEnd_IsNotCalledAgain) {
  RecordingListener a("A"), b("B");
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rb = monitor_.AddListener(&b);
  a.on_end = [&] { ra.Reset(); };

  Dispatch();
  Dispatch();

  EXPECT_THAT(a.events, ElementsAre("A.begin", "A.end"));
  EXPECT_THAT(b.events, ElementsAre("B.begin", "B.end", "B.begin", "B.end"));
}

TEST_F(LooperMonitorListenerTest, ListenerRemovedByAnotherInBegin_GetsNothing) {
  RecordingListener a("A"), b("B");
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rb = monitor_.AddListener(&b);
  a.on_begin = [&] { rb.Reset(); };

  Dispatch();

  EXPECT_THAT(a.events, ElementsAre("A.begin", "A.end"));
  EXPECT_THAT(b.events, IsEmpty());
}

TEST_F(LooperMonitorListenerTest, ListenerAddedDuringBegin_MissesThatEndButGetsTheNextDispatch) {
  RecordingListener a("A"), late("Late");
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rlate;
  a.on_begin = [&] {
    if (!rlate.active()) rlate = monitor_.AddListener(&late);
  };

  Dispatch();
  EXPECT_THAT(late.events, IsEmpty());
  Dispatch();
  EXPECT_THAT(late.events, ElementsAre("Late.begin", "Late.end"));
  EXPECT_THAT(a.events, ElementsAre("A.begin", "A.end", "A.begin", "A.end"));
}

TEST_F(LooperMonitorListenerTest, ListenerAddedDuringEnd_FirstHearsTheNextDispatch) {
  RecordingListener a("A"), late("Late");
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rlate;
  a.on_end = [&] {
    if (!rlate.active()) rlate = monitor_.AddListener(&late);
  };

  Dispatch();
  EXPECT_THAT(late.events, IsEmpty());
  Dispatch();
  EXPECT_THAT(late.events, ElementsAre("Late.begin", "Late.end"));
}

TEST_F(LooperMonitorListenerTest, ListenerAddedBetweenBeginAndEnd_GetsNoEnd) {
  RecordingListener late("Late");
  monitor_.DispatchBegin();
  ObserverRegistration rlate = monitor_.AddListener(&late);
  monitor_.DispatchEnd();
  EXPECT_THAT(late.events, IsEmpty());
  Dispatch();
  EXPECT_THAT(late.events, ElementsAre("Late.begin", "Late.end"));
}

// The first listener is called directly, outside the list (one hop on the
// hot path): it follows the same rules as the listed ones.
TEST_F(LooperMonitorListenerTest, FirstListenerRemovedAndAddedAgainMidDispatch_GetsNoEnd) {
  RecordingListener a("A");
  ObserverRegistration ra = monitor_.AddListener(&a);  // The first slot.
  monitor_.DispatchBegin();
  ra.Reset();
  ra = monitor_.AddListener(&a);  // The first slot again.
  monitor_.DispatchEnd();
  EXPECT_THAT(a.events, ElementsAre("A.begin"));
  Dispatch();
  EXPECT_THAT(a.events, ElementsAre("A.begin", "A.begin", "A.end"));
}

TEST_F(LooperMonitorListenerTest, ListenersHearDispatchesInTheOrderTheyWereAdded) {
  std::vector<std::string> order;
  RecordingListener a("A"), b("B"), c("C");
  a.on_begin = [&] { order.push_back("A"); };
  b.on_begin = [&] { order.push_back("B"); };
  c.on_begin = [&] { order.push_back("C"); };
  ObserverRegistration ra = monitor_.AddListener(&a);
  ObserverRegistration rb = monitor_.AddListener(&b);
  ra.Reset();  // The first slot stays empty while B is listed...
  ObserverRegistration rc = monitor_.AddListener(&c);  // ...so C comes after B.
  ra = monitor_.AddListener(&a);
  Dispatch();
  EXPECT_THAT(order, ElementsAre("B", "C", "A"));
}

// Idle-callback runs of a foreign loop (matrix::glib's idle-priority sources).
class RecordingIdleListener : public LooperIdleListener {
 public:
  void OnIdleBegin(TimeTicks begin, const char* name) override {
    begins.push_back(begin);
    names.push_back(name);
  }
  void OnIdleEnd(TimeTicks begin, TimeTicks end) override { runs.push_back(end - begin); }
  std::vector<TimeTicks> begins;
  std::vector<std::string> names;
  std::vector<absl::Duration> runs;
};

TEST(LooperMonitorForeignTest, IdleHooks_DeliverRunsThatDoNotNest) {
  mt::FakeTickClock clock;
  LooperMonitor monitor(&clock);
  monitor.Start();
  RecordingIdleListener idle;
  ObserverRegistration registration = monitor.AddIdleListener(&idle);
  RecordingListener dispatches;
  ObserverRegistration dispatch_registration = monitor.AddListener(&dispatches);

  monitor.IdleEnd();  // No run: ignored.
  const TimeTicks t0 = clock.NowTicks();
  monitor.DispatchBegin("glib-dispatch");
  monitor.IdleBegin("glib idle source");
  EXPECT_TRUE(monitor.is_idle_running());
  clock.Advance(absl::Milliseconds(3));
  monitor.IdleBegin("again");  // Runs do not nest: ignored.
  clock.Advance(absl::Milliseconds(4));
  monitor.IdleEnd();
  monitor.DispatchEnd();
  EXPECT_FALSE(monitor.is_idle_running());
  EXPECT_THAT(idle.begins, ElementsAre(t0));
  EXPECT_THAT(idle.names, ElementsAre("glib idle source"));
  EXPECT_THAT(idle.runs, ElementsAre(absl::Milliseconds(7)));
  EXPECT_THAT(dispatches.events, ElementsAre("L.begin", "L.end"));  // Unaffected.

  // Stop() ends a run in progress, once.
  monitor.IdleBegin("glib idle source");
  clock.Advance(absl::Milliseconds(2));
  monitor.Stop();
  EXPECT_FALSE(monitor.is_idle_running());
  EXPECT_THAT(idle.runs, ElementsAre(absl::Milliseconds(7), absl::Milliseconds(2)));
}

}  // namespace

// --- Recording, and a first listener that wants less ------------------------

namespace record_test {

using ::matrix::DispatchHeartbeat;

TEST_F(LooperMonitorTest, RecordDispatches_WritesEachOutermostDispatchBeforeAnyListenerRuns) {
  LooperMonitor monitor(env_.looper());
  DispatchHeartbeat heartbeat;
  monitor.RecordDispatches(&heartbeat, nullptr);
  monitor.Start();
  RecordingListener listener;
  DispatchHeartbeat::Snapshot at_begin;
  listener.on_begin = [&] { at_begin = heartbeat.Read(); };
  ObserverRegistration registration = monitor.AddListener(&listener);
  const TimeTicks t0 = env_.Now();
  Dispatch(absl::Milliseconds(4));

  EXPECT_TRUE(at_begin.active);  // Written before the listener heard it.
  EXPECT_EQ(at_begin.dispatch_number, 1u);
  EXPECT_EQ(at_begin.begin, t0);
  const DispatchHeartbeat::Snapshot after = heartbeat.Read();
  EXPECT_FALSE(after.active);
  EXPECT_EQ(after.last_end, t0 + absl::Milliseconds(4));
  EXPECT_EQ(monitor.last_dispatch_end(), t0 + absl::Milliseconds(4));

  // Nested dispatches are one record; with recording stopped, none.
  handler_.Post([this] {
    Handler nested(env_.looper(), "nested");
    nested.Post([] {});
    env_.looper()->PollOnce(absl::ZeroDuration());
  });
  RunPending();
  EXPECT_EQ(heartbeat.dispatch_number(), 2u);
  monitor.RecordDispatches(nullptr, nullptr);
  Dispatch();
  EXPECT_EQ(heartbeat.dispatch_number(), 2u);
}

TEST_F(LooperMonitorTest, FirstListener_WantingLess_HearsOnlyWhatItAskedFor) {
  LooperMonitor monitor(env_.looper());
  DispatchHeartbeat heartbeat;
  monitor.RecordDispatches(&heartbeat, nullptr);
  monitor.Start();
  RecordingListener first("F");
  RecordingListener listed("S");
  first.set_wants_dispatch_begin(false);
  first.set_dispatch_end_floor_ns(absl::ToInt64Nanoseconds(absl::Milliseconds(10)));
  ObserverRegistration r1 = monitor.AddListener(&first);
  ObserverRegistration r2 = monitor.AddListener(&listed);
  // The floor now counts as seen: the first change below is the next one.
  Dispatch(absl::Milliseconds(20));
  first.events.clear();
  listed.events.clear();

  Dispatch(absl::Milliseconds(2));   // Shorter than the floor: nothing.
  Dispatch(absl::Milliseconds(10));  // At the floor: its end.
  handler_.Post([&] { first.RequestDispatchEnd(); });  // Asked for: its end.
  RunPending();
  Dispatch(absl::Milliseconds(2));  // The request was for that one only.
  EXPECT_THAT(first.events, ElementsAre("F.end", "F.end"));
  EXPECT_THAT(listed.events, SizeIs(8));  // The others hear every dispatch.

  // A floor changed somewhere: the next end is heard once (to read floors).
  first.events.clear();
  LooperDispatchListener::NoteEndFloorChange();
  Dispatch(absl::Milliseconds(2));
  Dispatch(absl::Milliseconds(2));
  EXPECT_THAT(first.events, ElementsAre("F.end"));
  EXPECT_EQ(heartbeat.dispatch_number(), 7u);  // Every dispatch recorded.
}

TEST_F(LooperMonitorTest, WhoHearsBegins_FollowsWantsAndTheListAsTheyChange) {
  LooperMonitor monitor(env_.looper());
  monitor.Start();
  RecordingListener first("F");
  ObserverRegistration r1 = monitor.AddListener(&first);
  Dispatch();
  EXPECT_THAT(first.events, ElementsAre("F.begin", "F.end"));

  // Changed after it was added: the monitor asks no more.
  first.events.clear();
  first.set_wants_dispatch_begin(false);
  Dispatch();
  EXPECT_THAT(first.events, ElementsAre("F.end"));

  // A listed listener hears begins; the first one still does not.
  first.events.clear();
  RecordingListener listed("S");
  {
    ObserverRegistration r2 = monitor.AddListener(&listed);
    Dispatch();
  }  // Removed: no listener wants begins any more.
  EXPECT_THAT(first.events, ElementsAre("F.end"));
  EXPECT_THAT(listed.events, ElementsAre("S.begin", "S.end"));
  listed.events.clear();
  first.events.clear();
  Dispatch();
  EXPECT_THAT(first.events, ElementsAre("F.end"));
  EXPECT_THAT(listed.events, IsEmpty());

  // Wanted again; and a listener that outlives the monitor may still change
  // what it wants.
  first.events.clear();
  first.set_wants_dispatch_begin(true);
  Dispatch();
  EXPECT_THAT(first.events, ElementsAre("F.begin", "F.end"));
  r1.Reset();
  RecordingListener survivor("V");
  ObserverRegistration r3;
  {
    LooperMonitor short_lived(env_.looper());
    short_lived.Start();
    r3 = short_lived.AddListener(&survivor);
  }
  survivor.set_wants_dispatch_begin(false);  // No monitor to tell (ASan checks).
  EXPECT_FALSE(survivor.wants_dispatch_begin());
}

TEST_F(LooperMonitorTest, Waited_IsWhetherTheLoopWaitedTheThresholdBetweenTwoDispatches) {
  LooperMonitor monitor(env_.looper());
  monitor.SetWaitThreshold(absl::ToInt64Nanoseconds(absl::Milliseconds(30)));
  monitor.Start();
  EXPECT_TRUE(monitor.waited());  // Until the first ClearWaited().
  Dispatch();
  monitor.ClearWaited();
  env_.AdvanceClock(absl::Milliseconds(29));
  Dispatch();
  EXPECT_FALSE(monitor.waited());
  env_.AdvanceClock(absl::Milliseconds(30));
  Dispatch();
  EXPECT_TRUE(monitor.waited());
  monitor.ClearWaited();
  Dispatch();
  EXPECT_FALSE(monitor.waited());
}

}  // namespace record_test
