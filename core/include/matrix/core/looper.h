// File: matrix/core/looper.h
//
// Looper runs a thread's message loop, as android.os.Looper does: it takes
// each due message from its MessageQueue and dispatches it to the message's
// Handler, and runs IdleHandlers when nothing is due.
//
// Two ways to watch dispatches:
//   - a Printer (SetMessageLogging) receives Android's exact text lines
//     ">>>>> Dispatching to <target> <callback>: <what>" before and
//     "<<<<< Finished to <target> <callback>" after each dispatch. This is
//     what BlockCanary and Matrix hook; it builds two strings per message.
//   - DispatchObservers receive begin/end with the message and timestamps,
//     without building any string. Any number may be registered.
//
//   matrix::Looper::PrepareMainLooper();
//   matrix::Handler handler(matrix::Looper::MyLooper());
//   handler.Post([] { std::puts("hello"); });
//   handler.PostDelayed([] { matrix::Looper::MyLooper()->Quit(); }, absl::Seconds(1));
//   matrix::Looper::Loop();
//
// Thread safety: a Looper belongs to the thread that prepared it. Quit(),
// QuitSafely(), SetMessageLogging() and queue() may be used from any thread;
// everything else on the looper thread only.

#ifndef MATRIX_CORE_LOOPER_H_
#define MATRIX_CORE_LOOPER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "matrix/core/check.h"
#include "matrix/core/message.h"
#include "matrix/core/message_queue.h"
#include "matrix/core/observer_list.h"
#include "matrix/core/thread_handle.h"
#include "matrix/core/tick_clock.h"

namespace matrix {

// Receives the Looper's message log lines (android.util.Printer).
class Printer {
 public:
  virtual ~Printer() = default;
  // Called on the looper thread, twice per dispatched message.
  virtual void Println(std::string_view line) = 0;
};

// Observes every dispatch of one Looper without string building.
//
// Implementations must be extremely fast: they run on the looper thread for
// every message. Every OnDispatchBegin is followed by exactly one
// OnDispatchEnd for the same message, also when the handler throws, unless the
// observer is removed in between. An observer added during a dispatch first
// hears of the next one. Timestamps come from the looper's clock; `begin` is
// the reading that found the message due, `end` is taken once after dispatch
// and shared by every observer.
//
// An observer says at construction which events it wants (dispatches, idle
// handler runs, or both); the Looper calls it for those only, so an observer
// of idle handlers costs nothing per message.
class DispatchObserver {
 public:
  enum Events : uint8_t {
    kDispatches = 1,
    kIdleHandlers = 2,
    kAllEvents = kDispatches | kIdleHandlers,
  };
  explicit DispatchObserver(uint8_t events = kAllEvents) : events_(events) {}
  virtual ~DispatchObserver() = default;
  virtual void OnDispatchBegin(const Message& msg, TimeTicks begin) = 0;
  virtual void OnDispatchEnd(const Message& msg, TimeTicks begin, TimeTicks end) = 0;
  // Around each IdleHandler run (same guarantees as dispatches).
  virtual void OnIdleHandlerBegin(const IdleHandler& /*handler*/, TimeTicks /*begin*/) {}
  virtual void OnIdleHandlerEnd(const IdleHandler& /*handler*/, TimeTicks /*begin*/,
                                TimeTicks /*end*/) {}

  uint8_t events() const { return events_; }

 private:
  const uint8_t events_;
};

class Looper {
 public:
  ~Looper();
  Looper(const Looper&) = delete;
  Looper& operator=(const Looper&) = delete;

  // Prepare()
  //
  // Creates the calling thread's looper. Preparing a thread twice is a fatal
  // error. Returns the new looper, which is destroyed when the thread exits:
  // Handlers that outlive it then refuse to post (they return false).
  static Looper* Prepare(const TickClock* clock = TickClock::Default());
  // As Prepare(), and makes it the process's main looper. Only one thread may
  // be the main thread; its looper cannot quit.
  static Looper* PrepareMainLooper(const TickClock* clock = TickClock::Default());
  // The calling thread's looper, or null.
  static Looper* MyLooper();
  // The main looper, or null. Can be called from any thread.
  static Looper* MainLooper();
  // Runs the calling thread's loop until Quit(). Fatal if not prepared.
  // Exceptions thrown by handlers propagate out of Loop().
  static void Loop();

  // Create()
  //
  // A looper owned by the caller and not bound to the thread's slot, run with
  // PollOnce() by its owner (the test environment, foreign loop bridges).
  static std::unique_ptr<Looper> Create(const TickClock* clock, bool quit_allowed = true);

