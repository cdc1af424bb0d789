// File: matrix/core/message.h
//
// Message is one unit of work for a Looper: either a callback (a Task) or a
// `what` code with arguments for its target Handler's HandleMessage(). The
// fields mirror android.os.Message.
//
//   matrix::Message msg(kMsgRefresh);
//   msg.arg1 = 42;
//   handler.SendMessageDelayed(std::move(msg), absl::Milliseconds(16));
//
// Thread safety: a Message is owned by one thread at a time: its sender until
// it is enqueued, the looper thread while it is dispatched.

#ifndef MATRIX_CORE_MESSAGE_H_
#define MATRIX_CORE_MESSAGE_H_

#include <any>
#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "matrix/core/location.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

class Handler;
class MessageQueue;

// A unit of work run on a looper or an executor. Move-only.
using Task = absl::AnyInvocable<void()>;

class Message {
 public:
  Message() = default;
  explicit Message(int what_code) : what(what_code) {}
  Message(Message&&) = default;
  Message& operator=(Message&&) = default;

  // User fields.
  int what = 0;
  int64_t arg1 = 0;
  int64_t arg2 = 0;
  std::any obj;
  // Identity used by RemoveMessages/RemoveCallbacks/HasMessages (Android's
  // `obj`/`token`). Never dereferenced.
  const void* token = nullptr;
  // When set, dispatch runs this instead of the target's HandleMessage().
  Task callback;
  // Where the message was posted from; shown in Printer lines and reports.
  Location posted_from;

  // Set when the message is enqueued.
  Handler* target() const { return target_; }
  TimeTicks when() const { return when_; }
  bool is_asynchronous() const { return asynchronous_; }
  // Asynchronous messages are not held back by sync barriers (vsync frames).
  void set_asynchronous(bool async) { asynchronous_ = async; }
  bool is_sync_barrier() const { return barrier_token_ != 0; }
  int barrier_token() const { return barrier_token_; }

  // The Android Printer spelling of the callback: "null" or the post site.
  std::string CallbackString() const;
  // "{ when=+12ms what=1 target=... }" relative to `now`, as Android prints.
  std::string ToString(TimeTicks now) const;

 private:
  friend class MessageQueue;
  friend class Handler;

  Handler* target_ = nullptr;
  TimeTicks when_;
  bool asynchronous_ = false;
  int barrier_token_ = 0;
  Message* next_ = nullptr;  // Intrusive queue link, owned by MessageQueue.
};

}  // namespace matrix

#endif  // MATRIX_CORE_MESSAGE_H_
