#include "matrix/core/handler.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "matrix/core/check.h"
#include "matrix/core/interned_string.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"

namespace matrix {
namespace {

std::string Describe(const Handler* h, const std::string& name) {
  return absl::StrFormat("Handler (%s) {%x}", name, reinterpret_cast<uintptr_t>(h));
}

}  // namespace

Handler::Handler(Looper* looper, Callback* callback, bool async)
    : looper_(looper),
      queue_(looper != nullptr ? looper->queue_ : nullptr),
      clock_(looper != nullptr ? looper->clock() : nullptr),
      looper_thread_(looper != nullptr ? looper->thread() : ThreadHandle()),
      callback_(callback),
      async_(async),
      name_(InternString("matrix::Handler")),
      description_(Describe(this, name_)) {
  MATRIX_CHECK(looper_ != nullptr, "A Handler needs a Looper");
}

Handler::Handler(Looper* looper, std::string name, bool async)
    : looper_(looper),
      queue_(looper != nullptr ? looper->queue_ : nullptr),
      clock_(looper != nullptr ? looper->clock() : nullptr),
      looper_thread_(looper != nullptr ? looper->thread() : ThreadHandle()),
      callback_(nullptr),
      async_(async),
      name_(InternString(name)),
      description_(Describe(this, name_)) {
  MATRIX_CHECK(looper_ != nullptr, "A Handler needs a Looper");
}

Handler::~Handler() {
  // Never touches looper_: it may be gone (its thread exited).
  if (looper_thread_.IsCurrent()) {
    queue_->RemoveCallbacksAndMessages(this, nullptr);
  } else {
    // One of our messages may be running on the looper thread right now,
    // using what its owner is destroying: wait for it to finish.
    queue_->RemoveAllAndWaitForDispatch(this);
  }
}

void Handler::HandleMessage(Message&) {}

void Handler::DispatchMessage(Message& msg) {
  if (msg.callback) {
    msg.callback();
    return;
  }
  if (callback_ != nullptr && callback_->HandleMessage(msg)) return;
  HandleMessage(msg);
}

bool Handler::Enqueue(Message msg, TimeTicks when) {
  if (async_) msg.set_asynchronous(true);
  if (queue_->EnqueueMessage(std::move(msg), this, when)) return true;
  LogRefused();
  return false;
}

void Handler::LogRefused() {
  if (refusal_logged_.exchange(true, std::memory_order_relaxed)) return;
  Logger()->warn("{} sending message to a Handler on a dead thread ({}); further refused "
                 "messages of this handler are not logged",
                 description_,
                 queue_->IsShutDown() ? "its looper's thread has exited" : "its looper quit");
}

namespace {
Message TaskMessage(Task task, const void* token, Location from) {
  Message msg;
  msg.callback = std::move(task);
  msg.token = token;
  msg.posted_from = from;
  return msg;
}
}  // namespace

bool Handler::Post(Task task, Location from) {
  return Enqueue(TaskMessage(std::move(task), nullptr, from), clock_->NowTicks());
}

bool Handler::PostDelayed(Task task, absl::Duration delay, Location from) {
  return PostDelayed(std::move(task), nullptr, delay, from);
}

bool Handler::PostDelayed(Task task, const void* token, absl::Duration delay, Location from) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  return Enqueue(TaskMessage(std::move(task), token, from),
                 clock_->NowTicks() + delay);
}

bool Handler::PostAtTime(Task task, TimeTicks when, Location from) {
  return Enqueue(TaskMessage(std::move(task), nullptr, from), when);
}

bool Handler::PostAtTime(Task task, const void* token, TimeTicks when, Location from) {
  return Enqueue(TaskMessage(std::move(task), token, from), when);
}

bool Handler::PostAtFrontOfQueue(Task task, Location from) {
  return SendMessageAtFrontOfQueue(TaskMessage(std::move(task), nullptr, from));
}

bool Handler::SendMessage(Message msg) {
  return Enqueue(std::move(msg), clock_->NowTicks());
}

bool Handler::SendMessageDelayed(Message msg, absl::Duration delay) {
  if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
  return Enqueue(std::move(msg), clock_->NowTicks() + delay);
}

bool Handler::SendMessageAtTime(Message msg, TimeTicks when) {
  return Enqueue(std::move(msg), when);
}

bool Handler::SendMessageAtFrontOfQueue(Message msg) {
  if (async_) msg.set_asynchronous(true);
  if (queue_->EnqueueMessageAtFront(std::move(msg), this)) return true;
  LogRefused();
  return false;
}

bool Handler::SendEmptyMessage(int what) { return SendMessage(Message(what)); }

bool Handler::SendEmptyMessageDelayed(int what, absl::Duration delay) {
  return SendMessageDelayed(Message(what), delay);
}

bool Handler::SendEmptyMessageAtTime(int what, TimeTicks when) {
  return SendMessageAtTime(Message(what), when);
}

void Handler::RemoveMessages(int what, const void* token) {
  queue_->RemoveMessages(this, what, token);
}

void Handler::RemoveCallbacks(const void* token) { queue_->RemoveCallbacks(this, token); }

void Handler::RemoveCallbacksAndMessages(const void* token) {
  queue_->RemoveCallbacksAndMessages(this, token);
}

bool Handler::HasMessages(int what, const void* token) const {
  return queue_->HasMessages(this, what, token);
}

bool Handler::HasCallbacks(const void* token) const {
  return queue_->HasCallbacks(this, token);
}

}  // namespace matrix
