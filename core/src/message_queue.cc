#include "matrix/core/message_queue.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <typeinfo>

#include "matrix/core/check.h"

namespace matrix {
namespace {
constexpr size_t kMaxPoolSize = 64;
}  // namespace

std::string IdleHandler::Name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = (status == 0 && demangled) ? demangled : mangled;
  std::free(demangled);
  return name;
}

MessageQueue::MessageQueue(const TickClock* clock, bool quit_allowed)
    : clock_(clock), quit_allowed_(quit_allowed) {}

MessageQueue::~MessageQueue() {
  absl::MutexLock lock(&mu_);
  for (Message* m = head_; m != nullptr;) {
    Message* next = m->next_;
    delete m;
    m = next;
  }
  for (Message* m = pool_; m != nullptr;) {
    Message* next = m->next_;
    delete m;
    m = next;
  }
}

Message* MessageQueue::Obtain() {
  if (pool_ == nullptr) return new Message();
  Message* m = pool_;
  pool_ = m->next_;
  --pool_size_;
  m->next_ = nullptr;
  return m;
}

void MessageQueue::RecycleLocked(Message* msg) {
  *msg = Message();  // Releases the callback and payload now.
  if (pool_size_ >= kMaxPoolSize) {
    delete msg;
    return;
  }
  msg->next_ = pool_;
  pool_ = msg;
  ++pool_size_;
}

void MessageQueue::Recycle(Message* msg) {
  // Destroy the payload outside the lock: it may run arbitrary destructors.
  Message released = std::move(*msg);
  (void)released;
  absl::MutexLock lock(&mu_);
  RecycleLocked(msg);
}

void MessageQueue::InsertLocked(Message* msg) {
  // Sorted by due time; a new message goes after every message due at the
  // same time (FIFO among equals).
  Message** link = &head_;
  while (*link != nullptr && (*link)->when_ <= msg->when_) link = &(*link)->next_;
  msg->next_ = *link;
  *link = msg;
  ++count_;
}

bool MessageQueue::EnqueueMessage(Message msg, Handler* target, TimeTicks when) {
  MATRIX_CHECK(target != nullptr, "a message needs a target handler");
  absl::MutexLock lock(&mu_);
  if (quitting_) return false;
  Message* m = Obtain();
  *m = std::move(msg);
  m->target_ = target;
  m->when_ = when;
  InsertLocked(m);
  if (blocked_) cv_.Signal();
  return true;
}

bool MessageQueue::EnqueueMessageAtFront(Message msg, Handler* target) {
  MATRIX_CHECK(target != nullptr, "a message needs a target handler");
  absl::MutexLock lock(&mu_);
  if (quitting_) return false;
  Message* m = Obtain();
  *m = std::move(msg);
  m->target_ = target;
  m->when_ = TimeTicks::Min();
  m->next_ = head_;
  head_ = m;
  ++count_;
  if (blocked_) cv_.Signal();
  return true;
}

int MessageQueue::PostSyncBarrier() {
  const TimeTicks now = clock_->NowTicks();
  absl::MutexLock lock(&mu_);
  const int token = next_barrier_token_++;
  Message* m = Obtain();
  m->when_ = now;
  m->barrier_token_ = token;
  InsertLocked(m);
  return token;
}

void MessageQueue::RemoveSyncBarrier(int token) {
  absl::MutexLock lock(&mu_);
  Message** link = &head_;
  while (*link != nullptr && (*link)->barrier_token_ != token) link = &(*link)->next_;
  MATRIX_CHECK(*link != nullptr,
               "The specified message queue synchronization barrier token has not been "
               "posted or has already been removed.");
  Message* barrier = *link;
  const bool was_head = barrier == head_;
  *link = barrier->next_;
  --count_;
  RecycleLocked(barrier);
  if (was_head && blocked_) cv_.Signal();
}

void MessageQueue::AddIdleHandler(IdleHandler* handler) {
  MATRIX_CHECK(handler != nullptr, "null idle handler");
  absl::MutexLock lock(&mu_);
  idle_handlers_.push_back(handler);
}

void MessageQueue::RemoveIdleHandler(IdleHandler* handler) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(idle_handlers_.begin(), idle_handlers_.end(), handler);
  if (it != idle_handlers_.end()) idle_handlers_.erase(it);
}

std::vector<IdleHandler*> MessageQueue::IdleHandlersSnapshot() const {
  absl::MutexLock lock(&mu_);
  return idle_handlers_;
}

namespace {
bool TokenMatches(const void* wanted, const void* actual) {
  return wanted == nullptr || wanted == actual;
}
}  // namespace

bool MessageQueue::HasMessages(const Handler* h, int what, const void* token) const {
  absl::MutexLock lock(&mu_);
  for (Message* m = head_; m != nullptr; m = m->next_) {
    if (m->target_ == h && !m->callback && m->what == what && TokenMatches(token, m->token)) {
      return true;
    }
  }
  return false;
}

