// File: matrix/core/app_state.h
//
// AppState is the process-wide UI state the tracers attribute their findings
// to: the visible scene (Matrix's "scene": the screen, page or mode the user
// sees), scene lifecycle (created, shown, destroyed) and whether the process
// is in the foreground. The application tells it what happens.
//
//   matrix::AppState* state = matrix::AppState::Get();
//   state->OnSceneCreated("Gallery");
//   state->OnSceneShown("Gallery");        // also makes it the visible scene
//   state->SetForeground(false);           // app went to the background
//
// Scene names are interned once; a SceneId is a small integer that the looper
// thread can read without a lock, and SceneName() gives a view that stays
// valid for the life of the process.
//
// Thread safety: thread-safe. Observers are called on the thread that made
// the change, never with a lock held.

#ifndef MATRIX_CORE_APP_STATE_H_
#define MATRIX_CORE_APP_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/observer_list.h"

namespace matrix {

using SceneId = uint32_t;

class AppStateObserver {
 public:
  virtual ~AppStateObserver() = default;
  virtual void OnForegroundChanged(bool /*foreground*/) {}
  virtual void OnSceneCreated(SceneId /*scene*/) {}
  // The scene's first frame was drawn (Matrix: the Activity got focus).
  virtual void OnSceneShown(SceneId /*scene*/) {}
  virtual void OnSceneDestroyed(SceneId /*scene*/) {}
};

class AppState {
 public:
  // The scene reported before the application names one: "default", as Matrix.
  static constexpr SceneId kDefaultScene = 0;

  // The process-wide instance. Never destroyed.
  static AppState* Get();

  // Scenes. Each call interns `name` (first call per name allocates).
  SceneId InternScene(std::string_view name);
  // Makes `name` the visible scene without a lifecycle event.
  void SetVisibleScene(std::string_view name);
  void OnSceneCreated(std::string_view name);
  void OnSceneShown(std::string_view name);
  void OnSceneDestroyed(std::string_view name);

  // The visible scene's id: one relaxed atomic load, safe on hot paths.
  SceneId visible_scene_id() const { return visible_scene_.load(std::memory_order_relaxed); }
  // A scene's name; the view stays valid for the life of the process.
  std::string_view SceneName(SceneId id) const;
  std::string_view visible_scene() const { return SceneName(visible_scene_id()); }
  // Scenes created and not yet destroyed.
  int live_scene_count() const;

  // Foreground / background. The process starts in the foreground.
  void SetForeground(bool foreground);
  bool is_foreground() const { return foreground_.load(std::memory_order_relaxed); }

  // Registers `observer` (not owned) until the handle is destroyed. The
  // handle may be destroyed on any thread.
  [[nodiscard]] ObserverRegistration AddObserver(AppStateObserver* observer);

  // Forgets scenes (ids stay reserved) and observers' effects: back to the
  // default scene, foreground, no live scenes.
  void ResetForTesting();

 private:
  AppState();
  std::vector<AppStateObserver*> SnapshotObservers() const;
  template <typename Fn>
  void Notify(Fn fn);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, SceneId> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<std::string>> names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<SceneId, int> live_ ABSL_GUARDED_BY(mu_);
  std::vector<AppStateObserver*> observers_ ABSL_GUARDED_BY(mu_);
  std::atomic<SceneId> visible_scene_{kDefaultScene};
  std::atomic<bool> foreground_{true};
};

}  // namespace matrix

#endif  // MATRIX_CORE_APP_STATE_H_
