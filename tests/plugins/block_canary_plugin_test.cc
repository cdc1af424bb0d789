// BlockCanaryPlugin on a fake clock: the main looper, the watchdog and the
// worker all run on the test thread (TestEnvironment), /proc is a fixture
// directory the test rewrites, and the looper thread's "stack" is whatever
// the test says it is (a fake capture returning addresses of the functions
// below, which the real symbolizer names).

#include "matrix/plugins/block_canary_plugin.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/testing/test_environment.h"

// The code the looper thread is "running" when sampled.
namespace blockcanary_test {
__attribute__((noinline)) int EarlyPhase(int n) {
  volatile int x = 0;
  for (int i = 0; i < n; ++i) x = x + i;
  return x;
}
__attribute__((noinline)) int LatePhase(int n) {
  volatile int x = 1;
  for (int i = 0; i < n; ++i) x = x * 3 + i;
  return x;
}
__attribute__((noinline)) int ThirdPartyWait(int n) {
  volatile int x = 2;
  for (int i = 0; i < n; ++i) x = x ^ i;
  return x;
}
__attribute__((noinline)) int RunTask(int n) {
  volatile int x = 3;
  for (int i = 0; i < n; ++i) x = x - i;
  return x;
}
}  // namespace blockcanary_test

namespace matrix {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr pid_t kPid = 4242;
constexpr absl::Duration kInterval = absl::Milliseconds(100);
const absl::Time kEpoch = absl::FromUnixSeconds(1750000000);  // 2025-06-15, no DST edge.

template <typename Fn>
uintptr_t Inside(Fn* fn, uintptr_t offset) {
  return reinterpret_cast<uintptr_t>(fn) + offset;
}

class CollectingListener : public PluginListener {
 public:
  void OnReportIssue(const Issue& issue) override { issues.push_back(issue); }
  std::vector<Issue> issues;
};

class RecordingInterceptor : public BlockInterceptor {
 public:
  RecordingInterceptor(std::string name, std::vector<std::string>* order)
      : name_(std::move(name)), order_(order) {}
  void OnBlock(const BlockInfo& block) override {
    order_->push_back(name_);
    blocks.push_back(block);
  }
  std::vector<BlockInfo> blocks;

