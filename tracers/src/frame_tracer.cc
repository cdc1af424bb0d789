#include "matrix/trace/frame_tracer.h"

#include <algorithm>
#include <thread>

#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"

namespace matrix {

// An async listener's delivery state, shared with the tasks posted to its
// executor. `mu` is held while the listener is called, so removing the
// listener waits for a call in progress on another thread.
struct FrameTracer::AsyncSlot {
  absl::Mutex mu;
  IDoFrameListener* listener ABSL_GUARDED_BY(mu) = nullptr;
  std::atomic<std::thread::id> delivering_thread{};
  Executor* executor = nullptr;
  int interval = 0;
  std::vector<FrameData> pending;  // Worker thread only.
};

FrameTracer::FrameTracer(Options options)
    : Tracer(kDoFrame),
      options_(std::move(options)),
      ring_(std::make_unique<internal::SpscRing<FrameData, kRingCapacity>>()),
      input_ring_(std::make_unique<internal::SpscRing<InputLatency, 256>>()),
      stats_(FrameStatsCollector::Options{
          options_.thresholds, options_.time_slice, absl::Seconds(1),
          [monitor = options_.env.monitor](TimeTicks from, TimeTicks to) {
            return monitor->stopped_time().ThrottledWithin(from, to);
          }}) {
  MATRIX_CHECK(options_.env.monitor != nullptr, "FrameTracer needs a UIThreadMonitor");
  MATRIX_CHECK(options_.env.worker_looper != nullptr, "FrameTracer needs a worker looper");
  worker_handler_ = std::make_unique<Handler>(options_.env.worker_looper, "matrix::FrameTracer");
}

FrameTracer::~FrameTracer() {
  OnCloseTrace();
  worker_handler_.reset();  // Drops pending drains before the state they use.
}

void FrameTracer::OnAlive() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  monitor_registration_ = options_.env.monitor->AddObserver(this);
  draining_.store(true);
  ScheduleDrain(drain_generation_.fetch_add(1) + 1);
}

void FrameTracer::OnDead() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  monitor_registration_.Reset();
  draining_.store(false);
  drain_generation_.fetch_add(1);
  worker_handler_->RemoveCallbacks(this);  // The periodic drain.
  worker_handler_->Post([this] { Drain(); });  // Deliver what is left.
}

ObserverRegistration FrameTracer::AddListener(IDoFrameListener* listener) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(listener != nullptr, "null frame listener");
  if (listener->executor() == nullptr) return sync_listeners_.Add(listener);

  auto slot = std::make_shared<AsyncSlot>();
  {
    absl::MutexLock lock(&slot->mu);
    slot->listener = listener;
  }
  slot->executor = listener->executor();
  slot->interval = std::max(listener->interval_frame_replay(), 0);
  {
    absl::MutexLock lock(&async_mu_);
    async_slots_.push_back(slot);
    has_async_listeners_.store(true);
  }
  return ObserverRegistration([this, slot]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    {
      absl::MutexLock lock(&async_mu_);
      async_slots_.erase(std::remove(async_slots_.begin(), async_slots_.end(), slot),
                         async_slots_.end());
      has_async_listeners_.store(!async_slots_.empty());
    }
    if (slot->delivering_thread.load() == std::this_thread::get_id()) {
      slot->listener = nullptr;  // Removed from inside its own callback; we hold mu.
    } else {
      absl::MutexLock lock(&slot->mu);  // Waits for a call in progress.
      slot->listener = nullptr;
    }
  });
}

void FrameTracer::DoFrame(const FrameData& frame) {
  if (!frame.is_vsync_frame) return;
  const int64_t dropped =
      frame.has_counted_drops && frame.counted_drops_after == last_frame_end_
          ? frame.counted_drops
          : CountDroppedFrames(frame.intended_frame_time, frame.shown(), last_frame_end_,
                               frame.refresh_rate);
  last_frame_end_ = frame.shown();
  if (!options_.report_in_background && !options_.env.app_state->is_foreground()) return;

  const bool to_worker =
      options_.fps_report || has_async_listeners_.load(std::memory_order_relaxed);
  if (sync_listeners_.empty()) {
    // The usual case: one copy, straight into the worker's ring.
    if (to_worker) {
      ring_->PushWith([&](FrameData& slot) {
        slot = frame;
        slot.dropped_frames = dropped;
      });
    }
    return;
  }
  FrameData f = frame;
  f.dropped_frames = dropped;
  if (!sync_listeners_.empty()) {
    const TickClock* clock = options_.env.monitor->clock();
    sync_listeners_.Notify([&](IDoFrameListener* listener) {
      const TimeTicks t0 = clock->NowTicks();
      listener->DoFrameSync(f);
      const absl::Duration took = clock->NowTicks() - t0;
      if (took > options_.slow_sync_listener) {
        slow_sync_calls_.fetch_add(1, std::memory_order_relaxed);
        const int64_t ns = absl::ToInt64Nanoseconds(took);
        if (ns > slowest_sync_ns_.load(std::memory_order_relaxed)) {
          slowest_sync_ns_.store(ns, std::memory_order_relaxed);
          // Already a slow frame: naming the culprit costs little more.
          std::string name = listener->name();
          absl::MutexLock lock(&slowest_mu_);
          slowest_sync_name_ = std::move(name);
        }
      }
    });
  }
  // (A sync listener may have added an async one.)
  if (options_.fps_report || has_async_listeners_.load(std::memory_order_relaxed)) {
    ring_->Push(f);
  }
}

