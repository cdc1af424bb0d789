#include "matrix/trace/looper_monitor.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "matrix/core/logging.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {

const char* LooperMonitor::SourceName(Source source) {
  switch (source) {
    case Source::kDispatchObserver: return "dispatch_observer";
    case Source::kPrinter: return "printer";
    case Source::kForeign: return "foreign";
  }
  return "unknown";
}

// Bridges the Looper's string-free dispatch observers to the monitor.
class LooperMonitor::DispatchObserverBridge : public DispatchObserver {
 public:
  explicit DispatchObserverBridge(LooperMonitor* monitor)
      : DispatchObserver(kDispatches), monitor_(monitor) {}
  // No frame, no spill: the listeners' calls are out of line.
  void OnDispatchBegin(const Message& msg, TimeTicks begin) override {
    LooperMonitor* const monitor = monitor_;
    if (!monitor->OpenDispatch(begin)) return;
    if (monitor->WriteMethodBegin(begin)) {
      monitor->heartbeat_->BeginMessage(begin, msg, monitor->method_mark_);
    }
    if (monitor->notify_begin_) [[unlikely]] monitor->NotifyBeginOfMessage(begin, msg);
  }
  void OnDispatchEnd(const Message&, TimeTicks, TimeTicks end) override { monitor_->End(end); }

 private:
  LooperMonitor* const monitor_;
};

// Our Printer. It forwards every line to the printer it replaced, then feeds
// the monitor. Once detached (the monitor stopped, or a third party replaced
// it and we installed a new one) it only forwards. Third parties may keep a
// pointer to it forever, so printers live in a process-wide pool and are never
// freed (at most one per re-install).
class LooperMonitor::MonitorPrinter : public Printer {
 public:
  MonitorPrinter(LooperMonitor* monitor, Printer* origin) : monitor_(monitor), origin_(origin) {}
  void Println(std::string_view line) override {
    if (origin_ != nullptr && origin_ != this) origin_->Println(line);
    if (LooperMonitor* monitor = monitor_.load(std::memory_order_acquire)) {
      monitor->OnPrinterLine(line);
    }
  }
  void Detach() { monitor_.store(nullptr, std::memory_order_release); }
  Printer* origin() const { return origin_; }

  static MonitorPrinter* Create(LooperMonitor* monitor, Printer* origin) {
    static absl::Mutex* mu = new absl::Mutex();
    static auto* pool = new std::vector<std::unique_ptr<MonitorPrinter>>();
    absl::MutexLock lock(mu);
    pool->push_back(std::make_unique<MonitorPrinter>(monitor, origin));
    return pool->back().get();
  }

 private:
  std::atomic<LooperMonitor*> monitor_;
  Printer* const origin_;
};

// Re-checks the printer when the looper goes idle, at most once per interval.
class LooperMonitor::PrinterCheck : public IdleHandler {
 public:
  explicit PrinterCheck(LooperMonitor* monitor) : monitor_(monitor) {}
  bool QueueIdle() override {
    const TimeTicks now = monitor_->clock_->NowTicks();
    if (now - monitor_->last_printer_check_ >= monitor_->options_.printer_check_interval) {
      monitor_->CheckPrinter();
    }
    return true;
  }
  std::string Name() const override { return "matrix::LooperMonitor$PrinterCheck"; }

 private:
  LooperMonitor* const monitor_;
};

LooperMonitor::LooperMonitor(Looper* looper, Options options)
    : looper_(looper), clock_(looper->clock()), options_(options) {
}

LooperMonitor::LooperMonitor(const TickClock* clock)
    : looper_(nullptr), clock_(clock), options_{Source::kForeign, absl::Seconds(60)} {}

LooperMonitor::~LooperMonitor() { Stop(); }

