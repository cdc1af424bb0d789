// The Qt 6.4.2 V4 frame-chain reader (qml_frames.h) on fake engine memory
// laid out like libQt6Qml 6.4.2's structs (src/internal/qv4_642_layout.h): a
// good chain reads and resolves to names, files and lines; each frame's
// owner comes from the native stack pointers; the engine on the thread's
// stack is picked; cycles, long chains, unmapped pages, a bad compiled-unit
// magic, a foreign vtable or engine read nothing or fail validation, never
// crash; the frames are interleaved just inside the engine frames that run
// them. The real engine is covered by tests/agent/qml_program_e2e_test.cc.

#include "matrix/trace/qml_frames.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/qv4_642_layout.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

using ::testing::ElementsAre;

// One compiled function of a FakeUnit.
struct FakeFunction {
  std::string name;
  int first_line;
  std::vector<std::pair<uint32_t, uint32_t>> lines;  // {code offset, line}
};

// Fake engine memory laid out like Qt 6.4.2's V4 engine.
class FakeV4 {
 public:
  FakeV4() {
    vtable_ = Blob(64);
    info_.unit_vptr = vtable_ + 16;
    js_engine_ = Blob(32);
    engine_ = Blob(800);
    Put(js_engine_, internal::kQv4JsEngineV4Engine, engine_);
    Put(engine_, internal::kQv4EnginePublicEngine, js_engine_);
  }

  const QmlRuntimeInfo& info() const { return info_; }
  uintptr_t engine() const { return engine_; }
  uintptr_t js_engine() const { return js_engine_; }

  // A compilation unit of file `file` holding `functions`; returns the
  // QV4::Function* of each.
  std::vector<uintptr_t> Unit(const std::string& file, const std::vector<FakeFunction>& functions,
                              uintptr_t* unit_data = nullptr) {
    // The compiled unit: header, string offset table, strings, functions.
    std::vector<std::string> strings = {"unused", file};
    for (const FakeFunction& f : functions) strings.push_back(f.name);
    size_t size = internal::kQv4CdUnitReadSize + 4 * strings.size();
    std::vector<uint32_t> string_offsets;
    for (const std::string& s : strings) {
      size = (size + 3) & ~size_t{3};
      string_offsets.push_back(static_cast<uint32_t>(size));
      size += 4 + 2 * s.size();
    }
    std::vector<uint32_t> function_offsets;
    for (const FakeFunction& f : functions) {
      size = (size + 7) & ~size_t{7};
      function_offsets.push_back(static_cast<uint32_t>(size));
      size += 64 + 8 * f.lines.size();  // 56-byte Function, 2 locals, the line table.
    }
    const uintptr_t unit = Blob(size);
    memcpy(reinterpret_cast<void*>(unit), "qv4cdata", 8);
    Put<uint32_t>(unit, internal::kQv4CdUnitVersion, internal::kQv4642DataStructureVersion);
    Put<uint32_t>(unit, internal::kQv4CdUnitQtVersion, internal::kQv4642QtVersion);
    Put<uint32_t>(unit, internal::kQv4CdUnitUnitSize, static_cast<uint32_t>(size));
    Put<uint32_t>(unit, internal::kQv4CdUnitStringTableSize, static_cast<uint32_t>(strings.size()));
    Put<uint32_t>(unit, internal::kQv4CdUnitOffsetToStringTable, internal::kQv4CdUnitReadSize);
    Put<uint32_t>(unit, internal::kQv4CdUnitSourceFileIndex, 1);
    for (size_t i = 0; i < strings.size(); ++i) {
      Put<uint32_t>(unit, internal::kQv4CdUnitReadSize + 4 * i, string_offsets[i]);
      Put<int32_t>(unit, string_offsets[i], static_cast<int32_t>(strings[i].size()));
      for (size_t c = 0; c < strings[i].size(); ++c) {
        Put<uint16_t>(unit, string_offsets[i] + 4 + 2 * c, static_cast<uint8_t>(strings[i][c]));
      }
    }
    // The ExecutableCompilationUnit: vptr, refCount, then the base.
    const uintptr_t executable = Blob(internal::kQv4UnitReadSize + 64);
    const uintptr_t cu = executable + internal::kQv4UnitVptrBefore;
    Put(executable, 0, info_.unit_vptr);
    Put<int32_t>(executable, 8, 1);
    Put(cu, internal::kQv4UnitData, unit);
    Put(cu, internal::kQv4UnitEngine, engine_);
    const std::string url = "file://" + file;
    const uintptr_t chars = Blob(2 * url.size() + 2);
    for (size_t c = 0; c < url.size(); ++c)
      Put<uint16_t>(chars, 2 * c, static_cast<uint8_t>(url[c]));
    Put(cu, internal::kQv4UnitFileName + internal::kQv4QStringPtr, chars);
    Put<int64_t>(cu, internal::kQv4UnitFileName + internal::kQv4QStringSize,
                 static_cast<int64_t>(url.size()));
    std::vector<uintptr_t> result;
    for (size_t i = 0; i < functions.size(); ++i) {
      const uintptr_t cf = unit + function_offsets[i];
      Put<uint32_t>(cf, internal::kQv4CdFunctionNameIndex, static_cast<uint32_t>(2 + i));
      Put<uint32_t>(cf, internal::kQv4CdFunctionLocalsOffset, 56);
      Put<uint16_t>(cf, internal::kQv4CdFunctionNLocals, 2);
      Put<uint16_t>(cf, internal::kQv4CdFunctionNLineNumbers,
                    static_cast<uint16_t>(functions[i].lines.size()));
      Put<uint32_t>(cf, internal::kQv4CdFunctionLocation,
                    static_cast<uint32_t>(functions[i].first_line) | (5u << 20));
      for (size_t k = 0; k < functions[i].lines.size(); ++k) {
        Put<uint32_t>(cf, 64 + 8 * k, functions[i].lines[k].first);
        Put<uint32_t>(cf, 64 + 8 * k + 4, functions[i].lines[k].second);
      }
      const uintptr_t function = Blob(internal::kQv4FunctionReadSize);
      Put(function, internal::kQv4FunctionCompilationUnit, cu);
      Put(function, internal::kQv4FunctionCompiledFunction, cf);
      result.push_back(function);
    }
    if (unit_data != nullptr) *unit_data = unit;
    return result;
  }

