// HangStackKey(), NativeStackKey() and TracedFunctions() on hand-built stacks
// and call trees.

#include "matrix/trace/report_context.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

constexpr char kApp[] = "/usr/bin/gallery";
constexpr char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kLibStdCxx[] = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";

// Function entry addresses of the fake program.
constexpr uintptr_t kNanosleep = 0x7f0000001000;
constexpr uintptr_t kWaitForDisk = 0x555500001000;
constexpr uintptr_t kOnClick = 0x555500002000;
constexpr uintptr_t kDecode = 0x555500003000;
constexpr uintptr_t kCheap = 0x555500004000;
constexpr uintptr_t kLoop = 0x555500005000;
constexpr uintptr_t kMain = 0x555500006000;
constexpr uintptr_t kTiny = 0x555500007000;

const absl::flat_hash_map<uintptr_t, std::string>& Names() {
  static const auto* names = new absl::flat_hash_map<uintptr_t, std::string>{
      {kNanosleep, "clock_nanosleep"}, {kWaitForDisk, "app::WaitForDisk(int)"},
      {kOnClick, "app::OnClick()"},    {kDecode, "app::Decode()"},
      {kCheap, "app::Cheap()"},        {kLoop, "matrix::Looper::Loop()"},
      {kMain, "main"},                 {kTiny, "app::Tiny()"}};
  return *names;
}

StackFrame Frame(uintptr_t entry, std::string module, uintptr_t offset = 0x2c) {
  StackFrame frame;
  frame.pc = entry + offset;
  auto it = Names().find(entry);
  if (it != Names().end()) frame.symbol.function = it->second;
  frame.symbol.module = std::move(module);
  frame.symbol.function_offset = frame.symbol.function.empty() ? 0 : offset;
  frame.symbol.module_offset = entry & 0xffffff;
  return frame;
}

StackFrame NamedFrame(std::string function, std::string module) {
  StackFrame frame;
  frame.pc = 0x7f0000900000;
  frame.symbol.function = std::move(function);
  frame.symbol.module = std::move(module);
  frame.symbol.function_offset = frame.symbol.function.empty() ? 0 : 4;
  return frame;
}

SymbolizedStack Stack(std::vector<StackFrame> frames) {
  SymbolizedStack stack;
  stack.tid = 42;
  stack.frames = std::move(frames);
  return stack;
}

// A tree of calls: each is (address, depth, cost); calls are laid out one
// after another in pre-order, children starting when their parent starts.
struct Call {
  uintptr_t address;
  int depth;
  absl::Duration cost;
};
CallTree Tree(const std::vector<Call>& calls) {
  const TimeTicks t0 = TimeTicks::FromNanoseconds(int64_t{1} << 34);
  std::vector<uint64_t> records = {MakeTimeRecord(t0)};
  struct Open {
    uintptr_t address;
    TimeTicks end;
  };
  std::vector<Open> open;
  TimeTicks now = t0;
  auto close_to = [&](size_t depth) {
    while (open.size() > depth) {
      now = open.back().end;
      records.push_back(MakeTimeRecord(now));
      records.push_back(MakeRecord(RecordKind::kExit, open.back().address, now));
      open.pop_back();
    }
  };
  for (const Call& call : calls) {
    close_to(static_cast<size_t>(call.depth));
    records.push_back(MakeTimeRecord(now));
    records.push_back(MakeRecord(RecordKind::kEnter, call.address, now));
    open.push_back({call.address, now + call.cost});
  }
  close_to(0);
  CallTree tree = CallTree::Build(records);
  tree.ResolveNames([](uintptr_t address) {
    auto it = Names().find(address);
    return it != Names().end() ? it->second : std::string("?");
  });
  return tree;
}

constexpr absl::Duration kHang = absl::Seconds(5);

TEST(HangStackKeyTest, UntracedApplicationFrame_IsWhereTheThreadIsStuck) {
  const SymbolizedStack stack =
      Stack({Frame(kNanosleep, kLibc), Frame(kWaitForDisk, kApp), Frame(kOnClick, kApp)});
  const CallTree tree = Tree({{kOnClick, 0, kHang}});
  // OnClick is traced and costly, but WaitForDisk (inner, untraced) is where
  // the thread is.
  EXPECT_EQ(HangStackKey(stack, &tree, {kOnClick}, kHang), "app::WaitForDisk(int)");
  // Without any tracing, the same.
  EXPECT_EQ(HangStackKey(stack, nullptr, {}, kHang), "app::WaitForDisk(int)");
}

TEST(HangStackKeyTest, TracedCheapFrame_IsSkippedForTheCostlyCaller) {
  const SymbolizedStack stack = Stack({Frame(kCheap, kApp), Frame(kOnClick, kApp)});
  // Cheap has only run for 10% of the hang: a passing moment of OnClick.
  const CallTree tree = Tree({{kOnClick, 0, kHang}, {kCheap, 1, absl::Milliseconds(500)}});
  EXPECT_EQ(HangStackKey(stack, &tree, {kCheap, kOnClick}, kHang), "app::OnClick()");
}

