#include "matrix/plugins/block_canary_info.h"

#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace matrix {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::TimeZone kUtc = absl::UTCTimeZone();

absl::Time At(int year, int month, int day, int hour, int minute, int second, int millis) {
  return absl::FromCivil(absl::CivilSecond(year, month, day, hour, minute, second), kUtc) +
         absl::Milliseconds(millis);
}

BlockFrame Frame(std::string function, uint64_t offset, std::string module,
                 std::string file = "", int line = 0) {
  return BlockFrame{std::move(function), offset, std::move(module), std::move(file), line};
}

BlockInfo SampleInfo() {
  BlockInfo info;
  info.qualifier = "gallery-1.4.2";
  info.version_name = "1.4.2";
  info.version_code = 142;
  info.uid = "u-42";
  info.network = "wifi";
  info.model = "Intel(R) Xeon(R) CPU @ 2.20GHz";
  info.api_level = "Linux 6.1.0 x86_64";
  info.machine = "HIGH";
  info.cpu_cores = 4;
  info.process = "gallery";
  info.pid = 4242;
  info.free_memory_kb = 3145728;
  info.total_memory_kb = 8000000;
  info.vm_rss_kb = 90112;
  info.time_cost_ms = 1503;
  info.thread_time_ms = 1410;
  info.time_start = At(2025, 11, 21, 10, 0, 0, 123);
  info.time_end = At(2025, 11, 21, 10, 0, 1, 626);
  info.message = ">>>>> Dispatching to Handler (app::Ui) {55d0} null: 0";
  info.scene = "Gallery";
  info.cpu_busy = false;
  info.block_cpu = BlockCpuRate{absl::Time(), 52, 50, 48, 4, 0};
  info.cpu_rate = {
      BlockCpuRate{At(2025, 11, 21, 10, 0, 0, 265), 51, 50, 47, 4, 0},
      BlockCpuRate{At(2025, 11, 21, 10, 0, 1, 700), 53, 49, 49, 4, 1},
  };
  info.samples = {
      BlockStackSample{At(2025, 11, 21, 10, 0, 0, 165),
                       {Frame("app::ParseHeader()", 0x2e, "gallery", "/src/app/parse.cc", 88),
                        Frame("app::Load(std::string const&)", 0x11, "gallery",
                              "/src/app/load at night.cc", 12),
                        Frame("", 0x3c4d, "libfoo.so")}},
      BlockStackSample{At(2025, 11, 21, 10, 0, 1, 265),
                       {Frame("app::DecodeBody()", 0x40, "gallery"),
                        Frame("app::Load(std::string const&)", 0x19, "gallery")}},
  };
  return info;
}

TEST(BlockLogFormatTest, Format_WritesBlockCanaryLayoutWithCrlf) {
  const std::string text = FormatBlockLog(SampleInfo(), At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  const std::string expected =
      "\r\n"
      "**********************\r\n"
      "2025-11-21 10:00:02(write log time)\r\n"
      "\r\n"
      "qua = gallery-1.4.2\r\n"
      "versionName = 1.4.2\r\n"
      "versionCode = 142\r\n"
      "uid = u-42\r\n"
      "network = wifi\r\n"
      "model = Intel(R) Xeon(R) CPU @ 2.20GHz\r\n"
      "api-level = Linux 6.1.0 x86_64\r\n"
      "machine = HIGH\r\n"
      "cpu-core = 4\r\n"
      "process = gallery\r\n"
      "pid = 4242\r\n"
      "freeMemory = 3145728\r\n"
      "totalMemory = 8000000\r\n"
      "vm-rss = 90112\r\n"
      "time = 1503\r\n"
      "thread-time = 1410\r\n"
      "time-start = 11-21 10:00:00.123\r\n"
      "time-end = 11-21 10:00:01.626\r\n"
      "message = >>>>> Dispatching to Handler (app::Ui) {55d0} null: 0\r\n"
      "scene = Gallery\r\n"
      "cpu-busy = false\r\n"
      "block-cpu = cpu:52% app:50% [user:48% system:4% ioWait:0% ]\r\n"
      "cpu-rate = 11-21 10:00:00.265 cpu:51% app:50% [user:47% system:4% ioWait:0% ]\r\n"
      "11-21 10:00:01.700 cpu:53% app:49% [user:49% system:4% ioWait:1% ]\r\n"
      "\r\n"
      "stack = 11-21 10:00:00.165\r\n"
      "\r\n"
      "app::ParseHeader()+0x2e (gallery) at /src/app/parse.cc:88\r\n"
      "app::Load(std::string const&)+0x11 (gallery) at /src/app/load at night.cc:12\r\n"
      "??+0x3c4d (libfoo.so)\r\n"
      "\r\n"
      "11-21 10:00:01.265\r\n"
      "\r\n"
      "app::DecodeBody()+0x40 (gallery)\r\n"
      "app::Load(std::string const&)+0x19 (gallery)\r\n"
      "\r\n"
      "\r\n"
      "\r\n";
  EXPECT_EQ(text, expected);
}

TEST(BlockLogFormatTest, RoundTrip_ParseGivesBackEveryField) {
  const BlockInfo info = SampleInfo();
  const std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  absl::StatusOr<BlockInfo> back = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, info);
  EXPECT_EQ(FormatBlockLog(*back, At(2025, 11, 21, 10, 0, 2, 0), kUtc), text);
}