  // A CppStackFrame at `address` (nullptr: a new heap one).
  uintptr_t Frame(uintptr_t function, int32_t ip, uintptr_t parent, uint8_t kind = 0,
                  uintptr_t address = 0) {
    const uintptr_t frame = address != 0 ? address : Blob(internal::kQv4FrameReadSize);
    Put(frame, internal::kQv4FrameParent, parent);
    Put(frame, internal::kQv4FrameFunction, function);
    Put<int32_t>(frame, internal::kQv4FrameInstructionPointer, ip);
    Put<uint8_t>(frame, internal::kQv4FrameKind, kind);
    return frame;
  }
  void SetCurrent(uintptr_t frame) { Put(engine_, internal::kQv4EngineCurrentStackFrame, frame); }

  uintptr_t Blob(size_t size) {
    blobs_.push_back(std::make_unique<uint64_t[]>((size + 7) / 8 + 1));
    memset(blobs_.back().get(), 0, ((size + 7) / 8 + 1) * 8);
    return reinterpret_cast<uintptr_t>(blobs_.back().get());
  }
  template <typename T>
  static void Put(uintptr_t base, size_t offset, T value) {
    memcpy(reinterpret_cast<void*>(base + offset), &value, sizeof(T));
  }

 private:
  QmlRuntimeInfo info_;
  uintptr_t vtable_ = 0, js_engine_ = 0, engine_ = 0;
  std::vector<std::unique_ptr<uint64_t[]>> blobs_;
};

const std::vector<FakeFunction> kHangFunctions = {
    {"busy", 7, {{0, 8}, {10, 9}, {30, 11}}},
    {"inner", 19, {{0, 20}, {12, 21}}},
    {"", 2, {{0, 3}}},
    {"%entry", 1, {{0, 1}, {4, 30}}},
};

class QmlFramesTest : public ::testing::Test {
 protected:
  void TearDown() override { SetQmlRuntimeForTesting(nullptr); }
};

