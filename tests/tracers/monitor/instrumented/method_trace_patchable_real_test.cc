// Patchable entries (patchable_entries.h) against the -finstrument-functions
// fallback: the same call graph (call_graph.cc, built once per mechanism)
// must leave the same method-in/method-out sequence in the ring. "real"
// because the program patches its own code; no timing is involved.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "call_graph.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/testing/sanitizers.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/patchable_entries.h"

namespace matrix {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

#define MATRIX_GRAPH_FUNCTIONS(ns)                                                           \
  {reinterpret_cast<uintptr_t>(&ns::Root), "Root"},                                         \
      {reinterpret_cast<uintptr_t>(&ns::Nested), "Nested"},                                 \
      {reinterpret_cast<uintptr_t>(&ns::Leaf), "Leaf"},                                     \
      {reinterpret_cast<uintptr_t>(&ns::Recurse), "Recurse"},                               \
      {reinterpret_cast<uintptr_t>(&ns::Catcher), "Catcher"},                               \
      {reinterpret_cast<uintptr_t>(&ns::Middle), "Middle"},                                 \
      {reinterpret_cast<uintptr_t>(&ns::Thrower), "Thrower"},                               \
      {reinterpret_cast<uintptr_t>(&ns::ManyArgs), "ManyArgs"},                             \
      {reinterpret_cast<uintptr_t>(&ns::ReturnsPair), "ReturnsPair"},                       \
  {                                                                                          \
    reinterpret_cast<uintptr_t>(&ns::Varargs), "Varargs"                                    \
  }

// Records [from, Mark()) as "+Name" / "-Name" ("?" for a function outside
// the graph, e.g. a std:: helper); time records are left out.
std::vector<std::string> Calls(const MethodTracer& tracer, uint64_t from,
                               const absl::flat_hash_map<uintptr_t, std::string>& names) {
  std::vector<std::string> out;
  for (uint64_t r : tracer.Copy(from, tracer.Mark()).records) {
    const RecordKind kind = GetRecordKind(r);
    if (kind != RecordKind::kEnter && kind != RecordKind::kExit) continue;
    auto it = names.find(GetRecordAddress(r));
    out.push_back(std::string(kind == RecordKind::kEnter ? "+" : "-") +
                  (it == names.end() ? "?" : it->second));
  }
  return out;
}

template <typename Graph>
void RunGraph(Graph& g) {
  EXPECT_EQ(g.root(5), 6 + 7 + 3 + 1);
  EXPECT_DOUBLE_EQ(g.many(1, 2, 3, 4, 5, 6, 7, 1.5, 2.0, 0.25),
                   1 + 4 + 9 + 16 + 25 + 36 + 49 + 3.0 - 0.25);
  const auto pair = g.pair(20, 30);
  EXPECT_EQ(pair.a, 40);
  EXPECT_EQ(pair.b, 90);
  EXPECT_EQ(g.varargs(3, 1.0, 2.0, 4.0), 7);
}

struct HookedGraph {
  int (*root)(int) = hooked_graph::Root;
  double (*many)(int, int, int, int, int, int, int, double, double,
                 double) = hooked_graph::ManyArgs;
  hooked_graph::Pair (*pair)(int64_t, int64_t) = hooked_graph::ReturnsPair;
  int (*varargs)(int, ...) = hooked_graph::Varargs;
};

struct PatchedGraph {
  int (*root)(int) = patched_graph::Root;
  double (*many)(int, int, int, int, int, int, int, double, double,
                 double) = patched_graph::ManyArgs;
  patched_graph::Pair (*pair)(int64_t, int64_t) = patched_graph::ReturnsPair;
  int (*varargs)(int, ...) = patched_graph::Varargs;
};

// Every test runs with each mechanism.
class PatchableEntriesTest : public ::testing::TestWithParam<PatchableEntries::Mechanism> {
 protected:
  // Patches with the test's mechanism, and checks that it was the one used.
  static absl::StatusOr<PatchableEntries::Stats> Patch() {
    PatchableEntries::Options options;
    options.mechanism = GetParam();
    absl::StatusOr<PatchableEntries::Stats> stats = PatchableEntries::Patch(options);
    if (stats.ok()) {
      EXPECT_EQ(stats->mechanism, GetParam());
    }
    return stats;
  }

