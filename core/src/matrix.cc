#include "matrix/core/matrix.h"

#include <memory>
#include <mutex>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "matrix/core/check.h"
#include "matrix/core/handler.h"
#include "matrix/core/handler_thread.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/thread_handle.h"

namespace matrix {
namespace {

// Matrix's DefaultPluginListener: logs each issue.
class DefaultPluginListener : public PluginListener {
 public:
  void OnReportIssue(const Issue& issue) override { Logger()->info("{}", issue.ToString()); }
};

absl::Mutex g_mu;
Matrix* g_instance ABSL_GUARDED_BY(g_mu) = nullptr;
// Instances whose Init() failed: their plugins stay allocated until
// Shutdown() (Matrix::Init's comment).
std::vector<std::unique_ptr<Matrix>>* g_failed ABSL_GUARDED_BY(g_mu) = nullptr;

}  // namespace

class Matrix::ForegroundForwarder : public AppStateObserver {
 public:
  explicit ForegroundForwarder(Matrix* matrix) : matrix_(matrix) {}
  void OnForegroundChanged(bool foreground) override {
    for (const auto& plugin : matrix_->plugins_) plugin->OnForeground(foreground);
  }

 private:
  Matrix* const matrix_;
};

Matrix::Builder::Builder() { context_.app_state = AppState::Get(); }

Matrix::Builder& Matrix::Builder::AddPlugin(std::unique_ptr<Plugin> plugin) {
  plugins_.push_back(std::move(plugin));
  return *this;
}

Matrix::Builder& Matrix::Builder::SetPluginListener(std::shared_ptr<PluginListener> listener) {
  listeners_.clear();
  default_listener_ = false;
  if (listener) listeners_.push_back(std::move(listener));
  return *this;
}

Matrix::Builder& Matrix::Builder::AddPluginListener(std::shared_ptr<PluginListener> listener) {
  default_listener_ = false;
  if (listener) listeners_.push_back(std::move(listener));
  return *this;
}

Matrix::Builder& Matrix::Builder::SetClock(const TickClock* clock) {
  context_.clock = clock;
  return *this;
}

Matrix::Builder& Matrix::Builder::SetMainLooper(Looper* looper) {
  context_.main_looper = looper;
  return *this;
}

Matrix::Builder& Matrix::Builder::SetWatchdogLooper(Looper* looper) {
  context_.watchdog_looper = looper;
  return *this;
}

Matrix::Builder& Matrix::Builder::SetWorkerLooper(Looper* looper) {
  context_.worker_looper = looper;
  return *this;
}

Matrix::Builder& Matrix::Builder::KeepAbseilDeadlockDetection(bool keep) {
  keep_deadlock_detection_ = keep;
  return *this;
}

Matrix::Builder& Matrix::Builder::SetShutdownDrainTimeout(absl::Duration timeout) {
  context_.shutdown_drain_timeout = timeout;
  return *this;
}

std::unique_ptr<Matrix> Matrix::Builder::Build() {
  return std::unique_ptr<Matrix>(new Matrix(*this));
}

Matrix::Matrix(Builder& builder)
    : plugins_(std::move(builder.plugins_)),
      context_(builder.context_),
      keep_deadlock_detection_(builder.keep_deadlock_detection_) {
  context_.listeners = std::move(builder.listeners_);
  if (builder.default_listener_) {
    context_.listeners.push_back(std::make_shared<DefaultPluginListener>());
  }
  if (context_.main_looper == nullptr) context_.main_looper = Looper::MainLooper();

  if (context_.shutdown_drain_timeout < absl::ZeroDuration()) {
    build_status_ = absl::InvalidArgumentError(
        absl::StrCat("Matrix: the shutdown drain timeout must be >= 0, not ",
                     absl::FormatDuration(context_.shutdown_drain_timeout)));
    return;
  }
  absl::flat_hash_set<std::string> tags;
  for (const auto& plugin : plugins_) {
    if (plugin == nullptr) {
      build_status_ = absl::InvalidArgumentError("Matrix: a null plugin was added");
      return;
    }
    if (!tags.insert(plugin->GetTag()).second) {
      build_status_ = absl::InvalidArgumentError(
          absl::StrCat("Matrix: plugin with tag '", plugin->GetTag(), "' added twice"));
      return;
    }
  }
}

Matrix::~Matrix() {
  app_state_registration_.Reset();
  // Plugins first: they hold handlers on the matrix threads.
  plugins_.clear();
  if (watchdog_thread_) watchdog_thread_.reset();
  if (worker_thread_) worker_thread_.reset();
}

absl::Status Matrix::InitPlugins() {
  if (context_.watchdog_looper == nullptr) {
    watchdog_thread_ = std::make_unique<HandlerThread>("matrix-watchdog", context_.clock);
    watchdog_thread_->Start();
    context_.watchdog_looper = watchdog_thread_->GetLooper();
    // Deadlines on a loaded machine: the watchdog sleeps until an ANR or lag
    // threshold, then runs for microseconds. A 0.1 ms slice makes it
    // preempt the running threads when it wakes (EEVDF, Linux 6.12+),
    // instead of waiting out their slices: ANR captures stay within 10 ms
    // of the threshold with both cores busy (AnrE2ETest). Best effort.
    // Waited for: Looper::Flush() returns at once while the new thread has
    // not begun looping yet, and Init would return before the slice is set.
    Handler setup(context_.watchdog_looper, "matrix::Matrix$Watchdog");
    auto slice_set = std::make_shared<absl::Notification>();
    setup.Post([slice_set] {
      (void)RequestShortTimeSlice(absl::Microseconds(100));
      slice_set->Notify();
    });
    slice_set->WaitForNotificationWithTimeout(absl::Seconds(1));
  }
  if (context_.worker_looper == nullptr) {
    worker_thread_ = std::make_unique<HandlerThread>("matrix-worker", context_.clock);
    worker_thread_->Start();
    context_.worker_looper = worker_thread_->GetLooper();
  }
  for (const auto& plugin : plugins_) {
    if (absl::Status status = plugin->Init(context_); !status.ok()) return status;
  }
  foreground_forwarder_ = std::make_unique<ForegroundForwarder>(this);
  app_state_registration_ = context_.app_state->AddObserver(foreground_forwarder_.get());
  return absl::OkStatus();
}

absl::Status Matrix::Init(std::unique_ptr<Matrix> matrix) {
  if (matrix == nullptr) return absl::InvalidArgumentError("Matrix::Init: null instance");
  if (absl::Status status = matrix->InitOrFail(); !status.ok()) {
    for (const auto& plugin : matrix->plugins_) {
      if (plugin != nullptr) plugin->DestroyAfterFailedInit(status);
    }
    absl::MutexLock lock(&g_mu);
    if (g_failed == nullptr) g_failed = new std::vector<std::unique_ptr<Matrix>>();
    g_failed->push_back(std::move(matrix));
    return status;
  }
  matrix.release();  // Owned through g_instance until Shutdown().
  return absl::OkStatus();
}

absl::Status Matrix::InitOrFail() {
  if (!build_status_.ok()) return build_status_;
  if (!keep_deadlock_detection_) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  {
    absl::MutexLock lock(&g_mu);
    if (g_instance != nullptr) {
      return absl::AlreadyExistsError("Matrix::Init: Matrix is already initialized");
    }
    g_instance = this;
  }
  if (absl::Status status = InitPlugins(); !status.ok()) {
    absl::MutexLock lock(&g_mu);
    g_instance = nullptr;
    return status;
  }
  return absl::OkStatus();
}

bool Matrix::IsInstalled() {
  absl::MutexLock lock(&g_mu);
  return g_instance != nullptr;
}

Matrix& Matrix::With() {
  absl::MutexLock lock(&g_mu);
  MATRIX_CHECK(g_instance != nullptr, "you must init Matrix sdk first");
  return *g_instance;
}

void Matrix::Shutdown() {
  Matrix* instance;
  std::vector<std::unique_ptr<Matrix>> failed;
  {
    absl::MutexLock lock(&g_mu);
    instance = g_instance;
    g_instance = nullptr;
    if (g_failed != nullptr) failed.swap(*g_failed);
  }
  failed.clear();
  if (instance == nullptr) return;
  instance->DestroyAllPlugins().IgnoreError();
  // Issues reported before the plugins stopped are still queued for the
  // listeners on the worker: deliver them before the plugins are freed.
  if (instance->context_.worker_looper != nullptr) instance->context_.worker_looper->Flush();
  delete instance;
}

Plugin* Matrix::GetPluginByTag(std::string_view tag) const {
  for (const auto& plugin : plugins_) {
    if (plugin->GetTag() == tag) return plugin.get();
  }
  return nullptr;
}

int64_t Matrix::listener_failures() const {
  int64_t total = 0;
  for (const auto& plugin : plugins_) {
    if (plugin != nullptr) total += plugin->listener_failures();
  }
  return total;
}

absl::Status Matrix::StartAllPlugins() {
  absl::Status first;
  for (const auto& plugin : plugins_) first.Update(plugin->Start());
  return first;
}

absl::Status Matrix::StopAllPlugins() {
  absl::Status first;
  for (const auto& plugin : plugins_) {
    if (plugin->state() == Plugin::State::kStarted) first.Update(plugin->Stop());
  }
  return first;
}

absl::Status Matrix::DestroyAllPlugins() {
  absl::Status first;
  for (const auto& plugin : plugins_) {
    if (plugin->state() != Plugin::State::kDestroyed) first.Update(plugin->Destroy());
  }
  return first;
}

}  // namespace matrix