TEST(BlockLogFormatTest, RoundTrip_WithoutSamplesOrCpuRates) {
  BlockInfo info = SampleInfo();
  info.samples.clear();
  info.cpu_rate.clear();
  info.block_cpu.reset();
  info.message.clear();
  info.thread_time_ms = -1;
  const std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  EXPECT_THAT(text, Not(HasSubstr("stack = ")));
  EXPECT_THAT(text, HasSubstr("cpu-rate = \r\n"));
  absl::StatusOr<BlockInfo> back = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, info);
}

TEST(BlockLogFormatTest, Parse_AcceptsLfLineEnds) {
  const BlockInfo info = SampleInfo();
  std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  text = absl::StrReplaceAll(text, {{"\r\n", "\n"}});
  absl::StatusOr<BlockInfo> back = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, info);
}

TEST(BlockLogFormatTest, Format_LineBreaksInValuesBecomeSpaces) {
  BlockInfo info = SampleInfo();
  info.qualifier = "two\r\nlines";
  absl::StatusOr<BlockInfo> back =
      ParseBlockLog(FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc), kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->qualifier, "two  lines");
}

TEST(BlockLogFormatTest, Parse_BlockAcrossNewYear_TakesTheYearFromTheHeader) {
  BlockInfo info = SampleInfo();
  info.time_start = At(2025, 12, 31, 23, 59, 59, 500);
  info.time_end = At(2026, 1, 1, 0, 0, 1, 3);
  info.cpu_rate.clear();
  info.samples = {BlockStackSample{At(2025, 12, 31, 23, 59, 59, 600), {Frame("a()", 1, "m")}},
                  BlockStackSample{At(2026, 1, 1, 0, 0, 0, 600), {Frame("b()", 1, "m")}}};
  absl::StatusOr<BlockInfo> back =
      ParseBlockLog(FormatBlockLog(info, At(2026, 1, 1, 0, 0, 2, 0), kUtc), kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->time_start, info.time_start);
  EXPECT_EQ(back->time_end, info.time_end);
  EXPECT_EQ(back->samples[1].time, At(2026, 1, 1, 0, 0, 0, 600));
}

TEST(BlockLogFormatTest, Parse_UnknownKeysAreIgnored) {
  std::string text = FormatBlockLog(SampleInfo(), At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  text = absl::StrReplaceAll(text, {{"uid = u-42\r\n", "uid = u-42\r\nimei = empty_imei\r\n"}});
  absl::StatusOr<BlockInfo> back = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, SampleInfo());
}