  void SetUp() override {
    if (!PatchableEntries::Supported()) GTEST_SKIP() << "patchable entries need x86-64 Linux";
    uint8_t b[5];
    PatchableEntries::ReadEntryBytes(reinterpret_cast<const void*>(&patched_graph::Leaf), b);
    if (b[0] != 0x90 || b[4] != 0x90) {
      // matrix_trace_methods(PATCHABLE) fell back to -finstrument-functions.
      GTEST_SKIP() << "patched_graph has no patchable entries (PATCHABLE needs GCC)";
    }
    if (GetParam() == PatchableEntries::Mechanism::kReturnSites &&
        (MATRIX_TESTING_ADDRESS_SANITIZER || MATRIX_TESTING_THREAD_SANITIZER)) {
      GTEST_SKIP() << "sanitizer builds wrap (the sanitizer owns __cxa_throw)";
    }
  }
  void TearDown() override { ASSERT_TRUE(PatchableEntries::Unpatch().ok()); }

  std::unique_ptr<MethodTracer> StartTracer() {
    MethodTracer::Options options;
    options.tick_period = absl::ZeroDuration();  // The test moves time.
    options.clock = &clock_;
    return MethodTracer::Start(options);
  }

  testing::FakeTickClock clock_;
  const absl::flat_hash_map<uintptr_t, std::string> hooked_names_{
      MATRIX_GRAPH_FUNCTIONS(hooked_graph)};
  const absl::flat_hash_map<uintptr_t, std::string> patched_names_{
      MATRIX_GRAPH_FUNCTIONS(patched_graph)};
};

const std::vector<std::string> kExpected = {
    "+Root",     "+Nested",   "+Leaf",     "-Leaf",        "+Leaf",    "-Leaf",
    "-Nested",   "+Recurse",  "+Recurse",  "+Recurse",     "+Recurse", "-Recurse",
    "-Recurse",  "-Recurse",  "-Recurse",  "+Catcher",     "+Middle",  "+Thrower",
    "-Thrower",  "-Middle",   "-Catcher",  "-Root",        "+ManyArgs", "-ManyArgs",
    "+ReturnsPair", "-ReturnsPair", "+Varargs", "-Varargs"};

TEST_P(PatchableEntriesTest, RecordsWhatTheFunctionHooksRecord) {
  auto tracer = StartTracer();
  HookedGraph hooked;
  uint64_t mark = tracer->Mark();
  RunGraph(hooked);
  const std::vector<std::string> hooked_calls = Calls(*tracer, mark, hooked_names_);
  EXPECT_THAT(hooked_calls, ElementsAreArray(kExpected));

  PatchedGraph patched;
  mark = tracer->Mark();
  RunGraph(patched);  // Not patched yet: nops, nothing recorded.
  EXPECT_THAT(Calls(*tracer, mark, patched_names_), IsEmpty());

  auto stats = Patch();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->modules, 1u);
  EXPECT_GE(stats->patched, 10u);
  EXPECT_EQ(stats->patched + stats->skipped, stats->entries);

  mark = tracer->Mark();
  RunGraph(patched);
  EXPECT_THAT(Calls(*tracer, mark, patched_names_), ElementsAreArray(hooked_calls));