 private:
  std::string name_;
  std::vector<std::string>* order_;
};

class RecordingPrinter : public Printer {
 public:
  void Println(std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

class BlockCanaryPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AppState::Get()->ResetForTesting();
    root_ = absl::StrCat(::testing::TempDir(), "/block_canary_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::system(absl::StrCat("rm -rf '", root_, "'").c_str());
    proc_ = root_ + "/proc";
    log_dir_ = root_ + "/logs";
    std::system(absl::StrCat("mkdir -p '", proc_, "/", kPid, "' '", root_,
                             "/sys/devices/system/cpu'")
                    .c_str());
    Write(root_ + "/sys/devices/system/cpu/present", "0-3\n");
    Write(proc_ + "/meminfo", "MemTotal:        8000000 kB\nMemFree:  100 kB\n"
                              "MemAvailable:    3000000 kB\n");
    Write(proc_ + "/cpuinfo", "processor\t: 0\nmodel name\t: Fixture CPU 9000\n");
    std::ofstream(absl::StrCat(proc_, "/", kPid, "/cmdline"), std::ios::binary)
        .write("fixture-app\0--flag\0", 19);
    SetTracerPid(0);
    WriteCpu();
    watchdog_ = env_.CreateBackgroundLooper("watchdog");
    worker_ = env_.CreateBackgroundLooper("worker");
    t0_ = env_.Now();
    stack_ = Stack(blockcanary_test::LatePhase);
  }

  void TearDown() override {
    if (plugin_ != nullptr) plugin_->Destroy().IgnoreError();
    plugin_.reset();
    std::system(absl::StrCat("rm -rf '", root_, "'").c_str());
  }

  static void Write(const std::string& path, const std::string& contents) {
    std::ofstream(path, std::ios::trunc) << contents;
  }

  void SetTracerPid(int pid) {
    Write(absl::StrCat(proc_, "/", kPid, "/status"),
          absl::StrCat("Name:\tfixture-app\nTracerPid:\t", pid,
                       "\nVmSize:\t  291234 kB\nVmRSS:\t   12345 kB\n"));
  }

  // /proc/stat's cpu line and the process's utime/stime, from the running
  // totals (clock ticks).
  void WriteCpu() {
    Write(proc_ + "/stat", absl::StrCat("cpu  ", user_, " 0 ", system_, " ", idle_,
                                        " 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"));
    Write(absl::StrCat(proc_, "/", kPid, "/stat"),
          absl::StrCat(kPid, " (fixture-app) S 1 1 1 0 -1 0 0 0 0 0 ", app_, " 0 0 0 20 0 3 0 100"));
  }
  // Over the next `d`: the machine's 4 cores spend `busy` percent of their
  // time busy, this process `app` percent, the looper thread `thread`
  // percent of one core. Moves time in steps of `step`, running everything;
  // the counters move at the end of each step (so a reading reflects the
  // steps completed before it).
  void RunWithCpu(absl::Duration d, int busy, int app, int thread,
                  absl::Duration step = kInterval) {
    for (absl::Duration done; done < d; done += step) {
      const absl::Duration s = std::min(step, d - done);
      env_.FastForwardBy(s);
      const int64_t ticks = absl::ToInt64Milliseconds(s) * 4 / 10;  // 100 Hz x 4 cores
      const int64_t busy_ticks = ticks * busy / 100;
      const int64_t app_ticks = ticks * app / 100;
      user_ += busy_ticks - busy_ticks / 4;
      system_ += busy_ticks / 4;
      idle_ += ticks - busy_ticks;
      app_ += app_ticks;
      env_.clock()->AdvanceThreadCpuTime(s * thread / 100);
      WriteCpu();
    }
  }

  std::vector<uintptr_t> Stack(int (*top)(int)) {
    return {Inside(top, 4), Inside(blockcanary_test::RunTask, 8)};
  }

  BlockCanaryPlugin::Hooks MakeHooks() {
    BlockCanaryPlugin::Hooks hooks;
    hooks.proc_root = proc_;
    hooks.pid = kPid;
    hooks.sys_root = root_ + "/sys";
    hooks.capture = [this](const ThreadHandle&, RawStack* out) -> absl::Status {
      ++captures_;
      if (fail_captures_) return absl::DeadlineExceededError("the looper thread did not answer");
      out->depth = 0;
      out->exact_top_pc = true;
      for (uintptr_t pc : stack_) out->pcs[out->depth++] = pc;
      out->captured_at = env_.clock()->NowTicks() + capture_delay_;
      return absl::OkStatus();
    };
    hooks.wall_clock = [this] { return kEpoch + (env_.Now() - t0_); };
    return hooks;
  }

  BlockCanaryContext::Builder Builder() {
    BlockCanaryContext::Builder b;
    b.SetLogPath(log_dir_).SetQualifier("test-1.0").DisplayNotification(false);
    return b;
  }

  // A handler that advances the fake clock in one step runs while the
  // watchdog cannot (one test thread): its tick runs late as if the process
  // had been stopped. Tests that time dispatches that way count wall time.
  BlockCanaryContext::Builder WallTimeBuilder() { return Builder().LeaveOutStoppedTime(false); }

  void StartPlugin(const BlockCanaryContext::Builder& builder) {
    absl::StatusOr<BlockCanaryContext> context = builder.Build();
    ASSERT_TRUE(context.ok()) << context.status();
    plugin_ = std::make_unique<BlockCanaryPlugin>(*context, MakeHooks());
    PluginContext c;
    c.clock = env_.clock();
    c.main_looper = env_.looper();
    c.watchdog_looper = watchdog_;
    c.worker_looper = worker_;
    c.app_state = AppState::Get();
    c.listeners = {listener_};
    ASSERT_TRUE(plugin_->Init(c).ok());
    ASSERT_TRUE(plugin_->Start().ok());
    env_.RunUntilIdle();
  }

  // A dispatch seen through the looper's Printer, as Looper::Loop prints it.
  void BeginDispatch() {
    env_.looper()->GetMessageLogging()->Println(
        ">>>>> Dispatching to Handler (test) {1} null: 7");
  }
  void EndDispatch() {
    env_.looper()->GetMessageLogging()->Println("<<<<< Finished to Handler (test) {1} null");
  }
  // Lets the watchdog see the end and the worker report it.
  void Settle() { env_.FastForwardBy(2 * kInterval); }

  // The 1.5 s block of the issue: 400 ms in EarlyPhase, then LatePhase,
  // beginning 250 ms after the plugin started (off the sampling grid).
  void RunEarlyLateBlock(int busy = 30, int app = 25, int thread = 60) {
    RunWithCpu(absl::Milliseconds(250), 5, 1, 0);
    stack_ = Stack(blockcanary_test::EarlyPhase);
    BeginDispatch();
    RunWithCpu(absl::Milliseconds(400), busy, app, thread);
    stack_ = Stack(blockcanary_test::LatePhase);
    RunWithCpu(absl::Milliseconds(1100), busy, app, thread);
    EndDispatch();
    RunWithCpu(2 * kInterval, 5, 1, 0);
  }

  testing::TestEnvironment env_;
  Looper* watchdog_ = nullptr;
  Looper* worker_ = nullptr;
  TimeTicks t0_;
  std::string root_, proc_, log_dir_;
  int64_t user_ = 1000, system_ = 500, idle_ = 10000, app_ = 100;
  std::vector<uintptr_t> stack_;
  int captures_ = 0;
  bool fail_captures_ = false;
  absl::Duration capture_delay_;  // From the tick to the stack's reading.
  std::vector<BlockInfo> interceptor_blocks_;
  std::shared_ptr<CollectingListener> listener_ = std::make_shared<CollectingListener>();
  std::unique_ptr<BlockCanaryPlugin> plugin_;
};

// Collects what interceptors see into the fixture.
BlockCanaryContext::Builder& Collect(BlockCanaryContext::Builder& b, std::vector<BlockInfo>* out) {
  return b.OnBlock([out](const BlockInfo& info) { out->push_back(info); });
}

bool Names(const BlockStackSample& s, absl::string_view function) {
  for (const BlockFrame& f : s.frames) {
    if (absl::StrContains(f.function, function)) return true;
  }
  return false;
}

TEST_F(BlockCanaryPluginTest, PrinterSource_IsTheDefaultAndKeepsAnExistingPrinter) {
  RecordingPrinter app_printer;
  env_.looper()->SetMessageLogging(&app_printer);
  auto b = WallTimeBuilder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  ASSERT_NE(plugin_->GetLooperMonitor(), nullptr);
  EXPECT_EQ(plugin_->GetLooperMonitor()->source(), LooperMonitor::Source::kPrinter);
  EXPECT_NE(env_.looper()->GetMessageLogging(), &app_printer);

  Handler handler(env_.looper());
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(1200)); });
  Settle();
  EXPECT_THAT(app_printer.lines, SizeIs(2));
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].time_cost_ms, 1200);
  EXPECT_THAT(interceptor_blocks_[0].message, HasSubstr(">>>>> Dispatching to Handler"));

  plugin_->Stop().IgnoreError();
  EXPECT_EQ(env_.looper()->GetMessageLogging(), &app_printer);
  env_.looper()->SetMessageLogging(nullptr);
}

