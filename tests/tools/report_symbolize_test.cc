// FrameSymbolizer (matrix/report/symbolize.h), the pass symbolize and push
// run over each issue: raw frames of this very test binary named from its
// own file (same build id), keys computed again from a raw frame's key and
// from an older report's system-frame fallback, call-tree nodes renamed,
// and frames that cannot be named left as they were, with why.

#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/plugins/block_canary_info.h"
#include "matrix/report/symbolize.h"
#include "matrix/trace/stack_key.h"
#include "matrix/trace/symbolizer.h"

namespace report_symbolize_test {
__attribute__((noinline)) uintptr_t LayoutStep() {
  uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return pc;
}
__attribute__((noinline)) uintptr_t ComputeLayout() {
  const uintptr_t pc = LayoutStep();  // The return address is in here.
  asm volatile("" ::: "memory");
  return pc;
}
}  // namespace report_symbolize_test

namespace matrix::report {
namespace {

using ::testing::HasSubstr;

const std::string kGlib = "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0";

struct Self {
  std::string path = std::filesystem::read_symlink("/proc/self/exe");
  std::string build_id;
  uint64_t elf_address = 0;  // A return address inside ComputeLayout().
  uint64_t offset = 0;       // Its offset from ComputeLayout()'s start.
};

Self SelfFrame() {
  unsetenv("DEBUGINFOD_URLS");  // No servers: only what each test gives.
  Self self;
  const uintptr_t pc = report_symbolize_test::ComputeLayout();
  Symbolizer symbolizer;
  const SymbolInfo info = symbolizer.Symbolize(pc);
  self.build_id = info.build_id;
  self.elf_address = info.module_offset;
  self.offset = pc - reinterpret_cast<uintptr_t>(&report_symbolize_test::ComputeLayout);
  return self;
}

// A hang whose stack is [glib (named), this binary's frame (raw), glib].
proto::Issue RawHang(const Self& self, const std::string& key) {
  proto::Issue issue;
  issue.set_tag("Trace_EvilMethod");
  proto::AnrReport* anr = issue.mutable_anr();
  anr->set_detail(proto::ANR);
  auto add = [&](const std::string& module, const std::string& function) {
    proto::StackFrame* f = anr->mutable_thread_stack()->add_frames();
    f->set_module(module);
    f->set_function(function);
    return f;
  };
  add(kGlib, "g_get_monotonic_time");
  proto::StackFrame* raw = add(self.path, "");
  raw->set_build_id(self.build_id);
  raw->set_elf_address(self.elf_address);
  raw->set_offset(self.elf_address);
  add(kGlib, "g_main_context_dispatch");
  anr->set_stack_key(key);
  issue.set_key(key);
  anr->add_stack()->set_name(UnnamedFrameKey(self.path, self.elf_address));
  return issue;
}

TEST(FrameSymbolizerTest, ARawFrameIsNamed_AndTheKeyIsItsFunction) {
  const Self self = SelfFrame();
  if (self.build_id.empty()) GTEST_SKIP() << "this test binary has no build id";
  proto::Issue issue = RawHang(self, UnnamedFrameKey(self.path, self.elf_address));
  FrameSymbolizer symbolizer({});
  ASSERT_TRUE(symbolizer.SymbolizeIssue(&issue));
  const proto::StackFrame& frame = issue.anr().thread_stack().frames(1);
  EXPECT_EQ(frame.function(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(frame.elf_address(), self.elf_address);
  EXPECT_EQ(issue.anr().stack_key(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.key(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.anr().stack(0).name(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(symbolizer.counts().named_frames, 1);
  EXPECT_EQ(symbolizer.counts().keys_changed, 1);
  EXPECT_TRUE(symbolizer.problems().empty());
  EXPECT_FALSE(symbolizer.SymbolizeIssue(&issue));  // Nothing raw is left.
}

// A raw frame of this version carries its offset from the function's start
// (from the unwind info) and is keyed by the start: named, the key is the
// function, and so is a call-tree node named like the raw frame.
TEST(FrameSymbolizerTest, ARawFrameKeyedByItsFunctionsStart_IsNamed) {
  const Self self = SelfFrame();
  if (self.build_id.empty()) GTEST_SKIP() << "this test binary has no build id";
  ASSERT_GT(self.offset, 0u);
  ASSERT_LT(self.offset, self.elf_address);
  const std::string start_key = UnnamedFrameKey(self.path, self.elf_address - self.offset);
  proto::Issue issue = RawHang(self, start_key);
  proto::StackFrame* raw = issue.mutable_anr()->mutable_thread_stack()->mutable_frames(1);
  raw->set_offset(self.offset);
  EXPECT_EQ(UnnamedFrameKey(*raw), start_key);
  issue.mutable_anr()->mutable_stack(0)->set_name(start_key);
  FrameSymbolizer symbolizer({});
  ASSERT_TRUE(symbolizer.SymbolizeIssue(&issue));
  EXPECT_EQ(issue.anr().thread_stack().frames(1).function(),
            "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.anr().thread_stack().frames(1).offset(), self.offset);
  EXPECT_EQ(issue.anr().stack_key(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.key(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.anr().stack(0).name(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(symbolizer.counts().keys_changed, 1);
}

// An older report keyed by the toolkit frame (the old fallback): named, it
// is keyed by the program's function; a key the program chose is kept.
TEST(FrameSymbolizerTest, ASystemFrameFallbackKey_IsComputedAgain_AProgramKeyIsKept) {
  const Self self = SelfFrame();
  if (self.build_id.empty()) GTEST_SKIP() << "this test binary has no build id";
  proto::Issue fallback = RawHang(self, "g_main_context_dispatch");
  FrameSymbolizer symbolizer({});
  ASSERT_TRUE(symbolizer.SymbolizeIssue(&fallback));
  EXPECT_EQ(fallback.anr().stack_key(), "report_symbolize_test::ComputeLayout()");
  proto::Issue traced = RawHang(self, "app::OnLayoutTimer()");
  ASSERT_TRUE(symbolizer.SymbolizeIssue(&traced));
  EXPECT_EQ(traced.anr().stack_key(), "app::OnLayoutTimer()");
}

TEST(FrameSymbolizerTest, FramesThatCannotBeNamed_StayRaw_WithWhy) {
  const Self self = SelfFrame();
  proto::Issue issue = RawHang(self, "k");
  proto::StackFrame* raw = issue.mutable_anr()->mutable_thread_stack()->mutable_frames(1);
  raw->clear_build_id();
  raw->set_no_build_id(true);
  proto::Issue other_build = RawHang(self, "k");
  other_build.mutable_anr()->mutable_thread_stack()->mutable_frames(1)->set_build_id("00ff");
  const std::string before = issue.SerializeAsString();
  FrameSymbolizer symbolizer({.debug_dirs = {"/nonexistent"}});
  EXPECT_FALSE(symbolizer.SymbolizeIssue(&issue));
  EXPECT_FALSE(symbolizer.SymbolizeIssue(&other_build));
  EXPECT_EQ(issue.SerializeAsString(), before);
  EXPECT_EQ(symbolizer.counts().raw_frames, 2);
  EXPECT_EQ(symbolizer.counts().no_build_id, 1);
  ASSERT_EQ(symbolizer.problems().size(), 2u);
  EXPECT_THAT(symbolizer.problems()[0], HasSubstr("the module has no build id"));
  EXPECT_THAT(symbolizer.problems()[1],
              HasSubstr("(build id 00ff) left raw: no .build-id/00/ff.debug in /nonexistent"));
  EXPECT_THAT(symbolizer.problems()[1], HasSubstr("here is another build"));
  EXPECT_FALSE(symbolizer.server_failed());
}

// A stripped program's BlockCanary block, as its file writes it: the frame
// carries the module's base name, its address and its function's start, and
// the file lists the module's build id. Read back, it is named from a
// .build-id directory and its key, the raw frame's, becomes the function.
TEST(FrameSymbolizerTest, ABlockFilesRawFrame_IsNamedByItsModulesBuildId) {
  const Self self = SelfFrame();
  if (self.build_id.empty()) GTEST_SKIP() << "this test binary has no build id";
  const std::string module = std::filesystem::path(self.path).filename();
  BlockInfo info;
  info.time_cost_ms = 1200;
  info.time_start = absl::FromUnixMillis(1'700'000'000'000);
  info.time_end = info.time_start + absl::Milliseconds(1200);
  BlockFrame raw{"", self.elf_address, module};
  raw.function_start = self.elf_address - self.offset;
  info.samples = {{info.time_start + absl::Milliseconds(600),
                   {BlockFrame{"g_get_monotonic_time", 0x11, "libglib-2.0.so.0"}, raw,
                    BlockFrame{"g_main_context_dispatch", 0x120, "libglib-2.0.so.0"}}}};
  info.modules = {{module, self.build_id}};
  info.key = KeyStackLine(info, {});
  ASSERT_EQ(info.key, UnnamedFrameKey(module, self.elf_address - self.offset));
  absl::StatusOr<BlockInfo> read =
      ParseBlockLog(FormatBlockLog(info, info.time_end, absl::UTCTimeZone()), absl::UTCTimeZone());
  ASSERT_TRUE(read.ok()) << read.status();
  proto::Issue issue;
  issue.set_tag("BlockCanary");
  *issue.mutable_block() = ToBlockReport(*read);
  issue.mutable_block()->set_key_stack_line(info.key);
  issue.set_key(info.key);

  // The offline path: <dir>/.build-id/xx/rest.debug, here this binary itself.
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "block_build_id" /
                                    ".build-id" / self.build_id.substr(0, 2);
  std::filesystem::create_directories(dir);
  const std::filesystem::path debug = dir / (self.build_id.substr(2) + ".debug");
  std::filesystem::remove(debug);
  std::filesystem::create_symlink(self.path, debug);
  FrameSymbolizer symbolizer({.debug_dirs = {dir.parent_path().parent_path().string()}});
  ASSERT_TRUE(symbolizer.SymbolizeIssue(&issue));
  const proto::StackFrame& named = issue.block().samples(0).frames(1);
  EXPECT_EQ(named.function(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(named.offset(), self.offset);
  EXPECT_EQ(issue.block().key_stack_line(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(issue.key(), "report_symbolize_test::ComputeLayout()");
  EXPECT_EQ(symbolizer.counts().named_frames, 1);
  EXPECT_EQ(symbolizer.counts().keys_changed, 1);
  EXPECT_TRUE(symbolizer.problems().empty());

  // Without the build id (a file of an older version) the frame stays raw.
  read->modules.clear();
  proto::Issue old;
  *old.mutable_block() = ToBlockReport(*read);
  FrameSymbolizer again({.debug_dirs = {dir.parent_path().parent_path().string()}});
  EXPECT_FALSE(again.SymbolizeIssue(&old));
  EXPECT_EQ(old.block().samples(0).frames(1).function(), "");
}

}  // namespace
}  // namespace matrix::report
