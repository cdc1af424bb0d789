// What the samples of a slow dispatch say (matrix/trace/sampled_stacks.h):
// the dominant function keys the report, and the samples' call tree.

#include "matrix/trace/sampled_stacks.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix {
namespace {

constexpr char kApp[] = "/home/dev/gallery/build/gallery";
constexpr char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kGlib[] = "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0";

StackFrame Frame(std::string function, std::string module, uintptr_t pc) {
  StackFrame frame;
  frame.pc = pc;
  frame.symbol.function = std::move(function);
  frame.symbol.module = std::move(module);
  frame.symbol.module_offset = pc - 0x1000;
  return frame;
}

// Innermost first, as captured.
SymbolizedStack Stack(std::vector<StackFrame> frames) {
  SymbolizedStack stack;
  stack.frames = std::move(frames);
  return stack;
}

const StackFrame kMain = Frame("main", kApp, 0x9000);
const StackFrame kDispatch = Frame("g_main_context_dispatch", kGlib, 0x8000);
const StackFrame kOnClick = Frame("app::OnClick()", kApp, 0x7000);
const StackFrame kLoad = Frame("app::LoadThumbnails()", kApp, 0x6000);
const StackFrame kDecode = Frame("app::Decode()", kApp, 0x5000);
const StackFrame kLog = Frame("app::LogClick()", kApp, 0x4000);
const StackFrame kMemcpy = Frame("__memmove_avx_unaligned_erms", kLibc, 0x3000);

std::vector<WeightedStack> Weighted(const std::vector<SymbolizedStack>& stacks,
                                    std::vector<int> ms) {
  std::vector<WeightedStack> out;
  for (size_t i = 0; i < stacks.size(); ++i) {
    out.push_back({&stacks[i], absl::Milliseconds(ms[i])});
  }
  return out;
}

TEST(SampledStackKeyTest, TheDeepestFrameHoldingMostOfTheTime_IsTheKey) {
  // OnClick ran throughout; Decode for 400 of 500 ms, LogClick for 100.
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kOnClick, kDispatch, kMain}),
      Stack({kDecode, kLoad, kOnClick, kDispatch, kMain}),
      Stack({kMemcpy, kDecode, kLoad, kOnClick, kDispatch, kMain}),
  };
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {100, 200, 200})), "app::Decode()");
}

TEST(SampledStackKeyTest, ACalleeUnderHalfTheTime_NeverTakesTheKeyFromItsCaller) {
  // Decode is the heaviest callee (40 %), but no callee of LoadThumbnails
  // holds the majority: LoadThumbnails is what held the thread.
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kLoad, kOnClick, kDispatch, kMain}),
      Stack({kDecode, kLoad, kOnClick, kDispatch, kMain}),
      Stack({kMemcpy, kLoad, kOnClick, kDispatch, kMain}),
  };
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {300, 400, 300})), "app::LoadThumbnails()");
  // Half exactly is not a majority either.
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {500, 500, 0})), "app::LoadThumbnails()");
}

TEST(SampledStackKeyTest, WeightNotSampleCount_DecidesTheDominantFrame) {
  // Three quick samples in LogClick, one that stands for 900 ms in Decode.
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kOnClick, kMain}),
      Stack({kLog, kOnClick, kMain}),
      Stack({kLog, kOnClick, kMain}),
      Stack({kDecode, kOnClick, kMain}),
  };
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {10, 10, 10, 900})), "app::Decode()");
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {300, 300, 300, 100})), "app::LogClick()");
}

TEST(SampledStackKeyTest, SystemFramesOnTheDominantPath_GiveWayToTheProgramFrameOutside) {
  // Most of the time in memcpy: the program's frame around it is the key.
  const std::vector<SymbolizedStack> stacks = {
      Stack({kMemcpy, kDecode, kOnClick, kDispatch, kMain}),
      Stack({kMemcpy, kDecode, kOnClick, kDispatch, kMain}),
  };
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {300, 300})), "app::Decode()");
}

