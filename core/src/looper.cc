#include "matrix/core/looper.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "matrix/core/handler.h"

namespace matrix {
namespace {

thread_local std::unique_ptr<Looper> tls_looper;
std::atomic<Looper*> g_main_looper{nullptr};

}  // namespace

Looper::Looper(const TickClock* clock, bool quit_allowed)
    : clock_(clock),
      queue_(std::make_shared<MessageQueue>(clock, quit_allowed)),
      thread_(ThreadHandle::Current()) {}

Looper::~Looper() {
  // Handlers may outlive this looper (its thread exited): they share the
  // queue, which from now on refuses their messages.
  queue_->Shutdown();
  Looper* self = this;
  g_main_looper.compare_exchange_strong(self, nullptr);
}

Looper* Looper::Prepare(const TickClock* clock) {
  MATRIX_CHECK(tls_looper == nullptr, "Only one Looper may be created per thread");
  tls_looper.reset(new Looper(clock, /*quit_allowed=*/true));
  return tls_looper.get();
}

Looper* Looper::PrepareMainLooper(const TickClock* clock) {
  MATRIX_CHECK(tls_looper == nullptr, "Only one Looper may be created per thread");
  MATRIX_CHECK(g_main_looper.load() == nullptr, "The main Looper has already been prepared.");
  tls_looper.reset(new Looper(clock, /*quit_allowed=*/false));
  g_main_looper.store(tls_looper.get());
  return tls_looper.get();
}

Looper* Looper::MyLooper() { return tls_looper.get(); }

Looper* Looper::MainLooper() { return g_main_looper.load(); }

bool Looper::is_main() const { return g_main_looper.load() == this; }

std::unique_ptr<Looper> Looper::Create(const TickClock* clock, bool quit_allowed) {
  return std::unique_ptr<Looper>(new Looper(clock, quit_allowed));
}

void Looper::ReleaseForTesting() { tls_looper.reset(); }

std::unique_ptr<Looper> Looper::ReleaseCurrent() { return std::move(tls_looper); }

void Looper::Loop() {
  Looper* me = MyLooper();
  MATRIX_CHECK(me != nullptr, "No Looper; Looper::Prepare() wasn't called on this thread.");
  me->RunLoop();
}

void Looper::RunLoop() {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  struct Looping {
    std::atomic<bool>* flag;
    ~Looping() { flag->store(false, std::memory_order_release); }
  } looping{&looping_};
  looping_.store(true, std::memory_order_release);
  while (Poll(absl::InfiniteDuration()) != PollResult::kQuit) {
  }
}

Looper::PollResult Looper::PollOnce(absl::Duration timeout) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  // The end-of-dispatch reading is "now" only when the next poll follows at
  // once, as in RunLoop(). An owner driving PollOnce() (a foreign loop) does
  // its own work in between: a stale reading would hide newly due messages
  // and backdate the next dispatch's begin time.
  now_hint_ = TimeTicks();
  return Poll(timeout);
}

Looper::PollResult Looper::Poll(absl::Duration timeout) {
  for (;;) {
    const TimeTicks hint = std::exchange(now_hint_, TimeTicks());
    MessageQueue::NextResult next = queue_->Next(
        timeout, idle_handlers_ran_,
        hint.is_null() ? std::nullopt : std::optional<TimeTicks>(hint));
    switch (next.kind) {
      case MessageQueue::NextResult::kMessage:
        Dispatch(next.message, next.now);
        return PollResult::kDispatched;
      case MessageQueue::NextResult::kIdle:
        // Once per idle period: not again until a message is dispatched
        // (Android runs them once per MessageQueue.next() call, and next()
        // returns only with a message). Set first, so that a throwing
        // handler does not make the others run again on the next poll.
        idle_handlers_ran_ = true;
        RunIdleHandlers();
        continue;
      case MessageQueue::NextResult::kTimeout:
        return PollResult::kIdle;
      case MessageQueue::NextResult::kQuit:
        return PollResult::kQuit;
    }
  }
}

namespace {

std::string BeginLine(const Message& msg) {
  return absl::StrCat(">>>>> Dispatching to ", msg.target()->ToString(), " ",
                      msg.CallbackString(), ": ", msg.what);
}

std::string EndLine(const Message& msg) {
  return absl::StrCat("<<<<< Finished to ", msg.target()->ToString(), " ",
                      msg.CallbackString());
}

}  // namespace

