// CallTree on hand-built record sequences: no threads, no clocks.

#include "matrix/trace/call_tree.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {
namespace {

using ::testing::ElementsAre;

constexpr uintptr_t kA = 0x401000;
constexpr uintptr_t kB = 0x402000;
constexpr uintptr_t kC = 0x403000;
constexpr uintptr_t kW = 0x404000;
constexpr uintptr_t kL = 0x405000;
constexpr uintptr_t kM = 0x406000;

std::string FakeName(uintptr_t address) {
  static const std::map<uintptr_t, std::string> names = {{kA, "A()"}, {kB, "B()"}, {kC, "C()"},
                                                         {kW, "W()"}, {kL, "L()"}, {kM, "M()"}};
  auto it = names.find(address);
  return it == names.end() ? "?" : it->second;
}

// Emits records the way MethodTracer's writer does: a time record whenever
// the time's epoch changes, exact time records for dispatches.
class Records {
 public:
  // The default start is a multiple of 1024 ns, so durations that are
  // multiples of 1.024 ms decode exactly.
  explicit Records(TimeTicks start = TimeTicks::FromNanoseconds(int64_t{1024} * 5'000'000))
      : now_(start) {
    records_.push_back(MakeTimeRecord(now_));
    epoch_ = RecordEpoch(now_.ToNanoseconds());
  }

  Records& Advance(absl::Duration d) {
    now_ += d;
    return *this;
  }
  Records& Enter(uintptr_t fn) { return Add(RecordKind::kEnter, fn); }
  Records& Exit(uintptr_t fn) { return Add(RecordKind::kExit, fn); }
  Records& ScopeEnter(const TraceSite* site) {
    return Add(RecordKind::kScopeEnter, reinterpret_cast<uintptr_t>(site));
  }
  Records& ScopeExit(const TraceSite* site) {
    return Add(RecordKind::kScopeExit, reinterpret_cast<uintptr_t>(site));
  }
  Records& Call(uintptr_t fn, absl::Duration cost) { return Enter(fn).Advance(cost).Exit(fn); }
  Records& DispatchBegin() { return Exact(MakeDispatchBeginRecord(now_)); }
  // As the writer: an end leaves the epoch as it was.
  Records& DispatchEnd() {
    records_.push_back(MakeDispatchEndRecord(now_));
    return *this;
  }
  Records& Raw(uint64_t record) {
    records_.push_back(record);
    return *this;
  }

  TimeTicks now() const { return now_; }
  const std::vector<uint64_t>& records() const { return records_; }
  // The records without the first `n` (a copy that lost its head).
  std::vector<uint64_t> DropFront(size_t n) const {
    return std::vector<uint64_t>(records_.begin() + n, records_.end());
  }

 private:
  Records& Add(RecordKind kind, uintptr_t address) {
    if (RecordEpoch(now_.ToNanoseconds()) != epoch_) {
      epoch_ = RecordEpoch(now_.ToNanoseconds());
      records_.push_back(MakeTimeRecord(now_));
    }
    records_.push_back(MakeRecord(kind, address, now_));
    return *this;
  }
  Records& Exact(uint64_t record) {
    epoch_ = RecordEpoch(now_.ToNanoseconds());
    records_.push_back(record);
    return *this;
  }