TEST(BlockLogFormatTest, Parse_CorruptFiles_FailWithReason) {
  const std::string good = FormatBlockLog(SampleInfo(), At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  struct Case {
    std::string text;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"", "header"},
      {"hello\r\n", "header"},
      {absl::StrReplaceAll(good, {{"(write log time)", ""}}), "write log time"},
      {absl::StrReplaceAll(good, {{"time = 1503\r\n", ""}}), "'time'"},
      {absl::StrReplaceAll(good, {{"time-start = 11-21 10:00:00.123\r\n", ""}}), "time-start"},
      {absl::StrReplaceAll(good, {{"time-start = 11-21", "time-start = 13-45"}}), "time-start"},
      {absl::StrReplaceAll(good, {{"time = 1503", "time = soon"}}), "time"},
      {absl::StrReplaceAll(good, {{"cpu-busy = false", "cpu-busy = maybe"}}), "cpu-busy"},
      {absl::StrReplaceAll(good, {{"(gallery)\r\n", "gallery\r\n"}}), "stack frame"},
      {absl::StrReplaceAll(good, {{"parse.cc:88", "parse.cc:x"}}), "stack frame"},
      {absl::StrReplaceAll(good, {{"parse.cc:88", "parse.cc"}}), "stack frame"},
      {absl::StrReplaceAll(good, {{"ioWait:1% ]", "ioWait:1%"}}), "cpu-rate"},
      {absl::StrReplaceAll(good, {{"qua = ", "qua: "}}), "unexpected line"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<BlockInfo> parsed = ParseBlockLog(c.text, kUtc);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.reason)) << c.text;
  }
}

TEST(BlockLogFormatTest, ToBlockReport_CarriesFieldsAndOffsets) {
  BlockInfo info = SampleInfo();
  info.key = "app::DecodeBody()";
  info.log_file = "/tmp/x/looper-1.log";
  const proto::BlockReport r = ToBlockReport(info);
  EXPECT_EQ(r.qualifier(), "gallery-1.4.2");
  EXPECT_EQ(r.cost_ms(), 1503);
  EXPECT_EQ(r.thread_time_ms(), 1410);
  EXPECT_EQ(r.time_start_ms(), absl::ToUnixMillis(info.time_start));
  EXPECT_EQ(r.block_cpu().cpu_percent(), 52);
  ASSERT_EQ(r.cpu_rate_size(), 2);
  EXPECT_EQ(r.cpu_rate(1).iowait_percent(), 1);
  ASSERT_EQ(r.samples_size(), 2);
  EXPECT_EQ(r.samples(0).offset_ms(), 42);
  EXPECT_EQ(r.samples(1).offset_ms(), 1142);
  EXPECT_EQ(r.samples(0).frames(0).function(), "app::ParseHeader()");
  EXPECT_EQ(r.samples(0).frames(2).offset(), 0x3c4du);
  EXPECT_EQ(r.samples(0).frames(0).file(), "/src/app/parse.cc");
  EXPECT_EQ(r.samples(0).frames(0).line(), 88u);
  EXPECT_EQ(r.samples(0).frames(2).file(), "");
  EXPECT_EQ(r.key_stack_line(), "app::DecodeBody()");
  EXPECT_EQ(r.log_file(), "/tmp/x/looper-1.log");
  EXPECT_EQ(r.message().callback(), info.message);
}

BlockStackSample StackOf(std::vector<BlockFrame> frames) {
  return BlockStackSample{absl::UnixEpoch(), std::move(frames)};
}

// Whether `frame` is concerned as the only frame of its sample.
bool IsConcernedAlone(const BlockFrame& frame, const std::vector<std::string>& packages) {
  return IsConcernedFrame(frame, StackOf({frame}), packages);
}

// An unnamed frame of a stripped module, its function starting at `start`.
BlockFrame Stripped(uint64_t offset, uint64_t start, std::string module) {
  BlockFrame f = Frame("", offset, std::move(module));
  f.function_start = start;
  return f;
}

TEST(BlockKeyTest, IsConcernedFrame_DefaultSkipsSystemAndRuntimeFrames) {
  const std::vector<std::string> none;
  EXPECT_FALSE(IsConcernedAlone(Frame("clock_nanosleep", 0x65, "libc.so.6"), none));
  EXPECT_FALSE(IsConcernedAlone(Frame("matrix::Looper::Loop()", 1, "app"), none));
  EXPECT_FALSE(
      IsConcernedAlone(Frame("std::function<void ()>::operator()() const", 1, "app"), none));
  EXPECT_FALSE(IsConcernedAlone(Frame("", 0x10, ""), none));
  EXPECT_FALSE(IsConcernedAlone(Frame("", 0x10, "libc.so.6"), none));
  EXPECT_TRUE(IsConcernedAlone(Frame("app::Decode()", 1, "app"), none));
}

