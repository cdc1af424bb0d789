#include "matrix/core/tick_clock.h"

#include <time.h>

namespace matrix {
namespace {

class MonotonicClock final : public TickClock {
 public:
  TimeTicks NowTicks() const override { return MonotonicNow(); }
};

}  // namespace

TimeTicks MonotonicNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimeTicks::FromNanoseconds(static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 +
                                    ts.tv_nsec);
}

const TickClock* TickClock::Default() {
  static const MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

}  // namespace matrix
