// Tests for Looper dispatch observers: begin/end for every dispatch (and idle
// handler) with the looper's timestamps, RAII registration, safety against
// observers being added or removed during a notification, pairing when a
// handler throws, and no allocation on the dispatch path.

#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/core/message_queue.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/testing/sanitizers.h"
#include "matrix/testing/test_environment.h"

// Counts the allocations made by this thread, to prove that a dispatch with
// observers (and no Printer) builds no string. ThreadSanitizer's runtime
// defines operator new itself (not replaceably), so the count is off there.
#define MATRIX_COUNT_ALLOCATIONS (!MATRIX_TESTING_THREAD_SANITIZER)

namespace {
thread_local size_t t_allocations = 0;
}  // namespace

#if MATRIX_COUNT_ALLOCATIONS
// Not inlined, so that GCC does not pair a caller's `new` with free().
__attribute__((noinline)) void* operator new(size_t size) {
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { std::free(p); }
#endif

namespace matrix {
namespace {

using ::matrix::testing::TestEnvironment;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TestEnvironment::Options NoChoreographer() {
  TestEnvironment::Options options;
  options.choreographer = false;
  return options;
}

// Logs "<name> begin <what>" / "<name> end <what>" into a shared log.
class LoggingObserver : public DispatchObserver {
 public:
  LoggingObserver(std::string name, std::vector<std::string>* log)
      : name_(std::move(name)), log_(log) {}
  void OnDispatchBegin(const Message& msg, TimeTicks begin) override {
    log_->push_back(absl::StrCat(name_, " begin ", msg.what));
    begins.push_back(begin);
    if (on_begin) on_begin();
  }
  void OnDispatchEnd(const Message& msg, TimeTicks begin, TimeTicks end) override {
    log_->push_back(absl::StrCat(name_, " end ", msg.what));
    end_begins.push_back(begin);
    ends.push_back(end);
    if (on_end) on_end();
  }
  void OnIdleHandlerBegin(const IdleHandler& handler, TimeTicks) override {
    log_->push_back(absl::StrCat(name_, " idle begin ", handler.Name()));
  }
  void OnIdleHandlerEnd(const IdleHandler& handler, TimeTicks begin, TimeTicks end) override {
    log_->push_back(absl::StrCat(name_, " idle end ", handler.Name(), " ",
                                 absl::FormatDuration(end - begin)));
  }

  std::function<void()> on_begin;
  std::function<void()> on_end;
  std::vector<TimeTicks> begins;
  std::vector<TimeTicks> end_begins;
  std::vector<TimeTicks> ends;

 private:
  std::string name_;
  std::vector<std::string>* log_;
};

// Counts what it hears; wants only `events`.
class EventCountingObserver : public DispatchObserver {
 public:
  explicit EventCountingObserver(uint8_t events) : DispatchObserver(events) {}
  void OnDispatchBegin(const Message&, TimeTicks) override { ++dispatch_begins; }
  void OnDispatchEnd(const Message&, TimeTicks, TimeTicks) override { ++dispatch_ends; }
  void OnIdleHandlerBegin(const IdleHandler&, TimeTicks) override { ++idle_begins; }
  void OnIdleHandlerEnd(const IdleHandler&, TimeTicks, TimeTicks) override { ++idle_ends; }
  int dispatch_begins = 0, dispatch_ends = 0, idle_begins = 0, idle_ends = 0;
};

class DispatchObserverTest : public ::testing::Test {
 protected:
  DispatchObserverTest() : env_(NoChoreographer()), handler_(env_.looper()) {}
  Looper* looper() { return env_.looper(); }

  TestEnvironment env_;
  Handler handler_;
  std::vector<std::string> log_;
};

TEST_F(DispatchObserverTest, Dispatch_WithSeveralObservers_EachHearsBeginAndEndInOrder) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  handler_.SendEmptyMessage(1);
  handler_.Post([this] { log_.push_back("task"); });

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "b begin 1", "a end 1", "b end 1",  //
                                "a begin 0", "b begin 0", "task", "a end 0", "b end 0"));
}