TEST_F(BlockCanaryPluginTest, Threshold_LongerThanThresholdIsABlock_ExactlyIsNot) {
  auto b = WallTimeBuilder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  Handler handler(env_.looper());
  for (int ms : {999, 1000, 1001, 2500}) {
    handler.Post([this, ms] { env_.AdvanceClock(absl::Milliseconds(ms)); });
    Settle();
  }
  ASSERT_THAT(interceptor_blocks_, SizeIs(2));
  EXPECT_EQ(interceptor_blocks_[0].time_cost_ms, 1001);
  EXPECT_EQ(interceptor_blocks_[1].time_cost_ms, 2500);
  EXPECT_EQ(plugin_->stats().blocks, 2);
  EXPECT_EQ(plugin_->stats().reported, 2);
  ASSERT_THAT(listener_->issues, SizeIs(2));
  EXPECT_EQ(listener_->issues[0].tag(), "BlockCanary");
}

TEST_F(BlockCanaryPluginTest, Threshold_IsConfigurable) {
  auto b = WallTimeBuilder().SetBlockThreshold(absl::Milliseconds(300));
  StartPlugin(Collect(b, &interceptor_blocks_));
  Handler handler(env_.looper());
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(301)); });
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(299)); });
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].time_cost_ms, 301);
}

TEST_F(BlockCanaryPluginTest, Samples_CoverTheWholeBlockFromNearItsStart) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& block = interceptor_blocks_[0];
  EXPECT_EQ(block.time_cost_ms, 1500);
  std::vector<int64_t> offsets;
  for (const BlockStackSample& s : block.samples) {
    offsets.push_back(absl::ToInt64Milliseconds(s.time - block.time_start));
  }
  // Every 100 ms from 50 ms in (the first tick after the start), plus the
  // threshold crossing at exactly 1000 ms, to the end.
  EXPECT_THAT(offsets, ElementsAre(50, 150, 250, 350, 450, 550, 650, 750, 850, 950, 1000, 1100,
                                   1200, 1300, 1400, 1500));
  int early = 0, late = 0;
  for (const BlockStackSample& s : block.samples) {
    EXPECT_TRUE(Names(s, "blockcanary_test::RunTask(int)"));
    early += Names(s, "blockcanary_test::EarlyPhase(int)");
    late += Names(s, "blockcanary_test::LatePhase(int)");
  }
  EXPECT_EQ(early, 4);  // The early 400 ms phase BlockCanary cannot see.
  EXPECT_EQ(late, 12);
  // The key is where most of the block went.
  EXPECT_EQ(block.key, "blockcanary_test::LatePhase(int)");
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(listener_->issues[0].key(), "blockcanary_test::LatePhase(int)");
  EXPECT_EQ(listener_->issues[0].proto().block().key_sample_count(), 12);
  EXPECT_EQ(plugin_->stats().samples, 16);
}