  // A time record falls due (new epoch) on the way in and on the way out:
  // the trampoline's slow path, with every register kept.
  clock_.Advance(absl::Milliseconds(40));
  tracer->UpdateTime(clock_.NowTicks());
  mark = tracer->Mark();
  EXPECT_EQ(patched_graph::Recurse(2), 2);
  EXPECT_THAT(Calls(*tracer, mark, patched_names_),
              ElementsAreArray({"+Recurse", "+Recurse", "+Recurse", "-Recurse", "-Recurse",
                                "-Recurse"}));
  int time_records = 0;
  for (uint64_t r : tracer->Copy(mark, tracer->Mark()).records) time_records += IsTimeRecord(r);
  EXPECT_EQ(time_records, 1);
}

TEST_P(PatchableEntriesTest, OtherThreadsRecordNothing) {
  ASSERT_TRUE(Patch().ok());
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  std::thread other([] {
    PatchedGraph patched;
    RunGraph(patched);
  });
  other.join();
  EXPECT_EQ(tracer->Mark(), mark);
  // And with no tracer anywhere, patched code runs untraced.
  tracer.reset();
  PatchedGraph patched;
  RunGraph(patched);
}

TEST_P(PatchableEntriesTest, UnpatchRestoresTheOriginalBytes) {
  const void* fns[] = {reinterpret_cast<const void*>(&patched_graph::Root),
                       reinterpret_cast<const void*>(&patched_graph::Leaf),
                       reinterpret_cast<const void*>(&patched_graph::Thrower)};
  const std::vector<uint8_t> nops(5, 0x90);
  for (const void* fn : fns) {
    uint8_t b[5];
    PatchableEntries::ReadEntryBytes(fn, b);
    EXPECT_THAT(std::vector<uint8_t>(b, b + 5), ElementsAreArray(nops));
  }
  ASSERT_TRUE(Patch().ok());
  EXPECT_GT(PatchableEntries::PatchedCount(), 0u);
  for (const void* fn : fns) {
    uint8_t b[5];
    PatchableEntries::ReadEntryBytes(fn, b);
    EXPECT_EQ(b[0], 0xe9);  // jmp rel32
    for (int i = 1; i < 5; ++i) {
      // Each byte of rel32 is a one-byte instruction that is harmless here.
      EXPECT_THAT(b[i], ::testing::AnyOf(0x90, 0xf5, 0xf8, 0xf9, 0xfc));
    }
  }
  // Patching twice changes nothing.
  ASSERT_TRUE(Patch().ok());
  ASSERT_TRUE(PatchableEntries::Unpatch().ok());
  EXPECT_EQ(PatchableEntries::PatchedCount(), 0u);
  for (const void* fn : fns) {
    uint8_t b[5];
    PatchableEntries::ReadEntryBytes(fn, b);
    EXPECT_THAT(std::vector<uint8_t>(b, b + 5), ElementsAreArray(nops));
  }
  // And patching again reuses the stubs.
  auto tracer = StartTracer();
  ASSERT_TRUE(Patch().ok());
  const uint64_t mark = tracer->Mark();
  EXPECT_EQ(patched_graph::Leaf(1), 2);
  EXPECT_THAT(Calls(*tracer, mark, patched_names_), ElementsAreArray({"+Leaf", "-Leaf"}));
}

TEST_P(PatchableEntriesTest, RecursionPastTheShadowStackIsNotRecorded) {
  if (GetParam() != PatchableEntries::Mechanism::kWrap) GTEST_SKIP() << "no shadow stack";
  ASSERT_TRUE(Patch().ok());
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  const int depth = static_cast<int>(PatchableEntries::kShadowDepth) + 50;
  EXPECT_EQ(patched_graph::Recurse(depth), depth);
  const std::vector<std::string> calls = Calls(*tracer, mark, patched_names_);
  // The outermost kShadowDepth calls, balanced.
  ASSERT_EQ(calls.size(), 2 * PatchableEntries::kShadowDepth);
  for (size_t i = 0; i < PatchableEntries::kShadowDepth; ++i) {
    EXPECT_EQ(calls[i], "+Recurse");
    EXPECT_EQ(calls[calls.size() - 1 - i], "-Recurse");
  }
  // Still in sync afterwards.
  const uint64_t mark2 = tracer->Mark();
  EXPECT_EQ(patched_graph::Nested(1), 5);
  EXPECT_THAT(Calls(*tracer, mark2, patched_names_),
              ElementsAreArray({"+Nested", "+Leaf", "-Leaf", "+Leaf", "-Leaf", "-Nested"}));
}

