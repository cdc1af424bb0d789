// What BlockCanaryPlugin adds to the looper thread per message allocates
// nothing: this binary replaces operator new to count the allocations made
// on the test thread while the plugin's listener runs.

#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "gtest/gtest.h"
#include "matrix/core/app_state.h"
#include "matrix/core/looper.h"
#include "matrix/plugins/block_canary_plugin.h"
#include "matrix/testing/sanitizers.h"
#include "matrix/testing/test_environment.h"

// ThreadSanitizer's runtime defines operator new itself (strongly), so this
// binary cannot replace it there; the counting tests are skipped under TSan
// and run in the other builds.
#define MATRIX_COUNT_ALLOCATIONS (!MATRIX_TESTING_THREAD_SANITIZER)

namespace {
thread_local bool g_counting = false;
thread_local long g_allocations = 0;
}  // namespace

#if MATRIX_COUNT_ALLOCATIONS

// GCC sees free() of what it inlined as operator new and warns; the pair is
// consistent (malloc/free underneath).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

void* operator new(std::size_t size) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif  // MATRIX_COUNT_ALLOCATIONS

namespace matrix {
namespace {

class Counting {
 public:
  Counting() {
    g_allocations = 0;
    g_counting = true;
  }
  ~Counting() { g_counting = false; }
  long allocations() const { return g_allocations; }
};

class BlockCanaryHotPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!MATRIX_COUNT_ALLOCATIONS) GTEST_SKIP() << "operator new belongs to ThreadSanitizer here";
  }

  void Start(LooperMonitor::Source source) {
    AppState::Get()->ResetForTesting();
    absl::StatusOr<BlockCanaryContext> context = BlockCanaryContext::Builder()
                                                     .SetLogPath("")
                                                     .SetLooperSource(source)
                                                     .DisplayNotification(false)
                                                     .Build();
    ASSERT_TRUE(context.ok());
    BlockCanaryPlugin::Hooks hooks;
    hooks.capture = [](const ThreadHandle&, RawStack* out) {
      out->depth = 0;
      return absl::OkStatus();
    };
    plugin_ = std::make_unique<BlockCanaryPlugin>(*context, hooks);
    PluginContext c;
    c.clock = env_.clock();
    c.main_looper = env_.looper();
    c.watchdog_looper = env_.CreateBackgroundLooper("watchdog");
    c.worker_looper = env_.CreateBackgroundLooper("worker");
    ASSERT_TRUE(plugin_->Init(c).ok());
    ASSERT_TRUE(plugin_->Start().ok());
    env_.RunUntilIdle();
  }
  void TearDown() override {
    if (plugin_) plugin_->Destroy().IgnoreError();
  }

  testing::TestEnvironment env_;
  std::unique_ptr<BlockCanaryPlugin> plugin_;
};

TEST_F(BlockCanaryHotPathTest, CountingWorks) {
  // Checks that this binary's operator new is the counting one.
  Counting counting;
  auto p = std::make_unique<int>(1);
  EXPECT_EQ(counting.allocations(), 1);
}

TEST_F(BlockCanaryHotPathTest, ForeignHooks_NoAllocationPerMessageNorAtABlockEnd) {
  Start(LooperMonitor::Source::kForeign);
  LooperMonitor* monitor = plugin_->GetLooperMonitor();
  ASSERT_NE(monitor, nullptr);
  monitor->DispatchBegin("warm-up");
  monitor->DispatchEnd();
  TimeTicks t = env_.Now();
  {
    Counting counting;
    for (int i = 0; i < 1000; ++i) {
      monitor->DispatchBegin(t, "event");
      t += absl::Microseconds(100);
      monitor->DispatchEnd(t);
    }
    // A block's end (longer than the threshold) publishes its end record
    // and reads the thread's CPU clock: still no allocation.
    monitor->DispatchBegin(t, "slow event");
    t += absl::Milliseconds(1500);
    monitor->DispatchEnd(t);
    EXPECT_EQ(counting.allocations(), 0);
  }
  // The block was seen: the measurement above ran the real path.
  env_.AdvanceClock(absl::Milliseconds(1600));
  env_.FastForwardBy(absl::Milliseconds(300));
  EXPECT_EQ(plugin_->stats().blocks, 1);
}

TEST_F(BlockCanaryHotPathTest, PrinterSource_AddsNoAllocationToThePrintedLines) {
  Start(LooperMonitor::Source::kPrinter);
  Printer* printer = env_.looper()->GetMessageLogging();
  ASSERT_NE(printer, nullptr);
  // The Looper builds these strings (BlockCanary's accepted cost); the
  // plugin's part starts at Println().
  const std::string begin = ">>>>> Dispatching to Handler (app::Ui) {55d0c3a1} null: 3";
  const std::string end = "<<<<< Finished to Handler (app::Ui) {55d0c3a1} null";
  printer->Println(begin);
  printer->Println(end);
  {
    Counting counting;
    for (int i = 0; i < 1000; ++i) {
      printer->Println(begin);
      printer->Println(end);
    }
    EXPECT_EQ(counting.allocations(), 0);
  }
  printer->Println(begin);
  env_.AdvanceClock(absl::Milliseconds(1200));
  printer->Println(end);
  env_.FastForwardBy(absl::Milliseconds(300));
  EXPECT_EQ(plugin_->stats().blocks, 1);
}

}  // namespace
}  // namespace matrix
