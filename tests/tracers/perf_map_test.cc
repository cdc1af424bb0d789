// PerfMap (the /tmp/perf-PID.map reader) and ParseJitName() on files and
// names written by hand in node 20's format (docs/stacks.md, "JIT frames").

#include "matrix/trace/perf_map.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

class PerfMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    path_ = (std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
             ("perf-map-test-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".map"))
                .string();
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app);
    out << text;
  }

  std::string path_;
};

TEST_F(PerfMapTest, MissingFile_NoNamesAndNoError) {
  PerfMap map(path_);
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.bad_lines(), 0u);
}

TEST_F(PerfMapTest, FindsTheEntryContainingThePc) {
  Append("1000 100 JS:*busyLoop /app/main.js:3:18\n0x2000 0x10 Builtin:Foo\n");
  PerfMap map(path_);
  std::optional<PerfMapEntry> e = map.Lookup(0x10ff);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->start, 0x1000u);
  EXPECT_EQ(e->size, 0x100u);
  EXPECT_EQ(e->name, "JS:*busyLoop /app/main.js:3:18");
  EXPECT_FALSE(map.Lookup(0x1100).has_value());  // One past the end.
  EXPECT_FALSE(map.Lookup(0xfff).has_value());
  ASSERT_TRUE(map.Lookup(0x2000).has_value());
  EXPECT_EQ(map.Lookup(0x2000)->name, "Builtin:Foo");
  EXPECT_EQ(map.size(), 2u);
}

TEST_F(PerfMapTest, BadLines_AreSkippedAndCounted) {
  Append(
      "garbage\n"
      "1000\n"
      "1000 100\n"
      "xyz 100 JS:*f /a.js:1:1\n"
      "1000 zz JS:*f /a.js:1:1\n"
      "1000 0 JS:*empty /a.js:1:1\n"
      "ffffffffffffffff 10 JS:*wraps /a.js:1:1\n"
      "\n"
      "3000 10 JS:*good /a.js:2:1\n");
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x3008).has_value());
  EXPECT_EQ(map.Lookup(0x3008)->name, "JS:*good /a.js:2:1");
  EXPECT_EQ(map.bad_lines(), 7u);  // The empty line is not bad.
  EXPECT_EQ(map.size(), 1u);
}

TEST_F(PerfMapTest, ReusedAddress_LaterLineWins) {
  Append(
      "1000 100 JS:~old /a.js:1:1\n"
      "1000 80 JS:*new /a.js:5:1\n"          // Same start: replaces.
      "2000 100 JS:*spans /a.js:7:1\n"
      "2080 100 JS:*overlaps /a.js:9:1\n");  // Overlaps the previous one: replaces it.
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1010).has_value());
  EXPECT_EQ(map.Lookup(0x1010)->name, "JS:*new /a.js:5:1");
  EXPECT_FALSE(map.Lookup(0x10f0).has_value());  // Only the new, shorter code is there.
  EXPECT_FALSE(map.Lookup(0x2010).has_value());  // The overlapped entry is gone.
  ASSERT_TRUE(map.Lookup(0x2090).has_value());
  EXPECT_EQ(map.Lookup(0x2090)->name, "JS:*overlaps /a.js:9:1");
  EXPECT_EQ(map.size(), 2u);
}

TEST_F(PerfMapTest, FileGrowingBetweenLookups_IsReadIncrementally) {
  Append("1000 10 JS:*first /a.js:1:1\n2000 10 JS:*sec");  // The runtime is mid-line.
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  EXPECT_FALSE(map.Lookup(0x2000).has_value());  // The partial line is not read.
  const uint64_t consumed = map.offset();
  EXPECT_EQ(consumed, std::string("1000 10 JS:*first /a.js:1:1\n").size());
  Append("ond /a.js:2:1\n3000 10 JS:*third /a.js:3:1\n");
  ASSERT_TRUE(map.Lookup(0x2004).has_value());
  EXPECT_EQ(map.Lookup(0x2004)->name, "JS:*second /a.js:2:1");
  EXPECT_TRUE(map.Lookup(0x3004).has_value());
  EXPECT_EQ(map.bad_lines(), 0u);
  // Reused after the first read: the later line wins.
  Append("1000 10 JS:*recompiled /a.js:9:1\n");
  map.Refresh();
  EXPECT_EQ(map.Lookup(0x1000)->name, "JS:*recompiled /a.js:9:1");
}