void Looper::Dispatch(Message* msg, TimeTicks begin) {
  // Ends the dispatch on every path, including an exception from the handler:
  // the "Finished" line, the observers' end, and the message's recycling.
  struct Finisher {
    Looper* looper;
    Message* msg;
    Printer* printer;
    TimeTicks begin;
    // The observers that heard the begin: the first one (if still registered
    // at the end) and the list's scope.
    DispatchObserver* first;
    uint32_t first_generation;
    std::optional<ObserverList<DispatchObserver>::Scope>* scope;
    void NotifyListed(TimeTicks end) {
      (*scope)->Notify([&](DispatchObserver* o) { o->OnDispatchEnd(*msg, begin, end); });
      scope->reset();
    }
    ~Finisher() {
      if (first != nullptr) {
        const TimeTicks end = looper->clock_->NowTicks();
        if (first_generation == looper->first_observer_generation_) {
          first->OnDispatchEnd(*msg, begin, end);
        }
        if (scope->has_value()) NotifyListed(end);
        looper->now_hint_ = end;
      } else if (scope->has_value()) {
        const TimeTicks end = looper->clock_->NowTicks();
        NotifyListed(end);
        looper->now_hint_ = end;
      } else {
        looper->now_hint_ = TimeTicks();
      }
      if (printer != nullptr) printer->Println(EndLine(*msg));
      --looper->dispatch_depth_;
      looper->queue_->Recycle(msg);
    }
  };

  idle_handlers_ran_ = false;  // The queue will be idle anew after this.
  Printer* printer = printer_.load(std::memory_order_acquire);
  if (printer != nullptr) printer->Println(BeginLine(*msg));
  std::optional<ObserverList<DispatchObserver>::Scope> scope;
  ++dispatch_depth_;
  // The observers present now hear this dispatch (fixed before any runs).
  Finisher finisher{this, msg, printer, begin, first_observer_, first_observer_generation_, &scope};
  if (!observers_.empty()) scope.emplace(observers_);
  if (finisher.first != nullptr) finisher.first->OnDispatchBegin(*msg, begin);
  if (scope.has_value()) {
    scope->Notify([&](DispatchObserver* o) { o->OnDispatchBegin(*msg, begin); });
  }
  msg->target()->DispatchMessage(*msg);
}

void Looper::RunIdleHandlers() {
  for (IdleHandler* handler : queue_->IdleHandlersSnapshot()) {
    struct Finisher {
      Looper* looper;
      IdleHandler* handler;
      TimeTicks begin;
      std::optional<ObserverList<DispatchObserver>::Scope> scope;
      ~Finisher() {
        if (scope.has_value()) {
          const TimeTicks end = looper->clock_->NowTicks();
          scope->Notify([&](DispatchObserver* o) { o->OnIdleHandlerEnd(*handler, begin, end); });
        }
        --looper->dispatch_depth_;
      }
    };
    ++dispatch_depth_;
    Finisher finisher{this, handler, TimeTicks(), std::nullopt};
    if (!idle_observers_.empty()) {
      finisher.begin = clock_->NowTicks();
      finisher.scope.emplace(idle_observers_);
      finisher.scope->Notify(
          [&](DispatchObserver* o) { o->OnIdleHandlerBegin(*handler, finisher.begin); });
    }
    if (!handler->QueueIdle()) queue_->RemoveIdleHandler(handler);
  }
}

void Looper::Flush() { FlushFor(absl::InfiniteDuration()); }

bool Looper::FlushFor(absl::Duration timeout) {
  if (IsCurrentThread() || !is_looping()) return true;
  auto done = std::make_shared<absl::Notification>();
  Handler handler(this, "matrix::Looper$Flush");
  if (!handler.Post([done] { done->Notify(); })) return true;  // Quitting.
  const absl::Time deadline = absl::Now() + timeout;
  while (!done->WaitForNotificationWithDeadline(
      std::min(deadline, absl::Now() + absl::Milliseconds(100)))) {
    if (queue_->IsQuitting() || !is_looping()) return true;
    if (absl::Now() >= deadline) return false;
  }
  return true;
}

void Looper::Quit() { queue_->Quit(/*safe=*/false); }

void Looper::QuitSafely() { queue_->Quit(/*safe=*/true); }

ObserverRegistration Looper::AddDispatchObserver(DispatchObserver* observer) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(observer != nullptr, "null DispatchObserver");
  const uint8_t events = observer->events();
  MATRIX_CHECK(events == DispatchObserver::kDispatches ||
                   events == DispatchObserver::kIdleHandlers ||
                   events == DispatchObserver::kAllEvents,
               "DispatchObserver wants no events");
  ObserverRegistration dispatches;
  if (events & DispatchObserver::kDispatches) {
    MATRIX_CHECK(observer != first_observer_ && !observers_.Contains(observer),
                 "DispatchObserver added twice");
    // The first slot is free only while no other observer is listed, so
    // observers still hear dispatches in the order they were added.
    if (first_observer_ == nullptr && observers_.empty()) {
      first_observer_ = observer;
      ++first_observer_generation_;
      dispatches = ObserverRegistration(
          [weak = std::weak_ptr<const int>(alive_), this, observer] {
            if (weak.expired() || first_observer_ != observer) return;
            first_observer_ = nullptr;
            ++first_observer_generation_;
          },
          std::weak_ptr<const void>(alive_));
    } else {
      dispatches = observers_.Add(observer);
    }
  }
  if (events == DispatchObserver::kDispatches) return dispatches;
  if (events == DispatchObserver::kIdleHandlers) return idle_observers_.Add(observer);
  return ObserverRegistration(
      [dispatches = std::move(dispatches), idle = idle_observers_.Add(observer)]() mutable {
        dispatches.Reset();
        idle.Reset();
      },
      std::weak_ptr<const void>(alive_));
}

}  // namespace matrix