bool MessageQueue::HasCallbacks(const Handler* h, const void* token) const {
  absl::MutexLock lock(&mu_);
  for (Message* m = head_; m != nullptr; m = m->next_) {
    if (m->target_ == h && m->callback && TokenMatches(token, m->token)) return true;
  }
  return false;
}

template <typename Pred>
void MessageQueue::RemoveIfLocked(Pred pred) {
  Message** link = &head_;
  while (*link != nullptr) {
    Message* m = *link;
    if (!m->is_sync_barrier() && pred(*m)) {
      *link = m->next_;
      --count_;
      RecycleLocked(m);
    } else {
      link = &m->next_;
    }
  }
}

void MessageQueue::RemoveMessages(const Handler* h, int what, const void* token) {
  absl::MutexLock lock(&mu_);
  RemoveIfLocked([&](const Message& m) {
    return m.target_ == h && !m.callback && m.what == what && TokenMatches(token, m.token);
  });
}

void MessageQueue::RemoveCallbacks(const Handler* h, const void* token) {
  MATRIX_CHECK(token != nullptr, "RemoveCallbacks needs the token the task was posted with");
  absl::MutexLock lock(&mu_);
  RemoveIfLocked(
      [&](const Message& m) { return m.target_ == h && m.callback && m.token == token; });
}

void MessageQueue::RemoveCallbacksAndMessages(const Handler* h, const void* token) {
  absl::MutexLock lock(&mu_);
  RemoveIfLocked([&](const Message& m) {
    return (h == nullptr || m.target_ == h) && TokenMatches(token, m.token);
  });
}

bool MessageQueue::IsIdle() const {
  const TimeTicks now = clock_->NowTicks();
  absl::MutexLock lock(&mu_);
  return head_ == nullptr || now < head_->when_;
}

size_t MessageQueue::PendingCount() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

Message* MessageQueue::FirstRunnableLocked(Message** prev) const {
  *prev = nullptr;
  Message* m = head_;
  if (m != nullptr && m->is_sync_barrier()) {
    // Behind a barrier only asynchronous messages may run.
    do {
      *prev = m;
      m = m->next_;
    } while (m != nullptr && !m->asynchronous_);
  }
  return m;
}

std::optional<TimeTicks> MessageQueue::NextRunnableTime() const {
  absl::MutexLock lock(&mu_);
  Message* prev;
  Message* m = FirstRunnableLocked(&prev);
  if (m == nullptr) return std::nullopt;
  return m->when_;
}

std::optional<MessageQueue::HeadInfo> MessageQueue::PeekHead() const {
  const TimeTicks now = clock_->NowTicks();
  absl::MutexLock lock(&mu_);
  if (head_ == nullptr) return std::nullopt;
  HeadInfo info;
  info.description = head_->ToString(now);
  info.when = head_->when_;
  info.overdue = now - head_->when_;
  info.pending = count_;
  return info;
}

void MessageQueue::Quit(bool safe) {
  MATRIX_CHECK(quit_allowed_, "Main thread not allowed to quit.");
  const TimeTicks now = clock_->NowTicks();
  absl::MutexLock lock(&mu_);
  if (quitting_) return;
  quitting_ = true;
  if (safe) {
    RemoveIfLocked([&](const Message& m) { return m.when_ > now; });
  } else {
    RemoveIfLocked([](const Message&) { return true; });
  }
  cv_.SignalAll();
}

bool MessageQueue::IsQuitting() const {
  absl::MutexLock lock(&mu_);
  return quitting_;
}

MessageQueue::NextResult MessageQueue::Next(absl::Duration max_wait, bool idle_handlers_done,
                                            std::optional<TimeTicks> now_hint) {
  absl::MutexLock lock(&mu_);
  TimeTicks wait_deadline;  // On the queue's clock; set on the first pass.
  bool first_pass = true;
  for (;;) {
    const TimeTicks now = (first_pass && now_hint) ? *now_hint : clock_->NowTicks();
    if (first_pass) wait_deadline = now + max_wait;
    first_pass = false;

    Message* prev;
    Message* m = FirstRunnableLocked(&prev);
    TimeTicks wake_at = TimeTicks::Max();
    if (m != nullptr) {
      if (now < m->when_) {
        wake_at = m->when_;
      } else {
        (prev ? prev->next_ : head_) = m->next_;
        m->next_ = nullptr;
        --count_;
        return {NextResult::kMessage, m, now};
      }
    }
    if (quitting_) return {NextResult::kQuit, nullptr, now};

    // Idle handlers run once per call, when nothing at the head is due.
    if (!idle_handlers_done && !idle_handlers_.empty() &&
        (head_ == nullptr || now < head_->when_)) {
      return {NextResult::kIdle, nullptr, now};
    }
    if (now >= wait_deadline) return {NextResult::kTimeout, nullptr, now};

    const TimeTicks until = std::min(wake_at, wait_deadline);
    blocked_ = true;
    cv_.WaitWithTimeout(&mu_, until - now);
    blocked_ = false;
  }
}

}  // namespace matrix
