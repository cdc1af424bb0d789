// The block file's frames of a symbolized stack (ToBlockFrames): names,
// offsets, function starts, and the build ids that name unnamed frames off
// the host.

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "internal/block_canary_block.h"
#include "matrix/plugins/block_canary_info.h"
#include "matrix/proto/block.pb.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

StackFrame Named(const std::string& function, const std::string& module) {
  StackFrame frame;
  frame.symbol.function = function;
  frame.symbol.function_offset = 0x1c;
  frame.symbol.module = module;
  frame.symbol.module_offset = 0x401c;
  frame.symbol.build_id = "aa11";
  return frame;
}

// A frame of a stripped module: no name; its function starts 0x20 before it.
StackFrame Unnamed(const std::string& module, uint64_t module_offset, const std::string& build_id) {
  StackFrame frame;
  frame.symbol.module = module;
  frame.symbol.module_offset = module_offset;
  frame.symbol.function_offset = 0x20;
  frame.symbol.build_id = build_id;
  return frame;
}

TEST(BlockCanaryFramesTest, NamedFramesKeepTheirNameAndOffset_AndListNoModule) {
  std::vector<BlockModule> modules;
  const std::vector<BlockFrame> frames =
      internal::ToBlockFrames({Named("app::Layout()", "/usr/bin/app")}, modules);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "app::Layout()");
  EXPECT_EQ(frames[0].offset, 0x1cu);
  EXPECT_EQ(frames[0].module, "app");
  EXPECT_EQ(frames[0].function_start, 0u);
  EXPECT_TRUE(modules.empty());
}

TEST(BlockCanaryFramesTest, UnnamedFramesListTheirModuleOnce_WithItsBuildId) {
  std::vector<BlockModule> modules;
  const std::vector<BlockFrame> frames = internal::ToBlockFrames(
      {Unnamed("/opt/app/libcore.so", 0x3c4d, "3d1f"),
       Unnamed("/opt/app/libcore.so", 0x5e00, "3d1f"), Named("main", "/usr/bin/app")},
      modules);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].module, "libcore.so");
  EXPECT_EQ(frames[0].offset, 0x3c4du);
  EXPECT_EQ(frames[0].function_start, 0x3c2du);
  EXPECT_EQ(frames[1].module, "libcore.so");
  EXPECT_EQ(modules, (std::vector<BlockModule>{{"libcore.so", "3d1f"}}));
}

// Two plugins of one file name in two directories: each unnamed frame is
// named off the host from its own module's debug file.
TEST(BlockCanaryFramesTest, ModulesOfOneFileName_AreToldApartByPath_EachWithItsBuildId) {
  std::vector<BlockModule> modules;
  std::vector<BlockFrame> frames =
      internal::ToBlockFrames({Unnamed("/usr/lib/app/plugins/a/libplugin.so", 0x1100, "aaaa"),
                               Unnamed("/usr/lib/app/plugins/b/libplugin.so", 0x2200, "bbbb")},
                              modules);
  // A later sample of the same stack lists nothing again.
  const std::vector<BlockFrame> again = internal::ToBlockFrames(
      {Unnamed("/usr/lib/app/plugins/b/libplugin.so", 0x2240, "bbbb")}, modules);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].module, "libplugin.so");
  EXPECT_EQ(frames[1].module, "/usr/lib/app/plugins/b/libplugin.so");
  EXPECT_EQ(again[0].module, "/usr/lib/app/plugins/b/libplugin.so");
  EXPECT_EQ(modules, (std::vector<BlockModule>{{"libplugin.so", "aaaa"},
                                               {"/usr/lib/app/plugins/b/libplugin.so", "bbbb"}}));

  // The report's raw frames carry each its own module's build id, also after
  // the block file is written and read back.
  BlockInfo info;
  info.samples.push_back({.time = absl::FromUnixSeconds(1764000000), .frames = frames});
  info.modules = modules;
  const proto::BlockReport r = ToBlockReport(info);
  ASSERT_EQ(r.samples(0).frames_size(), 2);
  EXPECT_EQ(r.samples(0).frames(0).build_id(), "aaaa");
  EXPECT_EQ(r.samples(0).frames(1).build_id(), "bbbb");
  const std::string text =
      FormatBlockLog(info, absl::FromUnixSeconds(1764000002), absl::UTCTimeZone());
  absl::StatusOr<BlockInfo> parsed = ParseBlockLog(text, absl::UTCTimeZone());
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
  EXPECT_EQ(parsed->modules, info.modules);
  EXPECT_EQ(parsed->samples[0].frames, frames);
}

}  // namespace
}  // namespace matrix