TEST_F(BlockCanaryPluginTest, Samples_AreTimedWhenTheStackWasRead) {
  // On a loaded machine the looper thread answers a capture late: each
  // sample is timed when its stack was read, and one read after the block
  // ended (it shows what came next) is not the block's.
  capture_delay_ = absl::Milliseconds(30);
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& block = interceptor_blocks_[0];
  std::vector<int64_t> offsets;
  for (const BlockStackSample& s : block.samples) {
    offsets.push_back(absl::ToInt64Milliseconds(s.time - block.time_start));
  }
  EXPECT_THAT(offsets, ElementsAre(80, 180, 280, 380, 480, 580, 680, 780, 880, 980, 1030, 1130,
                                   1230, 1330, 1430));
  EXPECT_EQ(block.key, "blockcanary_test::LatePhase(int)");
}

TEST_F(BlockCanaryPluginTest, LongBlock_SamplesStayBoundedAndSpanTheBlock) {
  auto b = Builder().SetMaxSamplesPerBlock(8);
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunWithCpu(absl::Milliseconds(30), 5, 1, 0, absl::Milliseconds(30));
  BeginDispatch();
  RunWithCpu(absl::Seconds(10), 50, 25, 100, absl::Seconds(1));
  EndDispatch();
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& block = interceptor_blocks_[0];
  // At most 8 regular samples plus the crossing.
  EXPECT_LE(block.samples.size(), 9u);
  EXPECT_GE(block.samples.size(), 5u);
  EXPECT_LT(block.samples.front().time - block.time_start, kInterval);
  EXPECT_GT(block.samples.back().time - block.time_start, absl::Seconds(8));
  // Evenly spread: no gap longer than a quarter of the block.
  for (size_t i = 1; i < block.samples.size(); ++i) {
    EXPECT_LE(block.samples[i].time - block.samples[i - 1].time, absl::Milliseconds(2600));
  }
  // Captures were thinned out too, not just the kept samples.
  EXPECT_LT(plugin_->stats().samples, 40);
}

TEST_F(BlockCanaryPluginTest, Cpu_RateAndBusyFlagComeFromProc) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock(/*busy=*/90, /*app=*/50, /*thread=*/80);
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& block = interceptor_blocks_[0];
  ASSERT_TRUE(block.block_cpu.has_value());
  // From the first reading to the one after the end: the block's 1500 ms.
  EXPECT_EQ(block.block_cpu->cpu, 90);
  EXPECT_EQ(block.block_cpu->app, 50);
  EXPECT_EQ(block.block_cpu->user, 68);  // 27 of 40 ticks (user + nice)
  EXPECT_EQ(block.block_cpu->system, 23);
  EXPECT_TRUE(block.cpu_busy);
  // One rate per pair of consecutive readings (16 samples and the end
  // reading), except the crossing's, which read the same counters as the
  // tick 50 ms before it (no time had passed for /proc/stat).
  ASSERT_THAT(block.cpu_rate, SizeIs(15));
  for (const BlockCpuRate& r : block.cpu_rate) {
    EXPECT_EQ(r.cpu, 90);
    EXPECT_EQ(r.app, 50);
    EXPECT_EQ(r.iowait, 0);
  }
  // Looper thread CPU from the first reading to the end.
  EXPECT_EQ(block.thread_time_ms, 1200);
  EXPECT_EQ(block.cpu_cores, 4);
  EXPECT_EQ(block.model, "Fixture CPU 9000");
  EXPECT_EQ(block.process, "fixture-app");
  EXPECT_EQ(block.pid, kPid);
  EXPECT_EQ(block.total_memory_kb, 8000000);
  EXPECT_EQ(block.free_memory_kb, 3000000);
  EXPECT_EQ(block.vm_rss_kb, 12345);
  EXPECT_EQ(block.machine, "HIGH");  // 7.6 GiB
}

