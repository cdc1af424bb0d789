// Source lines and inlined frames from DWARF (libdw): a module built with -g
// (tests/tracers/evidence/dwarf_fixture), loaded as copies that carry their debug info
// themselves, in a separate file found by .gnu_debuglink or by build id, or
// not at all. Uses binutils' objcopy and readelf.

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/time_ticks.h"
#include "matrix/proto/common.pb.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/symbolizer.h"

#ifndef MATRIX_DWARF_FIXTURE
#error "MATRIX_DWARF_FIXTURE (the fixture module's path) is set by tests/CMakeLists.txt"
#endif

namespace matrix {
namespace {

using ::testing::EndsWith;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::StartsWith;

constexpr char kFixtureSource[] = "/tests/tracers/evidence/dwarf_fixture/dwarf_fixture.cc";

// What one loaded copy of the fixture reported about itself.
struct FixtureAddresses {
  uintptr_t known_pc = 0;  // A return address; look up pc - 1.
  int known_line = 0;
  uintptr_t inlined_pc = 0;
  int inner_line = 0;  // In InlinedHelper().
  int outer_line = 0;  // In DwarfFixtureInlined(), calling InlinedHelper().
};

class SymbolizerDwarfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(system("objcopy --version > /dev/null 2>&1"), 0) << "binutils' objcopy is needed";
    std::string pattern = ::testing::TempDir() + "/dwarf_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    for (void* handle : handles_) dlclose(handle);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Run(const std::string& command) {
    ASSERT_EQ(system((command + " 2>&1").c_str()), 0) << command;
  }

  // A copy of the fixture at <dir>/<name>/libdwarf_fixture.so.
  std::string Copy(const std::string& name) {
    std::string directory = absl::StrCat(dir_, "/", name);
    std::filesystem::create_directories(directory);
    std::string path = directory + "/libdwarf_fixture.so";
    std::filesystem::copy_file(MATRIX_DWARF_FIXTURE, path);
    return path;
  }

  // The fixture's GNU build id as hex, via readelf.
  std::string BuildId(const std::string& path) {
    std::string id_file = dir_ + "/id";
    Run(absl::StrCat("readelf -n ", path, " | sed -n 's/.*Build ID: //p' > ", id_file));
    std::string id;
    if (FILE* f = fopen(id_file.c_str(), "r")) {
      char buffer[128] = {};
      if (fgets(buffer, sizeof(buffer), f) != nullptr) id = buffer;
      fclose(f);
    }
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }

  // Loads `path` and calls its functions.
  FixtureAddresses Load(const std::string& path) {
    FixtureAddresses out;
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (handle == nullptr) return out;
    handles_.push_back(handle);
    auto known = reinterpret_cast<uintptr_t (*)(int*)>(dlsym(handle, "DwarfFixtureKnownLine"));
    auto inlined =
        reinterpret_cast<uintptr_t (*)(int*, int*)>(dlsym(handle, "DwarfFixtureInlined"));
    EXPECT_NE(known, nullptr);
    EXPECT_NE(inlined, nullptr);
    if (known == nullptr || inlined == nullptr) return out;
    out.known_pc = known(&out.known_line);
    out.inlined_pc = inlined(&out.inner_line, &out.outer_line);
    return out;
  }

  std::string dir_;
  std::vector<void*> handles_;
};

TEST_F(SymbolizerDwarfTest, KnownFunction_HasItsSourceFileAndLine) {
  FixtureAddresses fixture = Load(Copy("plain"));
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureKnownLine");
  EXPECT_THAT(info.file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.line, fixture.known_line);
  EXPECT_GT(info.column, 0);
  EXPECT_THAT(info.inlined, IsEmpty());
}

