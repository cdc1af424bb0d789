#include "matrix/testing/test_environment.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "matrix/core/check.h"

namespace matrix::testing {

TestEnvironment::TestEnvironment() : TestEnvironment(Options()) {}

TestEnvironment::TestEnvironment(Options options) : auto_vsync_(options.auto_vsync) {
  MATRIX_CHECK(Looper::MyLooper() == nullptr,
               "TestEnvironment: the test thread already has a Looper");
  looper_ = options.main_looper ? Looper::PrepareMainLooper(&clock_) : Looper::Prepare(&clock_);
  if (options.choreographer) {
    auto source = std::make_unique<ManualVsyncSource>(options.refresh_rate);
    vsync_ = source.get();
    choreographer_ = Choreographer::Install(std::move(source));
  }
  vsync_grid_base_ = clock_.NowTicks();
  grid_rate_ = options.refresh_rate;
}

TestEnvironment::~TestEnvironment() {
  if (choreographer_ != nullptr) Choreographer::ReleaseForTesting();
  background_.clear();
  Looper::ReleaseForTesting();
}

Looper* TestEnvironment::CreateBackgroundLooper(const std::string& /*name*/) {
  background_.push_back(Looper::Create(&clock_));
  return background_.back().get();
}

bool TestEnvironment::RunDue() {
  bool progress = false;
  // Due messages one at a time, each from the looper whose next message is
  // due first, so that loopers interleave in global due-time order even after
  // AdvanceClock() made several due at once (the main looper wins ties).
  for (;;) {
    const TimeTicks now = clock_.NowTicks();
    Looper* earliest = nullptr;
    TimeTicks earliest_when;
    auto consider = [&](Looper* looper) {
      const std::optional<TimeTicks> when = looper->queue()->NextRunnableTime();
      if (when && *when <= now && (earliest == nullptr || *when < earliest_when)) {
        earliest = looper;
        earliest_when = *when;
      }
    };
    consider(looper_);
    // Index loop: a message may create another background looper.
    for (size_t i = 0; i < background_.size(); ++i) consider(background_[i].get());
    if (earliest == nullptr) break;
    if (earliest->PollOnce(absl::ZeroDuration()) != Looper::PollResult::kDispatched) break;
    progress = true;
  }
  // Nothing is due anywhere: let each looper run its idle handlers, and
  // whatever they post.
  auto drain = [&](Looper* looper) {
    while (looper->PollOnce(absl::ZeroDuration()) == Looper::PollResult::kDispatched) {
      progress = true;
    }
  };
  drain(looper_);
  for (size_t i = 0; i < background_.size(); ++i) drain(background_[i].get());
  return progress;
}

void TestEnvironment::RunUntilIdle() {
  for (int rounds = 0; RunDue(); ++rounds) {
    MATRIX_CHECK(rounds < 10'000'000,
                 "RunUntilIdle: messages keep reposting themselves with no delay");
  }
}

TimeTicks TestEnvironment::NextVsyncTick() const {
  const TimeTicks now = clock_.NowTicks();
  int64_t k = grid_rate_.IntervalsIn(now - vsync_grid_base_) + 1;
  TimeTicks tick = grid_rate_.TickAfter(vsync_grid_base_, k);
  // Ticks are rounded down to a nanosecond, so when `now` is a tick the count
  // above can be one short and `tick` equal to `now`: FastForwardBy() would
  // then fire the same vsync forever. The next tick is strictly later.
  while (tick <= now) tick = grid_rate_.TickAfter(vsync_grid_base_, ++k);
  return tick;
}

std::optional<TimeTicks> TestEnvironment::NextEventTime() const {
  std::optional<TimeTicks> next;
  auto consider = [&](std::optional<TimeTicks> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  auto consider_looper = [&](Looper* looper) {
    if (!looper->queue()->IsQuitting()) consider(looper->queue()->NextRunnableTime());
  };
  consider_looper(looper_);
  for (const auto& looper : background_) consider_looper(looper.get());
  return next;
}

void TestEnvironment::FastForwardBy(absl::Duration delta) {
  MATRIX_CHECK(delta >= absl::ZeroDuration(), "FastForwardBy a negative duration");
  const TimeTicks target = clock_.NowTicks() + delta;
  for (;;) {
    RunUntilIdle();
    std::optional<TimeTicks> next = NextEventTime();
    std::optional<TimeTicks> vsync_tick;
    if (auto_vsync_ && vsync_ != nullptr && vsync_->vsync_requested()) {
      vsync_tick = NextVsyncTick();
      if (!next || *vsync_tick < *next) next = vsync_tick;
    }
    if (!next || *next > target) break;
    if (*next > clock_.NowTicks()) clock_.SetNowTicks(*next);
    if (vsync_tick && *vsync_tick == *next) vsync_->Fire(*vsync_tick);
  }
  if (target > clock_.NowTicks()) clock_.SetNowTicks(target);
  RunUntilIdle();
}

bool TestEnvironment::FireVsync() { return FireVsyncAt(clock_.NowTicks()); }

bool TestEnvironment::FireVsyncAt(TimeTicks timestamp) {
  MATRIX_CHECK(vsync_ != nullptr, "TestEnvironment has no Choreographer");
  const bool fired = vsync_->Fire(timestamp);
  RunUntilIdle();
  return fired;
}

void TestEnvironment::SetRefreshRate(RefreshRate rate) {
  MATRIX_CHECK(vsync_ != nullptr, "TestEnvironment has no Choreographer");
  vsync_->SetRefreshRate(rate);
  // Re-anchor the auto-vsync grid at now, in the new rate.
  vsync_grid_base_ = clock_.NowTicks();
  grid_rate_ = rate;
}

size_t TestEnvironment::PendingMessageCount() const {
  size_t count = looper_->queue()->PendingCount();
  for (const auto& looper : background_) count += looper->queue()->PendingCount();
  return count;
}

}  // namespace matrix::testing
