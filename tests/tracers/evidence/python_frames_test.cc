// The CPython 3.11 frame-chain reader (python_frames.h) on fake interpreter
// memory laid out like 3.11's structs: a good chain reads and resolves;
// garbage (random bytes, unmapped pages, cycles, wrong type pointers, freed
// code objects) gives an error, never a crash; a fuzz loop of random
// pointer soup. The real interpreter is covered by tests/agent's Python
// tests (python_program_e2e_test.cc, tk_program_e2e_test.cc).

#include "matrix/trace/python_frames.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "internal/python311_layout.h"
#include "internal/python312_layout.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

using ::testing::ElementsAre;

pid_t Tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// A real 3.11 co_linetable (Debian's python3.11, 3.11.2) of
//   def f(n):                     # line 102
//       total = 0
//       for i in range(n):
//           if i % 3 == 0:
//               total += i
//           else:
//               total -= 1
//       x = [
//           total,
//           n,
//       ]
//       return x
// and the line of each of its 47 code units (co_positions()).
constexpr uint8_t kLineTable[] = {
    0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xdd, 0x0d, 0x12, 0x90, 0x31, 0x89, 0x58,
    0x8c, 0x58, 0xf0, 0x00, 0x04, 0x05, 0x17, 0xf0, 0x00, 0x04, 0x05, 0x17, 0x88, 0x01,
    0xd8, 0x0b, 0x0c, 0x88, 0x71, 0x89, 0x35, 0x90, 0x41, 0x8a, 0x3a, 0x88, 0x3a, 0xd8,
    0x0c, 0x11, 0x90, 0x51, 0x89, 0x4a, 0x88, 0x45, 0x88, 0x45, 0xe0, 0x0c, 0x11, 0x90,
    0x51, 0x89, 0x4a, 0x88, 0x45, 0x88, 0x45, 0xe0, 0x08, 0x0d, 0xd8, 0x08, 0x09, 0xf0,
    0x05, 0x03, 0x09, 0x06, 0x80, 0x41, 0xf0, 0x08, 0x00, 0x0c, 0x0d, 0x80, 0x48};
constexpr int kFirstLine = 102;
constexpr int kLines[] = {102, 103, 103, 104, 104, 104, 104, 104, 104, 104, 104, 104,
                          104, 104, 104, 104, 104, 104, 104, 104, 105, 105, 105, 105,
                          105, 105, 105, 105, 105, 106, 106, 106, 106, 106, 106, 108,
                          108, 108, 108, 108, 108, 110, 111, 109, 109, 113, 113};
constexpr int kCodeUnits = 47;

// The offsets FakePython lays memory out with (python311_layout.h and
// python312_layout.h, themselves checked against CPython's headers).
struct FakeLayout {
  uint32_t version_hex;
  size_t interp_threads_head, thread_native_thread_id, cframe_current_frame;
  size_t frame_code, frame_previous, frame_prev_instr, frame_is_entry, frame_owner;
  size_t code_first_line_no, code_first_traceable, code_code_adaptive, unicode_ascii_data;
  bool entry_shims;  // 3.12: an owner-3 frame links each eval call's frames.
};
constexpr FakeLayout kFake311 = {0x030b02f0,
                                 internal::kPy311InterpThreadsHead,
                                 internal::kPy311ThreadNativeThreadId,
                                 internal::kPy311CFrameCurrentFrame,
                                 internal::kPy311FrameCode,
                                 internal::kPy311FramePrevious,
                                 internal::kPy311FramePrevInstr,
                                 internal::kPy311FrameIsEntry,
                                 internal::kPy311FrameOwner,
                                 internal::kPy311CodeFirstLineNo,
                                 internal::kPy311CodeFirstTraceable,
                                 internal::kPy311CodeCodeAdaptive,
                                 internal::kPy311UnicodeAsciiData,
                                 false};
constexpr FakeLayout kFake312 = {0x030c01f0,
                                 internal::kPy312InterpThreadsHead,
                                 internal::kPy312ThreadNativeThreadId,
                                 internal::kPy312CFrameCurrentFrame,
                                 internal::kPy312FrameCode,
                                 internal::kPy312FramePrevious,
                                 internal::kPy312FramePrevInstr,
                                 0,
                                 internal::kPy312FrameOwner,
                                 internal::kPy312CodeFirstLineNo,
                                 internal::kPy312CodeFirstTraceable,
                                 internal::kPy312CodeCodeAdaptive,
                                 internal::kPy312UnicodeAsciiData,
                                 true};

