// MethodTracer on one thread, without a ticker: the test drives the cached
// time with UpdateTime() and calls the compiler hooks by hand.

#include "matrix/trace/method_tracer.h"

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_record.h"

extern "C" void __cyg_profile_func_enter(void* this_fn, void* call_site);
extern "C" void __cyg_profile_func_exit(void* this_fn, void* call_site);

namespace matrix {
namespace {

void* Fn(uintptr_t address) { return reinterpret_cast<void*>(address); }
void Enter(uintptr_t address) { __cyg_profile_func_enter(Fn(address), nullptr); }
void Exit(uintptr_t address) { __cyg_profile_func_exit(Fn(address), nullptr); }

class ManualClock : public TickClock {
 public:
  TimeTicks NowTicks() const override { return now; }
  TimeTicks now = TimeTicks::FromNanoseconds(int64_t{1024} * 1'000'000);
};

class MethodTracerTest : public ::testing::Test {
 protected:
  std::unique_ptr<MethodTracer> StartTracer(size_t buffer_bytes = size_t{8} << 20) {
    MethodTracer::Options options;
    options.buffer_bytes = buffer_bytes;
    options.tick_period = absl::ZeroDuration();  // The test moves time.
    options.clock = &clock_;
    return MethodTracer::Start(options);
  }

