#include "matrix/glib/glib_monitor.h"

#include <array>
#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/logging.h"
#include "matrix/plugins/trace_plugin.h"

namespace matrix::glib {

namespace {

// GPollFunc has no user data, so each attached context gets its own poll
// function: one of kMaxAttachedContexts trampolines, each bound to a slot.
struct PollSlot {
  std::atomic<GlibMonitor*> monitor{nullptr};
  std::atomic<GPollFunc> previous{nullptr};
};

absl::Mutex g_slots_mu;
// in_use: attached, or leaked (our poll function is still in a chain).
std::array<bool, GlibMonitor::kMaxAttachedContexts> g_slot_in_use ABSL_GUARDED_BY(g_slots_mu){};

// Never destroyed: a leaked trampoline may still run at exit.
PollSlot* Slots() {
  static auto* slots = new std::array<PollSlot, GlibMonitor::kMaxAttachedContexts>();
  return slots->data();
}

}  // namespace

template <int kIndex>
struct PollTrampoline {
  static gint Poll(GPollFD* fds, guint nfds, gint timeout) {
    PollSlot& slot = Slots()[kIndex];
    GlibMonitor* monitor = slot.monitor.load(std::memory_order_acquire);
    if (monitor != nullptr) monitor->BeforePoll();
    const gint result = slot.previous.load(std::memory_order_acquire)(fds, nfds, timeout);
    if (monitor != nullptr) monitor->AfterPoll();
    return result;
  }
};

namespace {

template <int... kIndices>
constexpr std::array<GPollFunc, sizeof...(kIndices)> MakeTrampolines(
    std::integer_sequence<int, kIndices...>) {
  return {&PollTrampoline<kIndices>::Poll...};
}

constexpr std::array<GPollFunc, GlibMonitor::kMaxAttachedContexts> kTrampolines =
    MakeTrampolines(std::make_integer_sequence<int, GlibMonitor::kMaxAttachedContexts>());

bool IsOurs(GPollFunc poll) {
  for (GPollFunc trampoline : kTrampolines) {
    if (poll == trampoline) return true;
  }
  return false;
}

}  // namespace

GlibMonitor::GlibMonitor(GMainContext* context, LooperMonitor* looper_monitor, int slot)
    : context_(g_main_context_ref(context)), looper_monitor_(looper_monitor), slot_(slot) {}

GlibMonitor::~GlibMonitor() {
  Detach();
  g_main_context_unref(context_);
}

void GlibMonitor::BeforePoll() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!in_dispatch_) return;
  in_dispatch_ = false;
  looper_monitor_->DispatchEnd();
}

void GlibMonitor::AfterPoll() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  in_dispatch_ = true;
  ++dispatch_count_;
  looper_monitor_->DispatchBegin(kDispatchLabel);
}

void GlibMonitor::Detach() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!attached_) return;
  attached_ = false;
  PollSlot& slot = Slots()[slot_];
  slot.monitor.store(nullptr, std::memory_order_release);
  if (in_dispatch_) {
    in_dispatch_ = false;
    looper_monitor_->DispatchEnd();
  }
  const bool ours_installed = g_main_context_get_poll_func(context_) == kTrampolines[slot_];
  if (ours_installed) {
    g_main_context_set_poll_func(context_, slot.previous.load(std::memory_order_acquire));
  } else {
    Logger()->warn(
        "matrix::glib: the GMainContext's poll function was replaced after Attach(); "
        "leaving ours in the chain (forwarding only)");
  }
  absl::MutexLock lock(&g_slots_mu);
  // A poll function still in someone's chain keeps its slot (and `previous`).
  if (ours_installed) g_slot_in_use[slot_] = false;
}

absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context,
                                                    LooperMonitor* looper_monitor) {
  if (looper_monitor == nullptr) {
    return absl::InvalidArgumentError("matrix::glib::Attach: null LooperMonitor");
  }
  if (looper_monitor->source() != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "matrix::glib::Attach: the LooperMonitor is not a foreign-loop monitor; configure "
        "TraceConfig::SetLooperSource(LooperMonitor::Source::kForeign)");
  }
  if (context == nullptr) context = g_main_context_default();
  if (IsOurs(g_main_context_get_poll_func(context))) {
    return absl::FailedPreconditionError(
        "matrix::glib::Attach: this GMainContext is already monitored");
  }
  int slot = -1;
  {
    absl::MutexLock lock(&g_slots_mu);
    for (int i = 0; i < GlibMonitor::kMaxAttachedContexts; ++i) {
      if (!g_slot_in_use[i]) {
        g_slot_in_use[i] = true;
        slot = i;
        break;
      }
    }
  }
  if (slot < 0) {
    return absl::ResourceExhaustedError(
        "matrix::glib::Attach: too many GMainContexts monitored at once (max 8)");
  }
  std::unique_ptr<GlibMonitor> monitor(new GlibMonitor(context, looper_monitor, slot));
  PollSlot& s = Slots()[slot];
  s.previous.store(g_main_context_get_poll_func(context), std::memory_order_release);
  s.monitor.store(monitor.get(), std::memory_order_release);
  monitor->attached_ = true;
  g_main_context_set_poll_func(context, kTrampolines[slot]);
  return monitor;
}

absl::StatusOr<std::unique_ptr<GlibMonitor>> Attach(GMainContext* context, TracePlugin* plugin) {
  if (plugin == nullptr) return absl::InvalidArgumentError("matrix::glib::Attach: null plugin");
  if (plugin->GetLooperMonitor() == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::glib::Attach: the TracePlugin has not started; call Start() on the loop "
        "thread first");
  }
  return Attach(context, plugin->GetLooperMonitor());
}

}  // namespace matrix::glib