TEST_F(QmlFramesTest, ReadsAndResolvesNamesFilesAndLines) {
  FakeV4 v4;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions);
  const uintptr_t global = v4.Frame(f[3], 6, 0);
  const uintptr_t anonymous = v4.Frame(f[2], 0, global);
  const uintptr_t scope = v4.Frame(0, 0, anonymous);  // No function: skipped.
  const uintptr_t inner = v4.Frame(f[1], 14, scope);
  const uintptr_t busy = v4.Frame(f[0], 15, inner);
  v4.SetCurrent(busy);

  RawQmlStack raw;
  ASSERT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kNone);
  ASSERT_EQ(raw.depth, 4);
  EXPECT_FALSE(raw.truncated);
  EXPECT_EQ(raw.engine, v4.engine());
  std::vector<std::string> got;
  for (int i = 0; i < raw.depth; ++i) {
    EXPECT_EQ(raw.frames[i].owner, -1);
    absl::StatusOr<QmlFrameInfo> info = ResolveQmlFrame(v4.info(), v4.engine(), raw.frames[i]);
    ASSERT_TRUE(info.ok()) << info.status();
    got.push_back(info->function + " " + info->file + ":" + std::to_string(info->line) +
                  (info->line_exact ? "" : "~"));
  }
  EXPECT_THAT(got, ElementsAre("busy /app/hang.qml:9", "inner /app/hang.qml:21",
                               "<anonymous> /app/hang.qml:2~", "<global> /app/hang.qml:30"));
}

TEST_F(QmlFramesTest, OwnersComeFromTheNativeStackPointers) {
  FakeV4 v4;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions);
  // A fake native stack: frame i's locals from sps[i] up to sps[i + 1].
  const uintptr_t stack = v4.Blob(4096);
  const uintptr_t sps[] = {stack, stack + 256, stack + 512, stack + 1024, stack + 2048};
  const uintptr_t outer = v4.Frame(f[1], 14, 0, 0, stack + 1024 + 64);   // Owner 3.
  const uintptr_t heap = v4.Frame(f[2], 0, outer);                       // Not on the stack.
  const uintptr_t inner = v4.Frame(f[0], 15, heap, 0, stack + 256 + 8);  // Owner 1.
  v4.SetCurrent(inner);
  RawQmlStack raw;
  ASSERT_EQ(ReadQmlStack(v4.engine(), sps, 5, &raw), QmlReadError::kNone);
  ASSERT_EQ(raw.depth, 3);
  EXPECT_EQ(raw.frames[0].owner, 1);
  EXPECT_EQ(raw.frames[1].owner, -1);
  EXPECT_EQ(raw.frames[2].owner, 3);
}

TEST_F(QmlFramesTest, CapturePicksTheEngineRunningOnThisStack) {
  FakeV4 here, elsewhere;
  const std::vector<uintptr_t> f = here.Unit("/app/a.qml", kHangFunctions);
  const std::vector<uintptr_t> g = elsewhere.Unit("/app/b.qml", kHangFunctions);
  const uintptr_t stack = here.Blob(4096);
  const uintptr_t sps[] = {stack, stack + 1024, stack + 4096};
  here.SetCurrent(here.Frame(f[0], 15, 0, 0, stack + 1024 + 16));
  elsewhere.SetCurrent(elsewhere.Frame(g[1], 14, 0));  // Below this stack: another thread's.

  RawQmlStack raw;
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.error, QmlReadError::kNoRuntime);  // No runtime yet.

  SetQmlRuntimeForTesting(&here.info());
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.error, QmlReadError::kNoRuntime);  // No engine registered.
  RegisterQmlEngineForTesting(elsewhere.js_engine(), elsewhere.engine());
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.error, QmlReadError::kNoEngine);
  EXPECT_EQ(raw.depth, 0);
  RegisterQmlEngineForTesting(here.js_engine(), here.engine());
  CaptureQmlStack(sps, 3, &raw);
  ASSERT_EQ(raw.error, QmlReadError::kNone);
  EXPECT_EQ(raw.engine, here.engine());
  ASSERT_EQ(raw.depth, 1);
  EXPECT_EQ(raw.frames[0].function, f[0]);
  EXPECT_EQ(raw.frames[0].owner, 1);
  // Destroyed, its memory reused: it no longer links back to its QJSEngine.
  FakeV4::Put(here.engine(), internal::kQv4EnginePublicEngine, uintptr_t{0});
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.error, QmlReadError::kNoEngine);
  EXPECT_EQ(raw.depth, 0);
}