TEST_F(SymbolizerDwarfTest, InlinedFunction_IsAnInlinedFrameWithItsLine) {
  FixtureAddresses fixture = Load(Copy("plain"));
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(fixture.inlined_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureInlined");
  // The frame's own line is the call of the inlined function...
  EXPECT_THAT(info.file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.line, fixture.outer_line);
  // ...and the inlined function holds the instruction's line.
  ASSERT_THAT(info.inlined, SizeIs(1));
  // GCC gives no linkage name for internal linkage (the qualified source
  // name, no parameters); clang does (with parameters).
  EXPECT_THAT(info.inlined[0].function, StartsWith("(anonymous namespace)::InlinedHelper"));
  EXPECT_THAT(info.inlined[0].file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.inlined[0].line, fixture.inner_line);
}

TEST_F(SymbolizerDwarfTest, InlinedLambda_IsNamedByItsEnclosingFunction) {
  Load(Copy("plain"));
  auto lambda_fn =
      reinterpret_cast<uintptr_t (*)(int*)>(dlsym(handles_.back(), "DwarfFixtureLambda"));
  ASSERT_NE(lambda_fn, nullptr);
  int inner_line = 0;
  const uintptr_t pc = lambda_fn(&inner_line);
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureLambda");
  ASSERT_THAT(info.inlined, SizeIs(1));
  // GCC: the qualified source name; clang: the demangled linkage name.
  EXPECT_THAT(info.inlined[0].function,
              ::testing::AnyOf("DwarfFixtureLambda::{lambda}::operator()",
                               ::testing::StartsWith("DwarfFixtureLambda::$_")));
  EXPECT_EQ(info.inlined[0].line, inner_line);
}

TEST_F(SymbolizerDwarfTest, StripDebugWithDebugLink_FindsLinesInTheDebugFile) {
  std::string path = Copy("debuglink");
  Run(absl::StrCat("cd ", dir_, "/debuglink && objcopy --only-keep-debug libdwarf_fixture.so ",
                   "libdwarf_fixture.debug && objcopy --strip-debug ",
                   "--add-gnu-debuglink=libdwarf_fixture.debug libdwarf_fixture.so"));
  FixtureAddresses fixture = Load(path);
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureKnownLine");
  EXPECT_THAT(info.file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.line, fixture.known_line);
  SymbolInfo inlined = symbolizer.Symbolize(fixture.inlined_pc - 1);
  EXPECT_EQ(inlined.line, fixture.outer_line);
  ASSERT_THAT(inlined.inlined, SizeIs(1));
  EXPECT_EQ(inlined.inlined[0].line, fixture.inner_line);
}

TEST_F(SymbolizerDwarfTest, StripDebugWithBuildIdTree_FindsLinesInTheDebugDirectory) {
  std::string path = Copy("buildid");
  std::string id = BuildId(path);
  ASSERT_GE(id.size(), 4u) << "the fixture is linked with --build-id";
  std::string debug_dir = dir_ + "/symbols";
  std::string target = absl::StrCat(debug_dir, "/.build-id/", id.substr(0, 2));
  std::filesystem::create_directories(target);
  Run(absl::StrCat("objcopy --only-keep-debug ", path, " ", target, "/", id.substr(2), ".debug"));
  Run(absl::StrCat("objcopy --strip-debug ", path));
  FixtureAddresses fixture = Load(path);

  // Not found without the debug directory: no debuglink, not in /usr/lib/debug.
  Symbolizer without;
  SymbolInfo missing = without.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(missing.function, "DwarfFixtureKnownLine");
  EXPECT_THAT(missing.file, IsEmpty());
  EXPECT_EQ(missing.line, 0);

  Symbolizer symbolizer;
  symbolizer.AddDebugDirectory(debug_dir);
  SymbolInfo info = symbolizer.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureKnownLine");
  EXPECT_THAT(info.file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.line, fixture.known_line);
}

TEST_F(SymbolizerDwarfTest, WithoutDebugAranges_FindsTheUnitByItsRanges) {
  // clang emits no .debug_aranges; libdw before 0.191 then finds no unit for
  // an address by itself.
  std::string path = Copy("noaranges");
  Run(absl::StrCat("objcopy --remove-section=.debug_aranges ", path));
  FixtureAddresses fixture = Load(path);
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(fixture.inlined_pc - 1);
  EXPECT_THAT(info.file, EndsWith(kFixtureSource));
  EXPECT_EQ(info.line, fixture.outer_line);
  ASSERT_THAT(info.inlined, SizeIs(1));
  EXPECT_EQ(info.inlined[0].line, fixture.inner_line);
}

TEST_F(SymbolizerDwarfTest, FullyStripped_FallsBackToDynsymNamesWithoutLines) {
  std::string path = Copy("stripped");
  Run(absl::StrCat("objcopy --strip-all ", path));
  FixtureAddresses fixture = Load(path);
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureKnownLine");  // From .dynsym.
  EXPECT_GT(info.function_offset, 0u);
  EXPECT_THAT(info.file, IsEmpty());
  EXPECT_EQ(info.line, 0);
  EXPECT_THAT(info.inlined, IsEmpty());
}

TEST_F(SymbolizerDwarfTest, SourceLinesOff_GivesNamesOnly) {
  FixtureAddresses fixture = Load(Copy("plain"));
  Symbolizer symbolizer(SymbolizerOptions{.source_lines = false});
  SymbolInfo info = symbolizer.Symbolize(fixture.known_pc - 1);
  EXPECT_EQ(info.function, "DwarfFixtureKnownLine");
  EXPECT_THAT(info.file, IsEmpty());
  EXPECT_EQ(info.line, 0);
}

TEST_F(SymbolizerDwarfTest, StackTextAndProto_CarryLinesAndInlinedFrames) {
  FixtureAddresses fixture = Load(Copy("plain"));
  Symbolizer symbolizer;
  RawStack raw;
  raw.pcs[0] = fixture.inlined_pc;
  raw.pcs[1] = fixture.known_pc;
  raw.depth = 2;
  SymbolizedStack stack = SymbolizeStack(raw, &symbolizer);
  ASSERT_THAT(stack.frames, SizeIs(2));

  const std::string text = stack.ToString();
  EXPECT_TRUE(absl::StrContains(text, "      inlined (anonymous namespace)::InlinedHelper"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat(kFixtureSource, ":", fixture.inner_line, "\n")))
      << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat(kFixtureSource, ":", fixture.outer_line, "\n")))
      << text;
  EXPECT_TRUE(absl::StrContains(text, absl::StrCat(kFixtureSource, ":", fixture.known_line, "\n")))
      << text;

  proto::ThreadStack proto_stack;
  FillThreadStack(stack, &proto_stack);
  ASSERT_EQ(proto_stack.frames_size(), 2);
  const proto::StackFrame& top = proto_stack.frames(0);
  EXPECT_THAT(top.file(), EndsWith(kFixtureSource));
  EXPECT_EQ(top.line(), static_cast<uint32_t>(fixture.outer_line));
  ASSERT_EQ(top.inlined_size(), 1);
  EXPECT_THAT(top.inlined(0).function(), StartsWith("(anonymous namespace)::InlinedHelper"));
  EXPECT_EQ(top.inlined(0).line(), static_cast<uint32_t>(fixture.inner_line));
  EXPECT_EQ(proto_stack.frames(1).line(), static_cast<uint32_t>(fixture.known_line));
  EXPECT_EQ(proto_stack.frames(1).inlined_size(), 0);
}

