#include "matrix/core/handler_thread.h"

#include "matrix/core/check.h"
#include "matrix/core/looper.h"

namespace matrix {

HandlerThread::HandlerThread(std::string name, const TickClock* clock)
    : name_(std::move(name)), clock_(clock) {}

HandlerThread::~HandlerThread() {
  QuitSafely();
  Join();
  absl::MutexLock lock(&mu_);
  finished_looper_.reset();
}

void HandlerThread::Start() {
  {
    absl::MutexLock lock(&mu_);
    MATRIX_CHECK(!started_, "HandlerThread started twice");
    started_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

void HandlerThread::Run() {
  SetCurrentThreadName(name_);
  Looper* looper = Looper::Prepare(clock_);
  {
    absl::MutexLock lock(&mu_);
    looper_ = looper;
    handle_ = looper->thread();
  }
  Looper::Loop();
  std::unique_ptr<Looper> owned = Looper::ReleaseCurrent();
  absl::MutexLock lock(&mu_);
  looper_ = nullptr;
  finished_ = true;
  finished_looper_ = std::move(owned);
}

Looper* HandlerThread::GetLooper() {
  absl::MutexLock lock(&mu_);
  if (!started_) return nullptr;
  mu_.Await(absl::Condition(
      +[](HandlerThread* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->looper_ != nullptr || self->finished_;
      },
      this));
  return looper_;
}

bool HandlerThread::Quit() {
  Looper* looper = GetLooper();
  if (looper == nullptr) return false;
  looper->Quit();
  return true;
}

bool HandlerThread::QuitSafely() {
  Looper* looper = GetLooper();
  if (looper == nullptr) return false;
  looper->QuitSafely();
  return true;
}

void HandlerThread::Join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

ThreadHandle HandlerThread::thread() const {
  absl::MutexLock lock(&mu_);
  return handle_;
}

}  // namespace matrix
