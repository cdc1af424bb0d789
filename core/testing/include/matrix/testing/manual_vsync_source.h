// File: matrix/testing/manual_vsync_source.h
//
// ManualVsyncSource is a VsyncSource for tests: a vsync happens when the test
// calls Fire(), at the timestamp the test gives, and only if the Choreographer
// asked for one.
//
//   matrix::testing::ManualVsyncSource* vsync = env.vsync();
//   choreographer->PostFrameCallback(...);
//   ASSERT_TRUE(vsync->vsync_requested());
//   vsync->Fire(env.clock()->NowTicks());   // posts the frame message
//   env.RunUntilIdle();                     // runs the frame
//
// Thread safety: thread-safe; the receiver is called on the thread that
// calls Fire().

#ifndef MATRIX_TESTING_MANUAL_VSYNC_SOURCE_H_
#define MATRIX_TESTING_MANUAL_VSYNC_SOURCE_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/vsync_source.h"

namespace matrix::testing {

class ManualVsyncSource : public VsyncSource {
 public:
  explicit ManualVsyncSource(RefreshRate rate = RefreshRate());

  void SetReceiver(Receiver* receiver) override;
  void RequestVsync() override;
  RefreshRate refresh_rate() const override;

  // Changes the rate reported with the next vsyncs.
  void SetRefreshRate(RefreshRate rate);
  bool vsync_requested() const;
  // Delivers a vsync at `timestamp` if one was requested. Returns whether it did.
  bool Fire(TimeTicks timestamp);
  int64_t frames_fired() const;

 private:
  mutable absl::Mutex mu_;
  Receiver* receiver_ ABSL_GUARDED_BY(mu_) = nullptr;
  RefreshRate rate_ ABSL_GUARDED_BY(mu_);
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
  int64_t frame_number_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace matrix::testing

#endif  // MATRIX_TESTING_MANUAL_VSYNC_SOURCE_H_
