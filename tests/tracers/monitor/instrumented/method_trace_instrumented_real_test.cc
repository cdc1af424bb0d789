// A real program built with matrix_trace_methods(): the compiler hooks, the
// ticker's cached clock, the copier and CallTree together name the real
// culprit of a slow dispatch. Real time (busy-waits), hence "real" in the
// file name; margins are generous.

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/debugging/symbolize.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/tick_clock.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_tracer.h"
#include "workload.h"

namespace matrix {
namespace {

// A one-shot event on std::mutex, which ThreadSanitizer sees through (the
// system Abseil is not built with TSan, so absl::Notification is opaque).
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

using ::testing::HasSubstr;
namespace wl = ::matrix_test_workload;

// The seam the Symbolizer will fill: address -> demangled name.
std::string AbslName(uintptr_t address) {
  char buffer[1024];
  if (absl::Symbolize(reinterpret_cast<const void*>(address), buffer, sizeof(buffer))) {
    return buffer;
  }
  return "";
}

class MethodTraceInstrumentedRealTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { absl::InitializeSymbolizer("/proc/self/exe"); }
};

// Index of the only node whose name contains `name`; fails if not unique.
size_t Find(const CallTree& tree, const std::string& name) {
  size_t found = tree.size();
  for (size_t i = 0; i < tree.size(); ++i) {
    if (tree.nodes()[i].name.find(name) != std::string::npos) {
      EXPECT_EQ(found, tree.size()) << "two nodes named " << name << "\n" << tree.ToString();
      found = i;
    }
  }
  EXPECT_LT(found, tree.size()) << "no node named " << name << "\n" << tree.ToString();
  return found;
}

void ExpectWithin10Percent(absl::Duration actual, absl::Duration truth, const std::string& what) {
  EXPECT_GE(actual, truth * 0.9) << what;
  EXPECT_LE(actual, truth * 1.1) << what;
}

TEST_F(MethodTraceInstrumentedRealTest, SlowDispatch_TreeShowsABCAndKeyIsC) {
  RecordCopy copy;
  absl::Duration measured;
  Event traced_done;
  Event other_done;
  int64_t ticker_wakeups = 0;
  std::thread looper([&] {
    auto tracer = MethodTracer::Start();
    const TimeTicks begin = MonotonicNow();
    const uint64_t mark = tracer->DispatchBegin(begin);
    wl::RunSlowDispatch(absl::Milliseconds(300), absl::Milliseconds(800));
    const TimeTicks end = MonotonicNow();
    tracer->DispatchEnd(end);
    measured = end - begin;
    copy = tracer->Copy(mark, tracer->Mark());
    ticker_wakeups = tracer->ticker_wakeups();
    traced_done.Notify();
    other_done.Wait();  // Destroy on the traced thread.
  });
  traced_done.Wait();
  // Instrumented calls on this (untraced) thread record nothing.
  MethodTracer* tracer = MethodTracer::Current();
  EXPECT_NE(tracer, nullptr);
  if (tracer != nullptr) {
    const uint64_t before = tracer->Mark();
    int sink = 0;
    for (int i = 0; i < 10000; ++i) sink += wl::InstrumentedLeaf(i);
    EXPECT_EQ(tracer->Mark(), before) << sink;
  }
  other_done.Notify();
  looper.join();

  EXPECT_FALSE(copy.truncated());
  // The ticker ran at its fine period during the busy dispatch.
  EXPECT_GT(ticker_wakeups, 100);
  CallTree tree = CallTree::Build(copy.records);
  tree.Trim();
  tree.ResolveNames(AbslName);
  SCOPED_TRACE(tree.ToString());
  std::printf("%s\n%s", tree.ToString().c_str(), tree.ToMachineString().c_str());

  ASSERT_GE(tree.size(), 5u);
  const CallNode& root = tree.nodes()[0];
  EXPECT_EQ(root.kind, MethodKind::kDispatch);
  EXPECT_EQ(root.cost, measured);  // Dispatch begin/end are exact.
  // dispatch > RunSlowDispatch > {Warmup, A > B > C}.
  const size_t run = Find(tree, "RunSlowDispatch(");
  const size_t warmup = Find(tree, "Warmup(");
  const size_t a = Find(tree, "::A(");
  const size_t b = Find(tree, "::B(");
  const size_t c = Find(tree, "::C(");
  ASSERT_LT(c, tree.size());
  ASSERT_LT(run, tree.size());
  EXPECT_EQ(tree.size(), 6u);
  EXPECT_EQ(tree.nodes()[run].parent, 0);
  EXPECT_EQ(tree.nodes()[warmup].parent, static_cast<int>(run));
  EXPECT_EQ(tree.nodes()[a].parent, static_cast<int>(run));
  EXPECT_EQ(tree.nodes()[c].depth, 4);
  EXPECT_EQ(tree.nodes()[b].parent, static_cast<int>(a));
  EXPECT_EQ(tree.nodes()[c].parent, static_cast<int>(b));
  EXPECT_LT(warmup, a);  // Call order.
  ExpectWithin10Percent(tree.nodes()[warmup].cost, absl::Milliseconds(300), "Warmup");
  ExpectWithin10Percent(tree.nodes()[a].cost, absl::Milliseconds(800), "A");
  ExpectWithin10Percent(tree.nodes()[b].cost, absl::Milliseconds(800), "B");
  ExpectWithin10Percent(tree.nodes()[c].cost, absl::Milliseconds(800), "C");
  for (const CallNode& node : tree.nodes()) {
    EXPECT_FALSE(node.running || node.entered_before_window || node.unwound) << node.name;
  }
  const std::optional<size_t> key = tree.KeyIndex(measured);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(*key, c);
  EXPECT_THAT(tree.nodes()[*key].name, HasSubstr("matrix_test_workload::C("));
}

TEST_F(MethodTraceInstrumentedRealTest, Exception_ThroughTracedFrames_TreeStaysConsistent) {
  RecordCopy copy;
  bool caught = false;
  std::thread looper([&] {
    MethodTracer::Options options;
    options.tick_period = absl::ZeroDuration();
    auto tracer = MethodTracer::Start(options);
    const uint64_t mark = tracer->DispatchBegin(MonotonicNow());
    caught = wl::Catcher();
    wl::Warmup(absl::ZeroDuration());  // A call after the unwinding.
    tracer->DispatchEnd(MonotonicNow());
    copy = tracer->Copy(mark, tracer->Mark());
  });
  looper.join();
  ASSERT_TRUE(caught);
  CallTree tree = CallTree::Build(copy.records);
  tree.ResolveNames(AbslName);
  SCOPED_TRACE(tree.ToString());
  const size_t catcher = Find(tree, "Catcher(");
  const size_t middle = Find(tree, "Middle(");
  const size_t thrower = Find(tree, "Thrower(");
  const size_t warmup = Find(tree, "Warmup(");
  ASSERT_LT(warmup, tree.size());
  EXPECT_EQ(tree.nodes()[catcher].depth, 1);
  EXPECT_EQ(tree.nodes()[middle].parent, static_cast<int>(catcher));
  EXPECT_EQ(tree.nodes()[thrower].parent, static_cast<int>(middle));
  // The call after the exception is a sibling of Catcher, not a child of a
  // frame the exception left.
  EXPECT_EQ(tree.nodes()[warmup].depth, 1);
  EXPECT_FALSE(tree.nodes()[catcher].unwound);
  EXPECT_EQ(tree.stats().unmatched_exits, 0);
  EXPECT_EQ(tree.stats().running_calls, 0);
#if defined(__clang__)
  // Clang's -finstrument-functions-after-inlining runs no exit hook while
  // unwinding: CallTree closes the frames when Catcher() exits.
  EXPECT_TRUE(tree.nodes()[middle].unwound);
  EXPECT_TRUE(tree.nodes()[thrower].unwound);
  EXPECT_EQ(tree.stats().unwound_calls, 2);
#else
  // GCC calls the exit hook from the unwinder's cleanups.
  EXPECT_FALSE(tree.nodes()[middle].unwound);
  EXPECT_FALSE(tree.nodes()[thrower].unwound);
  EXPECT_EQ(tree.stats().unwound_calls, 0);
#endif
}

}  // namespace
}  // namespace matrix
