#include "matrix/core/choreographer.h"

#include <algorithm>
#include <memory>

#include "matrix/core/logging.h"
#include "matrix/core/looper.h"

namespace matrix {
namespace {

constexpr int kMsgDoFrame = 0;
constexpr int kMsgDoScheduleCallback = 1;

thread_local std::unique_ptr<Choreographer> tls_choreographer;

}  // namespace

class Choreographer::FrameHandler : public Handler {
 public:
  explicit FrameHandler(Choreographer* choreographer)
      : Handler(choreographer->looper_, "matrix::Choreographer$FrameHandler", /*async=*/true),
        choreographer_(choreographer) {}

  void HandleMessage(Message& msg) override {
    switch (msg.what) {
      case kMsgDoFrame: {
        choreographer_->have_pending_vsync_.store(false, std::memory_order_relaxed);
        choreographer_->DoFrame(
            TimeTicks::FromNanoseconds(choreographer_->pending_vsync_ns_.load()),
            RefreshRate::FromMillihertz(choreographer_->pending_vsync_mhz_.load()),
            choreographer_->pending_frame_number_.load());
        break;
      }
      case kMsgDoScheduleCallback:
        choreographer_->DoScheduleCallback(static_cast<CallbackType>(msg.arg1));
        break;
    }
  }

 private:
  Choreographer* const choreographer_;
};

const char* Choreographer::CallbackTypeName(CallbackType type) {
  switch (type) {
    case kInput: return "INPUT";
    case kAnimation: return "ANIMATION";
    case kInsetsAnimation: return "INSETS_ANIMATION";
    case kTraversal: return "TRAVERSAL";
    case kCommit: return "COMMIT";
  }
  return "UNKNOWN";
}

Choreographer* Choreographer::GetInstance() {
  if (tls_choreographer == nullptr) {
    Looper* looper = Looper::MyLooper();
    MATRIX_CHECK(looper != nullptr, "The current thread must have a looper!");
    tls_choreographer.reset(new Choreographer(
        looper, std::make_unique<SoftwareVsyncSource>(RefreshRate(), looper->clock())));
  }
  return tls_choreographer.get();
}

Choreographer* Choreographer::Install(std::unique_ptr<VsyncSource> source) {
  MATRIX_CHECK(tls_choreographer == nullptr, "this thread already has a Choreographer");
  Looper* looper = Looper::MyLooper();
  MATRIX_CHECK(looper != nullptr, "The current thread must have a looper!");
  MATRIX_CHECK(source != nullptr, "null vsync source");
  tls_choreographer.reset(new Choreographer(looper, std::move(source)));
  return tls_choreographer.get();
}

Choreographer* Choreographer::Peek() { return tls_choreographer.get(); }

void Choreographer::ReleaseForTesting() { tls_choreographer.reset(); }

Choreographer::Choreographer(Looper* looper, std::unique_ptr<VsyncSource> source)
    : looper_(looper), source_(std::move(source)), handler_(std::make_unique<FrameHandler>(this)) {
  frame_info_.refresh_rate = source_->refresh_rate();
  source_->SetReceiver(this);
}

Choreographer::~Choreographer() {
  source_->SetReceiver(nullptr);  // No OnVsync() after this returns.
  handler_.reset();               // Drops pending frame messages.
}

void Choreographer::OnVsync(TimeTicks timestamp, RefreshRate rate, int64_t frame_number) {
  // On the source's thread. Hand the vsync to the looper thread as an
  // asynchronous message due at the vsync time, as Android's
  // FrameDisplayEventReceiver does.
  const TimeTicks now = looper_->clock()->NowTicks();
  if (timestamp > now) timestamp = now;  // A vsync from the future: use now.
  pending_vsync_ns_.store(timestamp.ToNanoseconds());
  pending_vsync_mhz_.store(rate.millihertz());
  pending_frame_number_.store(frame_number);
  if (have_pending_vsync_.exchange(true)) return;  // The pending message takes the latest.
  handler_->SendEmptyMessageAtTime(kMsgDoFrame, timestamp);
}

void Choreographer::PostCallback(CallbackType type, Task action, const void* token) {
  PostCallbackDelayed(type, std::move(action), token, absl::ZeroDuration());
}

void Choreographer::PostCallbackDelayed(CallbackType type, Task action, const void* token,
                                        absl::Duration delay) {
  MATRIX_CHECK(action, "null callback");
  CallbackRecord record;
  record.action = std::move(action);
  record.token = token;
  AddCallback(type, std::move(record), delay);
}

void Choreographer::PostFrameCallback(FrameCallback callback, const void* token) {
  PostFrameCallbackDelayed(std::move(callback), absl::ZeroDuration(), token);
}

void Choreographer::PostFrameCallbackDelayed(FrameCallback callback, absl::Duration delay,
                                             const void* token) {
  MATRIX_CHECK(callback, "null frame callback");
  CallbackRecord record;
  record.frame_callback = std::move(callback);
  record.token = token;
  AddCallback(kAnimation, std::move(record), delay);
}

void Choreographer::AddCallback(CallbackType type, CallbackRecord record, absl::Duration delay) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  const TimeTicks now = looper_->clock()->NowTicks();
  record.due = now + delay;
  const TimeTicks due = record.due;
  const void* token = record.token;
  auto& pending = queues_[type].pending;
  auto pos = std::upper_bound(pending.begin(), pending.end(), due,
                              [](TimeTicks t, const CallbackRecord& r) { return t < r.due; });
  pending.insert(pos, std::move(record));
  if (due <= now) {
    ScheduleFrame();
  } else {
    Message msg(kMsgDoScheduleCallback);
    msg.arg1 = type;
    msg.token = token;
    handler_->SendMessageAtTime(std::move(msg), due);
  }
}