// Fake interpreter memory laid out like CPython 3.11 (or 3.12).
class FakePython {
 public:
  explicit FakePython(const FakeLayout& layout = kFake311) : l_(layout) {
    info_.runtime = Blob(64);
    info_.code_type = Blob(64);
    info_.unicode_type = Blob(64);
    info_.bytes_type = Blob(64);
    info_.version_hex = l_.version_hex;
    interp_ = Blob(128);
    tstate_ = Blob(256);
    cframe_ = Blob(32);
    Put(info_.runtime, 40, interp_);  // interpreters.head (both)
    Put(interp_, l_.interp_threads_head, tstate_);
    Put(tstate_, 16, interp_);  // interp (both)
    Put(tstate_, 56, cframe_);  // cframe (both)
    Put<uint64_t>(tstate_, l_.thread_native_thread_id, static_cast<uint64_t>(Tid()));
    trampoline_ = Code("<trampoline>", "<shim>");
  }

  const PythonRuntimeInfo& info() const { return info_; }
  const FakeLayout& layout() const { return l_; }
  uintptr_t tstate() const { return tstate_; }
  uintptr_t cframe() const { return cframe_; }

  uintptr_t Str(const std::string& s) {
    const size_t data = l_.unicode_ascii_data;
    uintptr_t p = Blob(data + s.size() + 1);
    Put(p, 8, info_.unicode_type);
    Put<int64_t>(p, 16, static_cast<int64_t>(s.size()));
    Put<uint32_t>(p, 32, (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7));  // kind 1, compact, ascii
    memcpy(reinterpret_cast<void*>(p + data), s.data(), s.size());
    return p;
  }

  uintptr_t Bytes(const uint8_t* data, size_t size) {
    uintptr_t p = Blob(32 + size + 1);
    Put(p, 8, info_.bytes_type);
    Put<int64_t>(p, 16, static_cast<int64_t>(size));
    memcpy(reinterpret_cast<void*>(p + 32), data, size);
    return p;
  }

  uintptr_t Code(const std::string& qualname, const std::string& file) {
    uintptr_t p = Blob(l_.code_code_adaptive + 2 * kCodeUnits);
    Put(p, 8, info_.code_type);
    Put<int64_t>(p, 16, kCodeUnits);
    Put<int32_t>(p, l_.code_first_line_no, kFirstLine);
    Put(p, 112, Str(file));                              // co_filename (both)
    Put(p, 120, Str(qualname));                          // co_name (both)
    Put(p, 128, Str(qualname));                          // co_qualname (both)
    Put(p, 136, Bytes(kLineTable, sizeof(kLineTable)));  // co_linetable (both)
    Put<int32_t>(p, l_.code_first_traceable, 0);
    return p;
  }

  // Pushes a frame running `code` at code unit `instr` (becomes current);
  // `is_entry`: the first frame of an eval call (3.12: a shim goes first).
  uintptr_t Push(uintptr_t code, int instr, bool is_entry) {
    if (is_entry && l_.entry_shims)
      PushRaw(trampoline_, 0, false, internal::kPy312FrameOwnedByCStack);
    return PushRaw(code, instr, is_entry && !l_.entry_shims, 0);
  }

  uintptr_t PushRaw(uintptr_t code, int instr, bool is_entry, uint8_t owner) {
    uintptr_t f = Blob(80);
    Put(f, l_.frame_code, code);
    Put(f, l_.frame_previous, top_);
    Put<uintptr_t>(f, l_.frame_prev_instr,
                   code + l_.code_code_adaptive + static_cast<uintptr_t>(2 * instr));
    if (!l_.entry_shims) Put<uint8_t>(f, l_.frame_is_entry, is_entry ? 1 : 0);
    Put<uint8_t>(f, l_.frame_owner, owner);
    top_ = f;
    Put(cframe_, l_.cframe_current_frame, top_);
    return f;
  }

  template <typename T = uintptr_t>
  static void Put(uintptr_t base, size_t offset, T value) {
    memcpy(reinterpret_cast<void*>(base + offset), &value, sizeof(T));
  }

  uintptr_t Blob(size_t size) {
    blobs_.push_back(std::make_unique<uint64_t[]>((size + 7) / 8 + 1));
    return reinterpret_cast<uintptr_t>(blobs_.back().get());
  }