  TimeTicks now_;
  uint64_t epoch_ = 0;
  std::vector<uint64_t> records_;
};

// Record times are truncated to 1.024 us.
void ExpectCost(const CallNode& node, absl::Duration expected) {
  EXPECT_LE(absl::AbsDuration(node.cost - expected), absl::Microseconds(3))
      << node.name << " cost " << node.cost << " expected " << expected;
}

CallTree Named(CallTree tree) {
  tree.ResolveNames(FakeName);
  return tree;
}

// The shape of the real-program test: W() 300 ms, then A > B > C 800 ms.
Records SlowDispatch() {
  Records r;
  r.DispatchBegin()
      .Call(kW, absl::Milliseconds(300))
      .Enter(kA)
      .Advance(absl::Milliseconds(1))
      .Enter(kB)
      .Call(kC, absl::Milliseconds(800))
      .Exit(kB)
      .Exit(kA)
      .DispatchEnd();
  return r;
}

TEST(CallTreeTest, Build_NestedCalls_PreOrderWithDepthsParentsAndCosts) {
  CallTree tree = Named(CallTree::Build(SlowDispatch().records()));
  ASSERT_EQ(tree.size(), 5u);
  const auto& n = tree.nodes();
  EXPECT_EQ(n[0].kind, MethodKind::kDispatch);
  EXPECT_EQ(n[0].name, "dispatch");
  EXPECT_EQ(n[1].name, "W()");
  EXPECT_EQ(n[2].name, "A()");
  EXPECT_EQ(n[3].name, "B()");
  EXPECT_EQ(n[4].name, "C()");
  EXPECT_EQ(n[0].depth, 0);
  EXPECT_EQ(n[1].depth, 1);
  EXPECT_EQ(n[2].depth, 1);
  EXPECT_EQ(n[3].depth, 2);
  EXPECT_EQ(n[4].depth, 3);
  EXPECT_EQ(n[0].parent, -1);
  EXPECT_EQ(n[1].parent, 0);
  EXPECT_EQ(n[2].parent, 0);
  EXPECT_EQ(n[3].parent, 2);
  EXPECT_EQ(n[4].parent, 3);
  ExpectCost(n[0], absl::Milliseconds(1101));
  ExpectCost(n[1], absl::Milliseconds(300));
  ExpectCost(n[2], absl::Milliseconds(801));
  ExpectCost(n[3], absl::Milliseconds(800));
  ExpectCost(n[4], absl::Milliseconds(800));
  EXPECT_EQ(n[1].address, kW);
  for (const CallNode& node : n) {
    EXPECT_FALSE(node.running || node.entered_before_window || node.unwound) << node.name;
  }
  EXPECT_EQ(tree.stats().unmatched_exits, 0);
  EXPECT_EQ(tree.stats().untimed_records, 0);
}

TEST(CallTreeTest, Build_DispatchTimesAreExactToTheNanosecond) {
  Records r(TimeTicks::FromNanoseconds(7'000'000'123));
  r.DispatchBegin().Advance(absl::Nanoseconds(1'234'567)).DispatchEnd();
  CallTree tree = CallTree::Build(r.records());
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_EQ(tree.nodes()[0].cost, absl::Nanoseconds(1'234'567));
  EXPECT_EQ(tree.nodes()[0].start, TimeTicks::FromNanoseconds(7'000'000'123));
}

TEST(CallTreeTest, Build_LongGapsAcrossEpochs_DecodeExactly) {
  // The writer emits a time record when the epoch (2^24 ns) changes, so a
  // 10 minute call decodes exactly, as does a call straddling one epoch.
  Records r;
  r.Call(kA, absl::Minutes(10)).Advance(absl::Milliseconds(16)).Call(kB, absl::Milliseconds(17));
  CallTree tree = CallTree::Build(r.records());
  ASSERT_EQ(tree.size(), 2u);
  ExpectCost(tree.nodes()[0], absl::Minutes(10));
  ExpectCost(tree.nodes()[1], absl::Milliseconds(17));
}

TEST(CallTreeTest, Build_BufferStartedMidCall_ReconstructsAncestorsInsteadOfEmptyTree) {
  // Matrix returns an empty stack here ("first node depth is not 0").
  Records r;
  r.Advance(absl::Milliseconds(2)).Call(kC, absl::Milliseconds(5)).Advance(absl::Milliseconds(1));
  r.Exit(kB).Advance(absl::Milliseconds(1)).Exit(kA).Call(kW, absl::Milliseconds(3));
  CallTree tree = Named(CallTree::Build(r.records()));
  ASSERT_EQ(tree.size(), 4u);
  const auto& n = tree.nodes();
  EXPECT_EQ(n[0].name, "A()");
  EXPECT_EQ(n[1].name, "B()");
  EXPECT_EQ(n[2].name, "C()");
  EXPECT_EQ(n[3].name, "W()");
  EXPECT_THAT((std::vector<int>{n[0].depth, n[1].depth, n[2].depth, n[3].depth}),
              ElementsAre(0, 1, 2, 0));
  EXPECT_TRUE(n[0].entered_before_window);
  EXPECT_TRUE(n[1].entered_before_window);
  EXPECT_FALSE(n[2].entered_before_window);
  // Lower bounds: from the first record of the window.
  ExpectCost(n[0], absl::Milliseconds(9));
  ExpectCost(n[1], absl::Milliseconds(8));
  ExpectCost(n[2], absl::Milliseconds(5));
  EXPECT_EQ(tree.stats().unmatched_exits, 2);
}

TEST(CallTreeTest, Build_StillRunningCalls_CostRunsToEndTime) {
  // The ANR case: the watchdog copies while the dispatch is stuck in C().
  Records r;
  r.DispatchBegin().Call(kW, absl::Milliseconds(300)).Enter(kA).Enter(kB).Enter(kC);
  const TimeTicks c_start = r.now();
  CallTree::Options options;
  options.end_time = c_start + absl::Seconds(5);
  CallTree tree = Named(CallTree::Build(r.records(), options));
  ASSERT_EQ(tree.size(), 5u);
  const auto& n = tree.nodes();
  EXPECT_TRUE(n[0].running);
  EXPECT_FALSE(n[1].running);
  EXPECT_TRUE(n[4].running);
  ExpectCost(n[0], absl::Milliseconds(5300));
  ExpectCost(n[4], absl::Seconds(5));
  EXPECT_EQ(tree.stats().running_calls, 4);
  EXPECT_EQ(*tree.KeyIndex(absl::Milliseconds(5300)), 4u);
}

TEST(CallTreeTest, Build_StillRunningWithoutEndTime_EndsAtLastRecord) {
  Records r;
  r.Enter(kA).Advance(absl::Milliseconds(7)).Call(kB, absl::Milliseconds(2));
  CallTree tree = CallTree::Build(r.records());
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_TRUE(tree.nodes()[0].running);
  ExpectCost(tree.nodes()[0], absl::Milliseconds(9));
}

TEST(CallTreeTest, Build_ExitMissingForInnerCalls_ClosesThemAsUnwound) {
  // An exception through code whose exit hook does not run (clang): the
  // next exit of an ancestor closes the inner calls.
  Records r;
  r.Enter(kA).Enter(kB).Advance(absl::Milliseconds(4)).Enter(kC).Advance(absl::Milliseconds(6));
  r.Exit(kA).Call(kW, absl::Milliseconds(1));
  CallTree tree = Named(CallTree::Build(r.records()));
  ASSERT_EQ(tree.size(), 4u);
  const auto& n = tree.nodes();
  EXPECT_FALSE(n[0].unwound);
  EXPECT_TRUE(n[1].unwound);
  EXPECT_TRUE(n[2].unwound);
  ExpectCost(n[1], absl::Milliseconds(10));
  ExpectCost(n[2], absl::Milliseconds(6));
  EXPECT_EQ(n[3].name, "W()");
  EXPECT_EQ(n[3].depth, 0);
  EXPECT_EQ(tree.stats().unwound_calls, 2);
}

TEST(CallTreeTest, Build_RecursionMatchesInnermostFrame) {
  Records r;
  r.Enter(kA).Advance(absl::Milliseconds(1)).Call(kA, absl::Milliseconds(2)).Exit(kA);
  CallTree tree = CallTree::Build(r.records());
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree.nodes()[1].depth, 1);
  ExpectCost(tree.nodes()[0], absl::Milliseconds(3));
  ExpectCost(tree.nodes()[1], absl::Milliseconds(2));
}

TEST(CallTreeTest, Build_TruncatedCopy_SkipsUntimedHeadAndKeepsTheRest) {
  // A copy that lost its head starts in the middle of an epoch: the records
  // before its first time record cannot be timed.
  Records r;
  r.Enter(kA).Enter(kB).Advance(absl::Milliseconds(20)).Call(kC, absl::Milliseconds(3));
  r.Exit(kB).Exit(kA);
  // Drop the first time record: Enter A and Enter B are untimed.
  CallTree tree = Named(CallTree::Build(r.DropFront(1)));
  EXPECT_EQ(tree.stats().untimed_records, 2);
  ASSERT_EQ(tree.size(), 3u);
  EXPECT_EQ(tree.nodes()[0].name, "A()");
  EXPECT_EQ(tree.nodes()[2].name, "C()");
  EXPECT_TRUE(tree.nodes()[0].entered_before_window);
  ExpectCost(tree.nodes()[2], absl::Milliseconds(3));
}

TEST(CallTreeTest, Build_NoTimeRecordAtAll_EmptyTree) {
  Records r;
  r.Call(kA, absl::Milliseconds(1));
  CallTree tree = CallTree::Build(r.DropFront(1));
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.stats().untimed_records, 2);
}

TEST(CallTreeTest, Build_ZeroRecordsAreInvalidAndSkipped) {
  Records r;
  r.Raw(0).Call(kA, absl::Milliseconds(1)).Raw(0);
  CallTree tree = CallTree::Build(r.records());
  EXPECT_EQ(tree.size(), 1u);
  EXPECT_EQ(tree.stats().invalid_records, 2);
}

TEST(CallTreeTest, Build_TimeGoingBackwards_IsClampedToZeroCost) {
  // A racing ticker store can move the cached time back a little.
  Records r;
  const TimeTicks t = r.now() + absl::Milliseconds(5);
  r.Raw(MakeRecord(RecordKind::kEnter, kA, t));
  r.Raw(MakeRecord(RecordKind::kExit, kA, t - absl::Milliseconds(1)));
  CallTree tree = CallTree::Build(r.records());
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_EQ(tree.nodes()[0].cost, absl::ZeroDuration());
}

TEST(CallTreeTest, Merge_AdjacentRepeatedLeaves_CountAndSummedCost) {
  Records r;
  r.Enter(kA);
  for (int i = 0; i < 3; ++i) r.Call(kL, absl::Milliseconds(2));
  r.Call(kM, absl::Milliseconds(1)).Call(kL, absl::Milliseconds(4)).Exit(kA);
  CallTree tree = Named(CallTree::Build(r.records()));
  ASSERT_EQ(tree.size(), 4u);
  const auto& n = tree.nodes();
  EXPECT_EQ(n[1].name, "L()");
  EXPECT_EQ(n[1].count, 3);
  ExpectCost(n[1], absl::Milliseconds(6));
  EXPECT_EQ(n[2].name, "M()");
  // Not adjacent to the first run: call order is kept.
  EXPECT_EQ(n[3].name, "L()");
  EXPECT_EQ(n[3].count, 1);
}

TEST(CallTreeTest, Merge_RepeatedCallsWithChildren_AggregatesChildrenByMethod) {
  // A loop calling B(), which calls L() then M(): one B with count 3, whose
  // children are one L and one M with count 3 each.
  Records r;
  r.Enter(kA);
  for (int i = 0; i < 3; ++i) {
    r.Enter(kB).Call(kL, absl::Milliseconds(1)).Call(kM, absl::Milliseconds(2)).Exit(kB);
  }
  r.Exit(kA);
  CallTree tree = Named(CallTree::Build(r.records()));
  ASSERT_EQ(tree.size(), 4u) << tree.ToString();
  EXPECT_EQ(tree.ToString(), "A() 1 9ms\n.B() 3 9ms\n..L() 3 3ms\n..M() 3 6ms\n");
}

TEST(CallTreeTest, Merge_DispatchesAreNeverMerged) {
  Records r;
  r.DispatchBegin().Advance(absl::Milliseconds(1)).DispatchEnd();
  r.DispatchBegin().Advance(absl::Milliseconds(1)).DispatchEnd();
  EXPECT_EQ(CallTree::Build(r.records()).size(), 2u);
}

TEST(CallTreeTest, Merge_CanBeTurnedOff) {
  Records r;
  r.Call(kL, absl::Milliseconds(1)).Call(kL, absl::Milliseconds(1));
  CallTree::Options options;
  options.merge = false;
  EXPECT_EQ(CallTree::Build(r.records(), options).size(), 2u);
  EXPECT_EQ(CallTree::Build(r.records()).size(), 1u);
}

// A full tree (Options::max_calls) folds a repeat of the finished call
// before it into that call, children included, even with merging off: the
// timeline's shape, with every call's time kept.
TEST(CallTreeTest, Bound_FullTreeFoldsRepeatsIntoTheCallBefore) {
  Records r;
  r.DispatchBegin().Enter(kA);
  for (int i = 0; i < 1000; ++i) {
    r.Enter(kB).Call(kL, absl::Microseconds(1024)).Exit(kB);
  }
  r.Exit(kA).DispatchEnd();
  CallTree::Options options;
  options.merge = false;
  options.max_calls = 8;
  CallTree tree = Named(CallTree::Build(r.records(), options));
  // dispatch, A, then B > L until the tree is full, then every later B
  // folds into the last one, its L into that B's L.
  EXPECT_LE(tree.size(), 8u) << tree.ToString();
  int b_calls = 0;
  int l_calls = 0;
  absl::Duration l_cost;
  for (const CallNode& n : tree.nodes()) {
    if (n.name == "B()") b_calls += n.count;
    if (n.name == "L()") {
      l_calls += n.count;
      l_cost += n.cost;
    }
  }
  EXPECT_EQ(b_calls, 1000) << tree.ToString();
  EXPECT_EQ(l_calls, 1000) << tree.ToString();
  ExpectCost(tree.nodes()[1], absl::Microseconds(1024) * 1000);  // A, whole.
  EXPECT_LE(absl::AbsDuration(l_cost - absl::Microseconds(1024) * 1000), absl::Milliseconds(1));
  EXPECT_EQ(tree.stats().dropped_calls, 0);
  EXPECT_GT(tree.stats().folded_calls, 990);
  // The last B spans its first folded call to the last call's end.
  const CallNode& last_b = tree.nodes()[tree.size() - 2];
  ASSERT_EQ(last_b.name, "B()") << tree.ToString();
  EXPECT_EQ(last_b.end, r.now());
  // Without a bound, every call is a node.
  options.max_calls = 0;
  EXPECT_EQ(CallTree::Build(r.records(), options).size(), 2002u);
}

// A full tree drops a call that repeats nothing, with everything it calls,
// counts it at its parent, and still matches every later exit: calls after
// the dropped ones close where they should.
TEST(CallTreeTest, Bound_FullTreeDropsOtherCallsAndCountsThemAtTheirParent) {
  Records r;
  r.Enter(kA);
  for (int i = 0; i < 50; ++i) {
    r.Enter(kB).Call(kL, absl::Microseconds(1024)).Exit(kB);  // B > L
    r.Call(kM, absl::Microseconds(1024));                     // M, between
  }
  r.Advance(absl::Milliseconds(10)).Exit(kA).Call(kC, absl::Milliseconds(2));
  CallTree::Options options;
  options.merge = false;
  options.max_calls = 6;
  CallTree tree = Named(CallTree::Build(r.records(), options));
  // A > B > L, M, B > L: full. Each later M repeats nothing (the call
  // before it is a B) and is dropped; each later B then follows a B and
  // folds into it, its L into that B's L. C, after A, is dropped at the top.
  EXPECT_EQ(tree.ToString(),
            "A() 1 112ms +49 trimmed\n.B() 1 1ms\n..L() 1 1ms\n.M() 1 1ms\n.B() 49 50ms\n"
            "..L() 49 50ms\n");
  const CallNode& a = tree.nodes()[0];
  EXPECT_EQ(a.trimmed_descendants, 49);
  EXPECT_EQ(tree.stats().dropped_calls, 49 + 1);
  EXPECT_EQ(tree.stats().folded_calls, 48 * 2);
  // A's exit matched through the dropped calls: A ends where it exited.
  ExpectCost(a, absl::Microseconds(1024) * 100 + absl::Milliseconds(10));
  EXPECT_FALSE(a.running);
  EXPECT_EQ(tree.stats().unmatched_exits, 0);
  EXPECT_EQ(tree.stats().unwound_calls, 0);
}

// A wide and deep tree: dispatch > 10 x F_i (i ms), each F_i > 9 distinct
// leaves of (j * 10) us, and F_9 > a chain of depth 5 holding most of the cost.
Records BigTree() {
  Records r;
  r.DispatchBegin();
  for (uintptr_t i = 1; i <= 10; ++i) {
    const uintptr_t f = 0x10000 * i;
    r.Enter(f);
    for (uintptr_t j = 1; j <= 9; ++j) r.Call(f + j * 0x10, absl::Microseconds(10 * j));
    if (i == 9) {
      for (uintptr_t d = 1; d <= 5; ++d) r.Enter(0x900000 + d);
      r.Advance(absl::Milliseconds(500));
      for (uintptr_t d = 5; d >= 1; --d) r.Exit(0x900000 + d);
    }
    r.Advance(absl::Milliseconds(i)).Exit(f);
  }
  r.DispatchEnd();
  return r;
}

// Every node's parent precedes it at depth - 1, depths never jump, and no
// call costs more than its parent (what Trim's selection relies on).
void ExpectConsistent(const CallTree& tree) {
  const auto& n = tree.nodes();
  for (size_t i = 0; i < n.size(); ++i) {
    if (n[i].parent < 0) {
      EXPECT_EQ(n[i].depth, 0) << i;
      continue;
    }
    ASSERT_LT(static_cast<size_t>(n[i].parent), i);
    EXPECT_EQ(n[n[i].parent].depth, n[i].depth - 1) << i;
    EXPECT_LE(n[i].depth, n[i - 1].depth + 1) << i;
    EXPECT_LE(n[i].cost, n[n[i].parent].cost) << i;
  }
}

TEST(CallTreeTest, Trim_ToTargetCount_KeepsTreeConsistentAndCostliest) {
  CallTree tree = CallTree::Build(BigTree().records());
  const size_t before = tree.size();
  ASSERT_EQ(before, 1u + 10 + 90 + 5);
  ExpectConsistent(tree);
  tree.Trim(30);
  EXPECT_EQ(tree.size(), 30u);
  ExpectConsistent(tree);
  // The root, all ten F_i and the deep chain (the costliest calls) survive.
  int trimmed = 0;
  int chain = 0;
  for (const CallNode& node : tree.nodes()) {
    trimmed += node.trimmed_descendants;
    if (node.address > 0x900000 && node.address <= 0x900005) ++chain;
  }
  EXPECT_EQ(chain, 5);
  EXPECT_EQ(trimmed, static_cast<int>(before - 30));
  EXPECT_EQ(tree.nodes()[0].kind, MethodKind::kDispatch);
}

TEST(CallTreeTest, Trim_WhileBuilding_SameAsTrimAfterwards) {
  CallTree trimmed_after = CallTree::Build(BigTree().records());
  trimmed_after.Trim(30);
  CallTree::Options options;
  options.trim_to = 30;
  CallTree trimmed_while = CallTree::Build(BigTree().records(), options);
  EXPECT_EQ(trimmed_while.ToMachineString(), trimmed_after.ToMachineString());
  ASSERT_EQ(trimmed_while.size(), trimmed_after.size());
  for (size_t i = 0; i < trimmed_while.size(); ++i) {
    EXPECT_EQ(trimmed_while.nodes()[i].parent, trimmed_after.nodes()[i].parent);
    EXPECT_EQ(trimmed_while.nodes()[i].trimmed_descendants,
              trimmed_after.nodes()[i].trimmed_descendants);
  }
}

TEST(CallTreeTest, Trim_Twice_AccumulatesTrimmedCounts) {
  CallTree tree = CallTree::Build(BigTree().records());
  const size_t before = tree.size();
  tree.Trim(60);
  tree.Trim(20);
  ExpectConsistent(tree);
  int trimmed = 0;
  for (const CallNode& node : tree.nodes()) trimmed += node.trimmed_descendants;
  EXPECT_EQ(trimmed, static_cast<int>(before - 20));
}

TEST(CallTreeTest, Consistent_ForMergedRunningUnwoundAndWrappedCalls) {
  Records r;
  r.Advance(absl::Milliseconds(1)).Call(kL, absl::Milliseconds(2)).Exit(kB);  // Wrapped.
  r.Enter(kA);
  for (int i = 0; i < 3; ++i) r.Enter(kB).Call(kL, absl::Milliseconds(1)).Exit(kB);  // Merged.
  r.Enter(kC).Enter(kM).Advance(absl::Milliseconds(3)).Exit(kC);                     // M unwound.
  r.Enter(kW).Advance(absl::Milliseconds(4));                                        // Running.
  CallTree::Options options;
  options.end_time = r.now() + absl::Milliseconds(10);
  CallTree tree = CallTree::Build(r.records(), options);
  ASSERT_GE(tree.size(), 6u);
  ExpectConsistent(tree);
}

TEST(CallTreeTest, Trim_RemovesCheapestLeavesFirstThenLatest) {
  Records r;
  r.Enter(kA).Call(kL, absl::Microseconds(1024)).Call(kM, absl::Microseconds(1024));
  r.Call(kW, absl::Microseconds(5120)).Exit(kA);
  CallTree tree = Named(CallTree::Build(r.records()));
  tree.Trim(3);
  EXPECT_EQ(tree.ToString(), "A() 1 7ms +1 trimmed\n.L() 1 1ms\n.W() 1 5ms\n");
}

TEST(CallTreeTest, Trim_BelowTreeDepth_RemovesWholeBranchesBottomUp) {
  CallTree tree = CallTree::Build(BigTree().records());
  tree.Trim(3);
  EXPECT_EQ(tree.size(), 3u);
  ExpectConsistent(tree);
  tree.Trim(0);
  EXPECT_TRUE(tree.empty());
}

TEST(CallTreeTest, Key_IsTheEndOfTheHotPath) {
  CallTree tree = Named(CallTree::Build(SlowDispatch().records()));
  std::optional<size_t> key = tree.KeyIndex(absl::Milliseconds(1101));
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(tree.nodes()[*key].name, "C()");
}

TEST(CallTreeTest, Key_DeepCallBelowThirtyPercentLosesToShallowCostlyCall) {
  Records r;
  r.DispatchBegin().Call(kW, absl::Milliseconds(700));
  r.Enter(kA).Enter(kB).Call(kC, absl::Milliseconds(200)).Exit(kB).Exit(kA).DispatchEnd();
  CallTree tree = Named(CallTree::Build(r.records()));
  EXPECT_EQ(tree.nodes()[*tree.KeyIndex(absl::Milliseconds(900))].name, "W()");
}

TEST(CallTreeTest, Key_UsesMeasuredCostWhenLargerThanTheTree) {
  // A (400 ms) > C (250 ms). Against the tree alone C is 62% and deeper, so
  // it wins; against a measured 1 s dispatch C is below 30% and A wins.
  Records r;
  r.Enter(kA).Advance(absl::Milliseconds(150)).Call(kC, absl::Milliseconds(250)).Exit(kA);
  CallTree tree = Named(CallTree::Build(r.records()));
  EXPECT_EQ(tree.nodes()[*tree.KeyIndex(absl::ZeroDuration())].name, "C()");
  EXPECT_EQ(tree.nodes()[*tree.KeyIndex(absl::Seconds(1))].name, "A()");
}

TEST(CallTreeTest, Key_FollowsTheHotPath_WhateverTheWrapperDepth) {
  // dispatch > seven wrappers (std::invoke and friends in a debug build) >
  // handler M (1100 ms) > { W (300 ms), A > B > C (800 ms) }. Ranked by
  // (depth + 1) * cost, M (8 x 1100) would tie with C (11 x 800); one more
  // wrapper would make M the key. The hot path names C at any depth.
  for (int wrappers : {0, 7, 8, 20}) {
    Records r;
    r.DispatchBegin();
    for (int i = 0; i < wrappers; ++i) r.Enter(kL);
    r.Enter(kM).Call(kW, absl::Milliseconds(300));
    r.Enter(kA).Enter(kB).Call(kC, absl::Milliseconds(800)).Exit(kB).Exit(kA).Exit(kM);
    for (int i = 0; i < wrappers; ++i) r.Exit(kL);
    r.DispatchEnd();
    CallTree tree = Named(CallTree::Build(r.records()));
    std::optional<size_t> key = tree.KeyIndex(absl::Milliseconds(1100));
    ASSERT_TRUE(key.has_value());
    EXPECT_EQ(tree.nodes()[*key].name, "C()") << wrappers << " wrappers\n" << tree.ToString();
  }
}

TEST(CallTreeTest, Key_StopsWhereNoChildHoldsThirtyPercent) {
  // A (1000 ms) spends its time in four 250 ms children: none reaches 30%, so
  // A, the call that spread the work, is the key.
  Records r;
  r.DispatchBegin().Enter(kA);
  for (uintptr_t fn : {kB, kC, kL, kM}) r.Call(fn, absl::Milliseconds(250));
  r.Exit(kA).DispatchEnd();
  CallTree tree = Named(CallTree::Build(r.records()));
  EXPECT_EQ(tree.nodes()[*tree.KeyIndex(absl::Seconds(1))].name, "A()");
}

TEST(CallTreeTest, Key_NeverTheDispatchWhenAnyCallExists) {
  // Matrix issue #459: only the dispatch root reaches 30%.
  Records r;
  r.DispatchBegin().Call(kA, absl::Milliseconds(10)).Call(kB, absl::Milliseconds(20));
  r.Advance(absl::Milliseconds(900)).DispatchEnd();
  CallTree tree = Named(CallTree::Build(r.records()));
  EXPECT_EQ(tree.nodes()[*tree.KeyIndex(absl::ZeroDuration())].name, "B()");

  Records only_dispatch;
  only_dispatch.DispatchBegin().Advance(absl::Milliseconds(900)).DispatchEnd();
  CallTree bare = CallTree::Build(only_dispatch.records());
  EXPECT_EQ(*bare.KeyIndex(absl::ZeroDuration()), 0u);
  EXPECT_FALSE(CallTree().KeyIndex(absl::Seconds(1)).has_value());
}

TEST(CallTreeTest, ResolveNames_OncePerAddress_ScopesFromTheirSite) {
  static constexpr TraceSite kSite{"Renderer::Draw", "renderer.cc", 12};
  Records r;
  r.Call(kL, absl::Milliseconds(1)).Call(kM, absl::Milliseconds(1)).Call(kL, absl::Milliseconds(1));
  r.ScopeEnter(&kSite).Advance(absl::Milliseconds(2)).ScopeExit(&kSite);
  CallTree tree = CallTree::Build(r.records());
  std::vector<uintptr_t> asked;
  tree.ResolveNames([&](uintptr_t address) {
    asked.push_back(address);
    return FakeName(address);
  });
  EXPECT_THAT(asked, ElementsAre(kL, kM));
  ASSERT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree.nodes()[3].kind, MethodKind::kScope);
  EXPECT_EQ(tree.nodes()[3].address, reinterpret_cast<uintptr_t>(&kSite));
  EXPECT_EQ(tree.nodes()[3].name, "Renderer::Draw");
}

TEST(CallTreeTest, ToString_OneLinePerCallWithDepthNameCountCost) {
  CallTree tree = Named(CallTree::Build(SlowDispatch().records()));
  EXPECT_EQ(tree.ToString(),
            "dispatch 1 1101ms\n"
            ".W() 1 300ms\n"
            ".A() 1 801ms\n"
            "..B() 1 800ms\n"
            "...C() 1 800ms\n");
}

TEST(CallTreeTest, ToMachineString_DepthCountMicrosFlagsName) {
  Records r;
  r.Advance(absl::Microseconds(4096)).Exit(kB).Enter(kC).Advance(absl::Microseconds(2048));
  CallTree::Options options;
  options.end_time = r.now();
  CallTree tree = Named(CallTree::Build(r.records(), options));
  EXPECT_EQ(tree.ToMachineString(), "0,1,4096,E,B()\n0,1,2048,R,C()\n");
  // Unnamed calls print their address.
  CallTree unnamed = CallTree::Build(r.records(), options);
  EXPECT_EQ(unnamed.ToString(), "0x402000 1 4ms entered-before-window\n0x403000 1 2ms running\n");
}

}  // namespace
}  // namespace matrix