TEST_F(BlockCanaryPluginTest, Cpu_QuietMachine_IsNotBusy) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock(/*busy=*/30, /*app=*/25, /*thread=*/100);
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].block_cpu->cpu, 30);
  EXPECT_EQ(interceptor_blocks_[0].block_cpu->app, 25);
  EXPECT_FALSE(interceptor_blocks_[0].cpu_busy);
}

TEST_F(BlockCanaryPluginTest, BusyFlag_IsNotSetByALateSampler) {
  // BlockCanary's cpu-busy meant "my sampler ran late". Here the watchdog is
  // starved (it wakes 90 ms late, six times: later than 100 ms would be a
  // stopped process) on an idle machine: not busy.
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunWithCpu(absl::Milliseconds(50), 5, 1, 0);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(100), 5, 1, 0);
  for (int i = 0; i < 6; ++i) {
    user_ += 4;
    idle_ += 72;
    WriteCpu();
    env_.AdvanceClock(absl::Milliseconds(190));
    env_.RunUntilIdle();
  }
  RunWithCpu(absl::Milliseconds(300), 5, 1, 0);
  EndDispatch();
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_FALSE(interceptor_blocks_[0].cpu_busy);
  EXPECT_LT(interceptor_blocks_[0].block_cpu->cpu, 10);
}

TEST_F(BlockCanaryPluginTest, StoppedProcess_ShortBlockAroundTheStop_IsNoBlock) {
  // A dispatch held 7 s by SIGSTOP (or a breakpoint) that ran 300 ms: the
  // sampler's tick due 100 ms in runs 7 s late. Not a block.
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunWithCpu(absl::Milliseconds(50), 5, 1, 0);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(150), 5, 1, 50);
  env_.AdvanceClock(absl::Seconds(7));  // Stopped: nothing runs.
  env_.RunUntilIdle();
  RunWithCpu(absl::Milliseconds(150), 5, 1, 50);
  EndDispatch();
  Settle();
  EXPECT_THAT(interceptor_blocks_, IsEmpty());
  EXPECT_EQ(plugin_->stats().stopped_suppressed, 1);
  EXPECT_EQ(plugin_->stats().reported, 0);
}

TEST_F(BlockCanaryPluginTest, StoppedProcess_StoppedTimeIsLeftOutOfTheCostAndReportedApart) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunWithCpu(absl::Milliseconds(50), 5, 1, 0);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(400), 5, 1, 50);
  env_.AdvanceClock(absl::Seconds(7));
  env_.RunUntilIdle();
  RunWithCpu(absl::Milliseconds(1200), 5, 1, 50);
  EndDispatch();
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& block = interceptor_blocks_[0];
  // Ran 1.6 s; the tick due 100 ms after the last one before the stop ran
  // 7 s late, so 6.9 s to 7 s of the stop are seen.
  EXPECT_NEAR(block.time_cost_ms, 1600, 100);
  EXPECT_NEAR(block.stopped_ms, 7000, 100);
  EXPECT_NEAR(block.time_cost_ms + block.stopped_ms, 8600, 1);
  EXPECT_EQ(block.time_end - block.time_start, absl::Milliseconds(8600));
  // The file keeps it.
  ASSERT_THAT(listener_->issues, SizeIs(1));
  EXPECT_EQ(listener_->issues[0].proto().block().stopped_ms(), block.stopped_ms);
}

TEST_F(BlockCanaryPluginTest, WhiteList_DropsTheBlockAndDeletesItsFile) {
  auto b = Builder().SetWhiteList({"blockcanary_test::ThirdParty"});
  StartPlugin(Collect(b, &interceptor_blocks_));
  stack_ = Stack(blockcanary_test::ThirdPartyWait);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(1200), 30, 20, 50);
  EndDispatch();
  Settle();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_THAT(listener_->issues, SizeIs(0));
  EXPECT_EQ(plugin_->stats().white_listed, 1);
  EXPECT_TRUE(plugin_->log_writer()->ListLogFiles()->empty());
  EXPECT_TRUE(plugin_->GetBlockGroups().empty());

  // Another block is reported as usual.
  stack_ = Stack(blockcanary_test::LatePhase);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(1200), 30, 20, 50);
  EndDispatch();
  Settle();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, WhiteList_KeepsTheFileWhenNotDeleting) {
  auto b = Builder().SetWhiteList({"blockcanary_test::ThirdParty"}).DeleteFilesInWhiteList(false);
  StartPlugin(Collect(b, &interceptor_blocks_));
  stack_ = Stack(blockcanary_test::ThirdPartyWait);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(1200), 30, 20, 50);
  EndDispatch();
  Settle();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_THAT(*plugin_->log_writer()->ListLogFiles(), SizeIs(1));
  // The block list (LoadBlockLogs) hides it without deleting it.
  BlockCanaryPlugin::LoadedBlocks loaded = plugin_->LoadBlockLogs();
  EXPECT_THAT(loaded.blocks, SizeIs(0));
  EXPECT_EQ(loaded.white_listed, 1);
  EXPECT_THAT(*plugin_->log_writer()->ListLogFiles(), SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, ConcernFilter_DropsBlocksWithoutConcernedFrames) {
  auto b = Builder().SetConcernPackages({"app::"}).FilterNonConcernStack(true);
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_EQ(plugin_->stats().non_concern, 1);
  // BlockCanary keeps the file and hides it from the list.
  EXPECT_THAT(*plugin_->log_writer()->ListLogFiles(), SizeIs(1));
  EXPECT_EQ(plugin_->LoadBlockLogs().non_concern, 1);
}