 private:
  std::vector<std::unique_ptr<uint64_t[]>> blobs_;
  FakeLayout l_;
  PythonRuntimeInfo info_;
  uintptr_t interp_ = 0, tstate_ = 0, cframe_ = 0, top_ = 0, trampoline_ = 0;
};

// An inaccessible page (reads of it fail with EFAULT).
class UnmappedPage {
 public:
  UnmappedPage() {
    void* p = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    address_ = reinterpret_cast<uintptr_t>(p);
  }
  ~UnmappedPage() { munmap(reinterpret_cast<void*>(address_), 4096); }
  uintptr_t address() const { return address_; }

 private:
  uintptr_t address_;
};

TEST(LocationTableTest, EveryCodeUnitOfARealTable) {
  for (int i = 0; i < kCodeUnits; ++i) {
    EXPECT_EQ(LineFromLocationTable(kLineTable, sizeof(kLineTable), kFirstLine, i), kLines[i])
        << "code unit " << i;
  }
  EXPECT_EQ(LineFromLocationTable(kLineTable, sizeof(kLineTable), kFirstLine, -1), kFirstLine);
  EXPECT_EQ(LineFromLocationTable(kLineTable, sizeof(kLineTable), kFirstLine, kCodeUnits), -1);
}

TEST(LocationTableTest, MalformedTablesGiveMinusOne) {
  const uint8_t no_start[] = {0x01, 0x02};
  EXPECT_EQ(LineFromLocationTable(no_start, sizeof(no_start), 10, 0), -1);
  const uint8_t cut_varint[] = {0xe8, 0x40};  // NO_COLUMNS, varint continues past the end.
  EXPECT_EQ(LineFromLocationTable(cut_varint, sizeof(cut_varint), 10, 0), -1);
  const uint8_t none[] = {0xf8};  // PY_CODE_LOCATION_INFO_NONE
  EXPECT_EQ(LineFromLocationTable(none, sizeof(none), 10, 0), -1);
  EXPECT_EQ(LineFromLocationTable(nullptr, 0, 10, 0), -1);
  std::mt19937_64 random(7);
  std::vector<uint8_t> table(64);
  for (int i = 0; i < 20000; ++i) {
    for (uint8_t& b : table) b = static_cast<uint8_t>(random());
    int line =
        LineFromLocationTable(table.data(), table.size(), 1, static_cast<int>(random() % 80));
    EXPECT_TRUE(line == -1 || (line >= 0 && line <= (1 << 24)));
  }
}

TEST(PythonFramesTest, OnlyCPython311And312AreSupported) {
  EXPECT_TRUE(PythonVersionSupported(0x030b02f0));   // 3.11.2
  EXPECT_TRUE(PythonVersionSupported(0x030b0af0));   // 3.11.10
  EXPECT_TRUE(PythonVersionSupported(0x030c03f0));   // 3.12.3
  EXPECT_FALSE(PythonVersionSupported(0x030a0cf0));  // 3.10.12
  EXPECT_FALSE(PythonVersionSupported(0x030d00f0));  // 3.13.0
  // An unknown version reads nothing.
  FakePython py;
  py.Push(py.Code("f", "/a.py"), 1, true);
  PythonRuntimeInfo info = py.info();
  info.version_hex = 0x030d00f0;
  RawPythonStack raw;
  EXPECT_EQ(ReadPythonStack(info, Tid(), &raw), PythonReadError::kNoRuntime);
}

// This test binary has no Python: no runtime, and captures stay native.
TEST(PythonFramesTest, WithoutPythonStacksStayNative) {
  PythonRuntimeInfo info;
  EXPECT_TRUE(absl::IsNotFound(DetectPythonRuntime(&info)));
  RefreshPythonRuntime();
  EXPECT_EQ(CurrentPythonRuntime(), nullptr);
  RawPythonStack raw;
  CapturePythonStack(Tid(), &raw);
  EXPECT_EQ(raw.error, PythonReadError::kNoRuntime);
  EXPECT_EQ(raw.depth, 0);
  RawStack stack;
  StackCapturer::CaptureCurrentThread(&stack);
  EXPECT_GT(stack.depth, 0);
  EXPECT_EQ(stack.python.depth, 0);
  SymbolizedStack symbolized = SymbolizeStack(stack);
  EXPECT_EQ(symbolized.frames.size(), static_cast<size_t>(stack.depth));
}