ObserverRegistration LooperMonitor::SetProvisionalSource(ProvisionalDispatchSource* source,
                                                         const char* label) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(source != nullptr, "SetProvisionalSource: null source");
  {
    absl::MutexLock lock(&provisional_mu_);
    if (provisional_ != nullptr) return ObserverRegistration();  // The first one stands.
    provisional_ = source;
    provisional_label_ = label;
  }
  has_provisional_.store(true, std::memory_order_release);
  return ObserverRegistration([this, source] {
    absl::MutexLock lock(&provisional_mu_);  // Waits for a call in progress.
    if (provisional_ != source) return;
    provisional_ = nullptr;
    provisional_label_ = nullptr;
    has_provisional_.store(false, std::memory_order_relaxed);
  });
}

TimeTicks LooperMonitor::ProvisionalBegin(const char** label) const {
  if (label != nullptr) *label = nullptr;
  if (!has_provisional_.load(std::memory_order_acquire)) return TimeTicks();
  absl::MutexLock lock(&provisional_mu_);
  if (provisional_ == nullptr) return TimeTicks();
  if (label != nullptr) *label = provisional_label_;
  return provisional_->ProvisionalBegin();
}

void LooperMonitor::Start() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (started_) return;
  started_ = true;
  switch (options_.source) {
    case Source::kDispatchObserver:
      MATRIX_CHECK(looper_ != nullptr, "the dispatch-observer source needs a Looper");
      bridge_ = std::make_unique<DispatchObserverBridge>(this);
      bridge_registration_ = looper_->AddDispatchObserver(bridge_.get());
      break;
    case Source::kPrinter:
      MATRIX_CHECK(looper_ != nullptr, "the printer source needs a Looper");
      InstallPrinter();
      printer_check_ = std::make_unique<PrinterCheck>(this);
      looper_->queue()->AddIdleHandler(printer_check_.get());
      break;
    case Source::kForeign:
      break;
  }
}

void LooperMonitor::Stop() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!started_) return;
  started_ = false;
  bridge_registration_.Reset();
  bridge_.reset();
  if (printer_check_ != nullptr) {
    looper_->queue()->RemoveIdleHandler(printer_check_.get());
    printer_check_.reset();
  }
  if (printer_ != nullptr) {
    printer_->Detach();
    // Restore what we replaced, unless someone has replaced us since (then
    // our printer stays in their chain as a pure forwarder).
    if (looper_->GetMessageLogging() == printer_) looper_->SetMessageLogging(printer_->origin());
    printer_ = nullptr;
  }
  // A dispatch in progress ends for the listeners now: they never get an
  // end without a begin, nor a begin without an end.
  if (depth_ > 0) {
    depth_ = 1;
    End(clock_->NowTicks());
  }
  IdleEnd(clock_->NowTicks());
}

void LooperMonitor::InstallPrinter() {
  Printer* current = looper_->GetMessageLogging();
  printer_ = MonitorPrinter::Create(this, current);
  looper_->SetMessageLogging(printer_);
  last_printer_check_ = clock_->NowTicks();
}

void LooperMonitor::CheckPrinter() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!started_ || options_.source != Source::kPrinter) return;
  last_printer_check_ = clock_->NowTicks();
  if (looper_->GetMessageLogging() == printer_) return;
  Logger()->warn("LooperMonitor: the looper's printer was replaced; re-installing ours");
  printer_->Detach();
  InstallPrinter();  // Chains the replacement.
  ++printer_reinstalls_;
}

void LooperMonitor::OnPrinterLine(std::string_view line) {
  if (!printer_checked_) {
    printer_checked_ = true;
    printer_valid_ = !line.empty() && (line[0] == '>' || line[0] == '<');
    if (!printer_valid_) {
      Logger()->error("LooperMonitor: printer is invalid, first line: {}", std::string(line));
    }
  }
  if (!printer_valid_ || line.empty()) return;
  const TimeTicks now = clock_->NowTicks();
  if (line[0] == '>') {
    DispatchInfo info;
    info.log_line = line;
    Begin(now, info);
  } else if (line[0] == '<') {
    End(now);
  }
}

