#include "matrix/trace/idle_handler_lag_tracer.h"

#include "matrix/core/handler.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {

IdleHandlerLagTracer::IdleHandlerLagTracer(Options options)
    : DispatchObserver(kIdleHandlers), options_(std::move(options)) {
  MATRIX_CHECK((options_.looper != nullptr) != (options_.looper_monitor != nullptr),
               "IdleHandlerLagTracer needs a Looper or a foreign LooperMonitor (one of them)");
  MATRIX_CHECK(options_.env.monitor != nullptr, "IdleHandlerLagTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.watchdog_looper != nullptr && options_.env.worker_looper != nullptr,
               "IdleHandlerLagTracer needs watchdog and worker loopers");
  if (!options_.capture) options_.capture = CaptureStack;
  watchdog_handler_ =
      std::make_unique<Handler>(options_.env.watchdog_looper, "matrix::IdleHandlerLagTracer");
  worker_handler_ =
      std::make_unique<Handler>(options_.env.worker_looper, "matrix::IdleHandlerLagTracer$Report");
}

IdleHandlerLagTracer::~IdleHandlerLagTracer() {
  OnCloseTrace();
  watchdog_handler_.reset();
  worker_handler_.reset();
}

void IdleHandlerLagTracer::OnAlive() {
  looper_registration_ = options_.looper != nullptr
                             ? options_.looper->AddDispatchObserver(this)
                             : options_.looper_monitor->AddIdleListener(this);
  alive_.store(true);
  watchdog_handler_->PostDelayed([this] { Check(); }, this, absl::ZeroDuration());
}

void IdleHandlerLagTracer::OnDead() {
  looper_registration_.Reset();
  alive_.store(false);
  watchdog_handler_->RemoveCallbacks(this);
}

void IdleHandlerLagTracer::OnIdleHandlerBegin(const IdleHandler& handler, TimeTicks begin) {
  // The name is interned (no allocation, valid forever).
  RunBegin(begin, handler.registered_name().c_str());
}

void IdleHandlerLagTracer::OnIdleHandlerEnd(const IdleHandler&, TimeTicks, TimeTicks) { RunEnd(); }

void IdleHandlerLagTracer::OnIdleBegin(TimeTicks begin, const char* name) { RunBegin(begin, name); }

void IdleHandlerLagTracer::OnIdleEnd(TimeTicks, TimeTicks) { RunEnd(); }

void IdleHandlerLagTracer::RunBegin(TimeTicks begin, const char* name) {
  // A few relaxed stores: no allocation.
  run_begin_ns_.store(begin.ToNanoseconds(), std::memory_order_relaxed);
  run_name_.store(name, std::memory_order_relaxed);
  run_seq_.fetch_add(1, std::memory_order_release);  // Odd: running.
}

void IdleHandlerLagTracer::RunEnd() {
  run_seq_.fetch_add(1, std::memory_order_release);  // Even: idle.
}

void IdleHandlerLagTracer::Check() {
  if (!alive_.load()) return;
  const TimeTicks now = options_.env.monitor->clock()->NowTicks();
  const uint64_t seq = run_seq_.load(std::memory_order_acquire);
  const TimeTicks begin = TimeTicks::FromNanoseconds(run_begin_ns_.load(std::memory_order_relaxed));
  const char* name = run_name_.load(std::memory_order_relaxed);
  TimeTicks next = now + options_.threshold;
  if ((seq & 1) && seq != reported_seq_ && run_seq_.load(std::memory_order_acquire) == seq) {
    if (now - begin >= options_.threshold) {
      reported_seq_ = seq;
      auto stack = std::make_shared<RawStack>();
      const absl::Status status =
          options_.capture(options_.env.monitor->looper_thread(), stack.get());
      lag_count_.fetch_add(1);
      const SceneId scene = options_.env.app_state->visible_scene_id();
      const bool foreground = options_.env.app_state->is_foreground();
      worker_handler_->Post([this, stack, status, name, begin, now, scene, foreground] {
        proto::AnrReport report;
        report.set_detail(proto::LAG_IDLE_HANDLER);
        report.set_cost_ms(absl::ToDoubleMilliseconds(now - begin));
        report.set_detection_delay_ms(
            absl::ToDoubleMilliseconds(now - (begin + options_.threshold)));
        report.set_idle_handler(name != nullptr && name[0] != '\0' ? name : "unknown");
        report.set_scene(std::string(options_.env.app_state->SceneName(scene)));
        report.set_is_process_foreground(foreground);
        const SymbolizedStack symbolized =
            FillCapturedStack(*stack, status, options_.env.monitor->looper_thread().tid(),
                              report.mutable_thread_stack());
        report.mutable_thread_stack()->set_captured_at_ms(absl::ToDoubleMilliseconds(now - begin));
        report.set_stack_key(HangStackKey(symbolized, nullptr, {}, now - begin));
        Issue issue;
        issue.mutable_proto()->set_tag(kTagEvilMethod);
        issue.mutable_proto()->set_key(report.stack_key());
        *issue.mutable_proto()->mutable_anr() = std::move(report);
        if (options_.env.report) options_.env.report(std::move(issue));
      });
    } else {
      next = begin + options_.threshold;
    }
  }
  watchdog_handler_->RemoveCallbacks(this);
  watchdog_handler_->PostAtTime([this] { Check(); }, this, next);
}

}  // namespace matrix