void Choreographer::InsertCallbackAtHead(CallbackType type, Task action, const void* token) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(action, "null callback");
  auto& pending = queues_[type].pending;
  CallbackRecord record;
  record.due = TimeTicks::Min();
  record.action = std::move(action);
  record.token = token;
  pending.insert(pending.begin(), std::move(record));
}

void Choreographer::RemoveCallbacks(CallbackType type, const void* token) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  auto& pending = queues_[type].pending;
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](const CallbackRecord& r) {
                                 return !r.frame_callback && (token == nullptr || r.token == token);
                               }),
                pending.end());
  if (token != nullptr) handler_->RemoveMessages(kMsgDoScheduleCallback, token);
}

void Choreographer::RemoveFrameCallback(const void* token) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  auto& pending = queues_[kAnimation].pending;
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](const CallbackRecord& r) {
                                 return r.frame_callback && (token == nullptr || r.token == token);
                               }),
                pending.end());
}

bool Choreographer::HasPendingCallbacks(CallbackType type) const {
  return !queues_[type].pending.empty();
}

void Choreographer::ScheduleFrame() {
  if (frame_scheduled_) return;
  frame_scheduled_ = true;
  source_->RequestVsync();
}

void Choreographer::DoScheduleCallback(CallbackType type) {
  if (frame_scheduled_) return;
  const TimeTicks now = looper_->clock()->NowTicks();
  const auto& pending = queues_[type].pending;
  if (!pending.empty() && pending.front().due <= now) ScheduleFrame();
}

void Choreographer::DoFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!frame_scheduled_) return;  // Nothing to do.
  if (!rate.valid()) rate = source_->refresh_rate();

  const TimeTicks start = looper_->clock()->NowTicks();
  TimeTicks frame_time = intended_vsync;
  int64_t skipped = 0;
  const absl::Duration jitter = start - intended_vsync;
  if (jitter >= rate.Interval()) {
    // Late by one or more intervals: skip to the latest vsync.
    skipped = rate.IntervalsIn(jitter);
    if (skipped >= skipped_frame_warning_limit_) {
      Logger()->info(
          "Skipped {} frames!  The application may be doing too much work on its main thread.",
          skipped);
    }
    frame_time = rate.TickAfter(intended_vsync, skipped);
  }
  if (frame_time < last_frame_time_) {
    // Time went backwards (e.g. after a skip); wait for the next vsync.
    source_->RequestVsync();
    return;
  }

  frame_scheduled_ = false;
  last_frame_time_ = frame_time;
  frame_info_ = FrameInfo{frame_number, intended_vsync, frame_time, start, rate, skipped};

  struct InFrame {
    Choreographer* c;
    ~InFrame() { c->in_frame_ = false; }
  } in_frame{this};
  in_frame_ = true;
  for (auto& queue_start : queue_start_ns_) queue_start.store(0, std::memory_order_relaxed);
  for (int type = 0; type < kCallbackTypeCount; ++type) {
    DoCallbacks(static_cast<CallbackType>(type), frame_time);
  }
}

bool Choreographer::SetFrameStartListener(FrameStartListener* listener) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (listener != nullptr && frame_start_listener_ != nullptr &&
      frame_start_listener_ != listener) {
    return false;
  }
  frame_start_listener_ = listener;
  return true;
}

void Choreographer::DoCallbacks(CallbackType type, TimeTicks frame_time) {
  CallbackQueue& queue = queues_[type];
  const TimeTicks now = looper_->clock()->NowTicks();
  queue_start_ns_[type].store(now.ToNanoseconds(), std::memory_order_relaxed);
  if (type == kInput && frame_start_listener_ != nullptr) frame_start_listener_->OnFrameStart(now);
  // Take the callbacks due now; ones posted while they run wait for a later
  // frame (or, for later queues, run in this one).
  auto due_end = std::upper_bound(queue.pending.begin(), queue.pending.end(), now,
                                  [](TimeTicks t, const CallbackRecord& r) { return t < r.due; });
  if (due_end == queue.pending.begin()) return;
  queue.running.clear();
  std::move(queue.pending.begin(), due_end, std::back_inserter(queue.running));
  queue.pending.erase(queue.pending.begin(), due_end);

  if (type == kCommit) {
    // As Android: if the frame ran so late that COMMIT starts two or more
    // intervals after the frame time, move the frame time forward.
    const RefreshRate rate = frame_info_.refresh_rate;
    const absl::Duration jitter = now - frame_time;
    if (jitter >= rate.Intervals(2)) {
      const int64_t n = rate.IntervalsIn(jitter);
      const TimeTicks adjusted = rate.TickAfter(frame_time, n - 1);
      if (adjusted > last_frame_time_) {
        frame_time = adjusted;
        last_frame_time_ = adjusted;
      }
    }
  }

  struct Cleanup {
    CallbackQueue* q;
    ~Cleanup() { q->running.clear(); }
  } cleanup{&queue};
  current_type_ = type;
  current_queue_start_ = now;
  for (CallbackRecord& record : queue.running) {
    if (record.frame_callback) {
      record.frame_callback(frame_time);
    } else {
      record.action();
    }
  }
}

}  // namespace matrix
