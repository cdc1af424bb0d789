// The text views: each report kind's evidence in RenderIssue, the generic
// field dump (reflection and raw JSON), the summary and the group list.

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/report/text_render.h"
#include "report_test_util.h"

namespace matrix::report {
namespace {

using test_util::AnrIssue;
using test_util::EvilMethodIssue;
using test_util::FrameIssue;
using test_util::kBaseTimeMs;
using test_util::Parsed;
using test_util::StartupIssue;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

// `text` holds `lines` as consecutive lines, in order.
::testing::AssertionResult HasLines(const std::string& text,
                                    const std::vector<std::string>& lines) {
  const std::string block = absl::StrJoin(lines, "\n") + "\n";
  if (text.find(block) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "missing block:\n" << block << "in:\n" << text;
}

TEST(RenderIssueTest, HangHeaderStackCallTreeThreadMemoryQueues) {
  const std::string text = RenderIssue(
      Parsed(AnrIssue("app::Decode(Image const&)", proto::ANR, 5012.5, kBaseTimeMs + 123),
             "r.jsonl", 9),
      {});
  EXPECT_THAT(text, HasSubstr("== Trace_EvilMethod/ANR ="));
  EXPECT_THAT(text, HasSubstr("key          app::Decode(Image const&)\n"));
  EXPECT_THAT(text, HasSubstr("time         2025-11-21 10:00:00.123 UTC\n"));
  EXPECT_THAT(text, HasSubstr("process      gallery (pid 4242), plugin Trace\n"));
  EXPECT_THAT(text, HasSubstr("scene        Gallery\n"));
  EXPECT_THAT(text, HasSubstr("cost         5012.5 ms\n"));
  EXPECT_THAT(text, HasSubstr("device       HIGH, 8 cores, 8.0 GiB RAM, 3.0 GiB available"));
  EXPECT_THAT(text, HasSubstr("source       r.jsonl:9\n"));
  EXPECT_THAT(text,
              HasSubstr("thread       gallery (tid 4242): S (sleeping), priority 20, nice -2, "
                        "CPU time 812.0 ms\n"));
  EXPECT_THAT(
      text, HasSubstr("memory       VmSize 812344 KiB, VmRSS 90112 KiB, heap in use 40210 KiB\n"));
  EXPECT_THAT(
      text,
      HasSubstr("queues       input 1.5 ms, animation 2.2 ms, traversal 7.8 ms, commit 0.0 ms\n"));
  EXPECT_THAT(text, HasSubstr("message      Handler (app::UiHandler) {55d0c3a1}, callback "
                              "Save@settings.cc:42, what 0\n"));
  EXPECT_THAT(text, HasSubstr("cpu usage    12.5%\n"));
  // One frame per line, innermost first: function+offset and the module's
  // file name.
  EXPECT_TRUE(HasLines(text, {
                                 "native stack of tid 4242 (gallery), captured at 5012.5 ms:",
                                 "  #0  clock_nanosleep+0x65  (libc.so.6)",
                                 "  #1  app::Decode(Image const&)+0x1c  (gallery)",
                                 "  #2  app::Main()+0x120  (gallery)",
                             }));
  // The call tree: costs right-aligned, names indented by depth.
  EXPECT_TRUE(HasLines(text, {
                                 "call tree (ms, pre-order):",
                                 "  5012.5  dispatch [running]",
                                 "  5011.5    app::Load() [running]",
                                 "  5010.5      app::Decode(Image const&) x3 [running]",
                             }));
}

TEST(RenderIssueTest, FullPathsShowsModulePaths) {
  RenderOptions options;
  options.full_paths = true;
  const std::string text =
      RenderIssue(Parsed(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs)), options);
  EXPECT_THAT(text, HasSubstr("#1  app::A()+0x1c  (/usr/bin/gallery)\n"));
}

TEST(RenderIssueTest, SourceLinesAndInlinedFramesAreShownUnderTheirFrame) {
  proto::Issue issue = AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs);
  proto::StackFrame* frame = issue.mutable_anr()->mutable_thread_stack()->mutable_frames(1);
  frame->set_file("/src/app/a.cc");
  frame->set_line(88);
  frame->set_column(7);
  proto::InlinedFrame* inner = frame->add_inlined();
  inner->set_function("app::Clamp(int)");
  inner->set_file("/src/app/math.h");
  inner->set_line(12);
  proto::InlinedFrame* middle = frame->add_inlined();
  middle->set_function("app::Scale(int)");
  middle->set_file("/src/app/math.h");
  middle->set_line(30);
  proto::MethodCall* call = issue.mutable_anr()->mutable_stack(1);
  call->set_file("/src/app/load.cc");
  call->set_line(10);
  // Read back from its JSON line, as `matrix-report show` does.
  const std::string text = RenderIssue(Parsed(issue), {});
  EXPECT_TRUE(HasLines(text, {"  #1  app::A()+0x1c  (gallery)",
                              "      inlined app::Clamp(int) at /src/app/math.h:12",
                              "      inlined app::Scale(int) at /src/app/math.h:30",
                              "      at /src/app/a.cc:88",
                              "  #2  app::Main()+0x120  (gallery)"}));
  EXPECT_THAT(text, HasSubstr("app::Load() [running]  at /src/app/load.cc:10\n"));
}

TEST(RenderIssueTest, FrameWithoutFunctionShowsPcAndModuleOffset) {
  google::protobuf::RepeatedPtrField<proto::StackFrame> frames;
  proto::StackFrame* frame = frames.Add();
  frame->set_pc("0x7f95d3ad44a3");
  frame->set_module("/usr/lib/libstdc++.so.6");
  frame->set_offset(0xd44a3);
  EXPECT_EQ(RenderStackFrames(frames, 2, {}), "  #0  0x7f95d3ad44a3  (libstdc++.so.6+0xd44a3)\n");
  // A frame whose function start the unwind info gave carries its offset
  // into the function: the module offset shown is still its address.
  frame->set_elf_address(0xd44a3);
  frame->set_offset(0x43);
  EXPECT_EQ(RenderStackFrames(frames, 2, {}), "  #0  0x7f95d3ad44a3  (libstdc++.so.6+0xd44a3)\n");
}

TEST(RenderIssueTest, SignalAnrShowsQueueHeadAndAllThreads) {
  proto::Issue issue = AnrIssue("app::Wait()", proto::SIGNAL_ANR, 2300, kBaseTimeMs);
  proto::AnrReport* anr = issue.mutable_anr();
  anr->set_signal(3);
  anr->set_queue_head("{ when=-2s callback=Tick@main.cc:1 }");
  anr->set_queue_head_overdue_ms(2000.25);
  anr->set_confirmed_hang(true);
  proto::ThreadStack* worker = anr->add_all_threads();
  worker->set_tid(4300);
  worker->set_thread_name("matrix-worker");
  test_util::AddFrame(worker, "syscall", "/lib/libc.so.6", 25);
  proto::ThreadStack* gone = anr->add_all_threads();
  gone->set_tid(4301);
  gone->set_error("NOT_FOUND: thread 4301 does not exist");
  const std::string text = RenderIssue(Parsed(issue), {});
  EXPECT_THAT(text, HasSubstr("signal       3 (SIGQUIT)\n"));
  EXPECT_THAT(text, HasSubstr("queue head   { when=-2s callback=Tick@main.cc:1 }\n"));
  EXPECT_THAT(text, HasSubstr("overdue      2000.2 ms\n"));
  EXPECT_THAT(text, HasSubstr("hang         confirmed"));
  EXPECT_TRUE(HasLines(text, {
                                 "all threads (2):",
                                 "  thread tid 4300 (matrix-worker):",
                                 "    #0  syscall+0x19  (libc.so.6)",
                                 "  thread tid 4301:",
                                 "    capture error: NOT_FOUND: thread 4301 does not exist",
                                 "    (no frames)",
                             }));
}

TEST(RenderIssueTest, SlowMethodShowsItsCallTreeAndCpuUsage) {
  const std::string text =
      RenderIssue(Parsed(EvilMethodIssue("app::DecodeImage()", 600, kBaseTimeMs)), {});
  EXPECT_THAT(text, HasSubstr("== Trace_EvilMethod/NORMAL ="));
  EXPECT_THAT(text, HasSubstr("cpu usage    97.5%\n"));
  EXPECT_TRUE(HasLines(text, {
                                 "call tree (ms, pre-order):",
                                 "  600.0  dispatch",
                                 "  599.5    app::LoadGallery()",
                                 "  148.9      app::ParseManifest()",
                                 "  450.0      app::DecodeImage()",
                             }));
}

TEST(RenderIssueTest, SampledSlowMethodShowsTheStackAtTheThresholdAndTheSamples) {
  proto::Issue issue = EvilMethodIssue("app::DecodeImage()", 1200, kBaseTimeMs);
  proto::EvilMethodReport* e = issue.mutable_evil_method();
  e->set_sample_count(11);
  e->set_detection_delay_ms(1.5);
  proto::ThreadStack* stack = e->mutable_thread_stack();
  stack->set_tid(4242);
  stack->set_captured_at_ms(701.5);
  proto::StackFrame* frame = stack->add_frames();
  frame->set_function("app::DecodeImage()");
  frame->set_module("/opt/gallery/bin/gallery");
  const std::string text = RenderIssue(Parsed(issue), {});
  EXPECT_THAT(text, HasSubstr("detected     1.5 ms after the threshold\n"));
  EXPECT_THAT(text, HasSubstr("samples      11 stacks from the threshold to the end, weighted "
                              "by the time each stands for\n"));
  EXPECT_TRUE(HasLines(text, {"native stack at the threshold of tid 4242, captured at 701.5 ms:",
                              "  #0  app::DecodeImage()  (gallery)"}));
}

TEST(RenderIssueTest, SlowMethodWithNegativeCpuUsageSaysNotSampled) {
  proto::Issue issue = EvilMethodIssue("k", 600, kBaseTimeMs);
  issue.mutable_evil_method()->set_cpu_usage(-1);
  issue.mutable_evil_method()->set_stack_truncated(true);
  const std::string text = RenderIssue(Parsed(issue), {});
  EXPECT_THAT(text, HasSubstr("cpu usage    not sampled"));
  EXPECT_THAT(text, HasSubstr("the oldest calls are missing"));
}

TEST(RenderIssueTest, FrameReportShowsLevelsPhasesSmoothnessAndInput) {
  const std::string text = RenderIssue(Parsed(FrameIssue("Gallery", 52.4, kBaseTimeMs)), {});
  EXPECT_THAT(text, HasSubstr("== Trace_FPS ="));
  EXPECT_THAT(text, HasSubstr("fps          52.4 fps\n"));
  EXPECT_THAT(text, HasSubstr("frames       2620 at 60.0 Hz, 238 dropped, over 10003.3 ms of frame "
                              "time: 52.4 fps\n"));
  EXPECT_TRUE(HasLines(text, {
                                 "levels       level      frames  dropped",
                                 "             BEST         2600       40",
                                 "             NORMAL         14       61",
                                 "             MIDDLE          5       97",
                                 "             HIGH            1       40",
                                 "             FROZEN          0        0",
                             }));
  EXPECT_THAT(text, HasSubstr("phases       per frame: input 0.4 ms, animation 2.1 ms, traversal "
                              "6.8 ms, commit 0.2 ms; vsync to frame end 9.5 ms\n"));
  EXPECT_THAT(
      text, HasSubstr("smoothness   worst 1 s window 41.7% of vsyncs dropped, p95 window 18.3%\n"));
  EXPECT_THAT(text, HasSubstr("input        40 events: latency median 3.2 ms, worst 68.5 ms\n"));
  EXPECT_THAT(text, Not(HasSubstr("lost")));
}

TEST(RenderIssueTest, StartupShowsTheTimelineInOrder) {
  const std::string text = RenderIssue(Parsed(StartupIssue(kBaseTimeMs)), {});
  EXPECT_THAT(text, HasSubstr("duration     2988.1 ms\n"));
  EXPECT_THAT(text, HasSubstr("startup      cold start, first scene Splash\n"));
  EXPECT_TRUE(HasLines(text, {
                                 "timeline     ms since the process started",
                                 "               41.3  main() (static initialisation)",
                                 "               52.5  application create begins",
                                 "             1830.2  application create ends (marks)",
                                 "             2100.5  first scene created",
                                 "             2410.7  first scene shown",
                                 "             2988.1  startup done",
                             }));
  EXPECT_THAT(text, HasSubstr("scenes       Splash > Home\n"));
}

TEST(RenderIssueTest, BlockShowsCpuMachineKeyLineAndMergedSamples) {
  const std::string text =
      RenderIssue(Parsed(test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs)), {});
  EXPECT_THAT(text, HasSubstr("== BlockCanary ="));
  EXPECT_THAT(text, HasSubstr("cost         2603.0 ms\n"));
  EXPECT_THAT(text, HasSubstr("block        2603 ms wall, 2503 ms CPU on the looper thread, "
                              "2025-11-21 09:59:57.397 .. 2025-11-21 10:00:00.000\n"));
  EXPECT_THAT(text, HasSubstr("cpu          busy over the block: cpu 91%, app 25%, user 80%, "
                              "system 11%, iowait 0%\n"));
  EXPECT_THAT(text, HasSubstr("machine      AMD EPYC, Linux 6.1.0 x86_64, 8 cores, 3145728 of "
                              "8388608 KiB available, VmRSS 90112 KiB\n"));
  EXPECT_THAT(text, HasSubstr("app          gallery-1.4.2, version 1.4.2 (142)\n"));
  EXPECT_THAT(text, HasSubstr("key line     app::Decode() (in 3 of 5 samples)\n"));
  EXPECT_THAT(text,
              HasSubstr("log file     /tmp/blockcanary/looper-2025-11-21_10-00-00.000.log\n"));
  EXPECT_THAT(text, HasSubstr("+100 ms  cpu 90%, app 24%, user 0%, system 0%, iowait 0%\n"));
  // Samples with the same stack are merged, the most frequent first.
  EXPECT_TRUE(HasLines(text, {
                                 "stack samples (5, 2 distinct stacks; most frequent first):",
                                 "  3 samples from +150 ms to +350 ms:",
                                 "    #0  app::Decode()+0x11  (gallery)",
                                 "    #1  app::Load()+0x40  (gallery)",
                                 "  2 samples from +50 ms to +450 ms:",
                                 "    #0  app::ParseHeader()+0x10  (gallery)",
                                 "    #1  app::Load()+0x40  (gallery)",
                             }));
}

