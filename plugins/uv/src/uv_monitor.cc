#include "matrix/uv/uv_monitor.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "matrix/plugins/trace_plugin.h"

namespace matrix::uv {

// The two handles live on the heap: libuv keeps using them until their close
// callbacks ran, which may be after the monitor is gone.
namespace internal {
struct UvHandles {
  uv_prepare_t prepare;
  uv_check_t check;
  int closing = 0;  // Close callbacks of ours still to run.
};
}  // namespace internal

namespace {

absl::Mutex g_loops_mu;
// The monitored loops (Attach/Detach only, never on a dispatch).
absl::flat_hash_set<uv_loop_t*>& Loops() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_loops_mu) {
  static auto* loops = new absl::flat_hash_set<uv_loop_t*>();
  return *loops;
}
// Handles that someone else closed: libuv may still use them, so they are
// kept (reachable) for the life of the process.
std::vector<std::unique_ptr<internal::UvHandles>>& Abandoned()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_loops_mu) {
  static auto* abandoned = new std::vector<std::unique_ptr<internal::UvHandles>>();
  return *abandoned;
}

template <typename Handle>
UvMonitor* MonitorOf(Handle* handle) {
  return static_cast<UvMonitor*>(handle->data);
}

}  // namespace

UvMonitor::UvMonitor(uv_loop_t* loop, LooperMonitor* looper_monitor)
    : loop_(loop), looper_monitor_(looper_monitor) {}

UvMonitor::~UvMonitor() { Detach(); }

uint64_t UvMonitor::IdleTime() const {
  return idle_time_ ? idle_time_(loop_) : uv_metrics_idle_time(loop_);
}

TimeTicks UvMonitor::ProvisionalBegin() const {
  // Acquire: pairs with the prepare's release store, so a base from a later
  // turn comes with that turn's dispatch number (UIThreadMonitor re-checks).
  const int64_t base = wait_base_ns_.load(std::memory_order_acquire);
  if (base == kNoWait) return TimeTicks();
  // libuv's idle time counts the wait in progress and is brought up to date
  // when the wait returns, before the I/O callbacks: so this is about now
  // while the loop waits, and the wait's return once it has returned.
  return TimeTicks::FromNanoseconds(base + static_cast<int64_t>(IdleTime()));
}

void UvMonitor::OnPrepare(uv_prepare_t* handle) {
  UvMonitor* self = MonitorOf(handle);
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(self->thread_checker_);
  self->prepare_time_ = self->looper_monitor_->clock()->NowTicks();
  // No idle time accrues between the check and this prepare, so the idle
  // time now is idle_before_. Published before the dispatch ends, so a
  // watchdog that sees it ended never pairs it with the last turn's base.
  self->wait_base_ns_.store(
      self->prepare_time_.ToNanoseconds() - static_cast<int64_t>(self->idle_before_),
      std::memory_order_release);
  if (!self->in_dispatch_) return;
  self->in_dispatch_ = false;
  self->looper_monitor_->DispatchEnd(self->prepare_time_);
}

void UvMonitor::OnCheck(uv_check_t* handle) {
  UvMonitor* self = MonitorOf(handle);
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(self->thread_checker_);
  const TimeTicks now = self->looper_monitor_->clock()->NowTicks();
  // Idle time grows only while the loop thread waits in the poll phase, so
  // its growth since the last check is this turn's wait.
  const uint64_t idle = self->IdleTime();
  const uint64_t waited_ns = idle - self->idle_before_;
  self->idle_before_ = idle;
  TimeTicks begin = now;
  if (!self->prepare_time_.is_null()) {
    begin = self->prepare_time_ + absl::Nanoseconds(static_cast<int64_t>(waited_ns));
    if (begin > now) begin = now;
  }
  if (self->in_dispatch_) {
    // A check without our prepare before it (the prepare handle was closed
    // by someone else): end the open dispatch where this one begins.
    self->looper_monitor_->DispatchEnd(begin);
  }
  self->in_dispatch_ = true;
  ++self->dispatch_count_;
  self->looper_monitor_->DispatchBegin(begin, kDispatchLabel);
}