  // ReleaseForTesting()
  //
  // Destroys the calling thread's looper (clearing the main looper if it was
  // it), so a test can prepare a fresh one.
  static void ReleaseForTesting();
  // Unbinds the calling thread's looper and hands it to the caller, who
  // keeps it alive for Handlers that still point at it (HandlerThread).
  static std::unique_ptr<Looper> ReleaseCurrent();

  enum class PollResult { kDispatched, kIdle, kQuit };
  // PollOnce()
  //
  // Dispatches at most one message, waiting up to `timeout` for one to become
  // due; runs idle handlers before waiting if none ran since the last
  // dispatch (once per idle period, as in Android). Looper thread only.
  PollResult PollOnce(absl::Duration timeout);

  // Quit() drops pending messages; QuitSafely() first runs those already due.
  // Loop() then returns. Any thread.
  void Quit();
  void QuitSafely();

  // Flush()
  //
  // Blocks until every message posted before the call has run, including one
  // running right now. Returns at once when called on the looper's own thread
  // or when the looper is not looping (nothing can be running then), and
  // gives up if the looper quits meanwhile. Any thread.
  void Flush();
  // As Flush(), but waits at most `timeout` (real time): false when the
  // messages posted before the call have not all run by then.
  bool FlushFor(absl::Duration timeout);

  // SetMessageLogging()
  //
  // Installs `printer` (not owned; null removes it). The previous printer is
  // replaced, as in Android. Can be called from any thread; takes effect from
  // the next dispatch.
  void SetMessageLogging(Printer* printer) { printer_.store(printer, std::memory_order_release); }
  Printer* GetMessageLogging() const { return printer_.load(std::memory_order_acquire); }

  // AddDispatchObserver()
  //
  // Registers `observer` (not owned) for the events it wants (see
  // DispatchObserver::events()) until the returned handle is destroyed.
  // Observers hear each dispatch in the order they were added. The first
  // dispatch observer (in practice the LooperMonitor) is called directly,
  // without a list walk: the cheapest path per message. Looper thread only.
  [[nodiscard]] ObserverRegistration AddDispatchObserver(DispatchObserver* observer);

  MessageQueue* queue() { return queue_.get(); }
  const TickClock* clock() const { return clock_; }
  const ThreadHandle& thread() const { return thread_; }
  bool IsCurrentThread() const { return thread_.IsCurrent(); }
  bool is_main() const;
  // True while Loop() runs this looper. Any thread.
  bool is_looping() const { return looping_.load(std::memory_order_acquire); }
  // True while a message or idle handler is being dispatched (looper thread).
  bool is_dispatching() const { return dispatch_depth_ > 0; }

 private:
  Looper(const TickClock* clock, bool quit_allowed);

  void RunLoop();
  // PollOnce() without discarding now_hint_ (for RunLoop()).
  PollResult Poll(absl::Duration timeout);
  void Dispatch(Message* msg, TimeTicks begin);
  void RunIdleHandlers();

  friend class Handler;  // Shares queue_.

  const TickClock* const clock_;
  // Shared with every Handler of this looper, so that a Handler that outlives
  // the looper (its thread exited) still has a queue, which refuses posts.
  const std::shared_ptr<MessageQueue> queue_;
  ThreadHandle thread_;
  std::atomic<Printer*> printer_{nullptr};
  // The first dispatch observer, outside the list (see AddDispatchObserver()).
  // Its generation changes whenever the slot changes, so that an observer
  // removed during a dispatch (even if added again) hears no end of it.
  DispatchObserver* first_observer_ = nullptr;
  uint32_t first_observer_generation_ = 0;
  ObserverList<DispatchObserver> observers_;       // Want kDispatches.
  ObserverList<DispatchObserver> idle_observers_;  // Want kIdleHandlers.
  // Keeps a two-list registration's active() honest once the looper is gone.
  std::shared_ptr<const int> alive_ = std::make_shared<const int>(0);
  int dispatch_depth_ = 0;
  std::atomic<bool> looping_{false};
  // True once the idle handlers ran and no message was dispatched since.
  bool idle_handlers_ran_ = false;
  // A clock reading taken right after the last dispatch, reused by the next
  // MessageQueue::Next() so that observed dispatches cost no extra clock read.
  // Only RunLoop() uses it: an owner calling PollOnce() may let time pass
  // between calls. Null when there is none (a plain store per dispatch).
  TimeTicks now_hint_;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_CORE_LOOPER_H_