TEST_F(QmlFramesTest, RegisteringChecksTheBackLinkAndKeepsReusedAddresses) {
  FakeV4 v4;
  // Outside a Qt 6.4.2 process (this test links no Qt) nothing registers.
  EXPECT_FALSE(RegisterQmlEngine(v4.js_engine(), v4.engine()));
  EXPECT_EQ(QmlEngineOf(v4.js_engine()), v4.engine());
  EXPECT_EQ(QmlEngineOf(0), 0u);
  // The registry holds kMaxQmlEngines; a repeated address keeps its entry,
  // and more engines replace the oldest.
  SetQmlRuntimeForTesting(&v4.info());
  for (int i = 0; i < 3 * kMaxQmlEngines; ++i)
    RegisterQmlEngineForTesting(v4.js_engine(), v4.engine());
  const std::vector<uintptr_t> f = v4.Unit("/app/a.qml", kHangFunctions);
  const uintptr_t stack = v4.Blob(1024);
  const uintptr_t sps[] = {stack, stack + 512, stack + 1024};
  v4.SetCurrent(v4.Frame(f[0], 15, 0, 0, stack + 600));
  std::vector<std::unique_ptr<FakeV4>> others;
  for (int i = 0; i < kMaxQmlEngines - 1; ++i) {
    others.push_back(std::make_unique<FakeV4>());
    RegisterQmlEngineForTesting(others.back()->js_engine(), others.back()->engine());
  }
  RawQmlStack raw;
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.engine, v4.engine());  // Still registered: 16 entries.
  others.push_back(std::make_unique<FakeV4>());
  RegisterQmlEngineForTesting(others.back()->js_engine(),
                              others.back()->engine());  // Replaces the oldest (v4's).
  CaptureQmlStack(sps, 3, &raw);
  EXPECT_EQ(raw.error, QmlReadError::kNoEngine);
}

TEST_F(QmlFramesTest, CyclesLongChainsAndBadPointersReadNothing) {
  FakeV4 v4;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions);
  RawQmlStack raw;
  // A cycle.
  const uintptr_t a = v4.Frame(f[0], 15, 0);
  const uintptr_t b = v4.Frame(f[1], 14, a);
  FakeV4::Put(a, internal::kQv4FrameParent, b);
  v4.SetCurrent(a);
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kCycle);
  EXPECT_EQ(raw.depth, 0);
  // A chain longer than kMaxQmlFrames: cut, marked truncated.
  uintptr_t frame = 0;
  for (int i = 0; i < 3 * kMaxQmlFrames; ++i) frame = v4.Frame(f[i % 2], 15, frame);
  v4.SetCurrent(frame);
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kNone);
  EXPECT_EQ(raw.depth, kMaxQmlFrames);
  EXPECT_TRUE(raw.truncated);
  // Scope frames only (no functions): bounded by the steps, not the depth.
  frame = 0;
  for (int i = 0; i < 3 * kMaxQmlFrames; ++i) frame = v4.Frame(0, 0, frame);
  v4.SetCurrent(frame);
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kNone);
  EXPECT_EQ(raw.depth, 0);
  EXPECT_TRUE(raw.truncated);
  // A bad kind, a misaligned function, an unmapped frame.
  v4.SetCurrent(v4.Frame(f[0], 15, 0, 7));
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kBadPointer);
  v4.SetCurrent(v4.Frame(f[0] + 3, 15, 0));
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kBadPointer);
  const long page = sysconf(_SC_PAGESIZE);
  void* unmapped = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(unmapped, MAP_FAILED);
  ASSERT_EQ(munmap(unmapped, page), 0);
  v4.SetCurrent(v4.Frame(f[0], 15, reinterpret_cast<uintptr_t>(unmapped)));
  EXPECT_EQ(ReadQmlStack(v4.engine(), nullptr, 0, &raw), QmlReadError::kFault);
  EXPECT_EQ(raw.depth, 0);
  EXPECT_EQ(ReadQmlStack(reinterpret_cast<uintptr_t>(unmapped), nullptr, 0, &raw),
            QmlReadError::kFault);
}

