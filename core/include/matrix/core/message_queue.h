// File: matrix/core/message_queue.h
//
// MessageQueue holds a Looper's pending messages ordered by due time (first in,
// first out among equal times) with Android's semantics: sync barriers that
// hold back synchronous messages while asynchronous ones pass, messages posted
// at the front, removal by handler/what/token, IdleHandlers, and quitting.
//
// Most code never touches the queue directly: it posts through a Handler and
// reads the queue through its Looper.
//
//   matrix::MessageQueue* queue = looper->queue();
//   int barrier = queue->PostSyncBarrier();      // hold back sync messages
//   ...                                          // async vsync frames still run
//   queue->RemoveSyncBarrier(barrier);
//
// Thread safety: thread-safe. Next() is called only by the looper thread.

#ifndef MATRIX_CORE_MESSAGE_QUEUE_H_
#define MATRIX_CORE_MESSAGE_QUEUE_H_

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "matrix/core/message.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

// Runs when the looper's queue has nothing due (Android's MessageQueue.IdleHandler).
class IdleHandler {
 public:
  virtual ~IdleHandler() = default;
  // Return true to stay registered, false to be removed after this run.
  // Called on the looper thread.
  virtual bool QueueIdle() = 0;
  // A name for reports (default: the dynamic type's demangled name). Called
  // once, when the handler is added to a queue.
  virtual std::string Name() const;
  // Name() as evaluated when the handler was last added to a queue ("" before).
  // Interned: the reference stays valid for the life of the process, so a
  // watchdog may keep it while the handler runs, or after it is gone. Any thread.
  const std::string& registered_name() const;

 private:
  friend class MessageQueue;
  std::atomic<const std::string*> registered_name_{nullptr};
};

class MessageQueue {
 public:
  MessageQueue(const TickClock* clock, bool quit_allowed);
  ~MessageQueue();
  MessageQueue(const MessageQueue&) = delete;
  MessageQueue& operator=(const MessageQueue&) = delete;

  // EnqueueMessage()
  //
  // Queues `msg` for `target` to run at `when`. Returns false (and drops the
  // message) once the queue is quitting. Can be called from any thread.
  bool EnqueueMessage(Message msg, Handler* target, TimeTicks when);
  // Queues `msg` ahead of every pending message.
  bool EnqueueMessageAtFront(Message msg, Handler* target);

  // PostSyncBarrier()
  //
  // Inserts a barrier at the current time: synchronous messages due after it
  // wait until RemoveSyncBarrier(token) while asynchronous ones run. Returns
  // the barrier's token. Can be called from any thread.
  int PostSyncBarrier();
  // Removes the barrier. Removing an unknown token is a fatal error, as in
  // Android. Can be called from any thread.
  void RemoveSyncBarrier(int token);

  // AddIdleHandler() / RemoveIdleHandler()
  //
  // `handler` is not owned and must be removed before it is destroyed. Can be
  // called from any thread.
  void AddIdleHandler(IdleHandler* handler);
  void RemoveIdleHandler(IdleHandler* handler);

  // Queries and removal. A null `token` matches any token. Thread-safe.
  bool HasMessages(const Handler* h, int what, const void* token) const;
  bool HasCallbacks(const Handler* h, const void* token) const;
  void RemoveMessages(const Handler* h, int what, const void* token);
  // Removes callback messages posted with `token` (which must not be null).
  void RemoveCallbacks(const Handler* h, const void* token);
  // Removes every message of `h` (null: of every handler) matching `token`.
  void RemoveCallbacksAndMessages(const Handler* h, const void* token);
  // Removes every message of `h` and, while one of them is being dispatched
  // (between Next() and Recycle()), waits for that dispatch to end. For a
  // Handler's destructor on another thread than the looper's: calling it on
  // the looper thread from inside such a dispatch would wait forever.
  void RemoveAllAndWaitForDispatch(const Handler* h);

  // True when nothing is due now (empty, or the head is in the future).
  bool IsIdle() const;
  // Number of pending messages, barriers included.
  size_t PendingCount() const;
  // When the next message that could run is due (barriers respected), or
  // nullopt when nothing could run. Used by the test environment.
  std::optional<TimeTicks> NextRunnableTime() const;

  // The message at the head of the queue and how overdue it is, for dumps.
  struct HeadInfo {
    std::string description;  // Message::ToString().
    TimeTicks when;
    absl::Duration overdue;   // now - when; negative if not yet due.
    size_t pending = 0;
  };
  std::optional<HeadInfo> PeekHead() const;

  // Quitting: Quit() drops every pending message; QuitSafely() drops those
  // not yet due and lets due ones run. Afterwards Next() returns kQuit and
  // enqueueing fails. Quitting the main looper is a fatal error. Any thread.
  void Quit(bool safe);
  bool IsQuitting() const;

  // Shutdown()
  //
  // The looper is gone (its thread exited): quits, also a main looper's
  // queue, and drops every pending message. Enqueueing fails from now on;
  // removal and queries find nothing. Called by ~Looper(). Any thread.
  void Shutdown();
  // True after Shutdown(). Any thread.
  bool IsShutDown() const;

  // ---- Looper side (looper thread only) ----

  struct NextResult {
    enum Kind { kMessage, kIdle, kTimeout, kQuit } kind = kTimeout;
    Message* message = nullptr;  // For kMessage; give it back with Recycle().
    TimeTicks now;               // Clock reading that found the message due.
  };
  // Returns the next due message, waiting at most `max_wait` (real time).
  // Returns kIdle (once per call, before waiting) when idle handlers should
  // run; call again with `idle_handlers_done` set. `now_hint`, when given, is a
  // clock reading taken just before the call and saves a clock read.
  NextResult Next(absl::Duration max_wait, bool idle_handlers_done,
                  std::optional<TimeTicks> now_hint);
  // A snapshot of the idle handlers, for the looper to run.
  std::vector<IdleHandler*> IdleHandlersSnapshot() const;
  // Returns a dispatched message's storage to the pool; its dispatch is over.
  void Recycle(Message* msg);

 private:
  Message* Obtain() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecycleLocked(Message* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertLocked(Message* msg) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unlinks every message matching `pred` (barriers included, if `pred` says
  // so) and returns them as a chain for DisposeRemoved().
  template <typename Pred>
  Message* UnlinkIfLocked(Pred pred) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Destroys the payloads of an unlinked chain without holding the lock (a
  // task's captures may run any destructor, including one that uses this
  // queue), then returns the messages to the pool.
  void DisposeRemoved(Message* chain) ABSL_LOCKS_EXCLUDED(mu_);
  Message* FirstRunnableLocked(Message** prev) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TickClock* const clock_;
  const bool quit_allowed_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  Message* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  Message* pool_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t pool_size_ ABSL_GUARDED_BY(mu_) = 0;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  bool quitting_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int next_barrier_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<IdleHandler*> idle_handlers_ ABSL_GUARDED_BY(mu_);
  // Targets of the messages being dispatched (nested loops: innermost last).
  std::vector<const Handler*> dispatching_ ABSL_GUARDED_BY(mu_);
  int dispatch_waiters_ ABSL_GUARDED_BY(mu_) = 0;
  absl::CondVar dispatch_done_;
};

}  // namespace matrix

#endif  // MATRIX_CORE_MESSAGE_QUEUE_H_
