// PerfMap (the /tmp/perf-PID.map reader) and ParseJitName() on files and
// names written by hand in node 20's format (docs/stacks.md, "JIT frames").

#include "matrix/trace/perf_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "matrix/core/logging.h"
#include "matrix/trace/symbolizer.h"
#include "matrix/testing/log_capture.h"

namespace matrix {
namespace {

using ::matrix::testing::ScopedLogCapture;

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
  void TearDown() override {
    std::filesystem::remove(path_);
    std::filesystem::remove(path_ + ".target");
  }

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
  Append("1000 10 JS:*" + std::string(1000, 'x') + " /a.js:1:1\n2000 10 JS:*after /a.js:1:1\n");
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

// A line longer than kMaxLineBytes is skipped whole, up to its newline (not
// cut and parsed: its end, the script and line, would be lost).
TEST_F(PerfMapTest, LinesLongerThanTheCap_AreSkippedToTheNextNewline) {
  Append("1000 10 JS:*" + std::string(PerfMap::kMaxLineBytes, 'x') + " /a.js:1:1\n" +
         "2000 10 JS:*after /a.js:1:1\n");
  PerfMap map(path_);
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
  ASSERT_TRUE(map.Lookup(0x2000).has_value());
  EXPECT_EQ(map.Lookup(0x2000)->name, "JS:*after /a.js:1:1");
  EXPECT_EQ(map.bad_lines(), 1u);
  EXPECT_EQ(map.size(), 1u);
}

// A map with no newline at all is read once: later lookups read only what
// was appended since, and the line it ends with is skipped, not re-read.
TEST_F(PerfMapTest, MapWithoutNewlines_IsReadOnce) {
  constexpr size_t kSize = 3 << 20;  // Under kMaxReadBytesPerLookup: one lookup reads it.
  static_assert(kSize <= PerfMap::kMaxReadBytesPerLookup);
  Append(std::string(kSize, 'x'));
  PerfMap map(path_);
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.bytes_read(), kSize);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.bytes_read(), kSize);  // Not read again.
  const std::string line = "1000 10 JS:*f /a.js:1:1\n";
  Append("\n" + line);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.Lookup(0x1000)->name, "JS:*f /a.js:1:1");
  EXPECT_EQ(map.bytes_read(), kSize + 1 + line.size());  // Only the appended bytes.
  // The line that had no newline: skipped, as longer than kMaxLineBytes.
  EXPECT_EQ(map.bad_lines(), 1u);
}

// A huge map without newlines: each lookup reads at most
// kMaxReadBytesPerLookup, and reading stops at kMaxFileBytes (said once).
TEST_F(PerfMapTest, HugeMap_EachLookupReadsABoundedPart_AndReadingStopsAtTheCap) {
  Append("");
  // Sparse: zeros, no newline, nothing written to the disk.
  ASSERT_EQ(truncate(path_.c_str(), static_cast<off_t>(PerfMap::kMaxFileBytes + (1 << 20))), 0);
  ScopedLogCapture log;
  PerfMap map(path_);
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_GT(map.bytes_read(), 0u);
  EXPECT_LE(map.bytes_read(), PerfMap::kMaxReadBytesPerLookup);
  uint64_t previous = 0;
  constexpr uint64_t kLookups = PerfMap::kMaxFileBytes / PerfMap::kMaxReadBytesPerLookup + 2;
  for (uint64_t i = 0; i < kLookups && map.bytes_read() != previous; ++i) {
    previous = map.bytes_read();
    map.Lookup(0x1000);
    EXPECT_LE(map.bytes_read() - previous, PerfMap::kMaxReadBytesPerLookup);
  }
  EXPECT_EQ(map.bytes_read(), PerfMap::kMaxFileBytes);
  Append("\n1000 10 JS:*beyond /a.js:1:1\n");
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.bytes_read(), PerfMap::kMaxFileBytes);
  EXPECT_EQ(log.Count(path_), 1) << log.text();
}