TEST_F(DispatchObserverTest, Dispatch_OnFakeClock_ReportsBeginAndSharedEndTimes) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  const TimeTicks t0 = env_.Now();
  handler_.PostDelayed([this] { env_.AdvanceClock(absl::Milliseconds(7)); },
                       absl::Milliseconds(10));

  env_.FastForwardBy(absl::Milliseconds(10));

  const TimeTicks begin = t0 + absl::Milliseconds(10);
  const TimeTicks end = begin + absl::Milliseconds(7);
  EXPECT_THAT(a.begins, ElementsAre(begin));
  EXPECT_THAT(a.end_begins, ElementsAre(begin));
  EXPECT_THAT(a.ends, ElementsAre(end));
  EXPECT_THAT(b.begins, ElementsAre(begin));
  EXPECT_THAT(b.ends, ElementsAre(end));
}

TEST_F(DispatchObserverTest, Registration_WhenDestroyed_StopsNotifications) {
  LoggingObserver a("a", &log_);
  {
    ObserverRegistration registration = looper()->AddDispatchObserver(&a);
    EXPECT_TRUE(registration.active());
    handler_.SendEmptyMessage(1);
    env_.RunUntilIdle();
  }
  handler_.SendEmptyMessage(2);
  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1"));
}

TEST_F(DispatchObserverTest, Registration_WhenMovedAndReset_UnregistersOnce) {
  LoggingObserver a("a", &log_);
  ObserverRegistration first = looper()->AddDispatchObserver(&a);
  ObserverRegistration moved = std::move(first);
  EXPECT_FALSE(first.active());  // NOLINT(bugprone-use-after-move): moved-from is empty.
  EXPECT_TRUE(moved.active());
  handler_.SendEmptyMessage(1);
  env_.RunUntilIdle();

  moved.Reset();
  moved.Reset();  // Idempotent.
  EXPECT_FALSE(moved.active());
  handler_.SendEmptyMessage(2);
  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1"));
}

TEST_F(DispatchObserverTest, Observer_RemovingItselfInBegin_HearsNoEndAndNothingMore) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  a.on_begin = [&] { ra.Reset(); };
  handler_.SendEmptyMessage(1);
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "b begin 1", "b end 1", "b begin 2", "b end 2"));
}

TEST_F(DispatchObserverTest, Observer_RemovingALaterOneInBegin_RemovedOneHearsNothing) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  a.on_begin = [&] { rb.Reset(); };
  handler_.SendEmptyMessage(1);
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1", "a begin 2", "a end 2"));
}

TEST_F(DispatchObserverTest, Observer_RemovingAnEarlierOneInEnd_OthersStillHearEnd) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  LoggingObserver c("c", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  ObserverRegistration rc = looper()->AddDispatchObserver(&c);
  b.on_end = [&] {
    ra.Reset();
    rb.Reset();
  };
  handler_.SendEmptyMessage(1);
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "b begin 1", "c begin 1", "a end 1", "b end 1",
                                "c end 1", "c begin 2", "c end 2"));
}

TEST_F(DispatchObserverTest, Observer_AddedDuringBegin_FirstHearsTheNextDispatch) {
  LoggingObserver a("a", &log_);
  LoggingObserver late("late", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rlate;
  a.on_begin = [&] {
    if (!rlate.active()) rlate = looper()->AddDispatchObserver(&late);
  };
  handler_.SendEmptyMessage(1);
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1", "a begin 2", "late begin 2", "a end 2",
                                "late end 2"));
}

TEST_F(DispatchObserverTest, Observer_AddedByTheTaskWithNoneRegistered_FirstHearsTheNextDispatch) {
  LoggingObserver late("late", &log_);
  ObserverRegistration rlate;
  handler_.Post([&] { rlate = looper()->AddDispatchObserver(&late); });
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("late begin 2", "late end 2"));
}

TEST_F(DispatchObserverTest, Observer_RemovedAndReaddedDuringDispatch_HearsOnlyTheNextOne) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  bool done = false;
  a.on_begin = [&] {
    if (done) return;
    done = true;
    rb.Reset();
    rb = looper()->AddDispatchObserver(&b);
  };
  handler_.SendEmptyMessage(1);
  handler_.SendEmptyMessage(2);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1", "a begin 2", "b begin 2", "a end 2",
                                "b end 2"));
}