TEST(HangStackKeyTest, TracedCostlyFrame_Wins_FromThirtyPercent) {
  const SymbolizedStack stack = Stack({Frame(kDecode, kApp), Frame(kOnClick, kApp)});
  const CallTree at_30 = Tree({{kOnClick, 0, kHang}, {kDecode, 1, absl::Milliseconds(1500)}});
  EXPECT_EQ(HangStackKey(stack, &at_30, {kDecode, kOnClick}, kHang), "app::Decode()");
  const CallTree below_30 =
      Tree({{kOnClick, 0, kHang}, {kDecode, 1, absl::Milliseconds(1499)}});
  EXPECT_EQ(HangStackKey(stack, &below_30, {kDecode, kOnClick}, kHang), "app::OnClick()");
}

TEST(HangStackKeyTest, TracedFrameTrimmedFromTheTree_CountsAsCheap) {
  const SymbolizedStack stack = Stack({Frame(kTiny, kApp), Frame(kOnClick, kApp)});
  const CallTree tree = Tree({{kOnClick, 0, kHang}});  // Tiny was trimmed away.
  EXPECT_EQ(HangStackKey(stack, &tree, {kTiny, kOnClick}, kHang), "app::OnClick()");
}

TEST(HangStackKeyTest, RepeatedTracedFunction_UsesItsCostliestCall) {
  const SymbolizedStack stack = Stack({Frame(kDecode, kApp), Frame(kOnClick, kApp)});
  const CallTree tree = Tree({{kOnClick, 0, kHang},
                              {kDecode, 1, absl::Milliseconds(100)},
                              {kCheap, 1, absl::Milliseconds(100)},
                              {kDecode, 1, absl::Seconds(4)}});
  EXPECT_EQ(HangStackKey(stack, &tree, {kDecode, kOnClick}, kHang), "app::Decode()");
}

TEST(HangStackKeyTest, SystemAndRuntimeFrames_AreSkipped) {
  const SymbolizedStack stack = Stack({
      Frame(kNanosleep, kLibc),
      NamedFrame("poll", kLibc),                                   // libc module
      NamedFrame("std::condition_variable::wait(std::unique_lock<std::mutex>&)", kLibStdCxx),
      NamedFrame("std::_Function_handler<void ()>::_M_invoke", kApp),  // std:: in the app
      NamedFrame("void std::__invoke_impl<void>()", kApp),
      NamedFrame("absl::Mutex::Lock()", kApp),
      NamedFrame("matrix::Handler::DispatchMessage(matrix::Message&)", kApp),
      NamedFrame("__libc_start_call_main", kApp),
      NamedFrame("", kApp),                                        // unnamed
      NamedFrame("tick", "/usr/lib/x86_64-linux-gnu/libabsl_synchronization.so"),
      NamedFrame("app::OnTimer()", kApp),
      NamedFrame("main", kApp),
  });
  EXPECT_EQ(HangStackKey(stack, nullptr, {}, kHang), "app::OnTimer()");
}

TEST(HangStackKeyTest, Fallback_TheTreesKeyWhenNoFrameNamesIt) {
  // Only system frames and a cheap traced frame on the stack.
  const SymbolizedStack stack = Stack({Frame(kNanosleep, kLibc), Frame(kCheap, kApp)});
  const CallTree tree = Tree({{kOnClick, 0, kHang},
                              {kCheap, 1, absl::Milliseconds(10)},
                              {kDecode, 1, absl::Seconds(4)}});
  EXPECT_EQ(HangStackKey(stack, &tree, {kCheap}, kHang), "app::Decode()");
}

TEST(HangStackKeyTest, Fallback_NativeStackKeyWithoutTreeOrApplicationFrames) {
  const SymbolizedStack stack = Stack({Frame(kNanosleep, kLibc), Frame(kLoop, kApp)});
  // Nothing is application code: the innermost named frame outside the C
  // runtime (where a capture lands in libc differs from run to run).
  EXPECT_EQ(HangStackKey(stack, nullptr, {}, kHang), "matrix::Looper::Loop()");
  // A tree of nothing but the dispatch does not name anything either.
  const TimeTicks t0 = TimeTicks::FromNanoseconds(int64_t{1} << 34);
  const CallTree dispatch_only = CallTree::Build(
      std::vector<uint64_t>{MakeDispatchBeginRecord(t0), MakeDispatchEndRecord(t0 + kHang)});
  EXPECT_EQ(HangStackKey(stack, &dispatch_only, {}, kHang), "matrix::Looper::Loop()");
  EXPECT_EQ(HangStackKey(Stack({}), nullptr, {}, kHang), "unknown");
  // An unnamed frame of a module that names none (stripped): module+0xaddress.
  EXPECT_EQ(HangStackKey(Stack({NamedFrame("", kApp)}), nullptr, {}, kHang),
            UnnamedFrameKey(kApp, 0));
}