TEST(BlockKeyTest, IsConcernedFrame_AnUnnamedFrameIsTheProgramsOnlyInAStrippedModule) {
  const std::vector<std::string> none;
  const BlockFrame unnamed = Frame("", 0x1a2b, "app");
  // No frame of "app" is named: the module is stripped, the frame its code.
  EXPECT_TRUE(IsConcernedFrame(unnamed, StackOf({unnamed, Frame("", 0x40, "app")}), none));
  EXPECT_TRUE(IsConcernedFrame(unnamed, StackOf({Frame("poll", 1, "libc.so.6"), unnamed}), none));
  // A named frame of "app" means the unnamed one is not the program's own
  // function (a static stub, a PLT entry).
  EXPECT_FALSE(
      IsConcernedFrame(unnamed, StackOf({unnamed, Frame("app::Decode()", 1, "app")}), none));
}

TEST(BlockKeyTest, IsConcernedFrame_PackagesMatchNamespacesOrModules) {
  const std::vector<std::string> packages = {"app::", "libgame"};
  EXPECT_TRUE(IsConcernedAlone(Frame("app::Decode()", 1, "main"), packages));
  EXPECT_FALSE(IsConcernedAlone(Frame("other::Decode()", 1, "main"), packages));
  EXPECT_TRUE(IsConcernedAlone(Frame("Physics::Step()", 1, "libgame.so.1"), packages));
  // The runtime linked into a concerned module is not the culprit.
  EXPECT_FALSE(IsConcernedAlone(Frame("std::sort<int*>(int*, int*)", 1, "libgame.so"), packages));
}

TEST(BlockKeyTest, KeyStackLine_AStrippedProgramsFunctionKeysByItsStartWhereverSamplesLand) {
  // Three samples inside one stripped function at three pcs, under a named
  // system frame: the key is the function's start, not the system frame and
  // not one pc.
  BlockInfo info;
  info.time_start = absl::UnixEpoch();
  info.time_end = info.time_start + absl::Milliseconds(3000);
  int64_t at_ms = 500;
  for (uint64_t pc : {0x1a10u, 0x1a2bu, 0x1a7fu}) {
    info.samples.push_back(
        BlockStackSample{info.time_start + absl::Milliseconds(at_ms),
                         {Stripped(pc, 0x1a00, "layoutd"), Stripped(0x2200, 0x21f0, "layoutd"),
                          Frame("g_main_context_dispatch", 0x120, "libglib-2.0.so.0")}});
    at_ms += 1000;
  }
  int count = 0;
  EXPECT_EQ(KeyStackLine(info, {}, &count), "layoutd+0x1a00");
  EXPECT_EQ(count, 3);
  EXPECT_TRUE(HasConcernedFrame(info, {}));
  // Without the start (older files), each pc stands alone: the caller, which
  // every sample shares at one pc, holds the majority.
  for (BlockStackSample& s : info.samples) {
    for (BlockFrame& f : s.frames) f.function_start = 0;
  }
  EXPECT_EQ(KeyStackLine(info, {}), "layoutd+0x2200");
}

TEST(BlockKeyTest, KeyStackLine_IsTheConcernedFrameMostSamplesShare) {
  BlockInfo info;
  info.samples = {
      StackOf({Frame("nanosleep", 1, "libc.so.6"), Frame("app::Early()", 2, "app")}),
      StackOf({Frame("app::Late()", 3, "app"), Frame("app::Run()", 4, "app")}),
      StackOf({Frame("memcpy", 1, "libc.so.6"), Frame("app::Late()", 5, "app")}),
  };
  int count = 0;
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Late()");
  EXPECT_EQ(count, 2);
  // With one sample each, the earliest wins (BlockCanary's first sample).
  info.samples.pop_back();
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Early()");
  EXPECT_EQ(count, 1);
  // Concern packages decide which frame is first.
  EXPECT_EQ(KeyStackLine(info, {"app::Run"}, &count), "app::Run()");
}

