// File: matrix/core/matrix.h
//
// Matrix is the facade: it holds the plugins, their listeners, the clock and
// the two matrix threads (matrix-watchdog for deadlines, matrix-worker for
// analysis and listeners), and forwards foreground changes to the plugins.
//
//   matrix::Looper::PrepareMainLooper();
//   auto trace = std::make_unique<matrix::TracePlugin>(
//       matrix::TraceConfig::Builder().EnableFps(true).EnableAnrTrace(true).Build().value());
//   absl::Status status = matrix::Matrix::Init(matrix::Matrix::Builder()
//       .AddPlugin(std::move(trace))
//       .SetPluginListener(my_listener)          // OnReportIssue(const matrix::Issue&)
//       .Build());
//   auto* plugin = matrix::Matrix::With().GetPluginByClass<matrix::TracePlugin>();
//   plugin->Start().IgnoreError();
//   matrix::Looper::Loop();
//
// Init() succeeds once per process (until Shutdown()); a second Init() returns
// AlreadyExists. With() before Init() is a fatal error ("you must init Matrix
// sdk first"), as in Matrix; IsInstalled() tells whether it is safe.
//
// Thread safety: thread-safe. Init/Shutdown must not race with each other.

#ifndef MATRIX_CORE_MATRIX_H_
#define MATRIX_CORE_MATRIX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/observer_list.h"
#include "matrix/core/plugin.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

class HandlerThread;
class Looper;

class Matrix {
 public:
  class Builder {
   public:
    Builder();
    // Adds a plugin (owned). Two plugins with one tag make Init() fail.
    Builder& AddPlugin(std::unique_ptr<Plugin> plugin);
    // Matrix's single listener: replaces the listeners set so far (the
    // default one logs each issue). Shared so sinks can outlive Matrix.
    Builder& SetPluginListener(std::shared_ptr<PluginListener> listener);
    // Adds another listener (e.g. a file sink next to your own).
    Builder& AddPluginListener(std::shared_ptr<PluginListener> listener);
    // The clock every plugin uses (default: TickClock::Default()).
    Builder& SetClock(const TickClock* clock);
    // The monitored looper (default: Looper::MainLooper() at Build()).
    Builder& SetMainLooper(Looper* looper);
    // Use these loopers instead of starting matrix-watchdog and
    // matrix-worker threads (tests run them in a TestEnvironment).
    Builder& SetWatchdogLooper(Looper* looper);
    Builder& SetWorkerLooper(Looper* looper);
    // Init() turns off Abseil's mutex deadlock detection, which Debian's
    // Abseil build leaves on: it takes one process-wide lock on every
    // absl::Mutex acquisition, so matrix's own threads would contend with the
    // looper thread's locks (and every lock pays a graph lookup). Pass true to
    // keep it (debug runs).
    Builder& KeepAbseilDeadlockDetection(bool keep);
    // How long Shutdown() waits, beyond the analysis running at that moment,
    // for the issues already detected (a slow dispatch that just ended, a
    // hang being captured) to be analysed and delivered. Default 1 s. What
    // is still queued then is dropped, counted and logged
    // (Plugin::FlushMatrixThreadsFor). Must be >= 0.
    Builder& SetShutdownDrainTimeout(absl::Duration timeout);
    std::unique_ptr<Matrix> Build();

   private:
    friend class Matrix;
    std::vector<std::unique_ptr<Plugin>> plugins_;
    std::vector<std::shared_ptr<PluginListener>> listeners_;
    bool default_listener_ = true;
    bool keep_deadlock_detection_ = false;
    PluginContext context_;
  };

  ~Matrix();
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;

  // Init()
  //
  // Installs `matrix` as the process's instance and initialises every plugin.
  // Fails with AlreadyExists if one is installed, InvalidArgument for a null
  // instance, duplicate plugin tags or a negative drain timeout, or a
  // plugin's own Init error. On failure the plugins are destroyed but stay
  // allocated until Shutdown(), so a pointer kept to one gives an error from
  // its lifecycle calls (Start() names Init's failure) instead of a crash.
  static absl::Status Init(std::unique_ptr<Matrix> matrix);
  static bool IsInstalled();
  // The installed instance; fatal if none.
  static Matrix& With();
  // Stops and destroys every plugin, drains the issues they had already
  // detected (analysed and delivered within the drain timeout, see
  // Builder::SetShutdownDrainTimeout), joins the matrix threads and
  // uninstalls the instance. Also frees the instances of failed Init() calls.
  // Safe to call when none is installed.
  static void Shutdown();

  Plugin* GetPluginByTag(std::string_view tag) const;
  template <typename T>
  T* GetPluginByClass() const {
    for (const auto& plugin : plugins_) {
      if (auto* typed = dynamic_cast<T*>(plugin.get())) return typed;
    }
    return nullptr;
  }
  const std::vector<std::unique_ptr<Plugin>>& plugins() const { return plugins_; }

  // Returns the first error; keeps going with the other plugins.
  absl::Status StartAllPlugins();
  absl::Status StopAllPlugins();
  absl::Status DestroyAllPlugins();

  // listener_failures()
  //
  // How many times a PluginListener threw, over every plugin (the sum of
  // Plugin::listener_failures()). A throwing listener is caught, logged once
  // per plugin and listener, and never stops delivery to the others. Any
  // thread.
  int64_t listener_failures() const;

  AppState& app_state() const { return *context_.app_state; }
  const PluginContext& context() const { return context_; }

 private:
  class ForegroundForwarder;
  explicit Matrix(Builder& builder);
  // Init() but for keeping a failed instance: installs this one and
  // initialises its plugins.
  absl::Status InitOrFail();
  absl::Status InitPlugins();

  std::vector<std::unique_ptr<Plugin>> plugins_;
  PluginContext context_;
  std::unique_ptr<HandlerThread> watchdog_thread_;
  std::unique_ptr<HandlerThread> worker_thread_;
  std::unique_ptr<ForegroundForwarder> foreground_forwarder_;
  ObserverRegistration app_state_registration_;
  absl::Status build_status_;
  bool keep_deadlock_detection_ = false;
};

}  // namespace matrix

#endif  // MATRIX_CORE_MATRIX_H_