TEST(SampledStackKeyTest, NoProgramFrameHoldsTheMajority_TheHeaviestSampleDecides) {
  // Three callbacks of one GLib dispatch, none the majority: the heaviest
  // sample's innermost program frame.
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kDispatch}),
      Stack({kDecode, kDispatch}),
      Stack({kMemcpy, kDispatch}),
  };
  EXPECT_EQ(SampledStackKey(Weighted(stacks, {300, 400, 300})), "app::Decode()");
  EXPECT_EQ(SampledStackKey({}), "");
  const std::vector<SymbolizedStack> unnamed = {Stack({Frame("", kApp, 0x1234)})};
  // A stripped program's frame: module+0xaddress.
  EXPECT_EQ(SampledStackKey(Weighted(unnamed, {100})), "gallery+0x234");
  // Samples at two pcs of one unnamed function, whose start the unwind info
  // gives (function_offset): one frame, keyed by the start.
  auto in_layout = [](uintptr_t pc) {
    StackFrame frame = Frame("", "/opt/viewer/viewer", pc);
    frame.symbol.function_offset = pc - 0x1200;
    return frame;
  };
  auto at = [&](uintptr_t pc) { return Stack({in_layout(pc), kDispatch}); };
  const std::vector<SymbolizedStack> spread = {at(0x1231), at(0x125d), at(0x1231), at(0x125d)};
  const std::vector<WeightedStack> weighted = Weighted(spread, {100, 100, 100, 100});
  const std::vector<DominantFrame> path = DominantCallPath(weighted);
  ASSERT_EQ(path.size(), 2u);
  EXPECT_EQ(path[1].samples_inside, 4u);
  EXPECT_EQ(SampledStackKey(weighted), "viewer+0x200");
}

TEST(FillSampledCallTreeTest, RootedAtTheDeepestSharedFrame_CostIsTheSampledTime) {
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kOnClick, kDispatch, kMain}),
      Stack({kDecode, kLoad, kOnClick, kDispatch, kMain}),
      Stack({kMemcpy, kDecode, kLoad, kOnClick, kDispatch, kMain}),
      Stack({Frame("", kApp, 0x1234), kOnClick, kDispatch, kMain}),
  };
  google::protobuf::RepeatedPtrField<proto::MethodCall> calls;
  std::string text;
  FillSampledCallTree(Weighted(stacks, {100, 200, 250, 50}), 30, &calls, &text);
  EXPECT_EQ(text,
            "0,app::OnClick(),4,600.000\n"
            "1,app::LogClick(),1,100.000\n"
            "1,app::LoadThumbnails(),2,450.000\n"
            "2,app::Decode(),2,450.000\n"
            "3,__memmove_avx_unaligned_erms,1,250.000\n"
            "1,gallery+0x234,1,50.000\n");
  ASSERT_EQ(calls.size(), 6);
  EXPECT_EQ(calls[3].name(), "app::Decode()");
  EXPECT_EQ(calls[3].depth(), 2);
  EXPECT_EQ(calls[3].count(), 2);
  EXPECT_DOUBLE_EQ(calls[3].cost_ms(), 450);
}

TEST(FillSampledCallTreeTest, WithoutADispatcherFrame_RootedAtTheOutermostFrames) {
  const std::vector<SymbolizedStack> stacks = {
      Stack({kDecode, kOnClick, kMain}),
      Stack({kDecode, kOnClick, kMain}),
  };
  google::protobuf::RepeatedPtrField<proto::MethodCall> calls;
  std::string text;
  FillSampledCallTree(Weighted(stacks, {100, 200}), 30, &calls, &text);
  EXPECT_EQ(text, "0,main,2,300.000\n1,app::OnClick(),2,300.000\n2,app::Decode(),2,300.000\n");
}

TEST(FillSampledCallTreeTest, Trimmed_KeepsTheHeaviestCallsWithTheirCallers) {
  const std::vector<SymbolizedStack> stacks = {
      Stack({kLog, kOnClick, kDispatch, kMain}),
      Stack({kMemcpy, kDecode, kLoad, kOnClick, kDispatch, kMain}),
  };
  google::protobuf::RepeatedPtrField<proto::MethodCall> calls;
  std::string text;
  FillSampledCallTree(Weighted(stacks, {100, 500}), 3, &calls, &text);
  EXPECT_EQ(text,
            "0,app::OnClick(),2,600.000\n"
            "1,app::LoadThumbnails(),1,500.000\n"
            "2,app::Decode(),1,500.000\n");
}

}  // namespace
}  // namespace matrix