void FrameTracer::OnInputHandled(SceneId scene, absl::Duration latency) {
  if (!options_.fps_report) return;
  input_ring_->Push(InputLatency{scene, absl::ToInt64Nanoseconds(latency)});
}

void FrameTracer::ScheduleDrain(uint64_t generation) {
  worker_handler_->PostDelayed(
      [this, generation] {
        Drain();
        if (draining_.load() && drain_generation_.load() == generation) {
          ScheduleDrain(generation);
        }
      },
      this, options_.drain_period);
}

void FrameTracer::Drain() {
  std::vector<std::shared_ptr<AsyncSlot>> slots;
  {
    absl::MutexLock lock(&async_mu_);
    slots = async_slots_;
  }
  while (std::optional<InputLatency> input = input_ring_->Pop()) {
    stats_.AddInputLatency(input->scene, options_.env.app_state->SceneName(input->scene),
                           absl::Nanoseconds(input->latency_ns));
  }
  while (std::optional<FrameData> frame = ring_->Pop()) {
    if (options_.fps_report) {
      if (auto report = stats_.Add(*frame, options_.env.app_state->SceneName(frame->scene))) {
        PublishReport(std::move(*report));
      }
    }
    for (auto& slot : slots) slot->pending.push_back(*frame);
  }
  if (options_.fps_report) {
    // Slices are wall time: one that ended with no frame after it (the scene
    // went idle) is reported now, not whenever the scene draws again.
    for (proto::FrameReport& report :
         stats_.ReportEndedSlices(options_.env.monitor->clock()->NowTicks())) {
      PublishReport(std::move(report));
    }
  }
  const uint64_t lost = ring_->dropped();
  if (lost > reported_lost_) {
    stats_.AddLostFrames(static_cast<int64_t>(lost - reported_lost_));
    reported_lost_ = lost;
  }
  for (auto& slot : slots) {
    if (slot->interval == 0) {
      if (!slot->pending.empty()) Deliver(slot, std::exchange(slot->pending, {}));
      continue;
    }
    const bool final_drain = !draining_.load();
    while (slot->pending.size() >= static_cast<size_t>(slot->interval) ||
           (final_drain && !slot->pending.empty())) {
      const size_t n = std::min(slot->pending.size(), static_cast<size_t>(slot->interval));
      std::vector<FrameData> batch(slot->pending.begin(), slot->pending.begin() + n);
      slot->pending.erase(slot->pending.begin(), slot->pending.begin() + n);
      Deliver(slot, std::move(batch));
    }
  }
  const uint64_t slow = slow_sync_calls_.load();
  if (slow > warned_slow_calls_) {
    std::string slowest_name;
    {
      absl::MutexLock lock(&slowest_mu_);
      slowest_name = slowest_sync_name_;
    }
    Logger()->warn(
        "FrameTracer: {} sync frame listener call(s) took longer than {}; slowest {} ({}). "
        "Give slow listeners an executor.",
        slow - warned_slow_calls_, absl::FormatDuration(options_.slow_sync_listener),
        absl::FormatDuration(absl::Nanoseconds(slowest_sync_ns_.load())), slowest_name);
    warned_slow_calls_ = slow;
  }
}

void FrameTracer::Deliver(const std::shared_ptr<AsyncSlot>& slot, std::vector<FrameData> frames) {
  std::shared_ptr<AsyncSlot> keep = slot;
  const bool replay = keep->interval > 0;
  keep->executor->Execute([keep, replay, frames = std::move(frames)] {
    absl::MutexLock lock(&keep->mu);
    keep->delivering_thread.store(std::this_thread::get_id());
    if (replay) {
      if (keep->listener != nullptr) keep->listener->DoReplay(frames);
    } else {
      for (const FrameData& frame : frames) {
        if (keep->listener == nullptr) break;  // Removed itself.
        keep->listener->DoFrameAsync(frame);
      }
    }
    keep->delivering_thread.store(std::thread::id());
  });
}

void FrameTracer::FlushReports() {
  worker_handler_->Post([this] {
    Drain();
    for (proto::FrameReport& report : stats_.Flush()) PublishReport(std::move(report));
  });
}

void FrameTracer::PublishReport(proto::FrameReport report) {
  Issue issue;
  issue.mutable_proto()->set_tag(kTagFps);
  issue.mutable_proto()->set_key(report.scene());
  *issue.mutable_proto()->mutable_frame() = std::move(report);
  if (issue.proto().frame().drop_level().frozen() > 0) {
    const UIThreadMonitor& monitor = *options_.env.monitor;
    options_.env.timeline.Attach(monitor, monitor.clock()->NowTicks(), absl::ZeroDuration(),
                                 "FPS report (frozen frames)", issue.mutable_proto());
  }
  if (options_.env.report) options_.env.report(std::move(issue));
}

void FrameTracer::OnForeground(bool foreground) {
  // Leaving the foreground closes the scenes' windows (Matrix flushes on pause).
  if (!foreground && options_.fps_report) FlushReports();
}

}  // namespace matrix
