#include "matrix/render_loop/render_loop_monitor.h"

#include <utility>

#include "absl/status/status.h"
#include "matrix/plugins/trace_plugin.h"

namespace matrix {

RenderLoopMonitor::RenderLoopMonitor(LooperMonitor* looper_monitor, UIThreadMonitor* ui_monitor,
                                     Options options)
    : looper_monitor_(looper_monitor),
      ui_monitor_(ui_monitor),
      label_(options.label),
      refresh_rate_(options.refresh_rate),
      swap_waits_for_vsync_(options.swap_waits_for_vsync) {
  ui_monitor_->AddFrameSource();
}

RenderLoopMonitor::~RenderLoopMonitor() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (in_frame_) EndAt(looper_monitor_->clock()->NowTicks());
  ui_monitor_->RemoveFrameSource();
}

TimeTicks RenderLoopMonitor::IntendedVsync(TimeTicks begin) const {
  if (!swap_waits_for_vsync_) return begin;
  // The first frame: no grid yet; it is meant for one interval after it began.
  if (last_end_.is_null()) return refresh_rate_.TickAfter(begin, 1);
  if (!last_swap_in_frame_ || begin < last_end_) return begin;
  // A swap that waits for the vsync returned on one: the frame after it is
  // meant for the next tick of that grid.
  return refresh_rate_.TickAfter(last_end_, refresh_rate_.IntervalsIn(begin - last_end_) + 1);
}

void RenderLoopMonitor::FrameBegin() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  const TimeTicks now = looper_monitor_->clock()->NowTicks();
  if (in_frame_) EndAt(now);
  in_frame_ = true;
  begin_ = now;
  phase_ = -1;
  swap_marked_ = false;
  intended_vsync_ = IntendedVsync(now);
  looper_monitor_->DispatchBegin(now, label_);
  ui_monitor_->MarkFrame(intended_vsync_, refresh_rate_, ++frame_count_);
  ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kInput, now);
}

void RenderLoopMonitor::Mark(UIThreadMonitor::Phase phase) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  const int index = static_cast<int>(phase);
  if (!in_frame_ || index <= phase_) return;  // Forward only.
  const TimeTicks now = looper_monitor_->clock()->NowTicks();
  // No marker before the swap: the frame's work was rendering.
  if (phase_ < 0 && phase == UIThreadMonitor::Phase::kCommit) {
    ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kTraversal, begin_);
  }
  ui_monitor_->MarkPhase(phase, now);
  phase_ = index;
  if (phase == UIThreadMonitor::Phase::kCommit) swap_marked_ = true;
}

void RenderLoopMonitor::FrameEnd() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!in_frame_) return;
  EndAt(looper_monitor_->clock()->NowTicks());
}

void RenderLoopMonitor::EndAt(TimeTicks end) {
  // No marker at all: the frame's work was rendering.
  if (phase_ < 0) ui_monitor_->MarkPhase(UIThreadMonitor::Phase::kTraversal, begin_);
  in_frame_ = false;
  last_end_ = end;
  last_swap_in_frame_ = swap_marked_;
  looper_monitor_->DispatchEnd(end);
}

bool RenderLoopMonitor::SetRefreshRate(RefreshRate rate) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  if (!rate.valid()) return false;
  refresh_rate_ = rate;
  return true;
}

bool RenderLoopMonitor::NameScene(std::string scene) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  AppState* state = AppState::Get();
  // The application's own scene (shown through AppState after ours) stands.
  const SceneId visible = state->visible_scene_id();
  if (visible != AppState::kDefaultScene && visible != scene_id_) return false;
  scene_ = std::move(scene);
  state->OnSceneShown(scene_);
  scene_id_ = state->InternScene(scene_);
  return true;
}

absl::StatusOr<std::unique_ptr<RenderLoopMonitor>> RenderLoopMonitor::Attach(
    LooperMonitor* looper_monitor, UIThreadMonitor* ui_monitor, Options options) {
  if (looper_monitor == nullptr || ui_monitor == nullptr) {
    return absl::InvalidArgumentError("matrix::RenderLoopMonitor::Attach: null monitor");
  }
  if (looper_monitor->source() != LooperMonitor::Source::kForeign) {
    return absl::FailedPreconditionError(
        "matrix::RenderLoopMonitor::Attach: the LooperMonitor is not a foreign-loop monitor; "
        "configure TraceConfig::SetLooperSource(LooperMonitor::Source::kForeign)");
  }
  if (!options.refresh_rate.valid()) {
    return absl::InvalidArgumentError(
        "matrix::RenderLoopMonitor::Attach: the refresh rate must be positive");
  }
  if (options.label == nullptr) {
    return absl::InvalidArgumentError("matrix::RenderLoopMonitor::Attach: null label");
  }
  std::string scene = std::move(options.scene);
  std::unique_ptr<RenderLoopMonitor> monitor(
      new RenderLoopMonitor(looper_monitor, ui_monitor, std::move(options)));
  if (!scene.empty()) {
    // Asked for explicitly: shown whatever the application showed before.
    AppState* state = AppState::Get();
    monitor->scene_ = std::move(scene);
    state->OnSceneShown(monitor->scene_);
    monitor->scene_id_ = state->InternScene(monitor->scene_);
  }
  return monitor;
}

absl::StatusOr<std::unique_ptr<RenderLoopMonitor>> RenderLoopMonitor::Attach(TracePlugin* plugin,
                                                                             Options options) {
  if (plugin == nullptr) {
    return absl::InvalidArgumentError("matrix::RenderLoopMonitor::Attach: null plugin");
  }
  if (plugin->GetLooperMonitor() == nullptr || plugin->GetUIThreadMonitor() == nullptr) {
    return absl::FailedPreconditionError(
        "matrix::RenderLoopMonitor::Attach: the TracePlugin has not started; call Start() on "
        "the loop thread first");
  }
  return Attach(plugin->GetLooperMonitor(), plugin->GetUIThreadMonitor(), std::move(options));
}

}  // namespace matrix
