// File: matrix/trace/tracer.h
//
// Tracer is Matrix's base for the detectors (FrameTracer, AnrTracer,
// EvilMethodTracer, StartupTracer, ...): a LooperObserver with an on/off
// lifecycle and a channel for the issues it finds.
//
//   class MyTracer : public matrix::Tracer {
//    protected:
//     void OnAlive() override { registration_ = monitor_->AddObserver(this); }
//     void OnDead() override { registration_.Reset(); }
//   };
//
// Thread safety: OnStartTrace()/OnCloseTrace() on the looper thread; each
// tracer documents the rest.

#ifndef MATRIX_TRACE_TRACER_H_
#define MATRIX_TRACE_TRACER_H_

#include <functional>

#include "matrix/core/app_state.h"
#include "matrix/core/issue.h"
#include "matrix/core/looper.h"
#include "matrix/trace/timeline.h"
#include "matrix/trace/ui_thread_monitor.h"

namespace matrix {

// Where a tracer sends the issues it finds (TracePlugin::OnDetectIssue).
using IssueCallback = std::function<void(Issue issue)>;

// TracerEnv
//
// What every tracer is given: the monitor it observes, the loopers it works
// on, the app state it reads, where it sends its issues and the flight
// recorder it attaches. TracePlugin fills one and hands it to each tracer;
// each tracer's Options says which fields it requires.
//
// Thread safety: a plain value, copied into each tracer.
struct TracerEnv {
  UIThreadMonitor* monitor = nullptr;  // Clock, looper thread, observers.
  Looper* watchdog_looper = nullptr;   // Deadlines and stack samples.
  Looper* worker_looper = nullptr;     // Report building, off the looper thread.
  AppState* app_state = AppState::Get();
  IssueCallback report;  // Receives the issues (worker thread).
  // The flight recorder (none by default): reports that have a moment of
  // detection (ANR, LAG, slow method, frozen frames) carry the window before it.
  TimelineAttachment timeline;
};

class Tracer : public LooperObserver {
 public:
  // `callbacks`: the LooperObserver callbacks this tracer needs.
  explicit Tracer(uint8_t callbacks = kAllCallbacks) : LooperObserver(callbacks) {}
  ~Tracer() override = default;

  // Turns the tracer on/off. Idempotent. Looper thread.
  void OnStartTrace() {
    if (alive_) return;
    alive_ = true;
    OnAlive();
  }
  void OnCloseTrace() {
    if (!alive_) return;
    alive_ = false;
    OnDead();
  }
  bool is_alive() const { return alive_; }

  // The app went to the foreground or background. Any thread.
  virtual void OnForeground(bool /*foreground*/) {}

 protected:
  virtual void OnAlive() {}
  virtual void OnDead() {}

 private:
  bool alive_ = false;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_TRACER_H_