BlockStackSample StackAt(int64_t ms, std::vector<BlockFrame> frames) {
  return BlockStackSample{absl::FromUnixMillis(1'700'000'000'000 + ms), std::move(frames)};
}

TEST(BlockKeyTest, KeyStackLine_WeighsEachSampleByTheTimeItStandsFor) {
  // app::Outer() runs 0-780 ms and is sampled sparsely (the rate halved);
  // its callee app::Inner() runs 780-1400 ms and is sampled densely around
  // the threshold's extra capture. Inner has more samples, Outer more time.
  BlockInfo info;
  info.time_start = absl::FromUnixMillis(1'700'000'000'000);
  info.time_end = info.time_start + absl::Milliseconds(1400);
  const std::vector<BlockFrame> outer = {Frame("app::Outer()", 1, "app")};
  const std::vector<BlockFrame> inner = {Frame("app::Inner()", 2, "app"),
                                         Frame("app::Outer()", 3, "app")};
  info.samples = {StackAt(300, outer), StackAt(700, outer), StackAt(860, inner),
                  StackAt(900, inner), StackAt(1300, inner)};
  int count = 0;
  // Outer: 0-500 + 500-780 = 780 ms; Inner: 780-880 + 880-1100 + 1100-1400 = 620 ms.
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Outer()");
  EXPECT_EQ(count, 5);  // Every sample is inside Outer.
  // When Inner runs on to 3400 ms (a last sample at 1390 standing for
  // 1345-3400 ms), it is the key.
  info.samples.push_back(StackAt(1390, inner));
  info.time_end = info.time_start + absl::Milliseconds(3400);
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Inner()");
  EXPECT_EQ(count, 4);
}

TEST(BlockKeyTest, KeyStackLine_ADominantFunctionIsNotSplitAmongItsCallees) {
  // app::Handle() runs app::Dominant() for 861 ms, which spends its time in
  // three helpers by turns, then app::Other() -> app::Callee() for 743 ms.
  // Counted by innermost frame, Callee (743 ms) beats each helper (287 ms);
  // Dominant held the thread for most of the block.
  BlockInfo info;
  info.time_start = absl::FromUnixMillis(1'700'000'000'000);
  info.time_end = info.time_start + absl::Milliseconds(1604);
  const BlockFrame handle = Frame("app::Handle()", 9, "app");
  const BlockFrame loop = Frame("matrix::Looper::Loop()", 1, "app");
  const std::string helpers[] = {"app::Measure()", "app::Layout()", "app::Paint()"};
  for (int64_t ms = 50; ms < 1604; ms += 100) {
    if (ms < 861) {
      info.samples.push_back(StackAt(ms, {Frame(helpers[(ms / 100) % 3], 2, "app"),
                                          Frame("app::Dominant()", 3, "app"), handle, loop}));
    } else {
      info.samples.push_back(StackAt(ms, {Frame("nanosleep", 1, "libc.so.6"),
                                          Frame("app::Callee()", 4, "app"),
                                          Frame("app::Other()", 5, "app"), handle, loop}));
    }
  }
  int count = 0;
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Dominant()");
  EXPECT_EQ(count, 9);
  // A concerned frame decides the key on the same path.
  EXPECT_EQ(KeyStackLine(info, {"app::Handle"}, &count), "app::Handle()");
  EXPECT_EQ(count, 16);
  // When the callee's side holds the majority, the callee is the key.
  info.time_end = info.time_start + absl::Milliseconds(3000);
  for (int64_t ms = 1650; ms < 3000; ms += 100) {
    info.samples.push_back(StackAt(ms, {Frame("nanosleep", 1, "libc.so.6"),
                                        Frame("app::Callee()", 4, "app"),
                                        Frame("app::Other()", 5, "app"), handle, loop}));
  }
  EXPECT_EQ(KeyStackLine(info, {}, &count), "app::Callee()");
}

