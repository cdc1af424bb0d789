// File: matrix/core/vsync_source.h
//
// A VsyncSource delivers vertical-sync ticks to a Choreographer, one tick per
// request: the Choreographer asks for a vsync only while it has callbacks
// pending, so an idle program gets no wake-ups.
//
// SoftwareVsyncSource is a thread that ticks at a refresh rate (60 Hz by
// default; any rate, changeable while running). Tests use
// matrix::testing::ManualVsyncSource, which fires when the test says.
//
//   auto vsync = std::make_unique<matrix::SoftwareVsyncSource>(
//       matrix::RefreshRate::FromHz(120));
//   matrix::Choreographer::Install(std::move(vsync));
//
// Thread safety: implementations are thread-safe; the receiver is called on
// the source's own thread (or the test's).

#ifndef MATRIX_CORE_VSYNC_SOURCE_H_
#define MATRIX_CORE_VSYNC_SOURCE_H_

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/tick_clock.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

class VsyncSource {
 public:
  class Receiver {
   public:
    virtual ~Receiver() = default;
    // A vsync happened at `timestamp`; `rate` is the rate in effect for the
    // frame it starts. Called on the source's thread.
    virtual void OnVsync(TimeTicks timestamp, RefreshRate rate, int64_t frame_number) = 0;
  };

  virtual ~VsyncSource() = default;
  // Sets the one receiver (not owned; null detaches). Once it returns, the
  // previous receiver is not called any more. Any thread.
  virtual void SetReceiver(Receiver* receiver) = 0;
  // Asks for one OnVsync() at the next tick. Repeated requests before the
  // tick coalesce. Any thread.
  virtual void RequestVsync() = 0;
  // The current refresh rate. Any thread.
  virtual RefreshRate refresh_rate() const = 0;
};

class SoftwareVsyncSource : public VsyncSource {
 public:
  explicit SoftwareVsyncSource(RefreshRate rate = RefreshRate(),
                               const TickClock* clock = TickClock::Default());
  ~SoftwareVsyncSource() override;

  void SetReceiver(Receiver* receiver) override;
  void RequestVsync() override;
  RefreshRate refresh_rate() const override;
  // Changes the rate from the next tick on. Any thread.
  void SetRefreshRate(RefreshRate rate);

 private:
  void Run();

  const TickClock* const clock_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  Receiver* receiver_ ABSL_GUARDED_BY(mu_) = nullptr;
  RefreshRate rate_ ABSL_GUARDED_BY(mu_);
  TimeTicks grid_base_ ABSL_GUARDED_BY(mu_);  // Ticks are grid_base_ + k intervals.
  TimeTicks last_tick_ ABSL_GUARDED_BY(mu_);
  uint64_t grid_version_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped on rate changes.
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;  // Receiver is being called.
  int64_t frame_number_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace matrix

#endif  // MATRIX_CORE_VSYNC_SOURCE_H_