  ManualClock clock_;
};

TEST_F(MethodTracerTest, Start_RoundsCapacityDownToPowerOfTwo) {
  {
    auto tracer = StartTracer();
    EXPECT_EQ(tracer->capacity(), size_t{1} << 20);  // 8 MiB of 8-byte records.
    EXPECT_EQ(MethodTracer::Current(), tracer.get());
  }
  EXPECT_EQ(MethodTracer::Current(), nullptr);
  EXPECT_EQ(StartTracer(3000)->capacity(), 256u);
  EXPECT_EQ(StartTracer(8)->capacity(), 64u);
}

TEST_F(MethodTracerTest, Start_WritesAnInitialTimeRecord) {
  auto tracer = StartTracer();
  ASSERT_EQ(tracer->Mark(), 1u);
  RecordCopy copy = tracer->Copy(0, 1);
  ASSERT_EQ(copy.records.size(), 1u);
  EXPECT_EQ(GetRecordKind(copy.records[0]), RecordKind::kTime);
  EXPECT_EQ(GetRecordTimeNs(copy.records[0]), clock_.now.ToNanoseconds());
  EXPECT_EQ(tracer->CachedTime(), clock_.now);
}

TEST_F(MethodTracerTest, Hooks_OnTracedThread_RecordKindAddressAndTime) {
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  tracer->UpdateTime(clock_.now + absl::Microseconds(2048));
  Enter(0x7f0012345670);
  tracer->UpdateTime(clock_.now + absl::Microseconds(4096));
  Exit(0x7f0012345670);
  RecordCopy copy = tracer->Copy(mark, tracer->Mark());
  ASSERT_EQ(copy.records.size(), 2u);
  EXPECT_FALSE(copy.truncated());
  EXPECT_EQ(GetRecordKind(copy.records[0]), RecordKind::kEnter);
  EXPECT_EQ(GetRecordKind(copy.records[1]), RecordKind::kExit);
  EXPECT_EQ(GetRecordAddress(copy.records[0]), 0x7f0012345670u);
  const int64_t base = clock_.now.ToNanoseconds();
  EXPECT_EQ(DecodeRecordTime(copy.records[0], base), base + 2'048'000);
  EXPECT_EQ(DecodeRecordTime(copy.records[1], base), base + 4'096'000);
}

TEST_F(MethodTracerTest, Hooks_OnOtherThreads_RecordNothing) {
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  std::thread other([] {
    for (int i = 0; i < 1000; ++i) {
      Enter(0x1000);
      Exit(0x1000);
    }
  });
  other.join();
  EXPECT_EQ(tracer->Mark(), mark);
}

TEST_F(MethodTracerTest, Hooks_WithoutTracer_RecordNothing) {
  Enter(0x1000);  // Must not crash.
  Exit(0x1000);
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  tracer.reset();
  Enter(0x1000);
  Exit(0x1000);
  EXPECT_EQ(MethodTracer::Current(), nullptr);
  EXPECT_EQ(mark, 1u);
}

TEST_F(MethodTracerTest, Hooks_EpochChange_WritesTimeRecordFirst) {
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  Enter(0x1000);
  const TimeTicks later = clock_.now + absl::Seconds(3);
  tracer->UpdateTime(later);
  Exit(0x1000);
  RecordCopy copy = tracer->Copy(mark, tracer->Mark());
  ASSERT_EQ(copy.records.size(), 3u);
  EXPECT_EQ(GetRecordKind(copy.records[1]), RecordKind::kTime);
  EXPECT_EQ(GetRecordTimeNs(copy.records[1]), later.ToNanoseconds());
  // Long gaps decode exactly.
  CallTree tree = CallTree::Build(tracer->Copy(0, tracer->Mark()).records);
  ASSERT_EQ(tree.size(), 1u);
  EXPECT_EQ(tree.nodes()[0].cost, absl::Seconds(3));
}

TEST_F(MethodTracerTest, UpdateTime_NeverMovesBackward) {
  auto tracer = StartTracer();
  tracer->UpdateTime(clock_.now + absl::Milliseconds(5));
  tracer->UpdateTime(clock_.now + absl::Milliseconds(2));
  EXPECT_EQ(tracer->CachedTime(), clock_.now + absl::Milliseconds(5));
}

TEST_F(MethodTracerTest, Dispatch_MarkIsTheBeginRecordWithExactTimes) {
  auto tracer = StartTracer();
  Enter(0x1000);
  Exit(0x1000);
  const TimeTicks begin = clock_.now + absl::Nanoseconds(1'000'123);
  const uint64_t mark = tracer->DispatchBegin(begin);
  EXPECT_EQ(mark, 3u);
  EXPECT_TRUE(tracer->in_dispatch());
  // The dispatch time moves the cached clock forward.
  EXPECT_EQ(tracer->CachedTime(), begin);
  Enter(0x2000);
  Exit(0x2000);
  const TimeTicks end = begin + absl::Nanoseconds(777);
  tracer->DispatchEnd(end);
  EXPECT_FALSE(tracer->in_dispatch());
  RecordCopy copy = tracer->Copy(mark, tracer->Mark());
  ASSERT_EQ(copy.records.size(), 4u);
  EXPECT_EQ(GetRecordKind(copy.records[0]), RecordKind::kDispatchBegin);
  EXPECT_EQ(GetRecordTimeNs(copy.records[0]), begin.ToNanoseconds());
  EXPECT_EQ(GetRecordKind(copy.records[3]), RecordKind::kDispatchEnd);
  EXPECT_EQ(GetRecordTimeNs(copy.records[3]), end.ToNanoseconds());
  CallTree tree = CallTree::Build(copy.records);
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree.nodes()[0].kind, MethodKind::kDispatch);
  EXPECT_EQ(tree.nodes()[0].cost, absl::Nanoseconds(777));
  EXPECT_EQ(tree.nodes()[1].address, 0x2000u);
}

TEST_F(MethodTracerTest, DispatchEnd_LeavesTheEpoch_CallsAfterItDecodeFromTheEnd) {
  auto tracer = StartTracer();
  const TimeTicks begin = clock_.now + absl::Milliseconds(1);
  const uint64_t mark = tracer->DispatchBegin(begin);
  Enter(0x1000);
  Exit(0x1000);
  // The dispatch ends 40 ms on, two epochs (16.78 ms) later than its begin;
  // the end moves neither the cached time nor the writer's epoch.
  const TimeTicks end = begin + absl::Milliseconds(40);
  tracer->DispatchEnd(end);
  EXPECT_EQ(tracer->CachedTime(), begin);
  Enter(0x2000);  // Stamped with the begin's time, in the begin's epoch.
  Exit(0x2000);
  tracer->UpdateTime(end + absl::Milliseconds(3));
  Enter(0x3000);  // A new epoch: a tick record first.
  Exit(0x3000);
  RecordCopy copy = tracer->Copy(mark, tracer->Mark());
  ASSERT_EQ(GetRecordKind(copy.records[3]), RecordKind::kDispatchEnd);
  ASSERT_EQ(GetRecordKind(copy.records[6]), RecordKind::kTime);
  CallTree tree = CallTree::Build(copy.records);
  EXPECT_EQ(tree.stats().untimed_records, 0);
  ASSERT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree.nodes()[0].kind, MethodKind::kDispatch);
  EXPECT_EQ(tree.nodes()[0].end, end);
  // Decoded against the begin's epoch and clamped to the end: not two
  // epochs late, nor before the dispatch ended.
  EXPECT_EQ(tree.nodes()[2].address, 0x2000u);
  EXPECT_EQ(tree.nodes()[2].start, end);
  EXPECT_EQ(tree.nodes()[3].address, 0x3000u);
  EXPECT_GE(tree.nodes()[3].start, end + absl::Milliseconds(2));
  EXPECT_LE(tree.nodes()[3].start, end + absl::Milliseconds(3));
}