TEST(PythonFramesTest, ReadsAndResolvesAChain) {
  FakePython py;
  uintptr_t main_code = py.Code("<module>", "/app/main.py");
  uintptr_t run_code = py.Code("App.run", "/app/main.py");
  uintptr_t spin_code = py.Code("spin", "/app/work.py");
  py.Push(main_code, 41, /*is_entry=*/true);
  py.Push(run_code, 20, /*is_entry=*/true);
  py.Push(spin_code, 5, /*is_entry=*/false);

  RawPythonStack raw;
  ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);
  ASSERT_EQ(raw.depth, 3);
  EXPECT_FALSE(raw.truncated);
  EXPECT_EQ(raw.frames[0].code, spin_code);
  EXPECT_EQ(raw.frames[0].instr, 5);
  EXPECT_EQ(raw.frames[0].is_entry, 0);
  EXPECT_EQ(raw.frames[1].is_entry, 1);

  absl::StatusOr<PythonFrameInfo> spin = ResolvePythonFrame(py.info(), raw.frames[0]);
  ASSERT_TRUE(spin.ok()) << spin.status();
  EXPECT_EQ(spin->qualname, "spin");
  EXPECT_EQ(spin->file, "/app/work.py");
  EXPECT_EQ(spin->line, kLines[5]);
  EXPECT_EQ(spin->first_line, kFirstLine);
  absl::StatusOr<PythonFrameInfo> main = ResolvePythonFrame(py.info(), raw.frames[2]);
  ASSERT_TRUE(main.ok()) << main.status();
  EXPECT_EQ(main->qualname, "<module>");
  EXPECT_EQ(main->line, kLines[41]);

  // Another thread's id: no thread state.
  EXPECT_EQ(ReadPythonStack(py.info(), Tid() + 100000, &raw), PythonReadError::kNoThreadState);
  EXPECT_EQ(raw.depth, 0);
}

// 3.12: no is_entry; each eval call's frames follow a shim frame owned by
// the C stack, which is not kept but marks the frame before it as the run's
// outermost.
TEST(PythonFramesTest, Python312ChainsSplitAtEntryShims) {
  FakePython py(kFake312);
  uintptr_t outer = py.Code("outer", "/app/a.py");
  uintptr_t middle = py.Code("middle", "/app/a.py");
  uintptr_t inner = py.Code("inner", "/app/a.py");
  py.Push(outer, 1, true);
  py.Push(middle, 2, true);
  py.Push(inner, 3, false);
  RawPythonStack raw;
  ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);
  ASSERT_EQ(raw.depth, 3);  // The two shims are not frames.
  EXPECT_EQ(raw.frames[0].code, inner);
  EXPECT_EQ(raw.frames[0].is_entry, 0);
  EXPECT_EQ(raw.frames[1].is_entry, 1);
  EXPECT_EQ(raw.frames[2].is_entry, 1);
  absl::StatusOr<PythonFrameInfo> info = ResolvePythonFrame(py.info(), raw.frames[0]);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->qualname, "inner");
  EXPECT_EQ(info->line, kLines[3]);
  auto native = [](const std::string& name) {
    StackFrame f;
    f.symbol.function = name;
    return f;
  };
  std::vector<StackFrame> frames = {native("_PyEval_EvalFrameDefault"), native("PythonCmd"),
                                    native("_PyEval_EvalFrameDefault"), native("main")};
  InterleavePythonFrames(py.info(), raw, &frames);
  std::vector<std::string> names;
  for (const StackFrame& f : frames) names.push_back(f.symbol.function);
  EXPECT_THAT(names, ElementsAre("inner", "middle", "_PyEval_EvalFrameDefault", "PythonCmd",
                                 "outer", "_PyEval_EvalFrameDefault", "main"));
  // With the 3.11 layout the same memory is garbage: an error, no frames.
  PythonRuntimeInfo wrong = py.info();
  wrong.version_hex = 0x030b02f0;
  EXPECT_NE(ReadPythonStack(wrong, Tid(), &raw), PythonReadError::kNone);
  EXPECT_EQ(raw.depth, 0);
}

TEST(PythonFramesTest, DeepChainsAreTruncated) {
  FakePython py;
  uintptr_t code = py.Code("recurse", "/app/r.py");
  for (int i = 0; i < kMaxPythonFrames + 10; ++i) py.Push(code, 3, i == 0);
  RawPythonStack raw;
  ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);
  EXPECT_EQ(raw.depth, kMaxPythonFrames);
  EXPECT_TRUE(raw.truncated);
}