TEST_F(QmlFramesTest, ResolveRejectsWhatIsNotThisEnginesCompiledFunction) {
  FakeV4 v4, other;
  uintptr_t unit = 0;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions, &unit);
  RawQmlFrame raw;
  raw.function = f[0];
  raw.ip = 15;
  ASSERT_TRUE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
  // Another engine's, another vtable.
  EXPECT_FALSE(ResolveQmlFrame(v4.info(), other.engine(), raw).ok());
  EXPECT_FALSE(ResolveQmlFrame(other.info(), v4.engine(), raw).ok());
  // A bad magic, another data structure version.
  memcpy(reinterpret_cast<void*>(unit), "qv4cdatX", 8);
  EXPECT_EQ(ResolveQmlFrame(v4.info(), v4.engine(), raw).status().code(),
            absl::StatusCode::kDataLoss);
  memcpy(reinterpret_cast<void*>(unit), "qv4cdata", 8);
  FakeV4::Put<uint32_t>(unit, internal::kQv4CdUnitVersion, 0x35);
  EXPECT_FALSE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
  FakeV4::Put<uint32_t>(unit, internal::kQv4CdUnitVersion, internal::kQv4642DataStructureVersion);
  // A name index past the string table, a unit size that leaves the
  // function outside.
  ASSERT_TRUE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
  FakeV4::Put<uint32_t>(unit, internal::kQv4CdUnitStringTableSize, 2);
  EXPECT_FALSE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
  FakeV4::Put<uint32_t>(unit, internal::kQv4CdUnitStringTableSize, 6);
  FakeV4::Put<uint32_t>(unit, internal::kQv4CdUnitUnitSize, 300);
  EXPECT_FALSE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
  raw.function = 0;
  EXPECT_FALSE(ResolveQmlFrame(v4.info(), v4.engine(), raw).ok());
}

TEST_F(QmlFramesTest, RandomMemoryNeverCrashes) {
  std::mt19937_64 random(42);
  std::vector<uint64_t> soup(4096);
  const auto base = reinterpret_cast<uintptr_t>(soup.data());
  QmlRuntimeInfo info;
  info.unit_vptr = base + 16;
  for (int round = 0; round < 200; ++round) {
    for (uint64_t& word : soup) {
      // Pointers into the soup, small numbers and noise.
      switch (random() % 3) {
        case 0:
          word = base + 8 * (random() % soup.size());
          break;
        case 1:
          word = random() % 64;
          break;
        default:
          word = random();
          break;
      }
    }
    RawQmlStack raw;
    const uintptr_t engine = base + 8 * (random() % soup.size());
    ReadQmlStack(engine, nullptr, 0, &raw);
    ASSERT_LE(raw.depth, kMaxQmlFrames);
    for (int i = 0; i < raw.depth; ++i) (void)ResolveQmlFrame(info, engine, raw.frames[i]);
  }
}

StackFrame Native(const std::string& function, const std::string& module) {
  StackFrame frame;
  frame.symbol.function = function;
  frame.symbol.module = module;
  return frame;
}

