// File: matrix/core/executor.h
//
// Executor runs tasks somewhere: on a looper's thread, or inline. Frame
// listeners and plugin listeners are bound to an Executor so the caller
// decides where its callbacks run.
//
//   matrix::LooperExecutor on_worker(worker_thread.GetLooper());
//   on_worker.Execute([] { Upload(); });
//   matrix::InlineExecutor::Get()->Execute([] { RunsRightHere(); });
//
// Thread safety: implementations are thread-safe.

#ifndef MATRIX_CORE_EXECUTOR_H_
#define MATRIX_CORE_EXECUTOR_H_

#include "matrix/core/handler.h"
#include "matrix/core/message.h"

namespace matrix {

class Looper;

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs `task` eventually. Can be called from any thread.
  virtual void Execute(Task task) = 0;
};

// Posts each task to a looper (FIFO). If the looper's thread exits first,
// Execute() drops the task (logged once, see Handler).
class LooperExecutor : public Executor {
 public:
  // `looper` must be alive now.
  explicit LooperExecutor(Looper* looper);
  void Execute(Task task) override;
  // The looper (freed when a prepared thread exits; see Handler::GetLooper()).
  Looper* looper() const { return handler_.GetLooper(); }

 private:
  Handler handler_;
};

// Runs each task immediately on the calling thread.
class InlineExecutor : public Executor {
 public:
  void Execute(Task task) override { task(); }
  // A process-wide instance. Never destroyed.
  static InlineExecutor* Get();
};

}  // namespace matrix

#endif  // MATRIX_CORE_EXECUTOR_H_
