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

// The probe sources (see glib_monitor.h): never ready, no fd, no timeout;
// their check tells which priority level GLib's check phase reached.
struct ProbeSource {
  GSource base;  // First: GLib allocates and frees the whole struct.
  GlibMonitor* monitor;
  bool idle;  // The kIdlePriority probe (else the G_MAXINT one).
};

struct ProbeFuncs {
  static gboolean Prepare(GSource*, gint* timeout) {
    *timeout = -1;  // No say in how long the loop blocks.
    return FALSE;
  }
  static gboolean Check(GSource* source) {
    auto* probe = reinterpret_cast<ProbeSource*>(source);
    if (probe->monitor != nullptr) {
      if (probe->idle) {
        probe->monitor->OnIdlePriorityChecked();
      } else {
        probe->monitor->OnNothingReadyChecked();
      }
    }
    return FALSE;
  }
  static gboolean Dispatch(GSource*, GSourceFunc, gpointer) { return G_SOURCE_CONTINUE; }
  static GSourceFuncs funcs;
};

GSourceFuncs ProbeFuncs::funcs = {&ProbeFuncs::Prepare, &ProbeFuncs::Check, &ProbeFuncs::Dispatch,
                                  nullptr, nullptr, nullptr};

namespace {

GSource* AttachProbe(GMainContext* context, GlibMonitor* monitor, bool idle) {
  GSource* source = g_source_new(&ProbeFuncs::funcs, sizeof(ProbeSource));
  auto* probe = reinterpret_cast<ProbeSource*>(source);
  probe->monitor = monitor;
  probe->idle = idle;
  g_source_set_priority(source, idle ? kIdlePriority : G_MAXINT);
  g_source_set_name(source, idle ? "matrix::glib idle-priority probe" : "matrix::glib ready probe");
  g_source_attach(source, context);
  return source;  // Our reference, dropped on Detach().
}

void DestroyProbe(GSource*& source) {
  if (source == nullptr) return;
  reinterpret_cast<ProbeSource*>(source)->monitor = nullptr;
  g_source_destroy(source);
  g_source_unref(source);
  source = nullptr;
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
  const TimeTicks now = looper_monitor_->clock()->NowTicks();
  if (in_idle_run_) EndIdleRun(now);
  in_dispatch_ = false;
  looper_monitor_->DispatchEnd(now);
}

void GlibMonitor::AfterPoll() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  in_dispatch_ = true;
  ++dispatch_count_;
  looper_monitor_->DispatchBegin(kDispatchLabel);
}

void GlibMonitor::OnIdlePriorityChecked() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  // No source above idle priority is ready: whatever this iteration
  // dispatches is idle-priority (unless the G_MAXINT probe is checked next:
  // then nothing is ready at all).
  if (!in_dispatch_ || in_idle_run_) return;
  in_idle_run_ = true;
  ++idle_run_count_;
  looper_monitor_->IdleBegin(kIdleSourceName);
}

void GlibMonitor::OnNothingReadyChecked() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  // Nothing will be dispatched: cancel the run begun a moment ago in this
  // same check phase (no callback ran in between).
  if (!in_idle_run_) return;
  --idle_run_count_;
  EndIdleRun(looper_monitor_->clock()->NowTicks());
}

void GlibMonitor::EndIdleRun(TimeTicks end) {
  in_idle_run_ = false;
  looper_monitor_->IdleEnd(end);
}

void GlibMonitor::Detach() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!attached_) return;
  attached_ = false;
  PollSlot& slot = Slots()[slot_];
  slot.monitor.store(nullptr, std::memory_order_release);
  DestroyProbe(idle_probe_);
  DestroyProbe(last_probe_);
  const TimeTicks now = looper_monitor_->clock()->NowTicks();
  if (in_idle_run_) EndIdleRun(now);
  if (in_dispatch_) {
    in_dispatch_ = false;
    looper_monitor_->DispatchEnd(now);
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
  monitor->idle_probe_ = AttachProbe(context, monitor.get(), /*idle=*/true);
  monitor->last_probe_ = AttachProbe(context, monitor.get(), /*idle=*/false);
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
