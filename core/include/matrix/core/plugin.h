// File: matrix/core/plugin.h
//
// A Plugin is one monitor registered with the Matrix facade (TracePlugin,
// BlockCanaryPlugin, or your own). It has Matrix's lifecycle,
//
//   kCreated --Init--> kInited --Start--> kStarted --Stop--> kStopped
//                                            ^------Start-------'
//   any state but kDestroyed --Destroy--> kDestroyed   (stops first)
//
// and reports what it finds with OnDetectIssue(), which decorates the issue
// (tag, plugin, process, pid, time) and delivers it to every PluginListener on
// the matrix-worker thread. Misuse (starting a destroyed plugin, initialising
// twice, ...) returns a FailedPrecondition status naming both states; a
// monitor never crashes its host for that. When Matrix::Init() fails, its
// plugins are destroyed but stay allocated until Matrix::Shutdown(): a pointer
// kept to one (to Start() it) gets an error naming Init's failure, not a
// dangling object.
//
//   class MyPlugin : public matrix::Plugin {
//    public:
//     MyPlugin() : Plugin("Mine") {}
//    protected:
//     absl::Status OnStart() override { ...; return absl::OkStatus(); }
//   };
//
// PluginListener receives lifecycle events and issues. A listener that throws
// never takes the host down: the plugin catches what it throws (std::exception
// or anything else), logs the first failure of each listener, counts every
// failure (listener_failures()) and goes on with the other listeners, the
// lifecycle transition and later issues.
//
// Thread safety: lifecycle methods and OnDetectIssue() can be called from any
// thread; lifecycle transitions are serialised. The On*() hooks run on the
// thread that called the lifecycle method.

#ifndef MATRIX_CORE_PLUGIN_H_
#define MATRIX_CORE_PLUGIN_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/issue.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

class AppState;
class Handler;
class Looper;
class Plugin;

class PluginListener {
 public:
  virtual ~PluginListener() = default;
  // Lifecycle events, on the thread that made the transition.
  virtual void OnInit(Plugin& /*plugin*/) {}
  virtual void OnStart(Plugin& /*plugin*/) {}
  virtual void OnStop(Plugin& /*plugin*/) {}
  virtual void OnDestroy(Plugin& /*plugin*/) {}
  // An issue, on the matrix-worker thread (or the reporting thread when the
  // plugin has no worker). Must not block for long: it delays other reports.
  virtual void OnReportIssue(const Issue& issue) = 0;
};

// What a plugin is given at Init: the clock and the threads it may use.
struct PluginContext {
  const TickClock* clock = TickClock::Default();
  // The monitored looper (the main thread), or null for foreign loops only.
  Looper* main_looper = nullptr;
  // matrix-watchdog: deadlines and sampling only, never analysis.
  Looper* watchdog_looper = nullptr;
  // matrix-worker: analysis, symbolization, report building, listeners.
  Looper* worker_looper = nullptr;
  AppState* app_state = nullptr;
  std::vector<std::shared_ptr<PluginListener>> listeners;
  // How long Destroy() waits, beyond the work running at that moment, for the
  // reports already detected to be analysed and delivered
  // (Matrix::Builder::SetShutdownDrainTimeout).
  absl::Duration shutdown_drain_timeout = absl::Seconds(1);
};

class Plugin {
 public:
  enum class State { kCreated, kInited, kStarted, kStopped, kDestroyed };
  static const char* StateName(State state);

  explicit Plugin(std::string tag);
  virtual ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Matrix's getTag(): identifies the plugin (unique per Matrix instance).
  const std::string& GetTag() const { return tag_; }
  State state() const { return state_.load(std::memory_order_acquire); }
  bool IsSupported() const { return supported_.load(); }

  // Lifecycle. See the file comment for the allowed transitions.
  absl::Status Init(PluginContext context);
  absl::Status Start();
  absl::Status Stop();
  absl::Status Destroy();