TEST_F(MethodTracerTest, Buffer_NeverGrows_AndCopiesAcrossWrapAround) {
  auto tracer = StartTracer(64 * 8);
  ASSERT_EQ(tracer->capacity(), 64u);
  // Fill past the physical end several times; each record's address is its
  // absolute index, so a copy can be checked record by record.
  for (uintptr_t i = 1; i < 64 * 5 + 10; ++i) Enter(i * 16);
  EXPECT_EQ(tracer->capacity(), 64u);
  const uint64_t end = tracer->Mark();
  EXPECT_EQ(end, 64u * 5 + 10);
  // A window that wraps physically (indices 300..329 sit at slots 44..63, 0..9).
  RecordCopy copy = tracer->Copy(end - 30, end);
  EXPECT_FALSE(copy.truncated());
  ASSERT_EQ(copy.records.size(), 30u);
  for (size_t k = 0; k < copy.records.size(); ++k) {
    EXPECT_EQ(GetRecordAddress(copy.records[k]), (copy.first_index + k) * 16) << k;
  }
}

TEST_F(MethodTracerTest, Copy_FromOverwrittenMark_KeepsTheValidTail) {
  auto tracer = StartTracer(64 * 8);
  const uint64_t mark = tracer->DispatchBegin(clock_.now);
  for (uintptr_t i = 2; i < 200; ++i) Enter(i * 16);
  const uint64_t end = tracer->Mark();
  RecordCopy copy = tracer->Copy(mark, end);
  EXPECT_TRUE(copy.truncated());
  EXPECT_EQ(copy.requested_first, mark);
  EXPECT_EQ(copy.end_index(), end);
  // At most capacity - 1 records survive (the slot the writer would write
  // next is never trusted).
  EXPECT_EQ(copy.records.size(), 63u);
  EXPECT_EQ(copy.lost(), end - mark - 63);
  for (size_t k = 0; k < copy.records.size(); ++k) {
    ASSERT_EQ(GetRecordAddress(copy.records[k]), (copy.first_index + k) * 16) << k;
  }
  // The lost head is untimed, not garbage: the tree keeps what it can.
  CallTree tree = CallTree::Build(copy.records);
  EXPECT_TRUE(tree.empty());
  EXPECT_EQ(tree.stats().untimed_records, 63);
}

TEST_F(MethodTracerTest, Copy_RangesBeyondTheWriteIndexAreClamped) {
  auto tracer = StartTracer();
  Enter(0x1000);
  RecordCopy copy = tracer->Copy(1, 1000);
  EXPECT_EQ(copy.records.size(), 1u);
  EXPECT_EQ(copy.end_index(), 2u);
  RecordCopy empty = tracer->Copy(5, 3);
  EXPECT_TRUE(empty.records.empty());
  EXPECT_FALSE(empty.truncated());
}

TEST_F(MethodTracerTest, CopyInto_ReusesStorage) {
  auto tracer = StartTracer();
  for (int i = 0; i < 100; ++i) Enter(0x1000);
  RecordCopy copy;
  tracer->CopyInto(0, tracer->Mark(), &copy);
  const uint64_t* data = copy.records.data();
  tracer->CopyInto(10, 60, &copy);
  EXPECT_EQ(copy.records.data(), data);
  EXPECT_EQ(copy.records.size(), 50u);
  EXPECT_EQ(copy.first_index, 10u);
}

void ScopedWork() { MATRIX_TRACE_SCOPE("ScopedWork"); }

TEST_F(MethodTracerTest, TraceScope_RecordsSiteAndNameIsRecoverable) {
  auto tracer = StartTracer();
  const uint64_t mark = tracer->DispatchBegin(clock_.now);
  {
    MATRIX_TRACE_SCOPE("Outer");
    tracer->UpdateTime(clock_.now + absl::Microseconds(1024));
    ScopedWork();
    ScopedWork();
  }
  tracer->DispatchEnd(clock_.now + absl::Microseconds(2048));
  CallTree tree = CallTree::Build(tracer->Copy(mark, tracer->Mark()).records);
  tree.ResolveNames([](uintptr_t) -> std::string {
    ADD_FAILURE() << "scopes need no resolver";
    return "";
  });
  EXPECT_EQ(tree.ToString(), "dispatch 1 2ms\n.Outer 1 1ms\n..ScopedWork 2 0ms\n");
  EXPECT_EQ(tree.nodes()[1].kind, MethodKind::kScope);
  const auto* site = reinterpret_cast<const TraceSite*>(tree.nodes()[1].address);
  EXPECT_THAT(site->file, ::testing::EndsWith("method_tracer_test.cc"));
}

TEST(MethodTracerDeathTest, Start_TwiceIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        MethodTracer::Options options;
        options.tick_period = absl::ZeroDuration();
        auto first = MethodTracer::Start(options);
        std::thread([&] { auto second = MethodTracer::Start(options); }).join();
      },
      "only one MethodTracer");
}

}  // namespace
}  // namespace matrix