TEST_F(BlockCanaryPluginTest, ConcernPackages_PickTheKeyFrame_WithoutFilterAllIsReported) {
  auto b = Builder().SetConcernPackages({"blockcanary_test::Run"});
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  // The first concerned frame is the caller, not the innermost function.
  EXPECT_EQ(interceptor_blocks_[0].key, "blockcanary_test::RunTask(int)");
}

TEST_F(BlockCanaryPluginTest, ConcernFilterOff_BlockWithoutConcernedFrameIsReported) {
  auto b = Builder().SetConcernPackages({"app::"});
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  // No concerned frame: the innermost named frame of the first sample.
  EXPECT_EQ(interceptor_blocks_[0].key, "blockcanary_test::EarlyPhase(int)");
}

TEST_F(BlockCanaryPluginTest, StopWhenDebugging_NeitherSamplesNorReports) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  SetTracerPid(777);
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_THAT(listener_->issues, SizeIs(0));
  EXPECT_EQ(captures_, 0);
  EXPECT_EQ(plugin_->stats().debugger_suppressed, 1);
  EXPECT_TRUE(plugin_->log_writer()->ListLogFiles()->empty());

  // The debugger detaches: blocks are reported again.
  SetTracerPid(0);
  env_.FastForwardBy(absl::Seconds(2));
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, StopWhenDebugging_DebuggerAttachedDuringTheBlock) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(300), 30, 20, 50);
  SetTracerPid(777);  // Seen at the threshold crossing at the latest.
  RunWithCpu(absl::Milliseconds(900), 30, 20, 50);
  const int captures_at_crossing = captures_;
  RunWithCpu(absl::Milliseconds(500), 30, 20, 50);
  EndDispatch();
  Settle();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_EQ(captures_, captures_at_crossing);
  EXPECT_EQ(plugin_->stats().debugger_suppressed, 1);
}

TEST_F(BlockCanaryPluginTest, StopWhenDebuggingOff_ReportsUnderADebugger) {
  auto b = Builder().StopWhenDebugging(false);
  StartPlugin(Collect(b, &interceptor_blocks_));
  SetTracerPid(777);
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(plugin_->stats().debugger_suppressed, 0);
}

