#include "matrix/testing/manual_vsync_source.h"

namespace matrix::testing {

ManualVsyncSource::ManualVsyncSource(RefreshRate rate) : rate_(rate) {}

void ManualVsyncSource::SetReceiver(Receiver* receiver) {
  absl::MutexLock lock(&mu_);
  receiver_ = receiver;
}

void ManualVsyncSource::RequestVsync() {
  absl::MutexLock lock(&mu_);
  requested_ = true;
}

RefreshRate ManualVsyncSource::refresh_rate() const {
  absl::MutexLock lock(&mu_);
  return rate_;
}

void ManualVsyncSource::SetRefreshRate(RefreshRate rate) {
  absl::MutexLock lock(&mu_);
  rate_ = rate;
}

bool ManualVsyncSource::vsync_requested() const {
  absl::MutexLock lock(&mu_);
  return requested_;
}

int64_t ManualVsyncSource::frames_fired() const {
  absl::MutexLock lock(&mu_);
  return frame_number_;
}

bool ManualVsyncSource::Fire(TimeTicks timestamp) {
  Receiver* receiver;
  RefreshRate rate;
  int64_t frame;
  {
    absl::MutexLock lock(&mu_);
    if (!requested_ || receiver_ == nullptr) return false;
    requested_ = false;
    receiver = receiver_;
    rate = rate_;
    frame = ++frame_number_;
  }
  receiver->OnVsync(timestamp, rate, frame);
  return true;
}

}  // namespace matrix::testing
