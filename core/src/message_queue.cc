#include "matrix/core/message_queue.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <typeinfo>
#include <utility>

#include "matrix/core/check.h"
#include "matrix/core/interned_string.h"

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
    : clock_(clock), quit_allowed_(quit_allowed) {
  absl::MutexLock lock(&mu_);
  dispatching_.reserve(8);  // Nesting deeper than this allocates.
}

MessageQueue::~MessageQueue() {
  Message* pending;
  Message* pool;
  {
    absl::MutexLock lock(&mu_);
    pending = std::exchange(head_, nullptr);
    pool = std::exchange(pool_, nullptr);
    count_ = 0;
    pool_size_ = 0;
  }
  // Outside the lock: a pending task's captures may touch this queue (a
  // Handler they own removes its messages when destroyed).
  for (Message* chain : {pending, pool}) {
    while (chain != nullptr) {
      Message* next = chain->next_;
      delete chain;
      chain = next;
    }
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
  const Handler* target = msg->target_;
  {
    // Destroy the payload outside the lock: it may run arbitrary destructors.
    Message released = std::move(*msg);
    (void)released;
  }
  absl::MutexLock lock(&mu_);
  RecycleLocked(msg);
  // The innermost dispatch of `target` is over.
  auto it = std::find(dispatching_.rbegin(), dispatching_.rend(), target);
  if (it != dispatching_.rend()) dispatching_.erase(std::next(it).base());
  if (dispatch_waiters_ > 0) dispatch_done_.SignalAll();
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
  // Ordinary messages have barrier token 0: match barriers only, so that an
  // unknown token (0 included) is fatal instead of removing some message.
  while (*link != nullptr &&
         !((*link)->is_sync_barrier() && (*link)->barrier_token_ == token)) {
    link = &(*link)->next_;
  }
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

const std::string& IdleHandler::registered_name() const {
  const std::string* name = registered_name_.load(std::memory_order_acquire);
  return name != nullptr ? *name : InternString("");
}

void MessageQueue::AddIdleHandler(IdleHandler* handler) {
  MATRIX_CHECK(handler != nullptr, "null idle handler");
  // Off the hot path: name it once, here, for the reports of every run.
  handler->registered_name_.store(&InternString(handler->Name()), std::memory_order_release);
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
Message* MessageQueue::UnlinkIfLocked(Pred pred) {
  Message* removed = nullptr;
  Message** tail = &removed;
  Message** link = &head_;
  while (*link != nullptr) {
    Message* m = *link;
    if (pred(*m)) {
      *link = m->next_;
      --count_;
      m->next_ = nullptr;
      *tail = m;
      tail = &m->next_;
    } else {
      link = &m->next_;
    }
  }
  return removed;
}

void MessageQueue::DisposeRemoved(Message* chain) {
  if (chain == nullptr) return;
  for (Message* m = chain; m != nullptr; m = m->next_) {
    m->callback = nullptr;
    m->obj.reset();
  }
  absl::MutexLock lock(&mu_);
  while (chain != nullptr) {
    Message* next = chain->next_;
    RecycleLocked(chain);
    chain = next;
  }
}

void MessageQueue::RemoveMessages(const Handler* h, int what, const void* token) {
  Message* removed;
  {
    absl::MutexLock lock(&mu_);
    removed = UnlinkIfLocked([&](const Message& m) {
      return !m.is_sync_barrier() && m.target_ == h && !m.callback && m.what == what &&
             TokenMatches(token, m.token);
    });
  }
  DisposeRemoved(removed);
}

void MessageQueue::RemoveCallbacks(const Handler* h, const void* token) {
  MATRIX_CHECK(token != nullptr, "RemoveCallbacks needs the token the task was posted with");
  Message* removed;
  {
    absl::MutexLock lock(&mu_);
    removed = UnlinkIfLocked([&](const Message& m) {
      return !m.is_sync_barrier() && m.target_ == h && m.callback && m.token == token;
    });
  }
  DisposeRemoved(removed);
}

void MessageQueue::RemoveCallbacksAndMessages(const Handler* h, const void* token) {
  Message* removed;
  {
    absl::MutexLock lock(&mu_);
    removed = UnlinkIfLocked([&](const Message& m) {
      return !m.is_sync_barrier() && (h == nullptr || m.target_ == h) &&
             TokenMatches(token, m.token);
    });
  }
  DisposeRemoved(removed);
}

void MessageQueue::RemoveAllAndWaitForDispatch(const Handler* h) {
  Message* removed = nullptr;
  Message** tail = &removed;
  {
    absl::MutexLock lock(&mu_);
    ++dispatch_waiters_;
    for (;;) {
      // Again after each wait: the running message may have posted more.
      *tail = UnlinkIfLocked(
          [&](const Message& m) { return !m.is_sync_barrier() && m.target_ == h; });
      while (*tail != nullptr) tail = &(*tail)->next_;
      if (std::find(dispatching_.begin(), dispatching_.end(), h) == dispatching_.end()) break;
      dispatch_done_.Wait(&mu_);
    }
    --dispatch_waiters_;
  }
  DisposeRemoved(removed);
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
  Message* removed;
  {
    absl::MutexLock lock(&mu_);
    if (quitting_) return;
    quitting_ = true;
    // As Android's removeAllMessagesLocked()/removeAllFutureMessagesLocked():
    // sync barriers go too, so that nothing is left pending.
    if (safe) {
      removed = UnlinkIfLocked([&](const Message& m) { return m.when_ > now; });
    } else {
      removed = UnlinkIfLocked([](const Message&) { return true; });
    }
    cv_.SignalAll();
  }
  DisposeRemoved(removed);
}

bool MessageQueue::IsQuitting() const {
  absl::MutexLock lock(&mu_);
  return quitting_;
}

void MessageQueue::Shutdown() {
  Message* removed;
  {
    absl::MutexLock lock(&mu_);
    quitting_ = true;
    shut_down_ = true;
    removed = UnlinkIfLocked([](const Message&) { return true; });
    cv_.SignalAll();
  }
  DisposeRemoved(removed);
}

bool MessageQueue::IsShutDown() const {
  absl::MutexLock lock(&mu_);
  return shut_down_;
}

MessageQueue::NextResult MessageQueue::Next(absl::Duration max_wait, bool idle_handlers_done,
                                            std::optional<TimeTicks> now_hint) {
  absl::MutexLock lock(&mu_);
  TimeTicks wait_deadline;  // On the queue's clock; set when first needed.
  bool first_pass = true;
  for (;;) {
    const TimeTicks now = (first_pass && now_hint) ? *now_hint : clock_->NowTicks();
    const bool set_deadline = first_pass;
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
        dispatching_.push_back(m->target_);  // Until Recycle().
        return {NextResult::kMessage, m, now};
      }
    }
    if (quitting_) return {NextResult::kQuit, nullptr, now};

    // Idle handlers run once per call, when nothing at the head is due.
    if (!idle_handlers_done && !idle_handlers_.empty() &&
        (head_ == nullptr || now < head_->when_)) {
      return {NextResult::kIdle, nullptr, now};
    }
    // Only a call that has to wait pays for the deadline arithmetic.
    if (set_deadline) wait_deadline = now + max_wait;
    if (now >= wait_deadline) return {NextResult::kTimeout, nullptr, now};

    const TimeTicks until = std::min(wake_at, wait_deadline);
    blocked_ = true;
    cv_.WaitWithTimeout(&mu_, until - now);
    blocked_ = false;
  }
}

}  // namespace matrix