// Each byte of a growing map is read once, a partial last line included.
TEST_F(PerfMapTest, GrowingMap_GetsNewSymbols_ReadingEachByteOnce) {
  std::string text = "1000 10 JS:*first /a.js:1:1\n2000 10 JS:*sec";
  Append(text);
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  EXPECT_FALSE(map.Lookup(0x2000).has_value());
  EXPECT_EQ(map.bytes_read(), text.size());
  for (const std::string more : {"ond /a.js:2:1\n3000 10 JS:*th", "ird /a.js:3:1\n"}) {
    Append(more);
    text += more;
    map.Lookup(0x1000);
    EXPECT_EQ(map.bytes_read(), text.size());
  }
  ASSERT_TRUE(map.Lookup(0x2004).has_value());
  EXPECT_EQ(map.Lookup(0x2004)->name, "JS:*second /a.js:2:1");
  ASSERT_TRUE(map.Lookup(0x3004).has_value());
  EXPECT_EQ(map.Lookup(0x3004)->name, "JS:*third /a.js:3:1");
  EXPECT_EQ(map.bytes_read(), text.size());
  EXPECT_EQ(map.bad_lines(), 0u);
}

// Replaced by a longer file (a new process with this pid): read from the
// start, not from where the old one ended.
TEST_F(PerfMapTest, ReplacedByALongerFile_IsReadFromTheStart) {
  Append("1000 10 JS:*a /a.js:1:1\n");
  PerfMap map(path_);
  ASSERT_TRUE(map.Lookup(0x1000).has_value());
  std::filesystem::remove(path_);
  Append("5000 10 JS:*c /c.js:1:1\n6000 10 JS:*d /c.js:2:1\n7000 10 JS:*e /c.js:3:1\n");
  ASSERT_TRUE(map.Lookup(0x5000).has_value());
  EXPECT_EQ(map.Lookup(0x5000)->name, "JS:*c /c.js:1:1");
  EXPECT_FALSE(map.Lookup(0x1000).has_value());
}

// Only a map owned by this process's user is read (perf itself refuses
// maps of other users): another user could otherwise put names in reports.
TEST_F(PerfMapTest, MapOfAnotherUser_IsRefusedAndSaidOnce) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "giving the map to another user (chown to 65534) needs root";
  }
  Append("1000 10 JS:*planted /a.js:1:1\n");
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  ScopedLogCapture log;
  PerfMap map(path_);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.bytes_read(), 0u);
  EXPECT_EQ(log.Count(path_), 1) << log.text();
  EXPECT_EQ(log.Count("65534"), 1) << log.text();
}

// A symbolic link is not followed, even to a map this user owns.
TEST_F(PerfMapTest, SymlinkedMap_IsRefusedAndSaidOnce) {
  {
    std::ofstream out(path_ + ".target");
    out << "1000 10 JS:*linked /a.js:1:1\n";
  }
  std::filesystem::create_symlink(path_ + ".target", path_);
  ScopedLogCapture log;
  PerfMap map(path_);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(map.Lookup(0x1000).has_value());
  EXPECT_EQ(map.bytes_read(), 0u);
  EXPECT_EQ(log.Count(path_), 1) << log.text();
}

// A FIFO is refused, and looking it up does not wait for a writer.
TEST_F(PerfMapTest, Fifo_IsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  ScopedLogCapture log;
  PerfMap map(path_);
  std::future<bool> found = std::async(std::launch::async, [&map] {
    bool any = false;
    for (int i = 0; i < 3; ++i) any |= map.Lookup(0x1000).has_value();
    return any;
  });
  if (found.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Blocked opening the FIFO: a writer releases it.
    const int fd = open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) close(fd);
    ADD_FAILURE() << "looking up a FIFO blocked";
  }
  EXPECT_FALSE(found.get());
  EXPECT_EQ(log.Count(path_), 1) << log.text();
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

// The Symbolizer does not name code from a perf map another user owns.
TEST(PerfMapSymbolizerTest, MapOfAnotherUser_NamesNothing) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "giving the map to another user (chown to 65534) needs root";
  }
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(code, MAP_FAILED);
  const auto base = reinterpret_cast<uintptr_t>(code);
  const std::string path = PerfMap::PathForPid(getpid());
  std::filesystem::remove(path);
  {
    std::ofstream out(path);
    char line[128];
    std::snprintf(line, sizeof(line), "%lx 100 JS:*planted /app/main.js:3:18\n",
                  static_cast<unsigned long>(base));
    out << line;
  }
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(base + 0x10);
  EXPECT_EQ(info.function, "");
  EXPECT_EQ(info.module, "");
  std::filesystem::remove(path);
  munmap(code, 4096);
}

}  // namespace
}  // namespace matrix