TEST(RenderIssueTest, UnknownKindIsDumpedRawWithFramesAsFrames) {
  const std::string line =
      R"json({"tag":"FutureCanary","key":"app::Parse()","time_ms":"1763719200000",)json"
      R"json("future_kind":)json"
      R"json({"cost_ms":"1503","scene":"Home","cpu_busy":true,"samples":[{"offset_ms":"42",)json"
      R"json("frames":[{"function":"app::Parse()","module":"/usr/bin/gallery","pc":"0x1"}]}],)json"
      R"json("tags":["a","b"]}})json";
  absl::StatusOr<IssueRecord> record = ParseIssueLine(line, {});
  ASSERT_TRUE(record.ok()) << record.status();
  const std::string text = RenderIssue(*record, {});
  EXPECT_THAT(text, HasSubstr("== FutureCanary ="));
  EXPECT_THAT(text, HasSubstr("cost         1503.0 ms\n"));
  EXPECT_TRUE(
      HasLines(text, {
                         "future_kind (not known to this build of matrix-report; raw fields):",
                         "  cost_ms: 1503",
                         "  cpu_busy: true",
                         "  samples (1):",
                         "    [0]",
                         "      frames (1):",
                         "        #0  app::Parse()  (gallery)",
                         "      offset_ms: 42",
                         "  scene: Home",
                         "  tags: a, b",
                     }));
}

