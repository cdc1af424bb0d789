// File: matrix/core/handler_thread.h
//
// HandlerThread is a thread running its own Looper (android.os.HandlerThread).
//
//   matrix::HandlerThread worker("matrix-worker");
//   worker.Start();
//   matrix::Handler handler(worker.GetLooper());   // blocks until ready
//   handler.Post([] { Analyze(); });
//   // ~HandlerThread quits safely and joins.
//
// Thread safety: thread-safe.

#ifndef MATRIX_CORE_HANDLER_THREAD_H_
#define MATRIX_CORE_HANDLER_THREAD_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

class Looper;

class HandlerThread {
 public:
  explicit HandlerThread(std::string name, const TickClock* clock = TickClock::Default());
  // Quits safely (due messages still run) and joins.
  ~HandlerThread();
  HandlerThread(const HandlerThread&) = delete;
  HandlerThread& operator=(const HandlerThread&) = delete;

  // Starts the thread. Starting twice is a fatal error.
  void Start();
  // The thread's looper, blocking until it is prepared. Null if the thread
  // was never started or has already quit.
  Looper* GetLooper();
  // Ask the loop to stop (see Looper::Quit/QuitSafely). False if not running.
  bool Quit();
  bool QuitSafely();
  // Waits for the thread to finish.
  void Join();

  const std::string& name() const { return name_; }
  // The running thread, or an invalid handle before GetLooper() could succeed.
  ThreadHandle thread() const;

 private:
  void Run();

  const std::string name_;
  const TickClock* const clock_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  // Kept after the loop ends: Handlers may still point at it.
  std::unique_ptr<Looper> finished_looper_ ABSL_GUARDED_BY(mu_);
  Looper* looper_ ABSL_GUARDED_BY(mu_) = nullptr;
  ThreadHandle handle_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace matrix

#endif  // MATRIX_CORE_HANDLER_THREAD_H_
