// Tests for ObserverList and ObserverRegistration: notification order, RAII
// removal, and the "existing only" policy when observers are added or removed
// while a notification (or a Scope spanning two) is in progress.

#include "matrix/core/observer_list.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix {
namespace {

using ::testing::ElementsAre;

class Observer {
 public:
  Observer(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void OnEvent(const std::string& event) {
    log_->push_back(name_ + ":" + event);
    if (hook) hook();
  }
  std::function<void()> hook;

 private:
  std::string name_;
  std::vector<std::string>* log_;
};

void Fire(ObserverList<Observer>& list, const std::string& event) {
  list.Notify([&](Observer* o) { o->OnEvent(event); });
}

TEST(ObserverListTest, Notify_WithSeveralObservers_CallsThemInAdditionOrder) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), b("b", &log), c("c", &log);
  ObserverRegistration rb = list.Add(&b);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rc = list.Add(&c);

  Fire(list, "x");

  EXPECT_THAT(log, ElementsAre("b:x", "a:x", "c:x"));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_TRUE(list.Contains(&a));
}

TEST(ObserverListTest, Registration_WhenDestroyed_RemovesTheObserver) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log);
  {
    ObserverRegistration ra = list.Add(&a);
    Fire(list, "1");
  }
  Fire(list, "2");

  EXPECT_THAT(log, ElementsAre("a:1"));
  EXPECT_TRUE(list.empty());
}

TEST(ObserverListTest, Registration_WhenListIsDestroyedFirst_IsInactiveAndSafe) {
  std::vector<std::string> log;
  Observer a("a", &log);
  ObserverRegistration ra;
  {
    ObserverList<Observer> list;
    ra = list.Add(&a);
    EXPECT_TRUE(ra.active());
  }
  EXPECT_FALSE(ra.active());
  ra.Reset();  // Must not touch the destroyed list.
}

TEST(ObserverListTest, Notify_WhenObserverRemovesItself_OthersAreStillCalled) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), b("b", &log), c("c", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rb = list.Add(&b);
  ObserverRegistration rc = list.Add(&c);
  b.hook = [&] { rb.Reset(); };

  Fire(list, "1");
  Fire(list, "2");

  EXPECT_THAT(log, ElementsAre("a:1", "b:1", "c:1", "a:2", "c:2"));
  EXPECT_EQ(list.size(), 2u);
}

TEST(ObserverListTest, Notify_WhenObserverRemovesALaterOne_RemovedOneIsNotCalled) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), b("b", &log), c("c", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rb = list.Add(&b);
  ObserverRegistration rc = list.Add(&c);
  a.hook = [&] {
    rb.Reset();
    rc.Reset();
  };

  Fire(list, "1");

  EXPECT_THAT(log, ElementsAre("a:1"));
  EXPECT_EQ(list.size(), 1u);
}

TEST(ObserverListTest, Notify_WhenObserverAddsAnother_NewOneFirstHearsTheNextNotification) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), late("late", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rlate;
  a.hook = [&] {
    if (!rlate.active()) rlate = list.Add(&late);
  };

  Fire(list, "1");
  Fire(list, "2");

  EXPECT_THAT(log, ElementsAre("a:1", "a:2", "late:2"));
}

TEST(ObserverListTest, Notify_Nested_RemovalIsDeferredUntilOutermostEnds) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), b("b", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rb = list.Add(&b);
  bool nested = false;
  a.hook = [&] {
    if (nested) return;
    nested = true;
    Fire(list, "inner");  // a removes b from inside the inner notification.
    rb.Reset();
  };
  b.hook = [&] {
    if (nested && ra.active()) ra.Reset();
  };

  Fire(list, "outer");

  // inner: a (no re-entry), b removes a. outer: a ran already; b was removed.
  EXPECT_THAT(log, ElementsAre("a:outer", "a:inner", "b:inner"));
  EXPECT_TRUE(list.empty());
}

TEST(ObserverListTest, Scope_WithObserverAddedBetweenNotifications_SkipsItForBoth) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), late("late", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rlate;
  {
    ObserverList<Observer>::Scope scope(list);
    scope.Notify([](Observer* o) { o->OnEvent("begin"); });
    rlate = list.Add(&late);
    scope.Notify([](Observer* o) { o->OnEvent("end"); });
  }
  Fire(list, "next");

  EXPECT_THAT(log, ElementsAre("a:begin", "a:end", "a:next", "late:next"));
}

TEST(ObserverListTest, Scope_WithObserverRemovedBetweenNotifications_SkipsItsEnd) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log), b("b", &log);
  ObserverRegistration ra = list.Add(&a);
  ObserverRegistration rb = list.Add(&b);
  {
    ObserverList<Observer>::Scope scope(list);
    scope.Notify([](Observer* o) { o->OnEvent("begin"); });
    ra.Reset();
    scope.Notify([](Observer* o) { o->OnEvent("end"); });
  }

  EXPECT_THAT(log, ElementsAre("a:begin", "b:begin", "b:end"));
  EXPECT_EQ(list.size(), 1u);
}

TEST(ObserverListTest, AddUnmanaged_ThenRemove_StopsNotifications) {
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log);
  list.AddUnmanaged(&a);
  Fire(list, "1");
  list.Remove(&a);
  list.Remove(&a);  // Removing an absent observer is a no-op.
  Fire(list, "2");

  EXPECT_THAT(log, ElementsAre("a:1"));
  EXPECT_TRUE(list.empty());
}

TEST(ObserverListTest, Notify_OnEmptyList_CallsNothing) {
  ObserverList<Observer> list;
  int calls = 0;
  list.Notify([&](Observer*) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ObserverListDeathTest, Add_SameObserverTwice_IsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<std::string> log;
  ObserverList<Observer> list;
  Observer a("a", &log);
  ObserverRegistration ra = list.Add(&a);
  EXPECT_DEATH((void)list.Add(&a), "observer added twice");
}

}  // namespace
}  // namespace matrix