TEST(PythonFramesTest, InterleavesRunsBeforeTheirEvalFrames) {
  FakePython py;
  uintptr_t outer = py.Code("outer", "/app/a.py");
  uintptr_t middle = py.Code("middle", "/app/a.py");
  uintptr_t inner = py.Code("inner", "/app/a.py");
  py.Push(outer, 1, true);
  py.Push(middle, 2, true);  // Called back from native code.
  py.Push(inner, 3, false);
  RawPythonStack raw;
  ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);

  auto native = [](const std::string& name) {
    StackFrame f;
    f.pc = 0x1000;
    f.symbol.function = name;
    f.symbol.module = "/usr/bin/python3.11";
    return f;
  };
  std::vector<StackFrame> frames = {native("time_monotonic"), native("_PyEval_EvalFrameDefault"),
                                    native("PythonCmd"), native("_PyEval_EvalFrameDefault.cold"),
                                    native("main")};
  InterleavePythonFrames(py.info(), raw, &frames);
  std::vector<std::string> names;
  for (const StackFrame& f : frames) names.push_back(f.symbol.function);
  EXPECT_THAT(names, ElementsAre("time_monotonic", "inner", "middle", "_PyEval_EvalFrameDefault",
                                 "PythonCmd", "outer", "_PyEval_EvalFrameDefault.cold", "main"));
  EXPECT_EQ(frames[1].symbol.module, kPythonFrameModule);
  EXPECT_EQ(frames[1].symbol.file, "/app/a.py");
  EXPECT_EQ(frames[1].symbol.line, kLines[3]);

  // Without eval frames (no symbols): the Python frames go to the end.
  std::vector<StackFrame> bare = {native("main")};
  InterleavePythonFrames(py.info(), raw, &bare);
  ASSERT_EQ(bare.size(), 4u);
  EXPECT_EQ(bare[1].symbol.function, "inner");
  EXPECT_EQ(bare[3].symbol.function, "outer");
}

TEST(PythonFramesTest, FreedCodeObjectIsAPlaceholder) {
  FakePython py;
  uintptr_t code = py.Code("gone", "/app/a.py");
  py.Push(code, 1, true);
  RawPythonStack raw;
  ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);
  FakePython::Put<uintptr_t>(code, 8, 0xdeadbeef);  // Freed and reused.
  EXPECT_FALSE(ResolvePythonFrame(py.info(), raw.frames[0]).ok());
  std::vector<StackFrame> frames;
  InterleavePythonFrames(py.info(), raw, &frames);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].symbol.function, "");
  EXPECT_EQ(frames[0].symbol.module, kPythonFrameModule);

  // Unmapped since.
  UnmappedPage page;
  raw.frames[0].code = page.address();
  EXPECT_FALSE(ResolvePythonFrame(py.info(), raw.frames[0]).ok());
}