void LooperMonitor::DispatchBegin(TimeTicks begin, const char* label) {
  DispatchInfo info;
  info.label = label;
  Begin(begin, info);
}

void LooperMonitor::DispatchEnd(TimeTicks end) { End(end); }

void LooperMonitor::RecordDispatches(DispatchHeartbeat* heartbeat, MethodTracer* methods) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(methods == nullptr || methods->thread().IsCurrent(),
               "LooperMonitor: the MethodTracer traces another thread than the loop's");
  MATRIX_CHECK(heartbeat == nullptr || heartbeat_ == nullptr || heartbeat_ == heartbeat,
               "LooperMonitor: it records into another heartbeat already (one UIThreadMonitor "
               "per LooperMonitor)");
  heartbeat_ = heartbeat;
  methods_ = heartbeat != nullptr ? methods : nullptr;
}

// OpenDispatch(), Begin() and End() are inlined into each source's hook (this
// file only): one call less per event on the hot path. What only listeners
// need is out of line, so the hooks themselves need no stack frame.
[[gnu::always_inline]] inline bool LooperMonitor::OpenDispatch(TimeTicks begin) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (depth_++ > 0) return false;  // Nested dispatch: only the outermost counts.
  begin_ = begin;
  if (begin.ToNanoseconds() - last_end_.ToNanoseconds() >= wait_threshold_ns_) waited_ = true;
  // The first listener now hears this dispatch (see AddListener()).
  first_in_dispatch_ = first_listener_;
  return true;
}

// One write per reader, before any listener runs: the method tracer's
// dispatch record (method_mark_), then true when the heartbeat records too.
// RecordDispatches() sets methods_ only with heartbeat_: one check when both
// record.
[[gnu::always_inline]] inline bool LooperMonitor::WriteMethodBegin(TimeTicks begin) {
  if (methods_ != nullptr) {
    method_mark_ = methods_->DispatchBegin(begin);
    return true;
  }
  method_mark_ = 0;
  return heartbeat_ != nullptr;
}

void LooperMonitor::UpdateNotifyBegin() {
  notify_begin_ = (first_listener_ != nullptr && first_listener_->wants_begin_) ||
                  !listeners_.empty();
}

void LooperDispatchListener::set_wants_dispatch_begin(bool wants) {
  wants_begin_ = wants;
  if (auto monitor = monitor_.lock()) (*monitor)->UpdateNotifyBegin();
}

[[gnu::always_inline]] inline void LooperMonitor::Begin(TimeTicks begin,
                                                        const DispatchInfo& info) {
  if (!OpenDispatch(begin)) return;
  if (WriteMethodBegin(begin)) heartbeat_->Begin(begin, info, method_mark_);
  if (notify_begin_) NotifyBegin(begin, info);
}

void LooperMonitor::NotifyBeginOfMessage(TimeTicks begin, const Message& msg) {
  DispatchInfo info;
  info.message = &msg;
  NotifyBegin(begin, info);
}

void LooperMonitor::NotifyBegin(TimeTicks begin, const DispatchInfo& info) {
  // The listeners present now hear this dispatch: fix the list's set before
  // any of them runs (one added by the first listener waits for the next).
  if (!listeners_.empty()) scope_.emplace(listeners_);
  LooperDispatchListener* const first = first_in_dispatch_;
  if (first != nullptr && first->wants_begin_) first->OnDispatchBegin(begin, info);
  if (!scope_.has_value()) return;
  scope_->Notify([&](LooperDispatchListener* l) { l->OnDispatchBegin(begin, info); });
}