// The reflection dump used for report kinds without a dedicated view (such
// as kinds added to issue.proto after this tool): non-default fields in
// proto order, enums by name, stacks and call trees drawn as such.
TEST(RenderMessageFieldsTest, RepeatedMessagesAreNumberedAndNestedStacksDrawn) {
  const proto::Issue issue = test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs);
  const std::string text = RenderMessageFields(issue.block(), 0, {});
  EXPECT_TRUE(HasLines(text, {"cost_ms: 2603", "thread_time_ms: 2503"}));
  EXPECT_TRUE(
      HasLines(text, {"samples (5):", "  [0]", "    time_ms: 1763719197447", "    offset_ms: 50",
                      "    frames (2 frames):", "      #0  app::ParseHeader()+0x10  (gallery)"}));
  EXPECT_THAT(text, HasSubstr("cpu_busy: true\n"));
}

TEST(RenderMessageFieldsTest, DumpsAnyMessageWithStacksAndCallTrees) {
  const proto::Issue issue = AnrIssue("app::Decode()", proto::LAG, 2100, kBaseTimeMs);
  const std::string text = RenderMessageFields(issue.anr(), 2, {});
  EXPECT_TRUE(HasLines(text, {"  detail: LAG", "  cost_ms: 2100", "  scene: Gallery"}));
  EXPECT_TRUE(HasLines(text, {
                                 "  thread_stack: tid 4242 (gallery), captured at 2100.0 ms:",
                                 "    #0  clock_nanosleep+0x65  (libc.so.6)",
                             }));
  EXPECT_TRUE(HasLines(text, {"  stack (call tree, ms):", "    2100.0  dispatch [running]"}));
  EXPECT_TRUE(HasLines(text, {"  thread:", "    tid: 4242", "    name: gallery"}));
  EXPECT_THAT(text, HasSubstr("  is_process_foreground: true\n"));
  // Default-valued fields are left out.
  EXPECT_THAT(text, Not(HasSubstr("signal")));
  EXPECT_THAT(text, Not(HasSubstr("commit_ms")));
}