TEST(PythonFramesTest, GarbageGivesAnErrorNeverACrash) {
  UnmappedPage page;
  {
    FakePython py;  // cframe points at an unmapped page.
    FakePython::Put(py.tstate(), 56, page.address());
    RawPythonStack raw;
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kFault);
    EXPECT_EQ(raw.depth, 0);
  }
  {
    FakePython py;  // A frame's previous points at an unmapped page.
    uintptr_t code = py.Code("f", "/a.py");
    uintptr_t frame = py.Push(code, 1, false);
    FakePython::Put(frame, 48, page.address());
    RawPythonStack raw;
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kFault);
  }
  {
    FakePython py;  // A cycle.
    uintptr_t code = py.Code("f", "/a.py");
    uintptr_t first = py.Push(code, 1, false);
    py.Push(code, 1, false);
    uintptr_t last = py.Push(code, 1, false);
    FakePython::Put(first, 48, last);
    RawPythonStack raw;
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kCycle);
    EXPECT_EQ(raw.depth, 0);
  }
  {
    FakePython py;  // Misaligned and kernel-space pointers.
    FakePython::Put<uintptr_t>(py.cframe(), 8, 0x1003);
    RawPythonStack raw;
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kBadPointer);
    FakePython::Put<uintptr_t>(py.cframe(), 8, 0xffffffff81000000);
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kBadPointer);
  }
  {
    FakePython py;  // prev_instr not inside the code object.
    uintptr_t code = py.Code("f", "/a.py");
    uintptr_t frame = py.Push(code, 1, false);
    FakePython::Put<uintptr_t>(frame, 56, 0x7000);
    RawPythonStack raw;
    EXPECT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kBadPointer);
  }
  {
    FakePython py;  // Wrong type pointers: code, qualname, line table.
    uintptr_t code = py.Code("f", "/a.py");
    py.Push(code, 1, false);
    RawPythonStack raw;
    ASSERT_EQ(ReadPythonStack(py.info(), Tid(), &raw), PythonReadError::kNone);
    PythonRuntimeInfo wrong = py.info();
    wrong.code_type += 8;
    EXPECT_FALSE(ResolvePythonFrame(wrong, raw.frames[0]).ok());
    wrong = py.info();
    wrong.unicode_type = wrong.bytes_type;
    EXPECT_FALSE(ResolvePythonFrame(wrong, raw.frames[0]).ok());
    wrong = py.info();
    wrong.bytes_type = wrong.unicode_type;
    EXPECT_FALSE(ResolvePythonFrame(wrong, raw.frames[0]).ok());
    // A str longer than any qualname.
    uintptr_t name = 0;
    memcpy(&name, reinterpret_cast<void*>(code + 128), sizeof(name));
    FakePython::Put<int64_t>(name, 16, 5000);
    EXPECT_FALSE(ResolvePythonFrame(py.info(), raw.frames[0]).ok());
    FakePython::Put<uintptr_t>(code, 128, page.address());
    EXPECT_FALSE(ResolvePythonFrame(py.info(), raw.frames[0]).ok());
  }
  {
    // The runtime itself is random bytes or unmapped.
    std::vector<uint64_t> junk(64);
    std::mt19937_64 random(3);
    for (uint64_t& word : junk) word = random();
    PythonRuntimeInfo info;
    info.runtime = reinterpret_cast<uintptr_t>(junk.data());
    info.code_type = 0x1000;
    info.version_hex = 0x030b02f0;
    RawPythonStack raw;
    EXPECT_NE(ReadPythonStack(info, Tid(), &raw), PythonReadError::kNone);
    info.runtime = page.address();
    EXPECT_EQ(ReadPythonStack(info, Tid(), &raw), PythonReadError::kFault);
    info.runtime = 0;
    EXPECT_EQ(ReadPythonStack(info, Tid(), &raw), PythonReadError::kNoRuntime);
  }
}

