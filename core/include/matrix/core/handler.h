// File: matrix/core/handler.h
//
// Handler posts work to a Looper's queue and handles the messages it sent, as
// android.os.Handler does. Tasks and messages run on the looper's thread.
//
//   class RefreshHandler : public matrix::Handler {
//    public:
//     using Handler::Handler;
//     void HandleMessage(matrix::Message& msg) override {
//       if (msg.what == kMsgRefresh) Refresh(msg.arg1);
//     }
//   };
//   RefreshHandler handler(matrix::Looper::MainLooper());
//   handler.SendEmptyMessageDelayed(kMsgRefresh, absl::Milliseconds(100));
//   handler.PostDelayed([] { Tick(); }, /*token=*/&tick_token, absl::Seconds(1));
//   handler.RemoveCallbacks(&tick_token);
//
// Destroying a Handler removes its pending messages. Destroyed on another
// thread than the looper's, it also waits for one of its messages that the
// looper is dispatching at that moment, so the owner of a Handler can free
// what its tasks use right after destroying it.
//
// A Handler may outlive its Looper: a thread prepared with Looper::Prepare()
// frees its looper when it exits. The handler shares the looper's queue, so
// posting and sending then return false and drop the message, as Android's
// "sending message to a Handler on a dead thread" (logged once per handler,
// also when the looper merely quit); removal and queries find nothing.
//
// Thread safety: posting, removal and queries are thread-safe. HandleMessage()
// and tasks run on the looper thread.

#ifndef MATRIX_CORE_HANDLER_H_
#define MATRIX_CORE_HANDLER_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "matrix/core/location.h"
#include "matrix/core/message.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

class Looper;
class MessageQueue;
class TickClock;

class Handler {
 public:
  // Intercepts messages before HandleMessage() (android.os.Handler.Callback).
  class Callback {
   public:
    virtual ~Callback() = default;
    // Return true when handled; HandleMessage() is then skipped.
    virtual bool HandleMessage(Message& msg) = 0;
  };

  // `looper` must be alive now; it may die first (see above). Its clock must
  // outlive the handler. With `async`, every message this handler sends is
  // asynchronous (passes sync barriers).
  explicit Handler(Looper* looper, Callback* callback = nullptr, bool async = false);
  Handler(Looper* looper, std::string name, bool async = false);
  virtual ~Handler();
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  // Subclasses handle `what` messages here. Looper thread.
  virtual void HandleMessage(Message& msg);
  // Runs msg.callback, else the Callback, else HandleMessage(). Looper thread.
  void DispatchMessage(Message& msg);

  // Posting. Each returns false (and drops the task) if the looper is
  // quitting or gone. `token` tags the task for RemoveCallbacks()/HasCallbacks().
  bool Post(Task task, Location from = Location::Current());
  bool PostDelayed(Task task, absl::Duration delay, Location from = Location::Current());
  bool PostDelayed(Task task, const void* token, absl::Duration delay,
                   Location from = Location::Current());
  bool PostAtTime(Task task, TimeTicks when, Location from = Location::Current());
  bool PostAtTime(Task task, const void* token, TimeTicks when,
                  Location from = Location::Current());
  bool PostAtFrontOfQueue(Task task, Location from = Location::Current());

  bool SendMessage(Message msg);
  bool SendMessageDelayed(Message msg, absl::Duration delay);
  bool SendMessageAtTime(Message msg, TimeTicks when);
  bool SendMessageAtFrontOfQueue(Message msg);
  bool SendEmptyMessage(int what);
  bool SendEmptyMessageDelayed(int what, absl::Duration delay);
  bool SendEmptyMessageAtTime(int what, TimeTicks when);

  // Removal and queries; a null token matches any.
  void RemoveMessages(int what, const void* token = nullptr);
  void RemoveCallbacks(const void* token);
  void RemoveCallbacksAndMessages(const void* token = nullptr);
  bool HasMessages(int what, const void* token = nullptr) const;
  bool HasCallbacks(const void* token) const;

  // The looper this handler was created for. Freed when a prepared thread
  // exits: do not use the pointer after that (the handler itself stays safe).
  Looper* GetLooper() const { return looper_; }
  bool is_asynchronous() const { return async_; }
  // "Handler (<name>) {<address>}", the target text in Printer lines.
  const std::string& ToString() const { return description_; }
  // The handler's name ("matrix::Handler" unless given). Interned: the
  // reference stays valid for the life of the process, so watchdog threads
  // may keep it even after the handler is gone.
  const std::string& name() const { return name_; }

 private:
  bool Enqueue(Message msg, TimeTicks when);
  // Logs the first refused message (the looper quit or is gone).
  void LogRefused();

  Looper* const looper_;
  // Shared with the looper: still valid once the looper is gone.
  const std::shared_ptr<MessageQueue> queue_;
  const TickClock* const clock_;
  const ThreadHandle looper_thread_;
  std::atomic<bool> refusal_logged_{false};
  Callback* const callback_;
  const bool async_;
  const std::string& name_;
  const std::string description_;
};

}  // namespace matrix

#endif  // MATRIX_CORE_HANDLER_H_