TEST_F(BlockCanaryPluginTest, Interceptors_RunInOrderAfterTheFileIsWritten) {
  std::vector<std::string> order;
  auto first = std::make_shared<RecordingInterceptor>("first", &order);
  auto late = std::make_shared<RecordingInterceptor>("added later", &order);
  auto b = Builder().AddInterceptor(first).OnBlock([&order](const BlockInfo& block) {
    order.push_back("context");
    EXPECT_EQ(access(block.log_file.c_str(), F_OK), 0) << block.log_file;
  });
  StartPlugin(b);
  plugin_->AddInterceptor(late);
  RunEarlyLateBlock();
  EXPECT_THAT(order, ElementsAre("first", "context", "added later"));
  ASSERT_THAT(first->blocks, SizeIs(1));
  EXPECT_EQ(first->blocks[0], late->blocks[0]);
  // Interceptors run before the Issue reaches the listeners.
  EXPECT_THAT(listener_->issues, SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, BlockFile_ReadsBackAsTheReportedBlock) {
  auto b = Builder().SetVersion("1.0.3", 103).SetUid("user-7").SetNetworkType("wifi");
  StartPlugin(Collect(b, &interceptor_blocks_));
  AppState::Get()->SetVisibleScene("Gallery");
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  const BlockInfo& reported = interceptor_blocks_[0];
  EXPECT_TRUE(absl::StartsWith(reported.log_file, log_dir_ + "/looper-2025-06-"))
      << reported.log_file;
  EXPECT_TRUE(absl::EndsWith(reported.log_file, ".log"));

  absl::StatusOr<BlockInfo> from_file = ReadBlockLog(reported.log_file);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  BlockInfo expected = reported;
  expected.key.clear();  // Not in the file: derived.
  EXPECT_EQ(*from_file, expected);
  EXPECT_EQ(from_file->qualifier, "test-1.0");
  EXPECT_EQ(from_file->version_name, "1.0.3");
  EXPECT_EQ(from_file->version_code, 103);
  EXPECT_EQ(from_file->uid, "user-7");
  EXPECT_EQ(from_file->network, "wifi");
  EXPECT_EQ(from_file->scene, "Gallery");
  EXPECT_EQ(from_file->time_start, kEpoch + absl::Milliseconds(250));
  EXPECT_EQ(from_file->time_end, kEpoch + absl::Milliseconds(1750));
  EXPECT_THAT(from_file->samples, SizeIs(16));

  // The Issue carries the same block, structured.
  ASSERT_THAT(listener_->issues, SizeIs(1));
  const proto::BlockReport& r = listener_->issues[0].proto().block();
  EXPECT_EQ(r.log_file(), reported.log_file);
  EXPECT_EQ(r.cost_ms(), 1500);
  EXPECT_EQ(r.samples_size(), 16);
  EXPECT_EQ(r.samples(0).offset_ms(), 50);
  EXPECT_EQ(r.qualifier(), "test-1.0");
  EXPECT_EQ(listener_->issues[0].proto().plugin(), "BlockCanary");
  EXPECT_GT(listener_->issues[0].proto().device().cpu_cores(), 0);
}

TEST_F(BlockCanaryPluginTest, Groups_CountBlocksByKeyStackLine) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  for (int i = 0; i < 3; ++i) RunEarlyLateBlock();
  stack_ = Stack(blockcanary_test::ThirdPartyWait);
  BeginDispatch();
  RunWithCpu(absl::Milliseconds(1300), 30, 20, 50);
  EndDispatch();
  Settle();
  const std::vector<BlockGroup> groups = plugin_->GetBlockGroups();
  ASSERT_THAT(groups, SizeIs(2));
  EXPECT_EQ(groups[0].key, "blockcanary_test::LatePhase(int)");
  EXPECT_EQ(groups[0].count, 3);
  EXPECT_EQ(groups[0].total_cost_ms, 4500);
  EXPECT_EQ(groups[1].key, "blockcanary_test::ThirdPartyWait(int)");
  EXPECT_EQ(groups[1].count, 1);
  // The files on disk group the same way.
  BlockCanaryPlugin::LoadedBlocks loaded = plugin_->LoadBlockLogs();
  EXPECT_THAT(loaded.errors, SizeIs(0));
  const std::vector<BlockGroup> from_disk = GroupBlocks(loaded.blocks);
  ASSERT_THAT(from_disk, SizeIs(2));
  EXPECT_EQ(from_disk[0].key, groups[0].key);
  EXPECT_EQ(from_disk[0].count, 3);
}

TEST_F(BlockCanaryPluginTest, LoadBlockLogs_KeepsFilesItCannotParse) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  const std::string corrupt = log_dir_ + "/looper-2025-01-01_00-00-00.000.log";
  Write(corrupt, "not a block\r\n");
  BlockCanaryPlugin::LoadedBlocks loaded = plugin_->LoadBlockLogs();
  EXPECT_THAT(loaded.blocks, SizeIs(1));
  ASSERT_THAT(loaded.errors, SizeIs(1));
  EXPECT_THAT(loaded.errors[0].message(), HasSubstr(corrupt));
  EXPECT_EQ(access(corrupt.c_str(), F_OK), 0);
}

TEST_F(BlockCanaryPluginTest, Retention_OldFilesAreDeletedAtStart) {
  std::system(absl::StrCat("mkdir -p '", log_dir_, "'").c_str());
  const std::string old_file = log_dir_ + "/looper-2025-06-12_00-00-00.000.log";
  const std::string recent = log_dir_ + "/looper-2025-06-14_00-00-00.000.log";
  Write(old_file, "old");
  Write(recent, "recent");
  auto age = [](const std::string& path, absl::Duration d) {
    const timespec t = absl::ToTimespec(kEpoch - d);
    const timespec times[2] = {t, t};
    ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  };
  age(old_file, absl::Hours(49));
  age(recent, absl::Hours(20));
  StartPlugin(Builder());
  EXPECT_EQ(access(old_file.c_str(), F_OK), -1);
  EXPECT_EQ(access(recent.c_str(), F_OK), 0);
}