// Pointer soup: words that are random, point into the soup (aligned or
// not), at an unmapped page, are our tid, small values (flags) or the type
// pointers. Once with the runtime itself in the soup, once with a good
// runtime and thread state whose current frame is in the soup (so chains of
// garbage frames are walked and resolved). Reading and resolving must never
// fault; without the fault-safe reads or the pointer checks this crashes.
void Fuzz(const FakeLayout& l) {
  UnmappedPage page;
  FakePython py(l);
  const PythonRuntimeInfo& types = py.info();
  std::mt19937_64 random(20261126);
  constexpr size_t kWords = 1024;
  std::vector<uint64_t> soup(kWords);
  const uintptr_t base = reinterpret_cast<uintptr_t>(soup.data());
  auto fill = [&] {
    for (uint64_t& word : soup) {
      switch (random() % 12) {
        case 0:
        case 1:
        case 2:
          word = base + 8 * (random() % kWords);
          break;
        case 3:
          word = base + random() % (8 * kWords);
          break;
        case 4:
          word = page.address() + 8 * (random() % 512);
          break;
        case 5:
          word = static_cast<uint64_t>(Tid());
          break;
        case 6:
          word = random() % 4;
          break;
        case 7:
          word = types.code_type;
          break;
        case 8:
          word = random() % 2 == 0 ? types.unicode_type : types.bytes_type;
          break;
        case 9:
          word = 0;
          break;
        default:
          word = random();
          break;
      }
    }
  };
  auto soup_pointer = [&](size_t words_needed) {
    return base + 8 * (random() % (kWords - words_needed));
  };
  // Frame- and code-shaped records with random fields, so walks go deep
  // and resolution gets past the type check.
  std::vector<uintptr_t> planted_frames(24);
  auto plant = [&] {
    for (uintptr_t& frame : planted_frames) frame = soup_pointer(9);
    for (uintptr_t frame : planted_frames) {
      uintptr_t code = soup_pointer(24);
      FakePython::Put<uintptr_t>(code, 8, types.code_type);
      FakePython::Put<int64_t>(code, 16, static_cast<int64_t>(random() % 80) - 4);
      FakePython::Put<int32_t>(code, l.code_first_line_no,
                               static_cast<int32_t>(random() % 200) - 2);
      FakePython::Put<int32_t>(code, l.code_first_traceable, static_cast<int32_t>(random() % 8));
      for (size_t field : {112, 128}) {  // co_filename, co_qualname: str-ish
        uintptr_t str = soup_pointer(8);
        FakePython::Put<uintptr_t>(code, field, str);
        FakePython::Put<uintptr_t>(str, 8, types.unicode_type);
        FakePython::Put<int64_t>(str, 16, static_cast<int64_t>(random() % 40) - 2);
        FakePython::Put<uint32_t>(str, 32, random() % 4 != 0 ? 0xe4 : random() % 256);
      }
      uintptr_t table = soup_pointer(8);  // co_linetable: bytes-ish
      FakePython::Put<uintptr_t>(code, 136, table);
      FakePython::Put<uintptr_t>(table, 8, types.bytes_type);
      FakePython::Put<int64_t>(table, 16, static_cast<int64_t>(random() % 64) - 2);
      uintptr_t previous = planted_frames[random() % planted_frames.size()];
      if (random() % 8 == 0) previous = page.address();
      if (random() % 8 == 0) previous = soup_pointer(9);
      if (random() % 8 == 0) previous = 0;
      FakePython::Put<uintptr_t>(frame, l.frame_code, random() % 8 == 0 ? random() : code);
      FakePython::Put<uintptr_t>(frame, l.frame_previous, previous);
      FakePython::Put<uintptr_t>(frame, l.frame_prev_instr,
                                 code + l.code_code_adaptive + 2 * (random() % 90) - 2);
      if (!l.entry_shims) {
        FakePython::Put<uint8_t>(frame, l.frame_is_entry, static_cast<uint8_t>(random() % 3));
      }
      FakePython::Put<uint8_t>(frame, l.frame_owner, static_cast<uint8_t>(random() % 5));
    }
  };
  int reads = 0, frames = 0, resolved = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    fill();
    if (iteration % 4 != 0) plant();
    PythonRuntimeInfo info = types;
    if (iteration % 2 == 0) {
      info.runtime = base + 8 * (random() % kWords);
    } else {
      FakePython::Put<uintptr_t>(
          py.cframe(), l.cframe_current_frame,
          iteration % 4 != 0 ? planted_frames[0] : base + 8 * (random() % kWords));
    }
    RawPythonStack raw;
    if (ReadPythonStack(info, Tid(), &raw) == PythonReadError::kNone) ++reads;
    frames += raw.depth;
    for (int i = 0; i < raw.depth; ++i) {
      if (ResolvePythonFrame(info, raw.frames[static_cast<size_t>(i)]).ok()) ++resolved;
    }
    // Frames pointing anywhere in the soup resolve (or not) without faulting.
    for (int i = 0; i < 8; ++i) {
      RawPythonFrame stray;
      stray.code = base + 8 * (random() % kWords);
      stray.instr = static_cast<int32_t>(random() % 64) - 1;
      if (ResolvePythonFrame(info, stray).ok()) ++resolved;
    }
  }
  std::printf("fuzz %x: %d chains read, %d frames, %d resolved\n", l.version_hex >> 16, reads,
              frames, resolved);
  // The walks and the resolution were exercised, not only the lookup.
  EXPECT_GT(frames, 150);
  EXPECT_GT(resolved, 50);
}

TEST(PythonFramesTest, FuzzRandomMemory311) { Fuzz(kFake311); }
TEST(PythonFramesTest, FuzzRandomMemory312) { Fuzz(kFake312); }

// What the capture handler adds for a 32-frame chain (measured, printed).
TEST(PythonFramesTest, ReadCost) {
  FakePython py;
  uintptr_t code = py.Code("f", "/a.py");
  for (int i = 0; i < 32; ++i) py.Push(code, 3, i % 4 == 0);
  RawPythonStack raw;
  constexpr int kRounds = 2000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) ReadPythonStack(py.info(), Tid(), &raw);
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      kRounds;
  ASSERT_EQ(raw.depth, 32);
  std::printf("ReadPythonStack, 32 frames: %.1f us\n", us);
  EXPECT_LT(us, 2000.0);
}

}  // namespace
}  // namespace matrix
