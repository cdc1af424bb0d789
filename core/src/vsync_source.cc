#include "matrix/core/vsync_source.h"

#include "matrix/core/thread_handle.h"

namespace matrix {

SoftwareVsyncSource::SoftwareVsyncSource(RefreshRate rate, const TickClock* clock)
    : clock_(clock), rate_(rate), grid_base_(clock->NowTicks()) {
  thread_ = std::thread([this] { Run(); });
}

SoftwareVsyncSource::~SoftwareVsyncSource() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

void SoftwareVsyncSource::SetReceiver(Receiver* receiver) {
  absl::MutexLock lock(&mu_);
  // Never return while the old receiver is being called.
  while (delivering_ && thread_.get_id() != std::this_thread::get_id()) {
    cv_.Wait(&mu_);
  }
  receiver_ = receiver;
}

void SoftwareVsyncSource::RequestVsync() {
  absl::MutexLock lock(&mu_);
  if (!requested_) {
    requested_ = true;
    cv_.SignalAll();
  }
}

RefreshRate SoftwareVsyncSource::refresh_rate() const {
  absl::MutexLock lock(&mu_);
  return rate_;
}

void SoftwareVsyncSource::SetRefreshRate(RefreshRate rate) {
  absl::MutexLock lock(&mu_);
  if (rate == rate_ || !rate.valid()) return;
  const TimeTicks now = clock_->NowTicks();
  // Re-anchor the tick grid at the last tick, so the phase is kept.
  grid_base_ = last_tick_.is_null() ? now : last_tick_;
  rate_ = rate;
  ++grid_version_;
  cv_.SignalAll();
}

void SoftwareVsyncSource::Run() {
  SetCurrentThreadName("matrix-vsync");
  mu_.Lock();
  for (;;) {
    while (!requested_ && !stopping_) cv_.Wait(&mu_);
    if (stopping_) break;
    // Wait for the next tick on the grid; recompute it if the rate changes
    // meanwhile.
    TimeTicks next;
    uint64_t version = grid_version_ - 1;
    for (;;) {
      if (stopping_) break;
      const TimeTicks now = clock_->NowTicks();
      if (version != grid_version_) {
        version = grid_version_;
        // Every tick from the grid's base: a tick counted from another
        // tick (rounded down to a nanosecond) can be a nanosecond off the
        // grid, and the frame time the Choreographer counts from it another.
        const int64_t k = rate_.IntervalsIn(now - grid_base_) + 1;
        next = rate_.TickAfter(grid_base_, k);
        if (next <= last_tick_) next = rate_.TickAfter(grid_base_, k + 1);
      }
      if (now >= next) break;
      cv_.WaitWithTimeout(&mu_, next - now);
    }
    if (stopping_) break;
    requested_ = false;
    last_tick_ = next;
    const int64_t frame = ++frame_number_;
    const RefreshRate rate = rate_;
    Receiver* receiver = receiver_;
    if (receiver == nullptr) continue;
    delivering_ = true;
    mu_.Unlock();
    receiver->OnVsync(next, rate, frame);
    mu_.Lock();
    delivering_ = false;
    cv_.SignalAll();
  }
  mu_.Unlock();
}

}  // namespace matrix