TEST_F(PerfMapTest, ReplacedFile_IsReadFromTheStart) {
  Append("1000 10 JS:*a /a.js:1:1\n2000 10 JS:*b /a.js:1:1\n");
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  std::filesystem::remove(path_);
  Append("5000 10 JS:*c /c.js:1:1\n");  // Shorter: a new process with this pid.
  ASSERT_TRUE(map.Lookup(0x5000).has_value());
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
}

TEST_F(PerfMapTest, LongNames_AreCut) {
  Append("1000 10 JS:*" + std::string(10000, 'x') + " /a.js:1:1\n2000 10 JS:*after /a.js:1:1\n");
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.Lookup(0x1000)->name.size(), PerfMap::kMaxNameBytes);
  EXPECT_TRUE(map.Lookup(0x2000).has_value());
}

TEST_F(PerfMapTest, Full_DropsOlderEntriesAndKeepsReading) {
  std::string text;
  for (size_t i = 0; i <= PerfMap::kMaxEntries; ++i) {
    char line[64];
    std::snprintf(line, sizeof(line), "%zx 10 JS:*f%zu /a.js:1:1\n", 0x100000 + i * 0x10, i);
    text += line;
  }
  Append(text);
  PerfMap map(path_);
  const uintptr_t last = 0x100000 + PerfMap::kMaxEntries * 0x10;
  ASSERT_TRUE(map.Lookup(last).has_value());
  EXPECT_LE(map.size(), PerfMap::kMaxEntries);
  EXPECT_EQ(map.overflows(), 1u);
}

TEST(ParseJitNameTest, Node20Names) {
  JitName n = ParseJitName("JS:*busyLoop /tmp/x/script.js:3:18");
  EXPECT_EQ(n.function, "busyLoop");
  EXPECT_EQ(n.file, "/tmp/x/script.js");
  EXPECT_EQ(n.line, 3);
  EXPECT_EQ(n.column, 18);
  EXPECT_EQ(n.kind, "JS");
  EXPECT_EQ(n.tier, "*");

  // Every tier gives the same function, file and line.
  for (const char* tier : {"~", "^", "+", "+'", "*", "*'"}) {
    JitName t = ParseJitName(std::string("JS:") + tier + "busyLoop /tmp/x/script.js:3:18");
    EXPECT_EQ(t.function, "busyLoop") << tier;
    EXPECT_EQ(t.file, "/tmp/x/script.js") << tier;
    EXPECT_EQ(t.line, 3) << tier;
    EXPECT_EQ(t.tier, tier);
  }

  JitName anonymous = ParseJitName("JS:~ /tmp/jit_busy.js:7:12");
  EXPECT_EQ(anonymous.function, "(anonymous)");
  EXPECT_EQ(anonymous.file, "/tmp/jit_busy.js");
  EXPECT_EQ(anonymous.line, 7);
  EXPECT_EQ(anonymous.column, 12);

  JitName internal = ParseJitName("JS:^requireBuiltin node:internal/bootstrap/realm:420:24");
  EXPECT_EQ(internal.function, "requireBuiltin");
  EXPECT_EQ(internal.file, "node:internal/bootstrap/realm");
  EXPECT_EQ(internal.line, 420);

  JitName eval = ParseJitName("Eval:~ /tmp/jit_busy.js:1:1");
  EXPECT_EQ(eval.function, "(anonymous)");
  EXPECT_EQ(eval.kind, "Eval");
}