const int kTracedFunctionLine = __LINE__ + 1;
__attribute__((noinline)) int TracedFunction(int x) { return x * 3 + 1; }

TEST(FillCallTreeTest, CallsCarryTheirDefinitionOrScopeLine) {
  static const TraceSite site{"app.scope", "/src/app/scope.cc", 77};
  const auto function = reinterpret_cast<uintptr_t>(&TracedFunction);
  const auto scope = reinterpret_cast<uintptr_t>(&site);
  const TimeTicks t0 = TimeTicks::FromNanoseconds(int64_t{1} << 34);
  const TimeTicks t1 = t0 + absl::Milliseconds(5);
  std::vector<uint64_t> records = {
      MakeTimeRecord(t0),
      MakeRecord(RecordKind::kEnter, function, t0),
      MakeRecord(RecordKind::kScopeEnter, scope, t0),
      MakeTimeRecord(t1),
      MakeRecord(RecordKind::kScopeExit, scope, t1),
      MakeRecord(RecordKind::kExit, function, t1),
  };
  CallTree tree = CallTree::Build(records);
  tree.ResolveNames([](uintptr_t address) { return Symbolizer::Get()->FunctionName(address); });
  google::protobuf::RepeatedPtrField<proto::MethodCall> calls;
  FillCallTree(tree, &calls, nullptr);
  ASSERT_EQ(calls.size(), 2);
  EXPECT_EQ(calls[0].name(), "matrix::(anonymous namespace)::TracedFunction(int)");
  EXPECT_THAT(calls[0].file(), EndsWith("/tests/tracers/evidence/symbolizer_dwarf_test.cc"));
  EXPECT_EQ(calls[0].line(), static_cast<uint32_t>(kTracedFunctionLine));
  EXPECT_EQ(calls[1].name(), "app.scope");
  EXPECT_EQ(calls[1].file(), "/src/app/scope.cc");
  EXPECT_EQ(calls[1].line(), 77u);
}