TEST_F(BlockCanaryPluginTest, Upload_DeletesTheFilesOnlyWhenItSucceeds) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  RunEarlyLateBlock();
  std::vector<std::string> sent;
  absl::Status status = plugin_->Upload([&](const std::vector<std::string>& files) {
    sent = files;
    return absl::UnavailableError("offline");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(sent, SizeIs(2));
  EXPECT_THAT(*plugin_->log_writer()->ListLogFiles(), SizeIs(2));
  status = plugin_->Upload([&](const std::vector<std::string>&) { return absl::OkStatus(); });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(*plugin_->log_writer()->ListLogFiles(), SizeIs(0));
}

TEST_F(BlockCanaryPluginTest, MonitorDuration_StopsReportingAfterIt) {
  auto b = Builder().SetMonitorDuration(absl::Seconds(5));
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
  env_.FastForwardBy(absl::Seconds(5));
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, NoLogPath_ReportsWithoutFiles) {
  auto b = Builder().SetLogPath("");
  StartPlugin(Collect(b, &interceptor_blocks_));
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].log_file, "");
  EXPECT_EQ(plugin_->log_writer(), nullptr);
  EXPECT_EQ(access(log_dir_.c_str(), F_OK), -1);
}

TEST_F(BlockCanaryPluginTest, CaptureFailures_AreCountedAndLeftOut) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  fail_captures_ = true;
  RunEarlyLateBlock();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_THAT(interceptor_blocks_[0].samples, SizeIs(0));
  EXPECT_EQ(interceptor_blocks_[0].key, "unknown");
  EXPECT_EQ(plugin_->stats().capture_failures, 16);
  // CPU still comes from the readings taken with each attempt.
  EXPECT_TRUE(interceptor_blocks_[0].block_cpu.has_value());
}

TEST_F(BlockCanaryPluginTest, DispatchObserverSource_DetectsBlocksToo) {
  auto b = WallTimeBuilder().SetLooperSource(LooperMonitor::Source::kDispatchObserver);
  StartPlugin(Collect(b, &interceptor_blocks_));
  EXPECT_EQ(env_.looper()->GetMessageLogging(), nullptr);
  Handler handler(env_.looper());
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(1100)); });
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].time_cost_ms, 1100);
  EXPECT_THAT(interceptor_blocks_[0].message, HasSubstr(">>>>> Dispatching to "));
}

TEST_F(BlockCanaryPluginTest, ForeignSource_DetectsThroughTheHooks) {
  auto b = Builder().SetLooperSource(LooperMonitor::Source::kForeign);
  StartPlugin(Collect(b, &interceptor_blocks_));
  LooperMonitor* monitor = plugin_->GetLooperMonitor();
  ASSERT_NE(monitor, nullptr);
  monitor->DispatchBegin("sdl-event");
  RunWithCpu(absl::Milliseconds(1300), 30, 20, 50);
  monitor->DispatchEnd();
  Settle();
  ASSERT_THAT(interceptor_blocks_, SizeIs(1));
  EXPECT_EQ(interceptor_blocks_[0].message, "sdl-event");
  EXPECT_FALSE(interceptor_blocks_[0].samples.empty());
}

TEST_F(BlockCanaryPluginTest, StopAndStart_NoDetectionWhileStopped) {
  auto b = Builder();
  StartPlugin(Collect(b, &interceptor_blocks_));
  ASSERT_TRUE(plugin_->Stop().ok());
  env_.RunUntilIdle();
  EXPECT_EQ(env_.looper()->GetMessageLogging(), nullptr);
  Handler handler(env_.looper());
  handler.Post([this] { env_.AdvanceClock(absl::Milliseconds(1500)); });
  Settle();
  EXPECT_THAT(interceptor_blocks_, SizeIs(0));
  EXPECT_EQ(captures_, 0);
  EXPECT_EQ(env_.PendingMessageCount(), 0u);  // No sampler ticks while stopped.

  ASSERT_TRUE(plugin_->Start().ok());
  env_.RunUntilIdle();
  RunEarlyLateBlock();
  EXPECT_THAT(interceptor_blocks_, SizeIs(1));
}

TEST_F(BlockCanaryPluginTest, Init_WithoutMainLooper_FailsClearly) {
  auto context = Builder().Build();
  ASSERT_TRUE(context.ok());
  BlockCanaryPlugin plugin(*context, MakeHooks());
  PluginContext c;
  c.clock = env_.clock();
  c.watchdog_looper = watchdog_;
  c.worker_looper = worker_;
  absl::Status status = plugin.Init(c);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("no main looper"));
}

}  // namespace
}  // namespace matrix