[[gnu::always_inline]] inline void LooperMonitor::End(TimeTicks end) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (depth_ != 1) [[unlikely]] {
    if (depth_ > 1) --depth_;  // A nested dispatch ended.
    return;                    // Or an end without a begin (hooked mid-dispatch).
  }
  depth_ = 0;
  // First, so the watchdogs see the end as early as possible.
  if (methods_ != nullptr) {
    heartbeat_->End(end);
    methods_->DispatchEnd(end);
  } else if (heartbeat_ != nullptr) {
    heartbeat_->End(end);
  }
  // first_in_dispatch_ is still set only if the first listener is still
  // registered (its removal clears it). It hears the end if it wants this one
  // (see LooperDispatchListener).
  const LooperDispatchListener* const first = first_in_dispatch_;
  const bool first_hears =
      first != nullptr &&
      (end.ToNanoseconds() - begin_.ToNanoseconds() >= first->effective_floor_ns_ ||
       LooperDispatchListener::end_floor_changes() != end_floors_seen_);
  if (first_hears || scope_.has_value()) [[unlikely]] {
    NotifyEnd(end, first_hears);
    return;
  }
  last_end_ = end;
}

void LooperMonitor::NotifyEnd(TimeTicks end, bool first_hears) {
  LooperDispatchListener* const first = std::exchange(first_in_dispatch_, nullptr);
  if (first_hears) {
    first->end_requested_ = false;
    first->effective_floor_ns_ = first->end_floor_ns_;
    end_floors_seen_ = LooperDispatchListener::end_floor_changes();
    first->OnDispatchEnd(begin_, end);
  }
  if (scope_.has_value()) {
    scope_->Notify([&](LooperDispatchListener* l) { l->OnDispatchEnd(begin_, end); });
    scope_.reset();
  }
  last_end_ = end;
}

ObserverRegistration LooperMonitor::AddListener(LooperDispatchListener* listener) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(listener != nullptr, "null listener");
  MATRIX_CHECK(listener != first_listener_ && !listeners_.Contains(listener),
               "listener added twice");
  // The first slot is free only while no other listener is registered, so
  // listeners are still called in the order they were added.
  if (first_listener_ == nullptr && listeners_.empty()) {
    first_listener_ = listener;
    listener->monitor_ = self_;
    UpdateNotifyBegin();
    return ObserverRegistration(
        [weak = std::weak_ptr<LooperMonitor*>(self_), listener] {
          if (auto self = weak.lock()) {
            LooperMonitor* monitor = *self;
            if (monitor->first_listener_ == listener) {
              monitor->first_listener_ = nullptr;
              // Removed mid-dispatch: no end for it, even if added again
              // before the dispatch ends (as for the listed listeners).
              monitor->first_in_dispatch_ = nullptr;
              monitor->UpdateNotifyBegin();
            }
          }
        },
        std::weak_ptr<const void>(self_));
  }
  ObserverRegistration listed = listeners_.Add(listener);
  UpdateNotifyBegin();
  return ObserverRegistration(
      [weak = std::weak_ptr<LooperMonitor*>(self_), listed = std::move(listed)]() mutable {
        listed.Reset();
        if (auto self = weak.lock()) (*self)->UpdateNotifyBegin();
      },
      std::weak_ptr<const void>(self_));
}

void LooperMonitor::IdleBegin(TimeTicks begin, const char* name) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (idle_running_) return;
  idle_running_ = true;
  idle_begin_ = begin;
  if (idle_listeners_.empty()) return;
  idle_scope_.emplace(idle_listeners_);
  idle_scope_->Notify([&](LooperIdleListener* l) { l->OnIdleBegin(begin, name); });
}

void LooperMonitor::IdleEnd(TimeTicks end) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!idle_running_) return;
  idle_running_ = false;
  if (!idle_scope_.has_value()) return;
  idle_scope_->Notify([&](LooperIdleListener* l) { l->OnIdleEnd(idle_begin_, end); });
  idle_scope_.reset();
}

ObserverRegistration LooperMonitor::AddIdleListener(LooperIdleListener* listener) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  return idle_listeners_.Add(listener);
}

}  // namespace matrix