TEST_F(DispatchObserverTest, Dispatch_WhenHandlerThrows_EndIsDeliveredAndExceptionPropagates) {
  LoggingObserver a("a", &log_);
  LoggingObserver b("b", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  handler_.Post([] { throw std::runtime_error("handler failed"); });
  handler_.SendEmptyMessage(5);

  EXPECT_THROW(looper()->PollOnce(absl::ZeroDuration()), std::runtime_error);
  EXPECT_THAT(log_, ElementsAre("a begin 0", "b begin 0", "a end 0", "b end 0"));
  EXPECT_FALSE(looper()->is_dispatching());

  // The looper keeps going with the next message.
  env_.RunUntilIdle();
  EXPECT_THAT(log_, ElementsAre("a begin 0", "b begin 0", "a end 0", "b end 0", "a begin 5",
                                "b begin 5", "a end 5", "b end 5"));
}

TEST(DispatchObserverLoopTest, Loop_WhenHandlerThrowsWithObserverAndPrinter_PairsEverything) {
  ::matrix::testing::FakeTickClock clock;
  Looper* looper = Looper::Prepare(&clock);
  std::vector<std::string> log;
  {
    Handler handler(looper);
    LoggingObserver a("a", &log);
    ObserverRegistration ra = looper->AddDispatchObserver(&a);
    class FirstWord : public Printer {
     public:
      explicit FirstWord(std::vector<std::string>* log) : log_(log) {}
      void Println(std::string_view line) override { log_->emplace_back(line.substr(0, 5)); }

     private:
      std::vector<std::string>* log_;
    } printer(&log);
    looper->SetMessageLogging(&printer);
    handler.SendEmptyMessage(1);
    handler.Post([] { throw std::logic_error("bad"); });

    EXPECT_THROW(Looper::Loop(), std::logic_error);

    looper->SetMessageLogging(nullptr);
  }
  Looper::ReleaseForTesting();
  EXPECT_THAT(log, ElementsAre(">>>>>", "a begin 1", "a end 1", "<<<<<",  //
                               ">>>>>", "a begin 0", "a end 0", "<<<<<"));
}

class NamedIdleHandler : public IdleHandler {
 public:
  NamedIdleHandler(std::string name, TestEnvironment* env, bool keep)
      : name_(std::move(name)), env_(env), keep_(keep) {}
  bool QueueIdle() override {
    env_->AdvanceClock(absl::Milliseconds(3));
    return keep_;
  }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  TestEnvironment* env_;
  bool keep_;
};

TEST_F(DispatchObserverTest, IdleHandlers_WithObserver_EachRunIsBracketedByBeginAndEnd) {
  LoggingObserver a("a", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  NamedIdleHandler first("first", &env_, /*keep=*/false);
  NamedIdleHandler second("second", &env_, /*keep=*/true);
  looper()->queue()->AddIdleHandler(&first);
  looper()->queue()->AddIdleHandler(&second);
  handler_.SendEmptyMessage(1);

  env_.RunUntilIdle();

  EXPECT_THAT(log_, ElementsAre("a begin 1", "a end 1",                         //
                                "a idle begin first", "a idle end first 3ms",  //
                                "a idle begin second", "a idle end second 3ms"));
  looper()->queue()->RemoveIdleHandler(&second);
}

TEST_F(DispatchObserverTest, IdleHandler_WhenItThrows_EndIsDeliveredAndExceptionPropagates) {
  class Thrower : public IdleHandler {
   public:
    bool QueueIdle() override { throw std::runtime_error("idle failed"); }
    std::string Name() const override { return "thrower"; }
  } thrower;
  LoggingObserver a("a", &log_);
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  looper()->queue()->AddIdleHandler(&thrower);

  EXPECT_THROW(env_.RunUntilIdle(), std::runtime_error);

  EXPECT_THAT(log_, ElementsAre("a idle begin thrower", "a idle end thrower 0"));
  EXPECT_FALSE(looper()->is_dispatching());
  looper()->queue()->RemoveIdleHandler(&thrower);
}

// An observer that records into preallocated storage, as a real monitor does.
class CountingObserver : public DispatchObserver {
 public:
  void OnDispatchBegin(const Message&, TimeTicks begin) override {
    ++begins;
    last_begin = begin;
  }
  void OnDispatchEnd(const Message&, TimeTicks, TimeTicks end) override {
    ++ends;
    last_end = end;
  }
  int begins = 0;
  int ends = 0;
  TimeTicks last_begin;
  TimeTicks last_end;
};

TEST_F(DispatchObserverTest, Dispatch_WithObserversAndNoPrinter_AllocatesNothing) {
  if (!MATRIX_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are not counted under TSan";
  CountingObserver a;
  CountingObserver b;
  ObserverRegistration ra = looper()->AddDispatchObserver(&a);
  ObserverRegistration rb = looper()->AddDispatchObserver(&b);
  // Warm up: the first dispatch may size internal storage.
  handler_.SendEmptyMessage(1);
  env_.RunUntilIdle();
  handler_.SendEmptyMessage(2);
  handler_.Post([] {});

  const size_t before = t_allocations;
  const Looper::PollResult first = looper()->PollOnce(absl::ZeroDuration());
  const Looper::PollResult second = looper()->PollOnce(absl::ZeroDuration());
  const size_t allocations = t_allocations - before;

  EXPECT_EQ(first, Looper::PollResult::kDispatched);
  EXPECT_EQ(second, Looper::PollResult::kDispatched);
  EXPECT_EQ(a.ends, 3);
  EXPECT_EQ(b.ends, 3);
  EXPECT_EQ(allocations, 0u);
}

TEST_F(DispatchObserverTest, Dispatch_WithPrinter_BuildsStrings) {
  // The counterpart of the test above: it shows the counter sees the Printer's
  // strings, so "0 allocations" there is meaningful.
  if (!MATRIX_COUNT_ALLOCATIONS) GTEST_SKIP() << "allocations are not counted under TSan";
  class NullPrinter : public Printer {
   public:
    void Println(std::string_view) override {}
  } printer;
  looper()->SetMessageLogging(&printer);
  handler_.SendEmptyMessage(1);
  env_.RunUntilIdle();
  handler_.SendEmptyMessage(2);

  const size_t before = t_allocations;
  looper()->PollOnce(absl::ZeroDuration());
  const size_t allocations = t_allocations - before;

  EXPECT_GE(allocations, 2u);
  looper()->SetMessageLogging(nullptr);
}

TEST_F(DispatchObserverTest, Observers_HearOnlyTheEventsTheyWant) {
  class KeptIdleHandler : public IdleHandler {
   public:
    bool QueueIdle() override { return true; }
    std::string Name() const override { return "kept"; }
  } idle;
  looper()->queue()->AddIdleHandler(&idle);
  EventCountingObserver dispatches(DispatchObserver::kDispatches);
  EventCountingObserver idles(DispatchObserver::kIdleHandlers);
  EventCountingObserver both(DispatchObserver::kAllEvents);
  ObserverRegistration rd = looper()->AddDispatchObserver(&dispatches);
  ObserverRegistration ri = looper()->AddDispatchObserver(&idles);
  ObserverRegistration rb = looper()->AddDispatchObserver(&both);
  handler_.Post([] {});
  handler_.Post([] {});
  env_.RunUntilIdle();

  EXPECT_EQ(dispatches.dispatch_begins, 2);
  EXPECT_EQ(dispatches.dispatch_ends, 2);
  EXPECT_EQ(dispatches.idle_begins, 0);
  EXPECT_EQ(idles.dispatch_begins, 0);
  EXPECT_EQ(idles.dispatch_ends, 0);
  EXPECT_GE(idles.idle_begins, 1);
  EXPECT_EQ(idles.idle_ends, idles.idle_begins);
  EXPECT_EQ(both.dispatch_begins, 2);
  EXPECT_EQ(both.idle_begins, idles.idle_begins);

  // One handle removes an observer of both kinds from both lists.
  EXPECT_TRUE(rb.active());
  rb.Reset();
  EXPECT_FALSE(rb.active());
  const int idle_runs_before = idles.idle_begins;
  handler_.Post([] {});
  env_.RunUntilIdle();
  EXPECT_GT(idles.idle_begins, idle_runs_before);
  EXPECT_EQ(both.idle_begins, idle_runs_before);
  EXPECT_EQ(both.dispatch_begins, 2);
  EXPECT_EQ(dispatches.dispatch_begins, 3);
  looper()->queue()->RemoveIdleHandler(&idle);
}

}  // namespace
}  // namespace matrix