TEST(BlockKeyTest, KeyStackLine_ASampleAfterTheBlockEndedStandsForNoTime) {
  // The sampler read "running", then the block ended before the capture: its
  // last sample is of the next thing and must not cost the first phase its
  // time (the weights of the others stay bounded by the block).
  BlockInfo info;
  info.time_start = absl::FromUnixMillis(1'700'000'000'000);
  info.time_end = info.time_start + absl::Milliseconds(1000);
  const std::vector<BlockFrame> early = {Frame("app::Early()", 1, "app")};
  const std::vector<BlockFrame> late = {Frame("app::Late()", 2, "app")};
  // Early: 0-540 ms (sampled at 90, 190, ... 490); Late: 540-1000 ms.
  for (int64_t ms = 90; ms < 1000; ms += 100) {
    info.samples.push_back(StackAt(ms, ms < 540 ? early : late));
  }
  info.samples.push_back(StackAt(1003, {Frame("app::NextThing()", 3, "app")}));
  EXPECT_EQ(KeyStackLine(info, {}), "app::Early()");
}

TEST(BlockKeyTest, KeyStackLine_WithoutConcernedFrame_FallsBack) {
  BlockInfo info;
  EXPECT_EQ(KeyStackLine(info, {}), "unknown");
  // libx.so names a frame, so its unnamed frame is not the program's.
  info.samples = {StackOf({Frame("", 0x10, "libx.so"), Frame("poll", 1, "libc.so.6"),
                           Frame("x::Run()", 0x4, "libx.so")})};
  info.samples[0].frames.back().module = "libx.so";
  int count = 7;
  EXPECT_EQ(KeyStackLine(info, {"other::"}, &count), "poll");
  EXPECT_EQ(count, 0);
  EXPECT_FALSE(HasConcernedFrame(info, {"other::"}));
  // An unnamed frame of a concerned module is named by module and offset.
  EXPECT_EQ(KeyStackLine(info, {"libx"}), "libx.so+0x10");
}

TEST(BlockKeyTest, IsWhiteListed_AnyFrameOfAnySample) {
  BlockInfo info;
  info.samples = {StackOf({Frame("app::A()", 1, "app")}),
                  StackOf({Frame("thirdparty::Blocker()", 1, "libthird.so"),
                           Frame("app::A()", 1, "app")})};
  EXPECT_TRUE(IsWhiteListed(info, {"thirdparty::"}));
  EXPECT_TRUE(IsWhiteListed(info, {"libthird"}));
  EXPECT_FALSE(IsWhiteListed(info, {"other::"}));
  EXPECT_FALSE(IsWhiteListed(info, {}));
}

TEST(BlockGroupTest, GroupBlocks_CountsByKeyMostFrequentFirst) {
  auto block = [](std::string key, int64_t cost, absl::Time start, std::string file) {
    BlockInfo b;
    b.key = std::move(key);
    b.time_cost_ms = cost;
    b.time_start = start;
    b.log_file = std::move(file);
    return b;
  };
  const absl::Time t0 = At(2025, 11, 21, 10, 0, 0, 0);
  const std::vector<BlockInfo> blocks = {
      block("app::Late()", 1200, t0, "a"),
      block("app::Early()", 5000, t0 + absl::Seconds(1), "b"),
      block("app::Late()", 1500, t0 + absl::Seconds(3), "c"),
      block("", 1100, t0 + absl::Seconds(4), "d"),
      block("app::Late()", 1100, t0 + absl::Seconds(2), "e"),
  };
  const std::vector<BlockGroup> groups = GroupBlocks(blocks);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].key, "app::Late()");
  EXPECT_EQ(groups[0].count, 3);
  EXPECT_EQ(groups[0].total_cost_ms, 3800);
  EXPECT_EQ(groups[0].max_cost_ms, 1500);
  EXPECT_EQ(groups[0].first_seen, t0);
  EXPECT_EQ(groups[0].last_seen, t0 + absl::Seconds(3));
  EXPECT_EQ(groups[0].last_log_file, "c");
  // Equal counts: the costlier group first.
  EXPECT_EQ(groups[1].key, "app::Early()");
  EXPECT_EQ(groups[2].key, "unknown");
  EXPECT_EQ(groups[2].count, 1);
}

