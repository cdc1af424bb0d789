// The agent's rule for the loop's own waits (tools/matrix-run/agent/
// loop_wait_sites.h): which call sites of condition variables, semaphores,
// sleeps and reads become dispatch boundaries. Frames are stack addresses:
// lower is deeper.

#include "loop_wait_sites.h"

#include "gtest/gtest.h"

namespace matrix::agent {
namespace {

using CallSite = LoopWaitSites::CallSite;

constexpr int64_t kBlocked = LoopWaitSites::kBlockedNanos;
constexpr int64_t kQuick = 1000;  // 1 us: an event was already there.

// The loop's wait, called from the loop function at its depth.
constexpr CallSite kLoop{.return_address = 0x1000, .frame = 0x7000};
// A handler's wait, deeper in the stack.
constexpr CallSite kHandler{.return_address = 0x2000, .frame = 0x6000};

TEST(LoopWaitSitesTest, ASiteIsTheLoopsAfterThreeBlockedWaits) {
  LoopWaitSites sites;
  sites.CountWait(kLoop, kBlocked);
  sites.CountWait(kLoop, kBlocked);
  sites.CountWait(kLoop, kQuick);  // An event was there already: one back.
  sites.CountWait(kLoop, kBlocked);
  EXPECT_FALSE(sites.IsLoopWait(kLoop));
  sites.CountWait(kLoop, kBlocked);
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
  EXPECT_EQ(sites.LoopWaitCount(), 1);
  // Another depth of the same code (a helper every wait goes through) is
  // another site.
  EXPECT_FALSE(sites.IsLoopWait({.return_address = 0x1000, .frame = 0x6800}));
}

// An uncontended semaphore used as a lock never blocks: never the loop's.
TEST(LoopWaitSitesTest, ASiteThatNeverBlockedIsNotLearned) {
  LoopWaitSites sites;
  for (int i = 0; i < 100; ++i) sites.CountWait(kHandler, kBlocked - 1);
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
}

// A semaphore used as a lock in a busy handler: thousands of uncontended
// waits, a few of them preempted by the scheduler (they "blocked").
TEST(LoopWaitSitesTest, AFewPreemptedWaitsAmongManyQuickOnesAreNotLearned) {
  LoopWaitSites sites;
  for (int i = 0; i < 10000; ++i) sites.CountWait(kHandler, i % 50 == 0 ? kBlocked : kQuick);
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
}

// Tcl's zero-time polls wait for its notifier thread (10-300 us, measured
// 12-66 us under Xvfb here): they blocked, though briefly; a Tk program may
// make nothing else before it idles.
TEST(LoopWaitSitesTest, ShortWaitsForAnotherThreadCountAsBlocked) {
  LoopWaitSites sites;
  for (int i = 0; i < 3; ++i) sites.CountWait(kLoop, 12'000);
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
}

// A sleep in a handler that runs on every dispatch of a poll loop: each
// poll (shallower) comes between two of its waits.
TEST(LoopWaitSitesTest, ShallowerBoundariesBetweenWaitsKeepASiteWork) {
  LoopWaitSites sites;
  for (int i = 0; i < 10; ++i) {
    sites.OnBoundary(0x7000);  // poll, called from the loop.
    sites.CountWait(kHandler, kBlocked);
  }
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
  // A boundary deeper than the site does not reset it (an X round trip in a
  // handler of a loop that waits on a condition variable).
  for (int i = 0; i < 3; ++i) {
    sites.OnBoundary(0x5000);
    sites.CountWait(kLoop, kBlocked);
  }
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
}

// Tcl waits without a timer in pthread_cond_wait (every zero-time poll too)
// and with one in pthread_cond_timedwait (maybe once before a long idle),
// from the same function, 0x37e bytes apart in Debian's libtcl8.6: one site,
// learned on the timed wait after two zero-time polls. A call at another
// depth, or far away, is not.
TEST(LoopWaitSitesTest, CallsOfOneFunctionAtOneDepthAreOneSite) {
  LoopWaitSites sites;
  const CallSite timed{.return_address = kLoop.return_address + 0x37e, .frame = kLoop.frame};
  for (int i = 0; i < 2; ++i) sites.CountWait(kLoop, 12'000);
  EXPECT_FALSE(sites.IsLoopWait(kLoop));
  sites.CountWait(timed, kBlocked);
  EXPECT_TRUE(sites.IsLoopWait(timed));
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
  EXPECT_TRUE(sites.IsLoopWait({.return_address = kLoop.return_address - 0x60,
                                .frame = kLoop.frame}));
  EXPECT_FALSE(sites.IsLoopWait({.return_address = timed.return_address,
                                 .frame = kLoop.frame - 0x100}));
  EXPECT_FALSE(sites.IsLoopWait({.return_address = kLoop.return_address + 0x10000,
                                 .frame = kLoop.frame}));
  // Not a read of an fd either.
  EXPECT_FALSE(sites.IsLoopWait({.return_address = timed.return_address,
                                 .frame = kLoop.frame, .fd = 3}));
}

// Before the loop's wait is known, a handler's recurring wait can be learned
// first (here it recurs first); the loop's first boundary forgets it.
TEST(LoopWaitSitesTest, AHandlerSiteLearnedFirstIsForgottenAtTheLoopsBoundary) {
  LoopWaitSites sites;
  for (int i = 0; i < 3; ++i) {
    sites.CountWait(kHandler, kBlocked);
    sites.CountWait(kLoop, kBlocked);
  }
  ASSERT_TRUE(sites.IsLoopWait(kLoop));
  ASSERT_TRUE(sites.IsLoopWait(kHandler));
  sites.OnBoundary(kLoop.frame);
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
}

// Once the loop's wait is known, a handler's retry loop of timed waits (it
// recurs and blocks with no boundary between) is not learned...
TEST(LoopWaitSitesTest, ARetryLoopInAHandlerIsNotLearnedOnceTheLoopIsKnown) {
  LoopWaitSites sites;
  for (int i = 0; i < 3; ++i) sites.CountWait(kLoop, kBlocked);
  ASSERT_TRUE(sites.IsLoopWait(kLoop));
  sites.OnBoundary(kLoop.frame);
  for (int i = 0; i < 50; ++i) sites.CountWait(kHandler, kBlocked);
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
}

// In a poll loop's dispatch (its poll at kLoop's depth), a handler that
// waits again and again (an asyncio coroutine in time.sleep) stays work; a
// site shallower than the poll (a loop waiting in a condition variable
// after a toolkit's round trip polled deeper) is still learned.
TEST(LoopWaitSitesTest, AHandlerOfAPollLoopIsNotLearned) {
  LoopWaitSites sites;
  for (int i = 0; i < 50; ++i) sites.CountWait(kHandler, kBlocked, kLoop.frame);
  EXPECT_FALSE(sites.IsLoopWait(kHandler));
  for (int i = 0; i < 3; ++i) sites.CountWait(kLoop, kBlocked, kHandler.frame);
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
  // Without the poll loop, the handler's site is learned (the limit).
  LoopWaitSites without;
  for (int i = 0; i < 3; ++i) without.CountWait(kHandler, kBlocked);
  EXPECT_TRUE(without.IsLoopWait(kHandler));
}

// ...but the loop's own wait, run nested deeper (a modal dialog's loop), is.
TEST(LoopWaitSitesTest, TheLoopRunNestedIsLearnedAndForgottenWhenItEnds) {
  LoopWaitSites sites;
  for (int i = 0; i < 3; ++i) sites.CountWait(kLoop, kBlocked);
  const CallSite nested{.return_address = kLoop.return_address, .frame = 0x5000};
  for (int i = 0; i < 3; ++i) sites.CountWait(nested, kBlocked);
  EXPECT_TRUE(sites.IsLoopWait(nested));
  sites.OnBoundary(kLoop.frame);  // Back in the outer loop.
  EXPECT_FALSE(sites.IsLoopWait(nested));
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
}

// read(): the fd is part of the site.
TEST(LoopWaitSitesTest, ReadSitesAreKeyedByTheirFd) {
  LoopWaitSites sites;
  const CallSite wake{.return_address = 0x3000, .frame = 0x7000, .fd = 5};
  for (int i = 0; i < 3; ++i) sites.CountWait(wake, kBlocked);
  EXPECT_TRUE(sites.IsLoopWait(wake));
  EXPECT_TRUE(sites.Knows(wake));
  const CallSite other{.return_address = 0x3000, .frame = 0x7000, .fd = 6};
  EXPECT_FALSE(sites.Knows(other));
  EXPECT_FALSE(sites.IsLoopWait(other));
}

// A full table replaces the sites being learned, never a learned one.
TEST(LoopWaitSitesTest, AFullTableKeepsItsLoopWaits) {
  LoopWaitSites sites;
  for (int i = 0; i < 3; ++i) sites.CountWait(kLoop, kBlocked);
  for (uintptr_t i = 0; i < 100; ++i) {
    // Shallower than the loop, so learnable; each seen once.
    sites.CountWait({.return_address = 0x100000 + i * 0x10000, .frame = 0x8000}, kBlocked);
  }
  EXPECT_TRUE(sites.IsLoopWait(kLoop));
  EXPECT_EQ(sites.LoopWaitCount(), 1);
  // Still learning new sites.
  const CallSite late{.return_address = 0x10000000, .frame = 0x8000};
  for (int i = 0; i < 3; ++i) sites.CountWait(late, kBlocked);
  EXPECT_TRUE(sites.IsLoopWait(late));
}

}  // namespace
}  // namespace matrix::agent
