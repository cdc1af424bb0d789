// File: matrix/core/observer_list.h
//
// ObserverList holds non-owned observers and notifies them in the order they
// were added. It survives observers being added or removed while a
// notification is in progress, including an observer removing itself:
//
//   - an observer removed during a notification is not called afterwards;
//   - an observer added during a notification is not called by the
//     notifications already in progress (the "existing only" policy), so a
//     begin/end pair never reaches an observer that missed the begin.
//
// Registration returns an ObserverRegistration, an RAII handle: destroying it
// removes the observer. It stays safe if the list is destroyed first.
//
//   class Source {
//    public:
//     [[nodiscard]] matrix::ObserverRegistration AddObserver(Observer* o) {
//       return observers_.Add(o);
//     }
//     void Fire() { observers_.Notify([](Observer* o) { o->OnFire(); }); }
//    private:
//     matrix::ObserverList<Observer> observers_;
//   };
//
// For a begin/end pair, hold a Scope across both notifications: observers
// added after the scope opened are skipped by both.
//
//   matrix::ObserverList<Observer>::Scope scope(observers_);
//   scope.Notify([](Observer* o) { o->Begin(); });
//   ...
//   scope.Notify([](Observer* o) { o->End(); });
//
// Thread safety: not thread-safe. A list and its registrations are used on one
// thread (debug builds check this). Notification never allocates.

#ifndef MATRIX_CORE_OBSERVER_LIST_H_
#define MATRIX_CORE_OBSERVER_LIST_H_

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "matrix/core/check.h"

namespace matrix {

namespace internal {

// Untyped storage shared between an ObserverList and its registrations.
class ObserverListCore {
 public:
  void Add(void* observer);
  void Remove(void* observer);
  bool Contains(const void* observer) const;
  size_t size() const { return live_; }  // Live observers.

  // Iteration bookkeeping. Entries are nulled on removal while iterating and
  // compacted once the outermost iteration ends.
  size_t BeginIteration() {
    ++iteration_depth_;
    return entries_.size();
  }
  void EndIteration() {
    if (--iteration_depth_ == 0 && needs_compaction_) Compact();
  }
  size_t capacity_for_index() const { return entries_.size(); }
  void* at(size_t i) const { return entries_[i]; }

 private:
  void Compact();

  std::vector<void*> entries_;
  size_t live_ = 0;
  int iteration_depth_ = 0;
  bool needs_compaction_ = false;
  MATRIX_THREAD_CHECKER(thread_checker_);
};

}  // namespace internal

// An RAII handle for one registration. Movable, not copyable. Destroying it
// (or calling Reset()) unregisters the observer. For an ObserverList this must
// happen on the list's thread; thread-safe registries say so themselves.
class [[nodiscard]] ObserverRegistration {
 public:
  ObserverRegistration() = default;
  // `unregister` runs once, on Reset() or destruction. With an `owner`, the
  // registration is inactive once the owner is gone.
  explicit ObserverRegistration(absl::AnyInvocable<void()> unregister,
                                std::weak_ptr<const void> owner = {})
      : unregister_(std::move(unregister)),
        owner_(std::move(owner)),
        has_owner_(!owner_.expired()) {}
  ObserverRegistration(ObserverRegistration&& other) noexcept { *this = std::move(other); }
  ObserverRegistration& operator=(ObserverRegistration&& other) noexcept {
    if (this != &other) {
      Reset();
      unregister_ = std::exchange(other.unregister_, nullptr);
      owner_ = std::move(other.owner_);
      has_owner_ = std::exchange(other.has_owner_, false);
    }
    return *this;
  }
  ObserverRegistration(const ObserverRegistration&) = delete;
  ObserverRegistration& operator=(const ObserverRegistration&) = delete;
  ~ObserverRegistration() { Reset(); }

  // Unregisters now. Idempotent.
  void Reset() {
    if (unregister_) std::exchange(unregister_, nullptr)();
  }
  bool active() const {
    return static_cast<bool>(unregister_) && !(has_owner_ && owner_.expired());
  }

 private:
  absl::AnyInvocable<void()> unregister_;
  std::weak_ptr<const void> owner_;
  bool has_owner_ = false;
};

template <typename ObserverType>
class ObserverList {
 public:
  ObserverList() : core_(std::make_shared<internal::ObserverListCore>()) {}
  ObserverList(const ObserverList&) = delete;
  ObserverList& operator=(const ObserverList&) = delete;

  // Add()
  //
  // Adds `observer` (not owned; must outlive the registration) and returns the
  // handle that removes it. Adding the same observer twice is an error.
  ObserverRegistration Add(ObserverType* observer) {
    core_->Add(observer);
    return ObserverRegistration(
        [weak = std::weak_ptr<internal::ObserverListCore>(core_), observer] {
          if (auto core = weak.lock()) core->Remove(observer);
        },
        std::weak_ptr<const void>(core_));
  }

  // AddUnmanaged() / Remove()
  //
  // For owners that manage removal themselves (e.g. Android-style APIs).
  void AddUnmanaged(ObserverType* observer) { core_->Add(observer); }
  void Remove(ObserverType* observer) { core_->Remove(observer); }

  bool Contains(const ObserverType* observer) const { return core_->Contains(observer); }
  bool empty() const { return core_->size() == 0; }
  size_t size() const { return core_->size(); }

  // Keeps the list's entries stable (removals are deferred) and fixes the set
  // of observers that Notify() reaches to those present at construction.
  class Scope {
   public:
    explicit Scope(ObserverList& list)
        : core_(list.core_.get()), end_(core_->BeginIteration()) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { core_->EndIteration(); }

    template <typename Fn>
    void Notify(Fn&& fn) {
      for (size_t i = 0; i < end_; ++i) {
        if (void* observer = core_->at(i)) fn(static_cast<ObserverType*>(observer));
      }
    }

   private:
    internal::ObserverListCore* core_;
    size_t end_;
  };

  // Notify()
  //
  // Calls `fn(observer)` for each observer present when the call began and
  // not removed since.
  template <typename Fn>
  void Notify(Fn&& fn) {
    Scope scope(*this);
    scope.Notify(std::forward<Fn>(fn));
  }

 private:
  std::shared_ptr<internal::ObserverListCore> core_;
};

}  // namespace matrix

#endif  // MATRIX_CORE_OBSERVER_LIST_H_