TEST(NativeStackKeyTest, InnermostApplicationFrame) {
  proto::ThreadStack stack;
  FillThreadStack(Stack({Frame(kNanosleep, kLibc), NamedFrame("", kApp),
                         NamedFrame("matrix::Looper::PollOnce(absl::Duration)", kApp),
                         Frame(kWaitForDisk, kApp), Frame(kOnClick, kApp)}),
                  &stack);
  EXPECT_EQ(NativeStackKey(stack), "app::WaitForDisk(int)");
}

TEST(NativeStackKeyTest, Fallbacks) {
  proto::ThreadStack only_system;
  FillThreadStack(Stack({NamedFrame("", kLibc), Frame(kNanosleep, kLibc), Frame(kLoop, kApp)}),
                  &only_system);
  EXPECT_EQ(NativeStackKey(only_system), "matrix::Looper::Loop()");
  EXPECT_EQ(NativeStackKey(proto::ThreadStack()), "unknown");
  // Only the C runtime named: its innermost frame, but never the vDSO's.
  proto::ThreadStack only_libc;
  FillThreadStack(Stack({NamedFrame("__vdso_clock_gettime", "linux-vdso.so.1"),
                         NamedFrame("clock_gettime", kLibc), NamedFrame("", kLibc)}),
                  &only_libc);
  EXPECT_EQ(NativeStackKey(only_libc), "clock_gettime");
  proto::ThreadStack only_vdso;
  FillThreadStack(Stack({NamedFrame("__vdso_clock_gettime", "linux-vdso.so.1"),
                         NamedFrame("", kLibc)}),
                  &only_vdso);
  EXPECT_EQ(NativeStackKey(only_vdso), "unknown");
  // A stripped program's unnamed frame keys before the C runtime's named one.
  proto::ThreadStack stripped;
  FillThreadStack(Stack({NamedFrame("clock_gettime", kLibc), NamedFrame("", kApp)}), &stripped);
  EXPECT_EQ(NativeStackKey(stripped), UnnamedFrameKey(kApp, 0));
}

TEST(NativeStackKeyTest, ABusyLoopInALibraryIsKeyedByTheLibraryNotWhereTheCaptureLanded) {
  // A JavaScript loop in a web engine's JIT code (unnamed) reading the
  // clock: captures land in the vDSO, libc or the JIT code, and every run
  // must give the same key, the engine's innermost named frame.
  const char* kJsc = "/usr/lib/x86_64-linux-gnu/libjavascriptcoregtk-4.1.so.0";
  const std::vector<StackFrame> engine = {NamedFrame("", "[anon]"), NamedFrame("", "[anon]"),
                                          NamedFrame("vmEntryToJavaScript", kJsc),
                                          NamedFrame("JSC::Interpreter::executeCall", kJsc)};
  for (const std::vector<StackFrame>& top :
       {std::vector<StackFrame>{NamedFrame("__vdso_clock_gettime", "linux-vdso.so.1"),
                                NamedFrame("clock_gettime", kLibc)},
        std::vector<StackFrame>{NamedFrame("clock_gettime", kLibc)}, std::vector<StackFrame>{}}) {
    std::vector<StackFrame> frames = top;
    frames.insert(frames.end(), engine.begin(), engine.end());
    proto::ThreadStack stack;
    FillThreadStack(Stack(frames), &stack);
    EXPECT_EQ(NativeStackKey(stack), "vmEntryToJavaScript");
  }
}

TEST(TracedFunctionsTest, StackFunctionsThatWereEntered) {
  const SymbolizedStack stack = Stack(
      {Frame(kWaitForDisk, kApp), Frame(kDecode, kApp), Frame(kOnClick, kApp), NamedFrame("", kApp)});
  const TimeTicks t0 = TimeTicks::FromNanoseconds(int64_t{1} << 34);
  const std::vector<uint64_t> records = {
      MakeTimeRecord(t0),
      MakeRecord(RecordKind::kEnter, kOnClick, t0),
      MakeRecord(RecordKind::kEnter, kMain, t0),    // Not on the stack.
      MakeRecord(RecordKind::kExit, kDecode, t0),   // Exit only: entered before the copy.
      MakeRecord(RecordKind::kEnter, kOnClick, t0),
  };
  EXPECT_EQ(TracedFunctions(stack, records), (absl::flat_hash_set<uintptr_t>{kOnClick}));
  EXPECT_TRUE(TracedFunctions(Stack({}), records).empty());
}

}  // namespace
}  // namespace matrix