TEST(RenderCallTreeTest, DeepOrNegativeDepthsStayBounded) {
  google::protobuf::RepeatedPtrField<proto::MethodCall> calls;
  test_util::AddCall(&calls, -5, "neg", 1);
  test_util::AddCall(&calls, 1 << 30, "deep", 2);
  const std::string text = RenderCallTree(calls, 0);
  EXPECT_THAT(text, HasSubstr("1.0  neg\n"));
  EXPECT_LT(text.size(), 400u);
}

TEST(RenderGroupsTest, ShowsCountWorstMedianSeenAndScenes) {
  const std::vector<IssueRecord> records = {
      Parsed(AnrIssue("app::Decode()", proto::ANR, 5000, kBaseTimeMs, "Gallery")),
      Parsed(AnrIssue("app::Decode()", proto::ANR, 7000, kBaseTimeMs + 90'000, "Home")),
      Parsed(AnrIssue("app::Decode()", proto::ANR, 6000, kBaseTimeMs + 60'000, "Gallery")),
      Parsed(FrameIssue("Gallery", 40, kBaseTimeMs)),
  };
  std::vector<const IssueRecord*> pointers;
  for (const IssueRecord& r : records) pointers.push_back(&r);
  const std::string text = RenderGroups(GroupIssues(pointers), {});
  EXPECT_THAT(text, HasSubstr("2 groups of 4 issues"));
  EXPECT_TRUE(HasLines(text, {
                                 "#1  Trace_EvilMethod/ANR  x3",
                                 "    key          app::Decode()",
                                 "    cost         worst 7000.0 ms, median 6000.0 ms",
                                 "    first seen   2025-11-21 10:00:00.000",
                                 "    last seen    2025-11-21 10:01:30.000 UTC (1 min 30 s later)",
                                 "    scenes       Gallery: 2, Home: 1",
                                 "    processes    gallery (pid 4242): 3",
                             }));
  EXPECT_TRUE(HasLines(text, {
                                 "#2  Trace_FPS  x1",
                                 "    key          Gallery",
                                 "    fps          worst 40.0 fps, median 40.0 fps",
                                 "    seen         2025-11-21 10:00:00.000 UTC",
                             }));
}

TEST(RenderIssueTest, BlockAppLineShowsAUidGivenButNotBlockCanarysPlaceholder) {
  // BlockCanaryContext's default uid is the placeholder "uid", and the
  // demo's block showed "app  matrix-demo, uid uid, network unknown".
  proto::Issue issue = test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs);
  issue.mutable_block()->set_uid("uid");
  issue.mutable_block()->set_network("unknown");
  std::string text = RenderIssue(Parsed(issue), {});
  EXPECT_THAT(text, HasSubstr("app          gallery-1.4.2, version 1.4.2 (142), network unknown\n"));
  EXPECT_THAT(text, Not(HasSubstr("uid")));
  issue.mutable_block()->set_uid("10042");
  text = RenderIssue(Parsed(issue), {});
  EXPECT_THAT(text, HasSubstr("app          gallery-1.4.2, version 1.4.2 (142), uid 10042, "
                              "network unknown\n"));
}

TEST(RenderIssueTest, ABlockReadFromItsTextFileShowsTheFileAsItsSource) {
  IssueRecord record = Parsed(test_util::BlockIssue("app::Decode()", 2603, kBaseTimeMs));
  record.source = {"blockcanary/looper-2025-11-21_10-00-00.000.log", 0};
  EXPECT_THAT(RenderIssue(record, {}),
              HasSubstr("source       blockcanary/looper-2025-11-21_10-00-00.000.log\n"));
}

TEST(RenderSummaryTest, CountsPerTagDetailTimeRangeProcessesAndReadProblems) {
  ReadResult read;
  read.files = {"a/issues.1.jsonl", "a/issues.jsonl"};
  read.lines = 6;
  read.malformed.push_back({{"a/issues.jsonl", 4}, "not a JSON issue"});
  read.records = {
      Parsed(AnrIssue("app::A()", proto::ANR, 5000, kBaseTimeMs + 2000)),
      Parsed(AnrIssue("app::B()", proto::ANR, 6500, kBaseTimeMs + 1000)),
      Parsed(FrameIssue("Gallery", 50, kBaseTimeMs)),
      Parsed(FrameIssue("Gallery", 40, kBaseTimeMs + 12'500)),
      Parsed(StartupIssue(kBaseTimeMs + 500)),
  };
  std::vector<const IssueRecord*> all;
  for (const IssueRecord& r : read.records) all.push_back(&r);
  const std::string text = RenderSummary(read, all, false, {});
  EXPECT_THAT(text, HasSubstr("issues       5 (2 files: a/issues.1.jsonl, a/issues.jsonl)\n"));
  EXPECT_THAT(text, HasSubstr("lines        6 read, 1 malformed (skipped; see stderr)\n"));
  EXPECT_THAT(
      text,
      HasSubstr("time         2025-11-21 10:00:00.000 .. 2025-11-21 10:00:12.500 UTC (12.50 s)\n"));
  EXPECT_THAT(text, HasSubstr("processes    gallery (pid 4242): 5\n"));
  EXPECT_THAT(text, HasSubstr("scenes       Gallery: 4, Splash: 1\n"));
  EXPECT_THAT(text, ContainsRegex("Trace_EvilMethod/ANR +2 +2 +6500.0 ms +5750.0 ms\n"));
  EXPECT_THAT(text, ContainsRegex("Trace_FPS +2 +1 +40.0 fps +45.0 fps\n"));
  EXPECT_THAT(text, ContainsRegex("Trace_StartUp +1 +1 +2988.1 ms +2988.1 ms\n"));

  const std::vector<const IssueRecord*> some = {all[2]};
  EXPECT_THAT(RenderSummary(read, some, true, {}),
              HasSubstr("issues       1 of 5 match the filters"));
}

TEST(RenderSummaryTest, TimesFollowTheTimeZone) {
  ReadResult read;
  read.files = {"x"};
  read.records = {Parsed(FrameIssue("Gallery", 50, kBaseTimeMs))};
  RenderOptions options;
  options.time_zone = absl::FixedTimeZone(8 * 3600);
  const std::string text = RenderSummary(read, {&read.records[0]}, false, options);
  EXPECT_THAT(text, HasSubstr("2025-11-21 18:00:00.000 .. 2025-11-21 18:00:00.000"));
}

}  // namespace
}  // namespace matrix::report
