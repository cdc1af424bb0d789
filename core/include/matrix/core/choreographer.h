// File: matrix/core/choreographer.h
//
// Choreographer schedules frame work on its looper's thread, as Android's
// Choreographer does. Each frame, started by a vsync, runs five callback
// queues in order: INPUT, ANIMATION, INSETS_ANIMATION, TRAVERSAL, COMMIT.
//
//   matrix::Choreographer* choreographer = matrix::Choreographer::GetInstance();
//   choreographer->PostFrameCallback([](matrix::TimeTicks frame_time) {
//     Animate(frame_time);
//   });
//   choreographer->PostCallback(matrix::Choreographer::kTraversal, [] { Draw(); });
//
// Semantics kept from Android:
//   - A vsync is requested only while callbacks are pending (one per frame).
//   - Vsync messages are asynchronous, so they pass sync barriers.
//   - The frame time is the vsync timestamp. A frame that starts one or more
//     intervals late skips to the latest vsync (frame time = that vsync) and,
//     past a limit (30 frames), logs "Skipped N frames!".
//   - Each queue takes the callbacks due when it starts, so INPUT work can
//     post TRAVERSAL work for the same frame.
//   - PostFrameCallback() callbacks run in the ANIMATION queue.
//
// InsertCallbackAtHead() adds a callback at the head of a queue without
// requesting a frame (Matrix's `addCallbackLocked(-1, ...)`): it runs first in
// the next frame somebody else requests. UIThreadMonitor uses it to time each
// queue of each frame.
//
// Thread safety: looper-thread only, except refresh_rate(). Posting from
// other threads goes through a Handler on the looper.

#ifndef MATRIX_CORE_CHOREOGRAPHER_H_
#define MATRIX_CORE_CHOREOGRAPHER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "matrix/core/check.h"
#include "matrix/core/handler.h"
#include "matrix/core/message.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/core/time_ticks.h"
#include "matrix/core/vsync_source.h"

namespace matrix {

class Looper;

class Choreographer : private VsyncSource::Receiver {
 public:
  enum CallbackType : int {
    kInput = 0,
    kAnimation = 1,
    kInsetsAnimation = 2,
    kTraversal = 3,
    kCommit = 4,
  };
  static constexpr int kCallbackTypeCount = 5;
  static const char* CallbackTypeName(CallbackType type);

  using FrameCallback = absl::AnyInvocable<void(TimeTicks frame_time)>;

  // What the current (or last) frame is.
  struct FrameInfo {
    int64_t frame_number = 0;
    TimeTicks intended_vsync;  // The vsync that started this frame.
    TimeTicks frame_time;      // The vsync it was adjusted to (if late).
    TimeTicks start;           // When the frame began running.
    RefreshRate refresh_rate;
    int64_t skipped_frames = 0;
  };

  // GetInstance()
  //
  // The calling thread's Choreographer, created on first use with a
  // SoftwareVsyncSource at 60 Hz. The thread must have a Looper.
  static Choreographer* GetInstance();
  // Install()
  //
  // Creates the calling thread's Choreographer on `source`. Fatal if one
  // exists already.
  static Choreographer* Install(std::unique_ptr<VsyncSource> source);
  // The calling thread's Choreographer or null, without creating one.
  static Choreographer* Peek();
  // Destroys the calling thread's Choreographer.
  static void ReleaseForTesting();

  ~Choreographer() override;

  // Posting and removal. Posting a due callback requests a frame.
  void PostCallback(CallbackType type, Task action, const void* token = nullptr);
  void PostCallbackDelayed(CallbackType type, Task action, const void* token,
                           absl::Duration delay);
  void PostFrameCallback(FrameCallback callback, const void* token = nullptr);
  void PostFrameCallbackDelayed(FrameCallback callback, absl::Duration delay,
                                const void* token = nullptr);
  // Removes pending callbacks of `type` posted with `token` (null: all of `type`).
  void RemoveCallbacks(CallbackType type, const void* token);
  void RemoveFrameCallback(const void* token);

  // InsertCallbackAtHead()
  //
  // Puts `action` ahead of every pending callback of `type`, without
  // requesting a frame. Does not allocate once the queue has had this many
  // callbacks before.
  void InsertCallbackAtHead(CallbackType type, Task action, const void* token = nullptr);