TEST_P(PatchableEntriesTest, TracerStoppedInsideATracedCall) {
  ASSERT_TRUE(Patch().ok());
  auto tracer = StartTracer();
  // A traced function whose frame outlives the tracer returns normally.
  struct Stopper {
    static int Run(std::unique_ptr<MethodTracer>* t) {
      t->reset();
      return 1;
    }
  };
  EXPECT_EQ(Stopper::Run(&tracer), 1);
  PatchedGraph patched;
  RunGraph(patched);
}

// Records carry the cached time's stamp: across an epoch change on the way
// in and another inside the body, each record is preceded by a time record
// carrying the cached time exactly, and decodes to it (to 1024 ns).
TEST_P(PatchableEntriesTest, RecordTimes_DecodeExactly_WhenTheEpochMovesInsideTheBody) {
  ASSERT_TRUE(Patch().ok());
  auto tracer = StartTracer();
  struct Context {
    testing::FakeTickClock* clock;
    MethodTracer* tracer;
  } context{&clock_, tracer.get()};
  auto advance_in_body = [](void* arg) {
    auto* c = static_cast<Context*>(arg);
    c->clock->Advance(absl::Milliseconds(25) + absl::Nanoseconds(3333));
    c->tracer->UpdateTime(c->clock->NowTicks());
  };
  const std::pair<const char*, int (*)(void (*)(void*), void*)> mechanisms[] = {
      {"hooks", hooked_graph::CallsBack}, {"patched", patched_graph::CallsBack}};
  for (const auto& [name, calls_back] : mechanisms) {
    SCOPED_TRACE(name);
    clock_.Advance(absl::Milliseconds(40) + absl::Nanoseconds(1777));
    tracer->UpdateTime(clock_.NowTicks());
    const int64_t in_ns = clock_.NowTicks().ToNanoseconds();
    const int64_t out_ns = in_ns + absl::ToInt64Nanoseconds(absl::Milliseconds(25)) + 3333;
    const uint64_t mark = tracer->Mark();
    EXPECT_EQ(calls_back(advance_in_body, &context), 1);

    const std::vector<uint64_t> r = tracer->Copy(mark, tracer->Mark()).records;
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(GetRecordKind(r[0]), RecordKind::kTime);
    EXPECT_EQ(GetRecordTimeNs(r[0]), in_ns);
    EXPECT_EQ(GetRecordKind(r[1]), RecordKind::kEnter);
    EXPECT_EQ(GetRecordAddress(r[1]), reinterpret_cast<uintptr_t>(calls_back));
    EXPECT_EQ(DecodeRecordTime(r[1], in_ns), in_ns & ~int64_t{1023});
    EXPECT_EQ(GetRecordKind(r[2]), RecordKind::kTime);
    EXPECT_EQ(GetRecordTimeNs(r[2]), out_ns);
    EXPECT_EQ(GetRecordKind(r[3]), RecordKind::kExit);
    EXPECT_EQ(GetRecordAddress(r[3]), reinterpret_cast<uintptr_t>(calls_back));
    EXPECT_EQ(DecodeRecordTime(r[3], out_ns), out_ns & ~int64_t{1023});
  }
}