TEST(BlockFrameTest, Name_UnknownFunctionUsesModuleAndOffset) {
  EXPECT_EQ(Frame("app::A()", 4, "app").Name(), "app::A()");
  EXPECT_EQ(Frame("", 0x1a2b, "libfoo.so").Name(), "libfoo.so+0x1a2b");
  EXPECT_EQ(Frame("", 0x10, "").Name(), "??+0x10");
  EXPECT_EQ(Stripped(0x1a2b, 0x1a00, "libfoo.so").Name(), "libfoo.so+0x1a00");
}

TEST(BlockLogFormatTest, AnUnnamedFramesFunctionStart_IsWrittenAfterItAndReadBack) {
  BlockInfo info = SampleInfo();
  info.samples[0].frames[2] = Stripped(0x3c4d, 0x3c00, "libfoo.so");
  const std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  // The module offset for addr2line, then the key of the function.
  EXPECT_THAT(text, HasSubstr("??+0x3c4d (libfoo.so) in libfoo.so+0x3c00\r\n"));
  absl::StatusOr<BlockInfo> parsed = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->samples[0].frames[2], info.samples[0].frames[2]);
  EXPECT_EQ(*parsed, info);
  // The report carries the address and the offset into the function, as a
  // tracer's report does.
  const proto::BlockReport r = ToBlockReport(info);
  EXPECT_EQ(r.samples(0).frames(2).elf_address(), 0x3c4du);
  EXPECT_EQ(r.samples(0).frames(2).offset(), 0x4du);
}

TEST(BlockLogFormatTest, BuildIds_AreWrittenOnePerModule_ReadBack_AndGoToTheRawFrames) {
  BlockInfo info = SampleInfo();
  info.modules = {{"libfoo.so", "3d1f0c5e9a"}, {"my app", "00ab"}};
  const std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  EXPECT_THAT(text, HasSubstr("build-id = 3d1f0c5e9a libfoo.so\r\nbuild-id = 00ab my app\r\n"));
  absl::StatusOr<BlockInfo> parsed = ParseBlockLog(text, kUtc);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->modules, info.modules);
  // The unnamed frame gets its module's build id and its address; named
  // frames need neither.
  const proto::BlockReport r = ToBlockReport(info);
  EXPECT_EQ(r.samples(0).frames(2).build_id(), "3d1f0c5e9a");
  EXPECT_EQ(r.samples(0).frames(2).elf_address(), 0x3c4du);
  EXPECT_EQ(r.samples(0).frames(2).offset(), 0x3c4du);
  EXPECT_EQ(r.samples(0).frames(0).build_id(), "");
  EXPECT_EQ(r.samples(0).frames(0).elf_address(), 0u);
  for (const char* bad : {"build-id = 3D1F libfoo.so", "build-id = 3d1f", "build-id =  libfoo.so",
                          "build-id = xyz libfoo.so"}) {
    const std::string changed =
        absl::StrReplaceAll(text, {{"build-id = 3d1f0c5e9a libfoo.so", bad}});
    EXPECT_FALSE(ParseBlockLog(changed, kUtc).ok()) << bad;
  }
}

TEST(BlockLogFormatTest, AFunctionStartOfAnotherModuleOrOfANamedFrame_IsCorrupt) {
  BlockInfo info = SampleInfo();
  std::string text = FormatBlockLog(info, At(2025, 11, 21, 10, 0, 2, 0), kUtc);
  for (const char* bad : {"??+0x3c4d (libfoo.so) in libbar.so+0x3c00",
                          "app::DecodeBody()+0x40 (gallery) in gallery+0x100"}) {
    std::string changed = absl::StrReplaceAll(text, {{"??+0x3c4d (libfoo.so)", bad}});
    if (std::string(bad).starts_with("app::")) {
      changed = absl::StrReplaceAll(text, {{"app::DecodeBody()+0x40 (gallery)", bad}});
    }
    ASSERT_NE(changed, text);
    EXPECT_FALSE(ParseBlockLog(changed, kUtc).ok()) << bad;
  }
}

}  // namespace
}  // namespace matrix
