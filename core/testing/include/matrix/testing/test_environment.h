// File: matrix/testing/test_environment.h
//
// TestEnvironment runs a program's loop deterministically on the test thread:
// a fake clock, the thread's Looper (optionally the main looper), a
// Choreographer on a ManualVsyncSource, and any number of extra "background"
// loopers (stand-ins for worker threads) that share the fake clock and run on
// the test thread in due-time order. Nothing sleeps: time moves only when the
// test moves it. Public, so applications can test their own frame budgets.
//
//   matrix::testing::TestEnvironment env;        // 60 Hz, main looper
//   matrix::Handler handler(env.looper());
//   bool ran = false;
//   handler.PostDelayed([&] { ran = true; }, absl::Seconds(5));
//   env.FastForwardBy(absl::Seconds(4));
//   EXPECT_FALSE(ran);
//   env.FastForwardBy(absl::Seconds(1));
//   EXPECT_TRUE(ran);
//
// With auto-vsync on (the default), the environment fires a vsync at every
// refresh-interval tick while the Choreographer asks for one, so
// FastForwardBy(1s) at 60 Hz draws up to 60 frames. Turn it off to fire
// vsyncs by hand with FireVsync().
//
// Thread safety: use from the test thread only; one environment at a time.

#ifndef MATRIX_TESTING_TEST_ENVIRONMENT_H_
#define MATRIX_TESTING_TEST_ENVIRONMENT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/core/choreographer.h"
#include "matrix/core/looper.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/testing/fake_tick_clock.h"
#include "matrix/testing/manual_vsync_source.h"

namespace matrix::testing {

class TestEnvironment {
 public:
  struct Options {
    // Prepare the test thread's looper as the process's main looper.
    bool main_looper = true;
    // Install a Choreographer on a ManualVsyncSource at this rate.
    bool choreographer = true;
    RefreshRate refresh_rate = RefreshRate();
    // Fire vsyncs on the refresh grid while FastForwardBy() runs.
    bool auto_vsync = true;
  };

  TestEnvironment();
  explicit TestEnvironment(Options options);
  // Releases the looper and Choreographer it created.
  ~TestEnvironment();
  TestEnvironment(const TestEnvironment&) = delete;
  TestEnvironment& operator=(const TestEnvironment&) = delete;

  FakeTickClock* clock() { return &clock_; }
  TimeTicks Now() const { return clock_.NowTicks(); }
  Looper* looper() { return looper_; }
  Choreographer* choreographer() { return choreographer_; }
  ManualVsyncSource* vsync() { return vsync_; }

  // CreateBackgroundLooper()
  //
  // A looper for a component that expects its own thread (a watchdog, a
  // worker). It runs on the test thread whenever this environment runs.
  Looper* CreateBackgroundLooper(const std::string& name);

  // Runs every message that is due now, on every looper, including those
  // posted meanwhile, and idle handlers when a looper goes idle.
  void RunUntilIdle();
  // Runs delayed messages (and vsyncs, with auto-vsync) in due order while
  // advancing the clock, until `delta` has passed.
  void FastForwardBy(absl::Duration delta);
  // Moves the clock without running anything.
  void AdvanceClock(absl::Duration delta) { clock_.Advance(delta); }

  // Fires a vsync now (or at `timestamp`) if one was requested, then runs
  // until idle. Returns whether a vsync was delivered.
  bool FireVsync();
  bool FireVsyncAt(TimeTicks timestamp);
  // Changes the refresh rate from the next vsync on.
  void SetRefreshRate(RefreshRate rate);
  void set_auto_vsync(bool on) { auto_vsync_ = on; }

  // Messages pending on every looper.
  size_t PendingMessageCount() const;

 private:
  bool RunDue();
  std::optional<TimeTicks> NextEventTime() const;
  TimeTicks NextVsyncTick() const;

  FakeTickClock clock_;
  Looper* looper_ = nullptr;
  Choreographer* choreographer_ = nullptr;
  ManualVsyncSource* vsync_ = nullptr;
  bool auto_vsync_ = true;
  TimeTicks vsync_grid_base_;
  RefreshRate grid_rate_;
  std::vector<std::unique_ptr<Looper>> background_;
};

}  // namespace matrix::testing

#endif  // MATRIX_TESTING_TEST_ENVIRONMENT_H_