  // OnDetectIssue()
  //
  // Reports `issue`: fills the tag (the plugin's if empty), plugin, process,
  // pid and time, lets the plugin add its context (DecorateIssue), and
  // delivers it to every listener on the worker looper. Any thread.
  void OnDetectIssue(Issue issue);

  // Called by Matrix when the app goes to the foreground or background.
  void OnForeground(bool foreground) { OnForegroundChanged(foreground); }

  // The context given at Init (empty before). Stable after Init.
  const PluginContext& context() const { return context_; }

  // listener_failures()
  //
  // How many times one of this plugin's listeners threw, from OnReportIssue()
  // or a lifecycle notification (OnInit/OnStart/OnStop/OnDestroy). Each
  // listener's first failure is logged (with what it threw); later ones are
  // only counted. Any thread.
  int64_t listener_failures() const {
    return listener_failures_.load(std::memory_order_relaxed);
  }

 protected:
  virtual absl::Status OnInit() { return absl::OkStatus(); }
  virtual absl::Status OnStart() { return absl::OkStatus(); }
  virtual absl::Status OnStop() { return absl::OkStatus(); }
  virtual absl::Status OnDestroy() { return absl::OkStatus(); }
  virtual void OnForegroundChanged(bool /*foreground*/) {}
  // Adds plugin-wide context to every issue (e.g. device info). Runs on the
  // thread that called OnDetectIssue().
  virtual void DecorateIssue(Issue& /*issue*/) {}
  // Marks the plugin unsupported on this platform: Start() then does nothing.
  void UnSupportPlugin() { supported_.store(false); }
  // Runs `fn` on the main looper's thread: at once when already there, when
  // there is no main looper, or when nobody runs it (not looping yet, or
  // quit); otherwise posted there. With `wait`, blocks until it has run.
  // Lifecycle hooks use it to touch looper-bound components from any thread.
  void RunOnMainLooper(absl::AnyInvocable<void()> fn, bool wait);
  // Waits until the tasks already posted to the watchdog and worker loopers
  // (including ones running now) have finished. Call it between stopping the
  // plugin's components and destroying them. Any thread but those two.
  void FlushMatrixThreads();
  // As FlushMatrixThreads(), but waits at most `timeout` in all: false when
  // the tasks posted before the call have not all run by then.
  bool FlushMatrixThreadsFor(absl::Duration timeout);

 private:
  friend class Matrix;  // DestroyAfterFailedInit().

  // Destroys the plugin of a Matrix whose Init() failed with `why`; later
  // lifecycle calls fail and name `why`.
  void DestroyAfterFailedInit(const absl::Status& why);
  absl::Status Transition(const char* action, State to, std::initializer_list<State> from,
                          absl::Status (Plugin::*hook)(), const char* callback,
                          void (PluginListener::*notify)(Plugin&));
  void Deliver(const Issue& issue);
  // Calls `notify` on listener `index` of the context, catching, counting and
  // (the first time for that listener) logging whatever it throws.
  void NotifyListener(size_t index, const char* callback,
                      absl::FunctionRef<void(PluginListener&)> notify);

  const std::string tag_;
  std::atomic<State> state_{State::kCreated};
  std::atomic<bool> supported_{true};
  absl::Mutex lifecycle_mu_;  // Serialises transitions (held across hooks).
  // Why Matrix::Init() failed, for a plugin it destroyed; else OK.
  absl::Status failed_init_ ABSL_GUARDED_BY(lifecycle_mu_);
  PluginContext context_;
  std::atomic<int64_t> listener_failures_{0};
  // One flag per context_.listeners entry: its first failure was logged.
  // Sized at Init.
  std::unique_ptr<std::atomic<bool>[]> listener_failure_logged_;
  // Posts deliveries to the worker; destroying it drops undelivered issues.
  std::unique_ptr<Handler> delivery_handler_;
  // Posts lifecycle work to the main looper.
  std::unique_ptr<Handler> main_handler_;
};

}  // namespace matrix

#endif  // MATRIX_CORE_PLUGIN_H_
