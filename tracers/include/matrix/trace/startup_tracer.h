// File: matrix/trace/startup_tracer.h
//
// StartupTracer times startup and reports it as Trace_StartUp every time,
// and as Trace_EvilMethod detail STARTUP with the method-trace call tree of
// the startup when it took longer than its threshold (cold 10 s, warm 4 s).
//
// Cold start timeline, measured from process start (read from /proc, so time
// before main() counts):
//
//   process start ... application create begin .. end ... first scene created
//     ... first scene shown (its first frame drawn) [splash scenes ...]
//     ... first non-splash scene shown = end of the cold start
//
// Application create is bounded by marks the application sets
// (MarkApplicationCreateBegin/End, usable before Matrix exists). Without
// them, it ends at the first dispatch the monitor sees. A scene is "shown"
// at the end of the first frame drawn after AppState::OnSceneShown(); when the
// loop draws no frames, at the end of that dispatch.
//
// Warm start: a scene is created while no scene is alive (every scene had
// gone away) and lasts until that scene is shown.
//
//   int main() {
//     auto method_tracer = matrix::MethodTracer::Start();   // trace startup too
//     matrix::MarkApplicationCreateBegin();
//     LoadConfig(); OpenDatabase();
//     matrix::MarkApplicationCreateEnd();
//     ... Matrix::Init with TracePlugin(EnableStartup(true)) ...
//     matrix::AppState::Get()->OnSceneCreated("Home");
//     matrix::AppState::Get()->OnSceneShown("Home");
//   }
//
// Thread safety: the marks from any thread; the tracer's callbacks on the
// looper thread (AppState events are forwarded there); reports on the worker.

#ifndef MATRIX_TRACE_STARTUP_TRACER_H_
#define MATRIX_TRACE_STARTUP_TRACER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/trace/tracer.h"

namespace matrix {

class Handler;
class Looper;

// Application-create marks. Any thread, any time (before Matrix::Init too).
// The first call of each counts. With a MethodTracer running, the begin mark
// also remembers where in the trace the startup's call tree starts.
void MarkApplicationCreateBegin();
void MarkApplicationCreateEnd();
// For tests: marks at explicit times.
void MarkApplicationCreateBeginAt(TimeTicks at);
void MarkApplicationCreateEndAt(TimeTicks at);
// Forgets both marks.
void ResetStartupMarksForTesting();

class StartupTracer : public Tracer, private AppStateObserver {
 public:
  struct Options {
    // Required: monitor, worker_looper, report.
    TracerEnv env;
    // The monitored looper: AppState events from other threads are handled
    // there. Null (foreign loops): handled on the calling thread.
    Looper* looper = nullptr;
    absl::Duration cold_threshold = absl::Seconds(10);
    absl::Duration warm_threshold = absl::Seconds(4);
    std::vector<std::string> splash_scenes;
    // Process start; default: read from /proc.
    std::optional<TimeTicks> process_start;
    // Wait for a frame to call a scene shown. False: only while the monitor
    // has a frame source (a foreign render loop's adapter, see
    // UIThreadMonitor::AddFrameSource()); otherwise the dispatch that
    // reported it shown is enough.
    bool wait_for_frame = true;
  };

  explicit StartupTracer(Options options);
  ~StartupTracer() override;

  void DoFrame(const FrameData& frame) override;
  void DispatchEnd(const DispatchData& dispatch) override;

  bool cold_start_done() const { return cold_done_; }
  int warm_start_count() const { return warm_count_; }

 protected:
  void OnAlive() override;
  void OnDead() override;

 private:
  struct Startup;
  void OnSceneCreated(SceneId scene) override;
  void OnSceneShown(SceneId scene) override;
  void OnSceneDestroyed(SceneId scene) override;
  void OnShownDrawn(SceneId scene, TimeTicks at);
  void Finish(std::shared_ptr<Startup> startup);
  void Analyze(const Startup& startup);
  bool IsSplash(SceneId scene) const;
  bool WaitsForFrame() const {
    return options_.wait_for_frame || options_.env.monitor->has_frame_source();
  }

  Options options_;
  ObserverRegistration monitor_registration_;
  ObserverRegistration app_state_registration_;
  std::unique_ptr<Handler> looper_handler_;  // AppState events -> looper thread.
  std::unique_ptr<Handler> worker_handler_;
  TimeTicks process_start_;
  std::vector<SceneId> splash_ids_;

  // Looper thread.
  bool cold_done_ = false;
  bool splash_shown_ = false;
  TimeTicks first_scene_created_;
  TimeTicks first_scene_shown_;
  SceneId first_scene_ = AppState::kDefaultScene;
  std::vector<SceneId> cold_scenes_;
  int live_scenes_ = 0;
  bool warm_pending_ = false;
  TimeTicks warm_begin_;
  uint64_t warm_mark_ = 0;
  TimeTicks warm_mark_time_;
  int warm_count_ = 0;
  std::optional<SceneId> shown_pending_;  // Shown; waiting for its first frame.
  // Sets shown_pending_, and the dispatch-end floor: 0 while a scene waits,
  // else the monitor skips DispatchEnd().
  void SetShownPending(std::optional<SceneId> scene);
};

}  // namespace matrix

#endif  // MATRIX_TRACE_STARTUP_TRACER_H_