TEST(ParseJitNameTest, OlderV8Names) {
  JitName lazy = ParseJitName("LazyCompile:~foo file:///x.js:1");
  EXPECT_EQ(lazy.function, "foo");
  EXPECT_EQ(lazy.file, "file:///x.js");
  EXPECT_EQ(lazy.line, 1);
  EXPECT_EQ(lazy.column, 0);
  EXPECT_EQ(lazy.kind, "LazyCompile");

  JitName function = ParseJitName("Function:*Foo.bar /srv/a b/app.js:10:2");
  EXPECT_EQ(function.function, "Foo.bar");
  EXPECT_EQ(function.file, "/srv/a b/app.js");  // A path with a space.
  EXPECT_EQ(function.line, 10);

  JitName getter = ParseJitName("JS:*get size /app/set.js:4:6");
  EXPECT_EQ(getter.function, "get size");
  EXPECT_EQ(getter.file, "/app/set.js");

  JitName script = ParseJitName("Script:~ /app/main.js");
  EXPECT_EQ(script.function, "(anonymous)");
  EXPECT_EQ(script.file, "/app/main.js");
}

TEST(ParseJitNameTest, OtherKindsAndRuntimes_KeepTheirName) {
  EXPECT_EQ(ParseJitName("Builtin:CEntry_Return1_ArgvOnStack_NoBuiltinExit").function,
            "Builtin:CEntry_Return1_ArgvOnStack_NoBuiltinExit");
  EXPECT_EQ(ParseJitName("Builtin:ArrayMap").kind, "Builtin");
  EXPECT_EQ(ParseJitName("BytecodeHandler:Ldar").function, "BytecodeHandler:Ldar");
  EXPECT_EQ(ParseJitName("TRACE_3::x.lua:12").function, "TRACE_3::x.lua:12");
  EXPECT_EQ(ParseJitName("Ljava/lang/String;::hashCode").function, "Ljava/lang/String;::hashCode");
  JitName py = ParseJitName("py::Widget.draw:/app/widget.py");
  EXPECT_EQ(py.function, "Widget.draw");
  EXPECT_EQ(py.file, "/app/widget.py");
}

// The Symbolizer names addresses outside every module from
// /tmp/perf-<pid>.map, with the module kJitModule.
TEST(PerfMapSymbolizerTest, AddressOutsideEveryModule_IsNamedFromThePerfMap) {
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(code, MAP_FAILED);
  const auto base = reinterpret_cast<uintptr_t>(code);
  const std::string path = PerfMap::PathForPid(getpid());
  std::filesystem::remove(path);
  Symbolizer symbolizer;
  EXPECT_EQ(symbolizer.Symbolize(base + 0x10).module, "");  // No map yet: unknown.
  {
    std::ofstream out(path);
    char line[128];
    std::snprintf(line, sizeof(line), "%lx 100 JS:*busyLoop /app/main.js:3:18\n",
                  static_cast<unsigned long>(base));
    out << line;
  }
  const auto started = std::chrono::steady_clock::now();
  SymbolInfo info = symbolizer.Symbolize(base + 0x10);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(info.function, "busyLoop");
  EXPECT_EQ(info.module, kJitModule);
  EXPECT_EQ(info.file, "/app/main.js");
  EXPECT_EQ(info.line, 3);
  EXPECT_EQ(info.column, 18);
  EXPECT_EQ(info.function_offset, 0x10u);
  EXPECT_EQ(symbolizer.Describe(base + 0x10), "busyLoop+0x10 ([jit])");
  // Recompiled at the same address: not served from the cache.
  {
    std::ofstream out(path, std::ios::app);
    char line[128];
    std::snprintf(line, sizeof(line), "%lx 100 JS:*other /app/main.js:9:1\n",
                  static_cast<unsigned long>(base));
    out << line;
  }
  EXPECT_EQ(symbolizer.Symbolize(base + 0x10).function, "other");
  std::printf("first perf map lookup: %lld us\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::microseconds>(took).count()));
  std::filesystem::remove(path);
  munmap(code, 4096);
}

}  // namespace
}  // namespace matrix