  bool HasPendingCallbacks(CallbackType type) const;

  // Told when a frame starts running its queues (before the INPUT queue's
  // callbacks), with the time current_queue_start() then gives them. With
  // queue_start() it lets a monitor time every phase of a frame without a
  // marker callback or a call per queue. Looper thread.
  class FrameStartListener {
   public:
    virtual void OnFrameStart(TimeTicks input_start) = 0;

   protected:
    ~FrameStartListener() = default;
  };
  // SetFrameStartListener()
  //
  // Installs `listener` (not owned; null removes it). There is one slot:
  // returns false, changing nothing, when another listener holds it.
  // Looper thread.
  bool SetFrameStartListener(FrameStartListener* listener);
  // queue_start()
  //
  // When queue `type` started in the frame running now, or in the last one
  // (null while it has not started in that frame). The Choreographer writes
  // it as each queue starts: one relaxed store, for any thread to read (a
  // reader elsewhere may see the frame before for a moment).
  TimeTicks queue_start(CallbackType type) const {
    return TimeTicks::FromNanoseconds(queue_start_ns_[type].load(std::memory_order_relaxed));
  }
  // True between the start and end of a frame.
  bool is_in_frame() const { return in_frame_; }
  // The queue being run, when is_in_frame().
  CallbackType current_callback_type() const { return current_type_; }
  // When the queue being run started (the clock reading the Choreographer
  // took to pick its due callbacks). Lets a callback at the head of a queue
  // time the queue without reading the clock again.
  TimeTicks current_queue_start() const { return current_queue_start_; }
  const FrameInfo& frame_info() const { return frame_info_; }
  // The frame time of the current or last frame.
  TimeTicks GetFrameTime() const { return frame_info_.frame_time; }
  // The source's current refresh rate. Any thread.
  RefreshRate refresh_rate() const { return source_->refresh_rate(); }
  bool is_frame_scheduled() const { return frame_scheduled_; }

  Looper* looper() const { return looper_; }
  VsyncSource* vsync_source() const { return source_.get(); }
  void SetSkippedFrameWarningLimit(int64_t frames) { skipped_frame_warning_limit_ = frames; }

 private:
  struct CallbackRecord {
    TimeTicks due;
    Task action;
    FrameCallback frame_callback;
    const void* token = nullptr;
  };
  struct CallbackQueue {
    std::vector<CallbackRecord> pending;  // Sorted by due, FIFO among equals.
    std::vector<CallbackRecord> running;  // Reused storage for one queue run.
  };
  class FrameHandler;

  Choreographer(Looper* looper, std::unique_ptr<VsyncSource> source);

  void OnVsync(TimeTicks timestamp, RefreshRate rate, int64_t frame_number) override;
  void AddCallback(CallbackType type, CallbackRecord record, absl::Duration delay);
  void ScheduleFrame();
  void DoScheduleCallback(CallbackType type);
  void DoFrame(TimeTicks intended_vsync, RefreshRate rate, int64_t frame_number);
  void DoCallbacks(CallbackType type, TimeTicks frame_time);

  Looper* const looper_;
  std::unique_ptr<VsyncSource> source_;
  std::unique_ptr<FrameHandler> handler_;
  std::array<CallbackQueue, kCallbackTypeCount> queues_;
  bool frame_scheduled_ = false;
  bool in_frame_ = false;
  CallbackType current_type_ = kInput;
  TimeTicks current_queue_start_;
  FrameStartListener* frame_start_listener_ = nullptr;
  std::array<std::atomic<int64_t>, kCallbackTypeCount> queue_start_ns_{};
  TimeTicks last_frame_time_;
  FrameInfo frame_info_;
  int64_t skipped_frame_warning_limit_ = 30;
  // The latest vsync, handed from the source's thread to the frame message.
  std::atomic<int64_t> pending_vsync_ns_{0};
  std::atomic<int64_t> pending_vsync_mhz_{0};
  std::atomic<int64_t> pending_frame_number_{0};
  std::atomic<bool> have_pending_vsync_{false};
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace matrix

#endif  // MATRIX_CORE_CHOREOGRAPHER_H_