TEST_F(QmlFramesTest, InterleavesJustInsideTheEngineFrames) {
  FakeV4 v4;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions);
  const std::string qml = "/usr/lib/x86_64-linux-gnu/libQt6Qml.so.6";
  // The stack of the busy() hang (innermost first), as the symbolizer names
  // it: VME::exec and VME::interpret are hidden, named by module only.
  std::vector<StackFrame> frames = {
      Native("QDateTime::currentMSecsSinceEpoch()", "/usr/lib/libQt6Core.so.6"),  // 0
      Native("", qml),                                                            // 1 Date.now
      Native("", qml),                                                            // 2 interpret
      Native("", qml),                                                            // 3 exec
      Native("", qml),                                                            // 4 owner of busy
      Native("QV4::Runtime::CallQmlContextPropertyLookup::call", qml),            // 5
      Native("", qml),                                                            // 6 interpret
      Native("", qml),                                                            // 7 exec
      Native("QV4::Function::call", qml),                 // 8 owner of inner
      Native("QQmlJavaScriptExpression::evaluate", qml),  // 9
      Native("main", "/usr/lib/qt6/bin/qml"),             // 10
  };
  RawQmlStack raw;
  raw.error = QmlReadError::kNone;
  raw.engine = v4.engine();
  raw.depth = 3;
  raw.frames[0] = {f[0], 15, 4, 0};
  raw.frames[1] = {f[2], 0, -1, 0};  // A generator's: next to its outer neighbour.
  raw.frames[2] = {f[1], 14, 8, 0};
  InterleaveQmlFrames(v4.info(), raw, 0, &frames);
  std::vector<std::string> names;
  for (const StackFrame& frame : frames) {
    names.push_back(frame.symbol.module == kQmlFrameModule ? "[" + frame.symbol.function + "]"
                                                           : frame.symbol.function);
  }
  // The hidden VME::interpret and VME::exec frames are named from their place.
  EXPECT_THAT(
      names,
      ElementsAre("QDateTime::currentMSecsSinceEpoch()", "", "[busy]", "QV4::Moth::VME::interpret",
                  "QV4::Moth::VME::exec", "", "QV4::Runtime::CallQmlContextPropertyLookup::call",
                  "[<anonymous>]", "[inner]", "QV4::Moth::VME::interpret", "QV4::Moth::VME::exec",
                  "QV4::Function::call", "QQmlJavaScriptExpression::evaluate", "main"));
  EXPECT_EQ(frames[2].symbol.file, "/app/hang.qml");
  EXPECT_EQ(frames[2].symbol.line, 9);

  // ToString shows the function, "[qml]" and the file and line.
  SymbolizedStack stack;
  stack.frames = frames;
  const std::string text = stack.ToString();
  EXPECT_THAT(text, ::testing::HasSubstr("busy ([qml])\n      at /app/hang.qml:9\n"));

  // Owners counted before frames were dropped from the front; a frame whose
  // owner is not on the (cut) stack goes to the end.
  std::vector<StackFrame> short_stack = {Native("x", "/lib/libc.so.6"), Native("", qml),
                                         Native("", qml), Native("", qml)};
  raw.depth = 2;
  raw.frames[0] = {f[0], 15, 4, 0};  // Owner 4 - 1 dropped = 3.
  raw.frames[1] = {f[1], 14, 40, 0};
  InterleaveQmlFrames(v4.info(), raw, 1, &short_stack);
  names.clear();
  for (const StackFrame& frame : short_stack) names.push_back(frame.symbol.function);
  EXPECT_THAT(names, ElementsAre("x", "busy", "QV4::Moth::VME::interpret", "QV4::Moth::VME::exec",
                                 "", "inner"));
}

// What the capture handler spends on the QML chain: two registered engines
// (one idle), a chain of 8 frames on an 8-frame native stack, then each
// frame resolved (outside the handler).
TEST_F(QmlFramesTest, ReadCost) {
  FakeV4 v4, idle;
  const std::vector<uintptr_t> f = v4.Unit("/app/hang.qml", kHangFunctions);
  const uintptr_t stack = v4.Blob(8 * 512);
  uintptr_t sps[9];
  for (int i = 0; i < 9; ++i) sps[i] = stack + 512 * static_cast<uintptr_t>(i);
  uintptr_t frame = 0;
  for (int i = 7; i >= 0; --i) {
    frame = v4.Frame(f[static_cast<size_t>(i % 2)], 15, frame, 0, stack + 512 * i + 64);
  }
  v4.SetCurrent(frame);
  SetQmlRuntimeForTesting(&v4.info());
  RegisterQmlEngineForTesting(idle.js_engine(), idle.engine());
  RegisterQmlEngineForTesting(v4.js_engine(), v4.engine());
  RawQmlStack raw;
  constexpr int kRounds = 2000;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) CaptureQmlStack(sps, 9, &raw);
  const double read_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      kRounds;
  ASSERT_EQ(raw.depth, 8);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds / 10; ++i) {
    for (int k = 0; k < raw.depth; ++k)
      ASSERT_TRUE(ResolveQmlFrame(v4.info(), v4.engine(), raw.frames[k]).ok());
  }
  const double resolve_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      (kRounds / 10);
  std::printf("CaptureQmlStack, 8 frames: %.1f us; resolving them: %.1f us\n", read_us, resolve_us);
  EXPECT_LT(read_us, 2000.0);
}

}  // namespace
}  // namespace matrix