TEST(DwarfModuleTest, UnreadableFile_IsNull) {
  EXPECT_EQ(internal::DwarfModule::Open("/nonexistent/lib.so", "/nonexistent/lib.so", {}), nullptr);
}

}  // namespace
}  // namespace matrix

namespace matrix {
namespace {

TEST(SymbolizerSystemLibraryTest, IsSystemLibrary_TheSystemLibraryDirectories) {
  EXPECT_TRUE(IsSystemLibrary("/lib/x86_64-linux-gnu/libc.so.6"));
  EXPECT_TRUE(IsSystemLibrary("/usr/lib/x86_64-linux-gnu/libQt6Core.so.6"));
  EXPECT_TRUE(IsSystemLibrary("/lib64/ld-linux-x86-64.so.2"));
  EXPECT_TRUE(IsSystemLibrary("/usr/lib64/libfoo.so"));
  EXPECT_FALSE(IsSystemLibrary("/usr/bin/node"));
  EXPECT_FALSE(IsSystemLibrary("/usr/local/lib/libapp.so"));
  EXPECT_FALSE(IsSystemLibrary("/usr/libexec/app"));
  EXPECT_FALSE(IsSystemLibrary("/library/app"));
  EXPECT_FALSE(IsSystemLibrary("/opt/app/lib/libapp.so"));
  // The kernel's vDSO has no file (and no DWARF to look for).
  EXPECT_TRUE(IsSystemLibrary("linux-vdso.so.1"));
  EXPECT_TRUE(IsSystemLibrary("linux-gate.so.1"));
}

// This test links matrix-cpp into its executable: no frame is in a matrix
// shared object (matrix-run's agent is one; its preload skips its own
// frames and module, see docs/performance.md).
TEST(SymbolizerSystemLibraryTest, InMatrixSharedObject_FalseWhenLinkedIntoTheExecutable) {
  EXPECT_FALSE(Symbolizer::InMatrixSharedObject(reinterpret_cast<uintptr_t>(&Symbolizer::Get)));
  EXPECT_FALSE(Symbolizer::InMatrixSharedObject(reinterpret_cast<uintptr_t>(&std::abort)));
  EXPECT_FALSE(Symbolizer::InMatrixSharedObject(0));
}

// A frame in libc is named but gets no source line by default, even where
// libc6-dbg's debug file is installed (it costs 10-18 MB for the life of the
// process); SymbolizerOptions::system_library_lines asks for it.
TEST(SymbolizerSystemLibraryTest, LibcFrame_NamedWithoutLineUnlessAsked) {
  const auto pc = reinterpret_cast<uintptr_t>(&clock_nanosleep) + 1;
  Symbolizer symbolizer;
  const SymbolInfo info = symbolizer.Symbolize(pc);
  ASSERT_TRUE(IsSystemLibrary(info.module)) << info.module;
  EXPECT_THAT(info.function, ::testing::HasSubstr("clock_nanosleep"));
  EXPECT_THAT(info.file, IsEmpty());
  EXPECT_EQ(info.line, 0);

  Symbolizer with_lines(SymbolizerOptions{.system_library_lines = true});
  const SymbolInfo full = with_lines.Symbolize(pc);
  EXPECT_EQ(full.function, info.function);
  if (full.file.empty()) GTEST_SKIP() << "libc has no debug file here (libc6-dbg)";
  EXPECT_GT(full.line, 0) << full.file;
}

}  // namespace
}  // namespace matrix