// Return sites have no shadow stack: every level of a deep recursion is
// recorded.
TEST_P(PatchableEntriesTest, ReturnSites_RecordRecursionAtAnyDepth) {
  if (GetParam() != PatchableEntries::Mechanism::kReturnSites) GTEST_SKIP() << "return sites";
  ASSERT_TRUE(Patch().ok());
  auto tracer = StartTracer();
  const uint64_t mark = tracer->Mark();
  const int depth = static_cast<int>(PatchableEntries::kShadowDepth) + 50;
  EXPECT_EQ(patched_graph::Recurse(depth), depth);
  const std::vector<std::string> calls = Calls(*tracer, mark, patched_names_);
  ASSERT_EQ(calls.size(), 2u * static_cast<size_t>(depth + 1));
  for (int i = 0; i <= depth; ++i) {
    EXPECT_EQ(calls[static_cast<size_t>(i)], "+Recurse");
    EXPECT_EQ(calls[calls.size() - 1 - static_cast<size_t>(i)], "-Recurse");
  }
}

// A return site is patched as a call whose rel32 keeps the nop's bytes
// 1f 44, and Unpatch() makes it the nop again.
TEST_P(PatchableEntriesTest, ReturnSites_PatchAndRestoreTheNopBeforeEachReturn) {
  if (GetParam() != PatchableEntries::Mechanism::kReturnSites) GTEST_SKIP() << "return sites";
  // Leaf's code: its return site is the nop just before its `ret` (c3).
  const auto* code = reinterpret_cast<const uint8_t*>(&patched_graph::Leaf);
  size_t site = 0;
  for (size_t i = 5; i < 64; ++i) {
    if (code[i] == 0x0f && code[i + 1] == 0x1f && code[i + 2] == 0x44 && code[i + 5] == 0xc3) {
      site = i;
      break;
    }
  }
  ASSERT_NE(site, 0u) << "no return site in Leaf";
  auto stats = Patch();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->return_sites, 0u);
  EXPECT_GT(stats->with_return_sites, 0u);
  uint8_t b[5];
  PatchableEntries::ReadEntryBytes(code + site, b);
  EXPECT_EQ(b[0], 0xe8);  // call rel32
  EXPECT_EQ(b[1], 0x1f);
  EXPECT_EQ(b[2], 0x44);
  ASSERT_TRUE(PatchableEntries::Unpatch().ok());
  PatchableEntries::ReadEntryBytes(code + site, b);
  EXPECT_EQ(b[0], 0x0f);
  EXPECT_EQ(b[1], 0x1f);
  EXPECT_EQ(b[2], 0x44);
}

INSTANTIATE_TEST_SUITE_P(Mechanisms, PatchableEntriesTest,
                         ::testing::Values(PatchableEntries::Mechanism::kWrap,
                                           PatchableEntries::Mechanism::kReturnSites),
                         [](const ::testing::TestParamInfo<PatchableEntries::Mechanism>& info) {
                           return info.param == PatchableEntries::Mechanism::kWrap ? "Wrap"
                                                                                   : "ReturnSites";
                         });

// kAuto times both mechanisms once and patches with the cheaper.
TEST(PatchableEntriesAutoTest, MeasuresBothAndUsesTheCheaper) {
  if (!PatchableEntries::Supported()) GTEST_SKIP() << "patchable entries need x86-64 Linux";
  uint8_t b[5];
  PatchableEntries::ReadEntryBytes(reinterpret_cast<const void*>(&patched_graph::Leaf), b);
  if (b[0] != 0x90) GTEST_SKIP() << "patched_graph has no patchable entries (PATCHABLE needs GCC)";
  if (MATRIX_TESTING_ADDRESS_SANITIZER || MATRIX_TESTING_THREAD_SANITIZER) {
    GTEST_SKIP() << "sanitizer builds wrap (the sanitizer owns __cxa_throw)";
  }
  auto stats = PatchableEntries::Patch();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->wrap_ns, 0);
  EXPECT_GT(stats->return_sites_ns, 0);
  EXPECT_EQ(stats->mechanism, stats->return_sites_ns < stats->wrap_ns
                                  ? PatchableEntries::Mechanism::kReturnSites
                                  : PatchableEntries::Mechanism::kWrap);
  ASSERT_TRUE(PatchableEntries::Unpatch().ok());
}

}  // namespace
}  // namespace matrix