void UvMonitor::Detach() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (handles_ == nullptr) return;
  internal::UvHandles* handles = handles_;
  handles_ = nullptr;
  wait_base_ns_.store(kNoWait, std::memory_order_relaxed);
  provisional_registration_.Reset();  // Waits for a watchdog call in progress.
  if (in_dispatch_) {
    in_dispatch_ = false;
    looper_monitor_->DispatchEnd();
  }
  auto on_closed = [](uv_handle_t* handle) {
    auto* h = static_cast<internal::UvHandles*>(handle->data);
    if (--h->closing == 0) delete h;
  };
  // Handles closed by someone else (a uv_walk teardown) finish closing on
  // their own schedule: their memory is then kept rather than freed under
  // libuv.
  const bool prepare_ours = !uv_is_closing(reinterpret_cast<uv_handle_t*>(&handles->prepare));
  const bool check_ours = !uv_is_closing(reinterpret_cast<uv_handle_t*>(&handles->check));
  handles->closing = 2;
  handles->prepare.data = handles;
  handles->check.data = handles;
  uv_prepare_stop(&handles->prepare);
  uv_check_stop(&handles->check);
  if (prepare_ours) uv_close(reinterpret_cast<uv_handle_t*>(&handles->prepare), on_closed);
  if (check_ours) uv_close(reinterpret_cast<uv_handle_t*>(&handles->check), on_closed);
  absl::MutexLock lock(&g_loops_mu);
  if (!prepare_ours || !check_ours) {
    ++handles->closing;  // Never reaches 0: kept in Abandoned().
    Abandoned().emplace_back(handles);
  }
  Loops().erase(loop_);
}

void UvMonitor::NameScene(const Options& options) {
  if (!options.name_scene) return;
  AppState* state = AppState::Get();
  // The application's own scene (shown through AppState already) stands.
  if (state->visible_scene_id() != AppState::kDefaultScene) return;
  scene_ = options.scene.empty() ? std::string(kDefaultScene) : options.scene;
  state->OnSceneShown(scene_);
}

absl::StatusOr<std::unique_ptr<UvMonitor>> Attach(uv_loop_t* loop, LooperMonitor* looper_monitor,
                                                  Options options) {
  if (loop == nullptr) return absl::InvalidArgumentError("matrix::uv::Attach: null uv_loop_t");
  if (looper_monitor == nullptr) {
    return absl::InvalidArgumentError("matrix::uv::Attach: null LooperMonitor");
  }
  if (looper_monitor->source() != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "matrix::uv::Attach: the LooperMonitor is not a foreign-loop monitor; configure "
        "TraceConfig::SetLooperSource(LooperMonitor::Source::kForeign)");
  }
  {
    absl::MutexLock lock(&g_loops_mu);
    if (!Loops().insert(loop).second) {
      return absl::FailedPreconditionError("matrix::uv::Attach: this uv_loop_t is already monitored");
    }
  }
  auto release_loop = [loop] {
    absl::MutexLock lock(&g_loops_mu);
    Loops().erase(loop);
  };
  if (int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME); rc != 0) {
    release_loop();
    return absl::InternalError(absl::StrCat(
        "matrix::uv::Attach: uv_loop_configure(UV_METRICS_IDLE_TIME): ", uv_strerror(rc)));
  }
  std::unique_ptr<UvMonitor> monitor(new UvMonitor(loop, looper_monitor));
  monitor->idle_time_ = std::move(options.idle_time_for_testing);
  auto* handles = new internal::UvHandles();
  // Init cannot fail for prepare and check handles on a valid loop (libuv
  // returns 0 unconditionally); start fails only for a null callback.
  uv_prepare_init(loop, &handles->prepare);
  uv_check_init(loop, &handles->check);
  handles->prepare.data = monitor.get();
  handles->check.data = monitor.get();
  int rc = uv_prepare_start(&handles->prepare, &UvMonitor::OnPrepare);
  if (rc == 0) rc = uv_check_start(&handles->check, &UvMonitor::OnCheck);
  // Never keep the loop alive.
  uv_unref(reinterpret_cast<uv_handle_t*>(&handles->prepare));
  uv_unref(reinterpret_cast<uv_handle_t*>(&handles->check));
  monitor->handles_ = handles;
  if (rc != 0) {
    monitor->Detach();
    return absl::InternalError(
        absl::StrCat("matrix::uv::Attach: cannot start the loop's handles: ", uv_strerror(rc)));
  }
  monitor->idle_before_ = monitor->IdleTime();
  monitor->provisional_registration_ =
      looper_monitor->SetProvisionalSource(monitor.get(), kDispatchLabel);
  monitor->NameScene(options);
  return monitor;
}

absl::StatusOr<std::unique_ptr<UvMonitor>> Attach(uv_loop_t* loop, TracePlugin* plugin,
                                                  Options options) {
  if (plugin == nullptr) return absl::InvalidArgumentError("matrix::uv::Attach: null plugin");
  if (plugin->GetLooperMonitor() == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::uv::Attach: the TracePlugin has not started; call Start() on the loop "
        "thread first");
  }
  return Attach(loop, plugin->GetLooperMonitor(), std::move(options));
}

}  // namespace matrix::uv
