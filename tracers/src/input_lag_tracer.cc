#include "matrix/trace/input_lag_tracer.h"

#include "matrix/core/handler.h"
#include "matrix/core/looper.h"
#include "matrix/trace/frame_tracer.h"
#include "matrix/trace/report_context.h"

namespace matrix {

InputLagTracer::InputLagTracer(Options options) : options_(std::move(options)) {
  MATRIX_CHECK(options_.env.monitor != nullptr, "InputLagTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.watchdog_looper != nullptr && options_.env.worker_looper != nullptr,
               "InputLagTracer needs watchdog and worker loopers");
  if (!options_.capture) options_.capture = CaptureStack;
  watchdog_handler_ =
      std::make_unique<Handler>(options_.env.watchdog_looper, "matrix::InputLagTracer");
  worker_handler_ =
      std::make_unique<Handler>(options_.env.worker_looper, "matrix::InputLagTracer$Report");
}

InputLagTracer::~InputLagTracer() {
  OnCloseTrace();
  watchdog_handler_.reset();
  worker_handler_.reset();
}

void InputLagTracer::OnAlive() {
  alive_.store(true);
  ScheduleCheck(options_.env.monitor->clock()->NowTicks() + options_.threshold);
}

void InputLagTracer::OnDead() {
  alive_.store(false);
  watchdog_handler_->RemoveCallbacks(this);
}

uint64_t InputLagTracer::OnInputEventReceived(TimeTicks event_time, const char* description) {
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  for (Slot& slot : slots_) {
    uint64_t free = 0;
    if (!slot.id.compare_exchange_strong(free, ~uint64_t{0}, std::memory_order_acq_rel)) {
      continue;  // Taken.
    }
    slot.event_time_ns.store(event_time.ToNanoseconds(), std::memory_order_relaxed);
    slot.description.store(description, std::memory_order_relaxed);
    slot.reported.store(false, std::memory_order_relaxed);
    slot.id.store(id, std::memory_order_release);
    // An event that is already old may be due before the watchdog's next
    // check: wake it sooner. (Events arriving promptly never need this.)
    const TimeTicks deadline = event_time + options_.threshold;
    if (alive_.load() && deadline.ToNanoseconds() < next_check_ns_.load()) {
      watchdog_handler_->Post([this] { Check(); });
    }
    return id;
  }
  untracked_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void InputLagTracer::OnInputEventHandled(uint64_t id) {
  if (id == 0) return;
  const TimeTicks now = options_.env.monitor->clock()->NowTicks();
  for (Slot& slot : slots_) {
    if (slot.id.load(std::memory_order_acquire) != id) continue;
    const TimeTicks event_time =
        TimeTicks::FromNanoseconds(slot.event_time_ns.load(std::memory_order_relaxed));
    slot.id.store(0, std::memory_order_release);
    if (options_.frame_tracer != nullptr) {
      options_.frame_tracer->OnInputHandled(options_.env.app_state->visible_scene_id(),
                                            now - event_time);
    }
    return;
  }
}

void InputLagTracer::PostInputEvent(Handler* handler, TimeTicks event_time,
                                    const char* description, Task task, Location from) {
  const uint64_t id = OnInputEventReceived(event_time, description);
  handler->Post(
      [this, id, task = std::move(task)]() mutable {
        task();
        OnInputEventHandled(id);
      },
      from);
}

void InputLagTracer::ScheduleCheck(TimeTicks at) {
  next_check_ns_.store(at.ToNanoseconds());
  watchdog_handler_->RemoveCallbacks(this);
  watchdog_handler_->PostAtTime([this] { Check(); }, this, at);
}

void InputLagTracer::Check() {
  if (!alive_.load()) return;
  const TimeTicks now = options_.env.monitor->clock()->NowTicks();
  TimeTicks next = now + options_.threshold;
  const Slot* overdue = nullptr;
  TimeTicks overdue_time;
  for (Slot& slot : slots_) {
    const uint64_t id = slot.id.load(std::memory_order_acquire);
    if (id == 0 || id == ~uint64_t{0} || slot.reported.load(std::memory_order_relaxed)) continue;
    const TimeTicks event_time =
        TimeTicks::FromNanoseconds(slot.event_time_ns.load(std::memory_order_relaxed));
    const TimeTicks deadline = event_time + options_.threshold;
    if (deadline <= now) {
      if (overdue == nullptr || event_time < overdue_time) {
        overdue = &slot;
        overdue_time = event_time;
      }
    } else if (deadline < next) {
      next = deadline;
    }
  }
  if (overdue != nullptr) {
    // Each overdue event is judged once; the report is throttled.
    for (Slot& slot : slots_) {
      const uint64_t id = slot.id.load(std::memory_order_acquire);
      if (id == 0 || id == ~uint64_t{0}) continue;
      if (TimeTicks::FromNanoseconds(slot.event_time_ns.load()) + options_.threshold <= now) {
        slot.reported.store(true, std::memory_order_relaxed);
      }
    }
    if (!last_report_.is_null() && now - last_report_ < options_.throttle) {
      throttled_.fetch_add(1);
    } else {
      last_report_ = now;
      lag_count_.fetch_add(1);
      auto stack = std::make_shared<RawStack>();
      const absl::Status status =
          options_.capture(options_.env.monitor->looper_thread(), stack.get());
      const char* description = overdue->description.load(std::memory_order_relaxed);
      const SceneId scene = options_.env.app_state->visible_scene_id();
      const bool foreground = options_.env.app_state->is_foreground();
      const TimeTicks event_time = overdue_time;
      worker_handler_->Post([this, stack, status, description, event_time, now, scene,
                             foreground] {
        proto::AnrReport report;
        report.set_detail(proto::LAG_TOUCH);
        report.set_cost_ms(absl::ToDoubleMilliseconds(now - event_time));
        report.set_detection_delay_ms(
            absl::ToDoubleMilliseconds(now - (event_time + options_.threshold)));
        report.set_input_event(description != nullptr ? description : "input");
        report.set_scene(std::string(options_.env.app_state->SceneName(scene)));
        report.set_is_process_foreground(foreground);
        const SymbolizedStack symbolized =
            FillCapturedStack(*stack, status, options_.env.monitor->looper_thread().tid(),
                              report.mutable_thread_stack());
        report.set_stack_key(HangStackKey(symbolized, nullptr, {}, now - event_time));
        Issue issue;
        issue.mutable_proto()->set_tag(kTagEvilMethod);
        issue.mutable_proto()->set_key(report.stack_key());
        *issue.mutable_proto()->mutable_anr() = std::move(report);
        if (options_.env.report) options_.env.report(std::move(issue));
      });
    }
  }
  ScheduleCheck(next);
}

}  // namespace matrix
