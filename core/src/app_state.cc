#include "matrix/core/app_state.h"

#include <algorithm>

namespace matrix {

AppState* AppState::Get() {
  static AppState* const state = new AppState();
  return state;
}

AppState::AppState() {
  names_.push_back(std::make_unique<std::string>("default"));
  ids_.emplace("default", kDefaultScene);
}

SceneId AppState::InternScene(std::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = ids_.find(absl::string_view(name.data(), name.size()));
  if (it != ids_.end()) return it->second;
  const SceneId id = static_cast<SceneId>(names_.size());
  names_.push_back(std::make_unique<std::string>(name));
  ids_.emplace(std::string(name), id);
  return id;
}

std::string_view AppState::SceneName(SceneId id) const {
  absl::MutexLock lock(&mu_);
  if (id >= names_.size()) return "unknown";
  return *names_[id];
}

std::vector<AppStateObserver*> AppState::SnapshotObservers() const {
  absl::MutexLock lock(&mu_);
  return observers_;
}

template <typename Fn>
void AppState::Notify(Fn fn) {
  for (AppStateObserver* observer : SnapshotObservers()) {
    // An observer removed by an earlier one (and maybe destroyed since) is
    // not called, as with ObserverList.
    {
      absl::MutexLock lock(&mu_);
      if (std::find(observers_.begin(), observers_.end(), observer) == observers_.end()) continue;
    }
    fn(observer);
  }
}

void AppState::SetVisibleScene(std::string_view name) {
  visible_scene_.store(InternScene(name), std::memory_order_relaxed);
}

void AppState::OnSceneCreated(std::string_view name) {
  const SceneId id = InternScene(name);
  {
    absl::MutexLock lock(&mu_);
    ++live_[id];
  }
  Notify([id](AppStateObserver* o) { o->OnSceneCreated(id); });
}

void AppState::OnSceneShown(std::string_view name) {
  const SceneId id = InternScene(name);
  visible_scene_.store(id, std::memory_order_relaxed);
  Notify([id](AppStateObserver* o) { o->OnSceneShown(id); });
}

void AppState::OnSceneDestroyed(std::string_view name) {
  const SceneId id = InternScene(name);
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(id);
    if (it != live_.end() && --it->second <= 0) live_.erase(it);
  }
  Notify([id](AppStateObserver* o) { o->OnSceneDestroyed(id); });
}

int AppState::live_scene_count() const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [id, n] : live_) count += n;
  return count;
}

void AppState::SetForeground(bool foreground) {
  if (foreground_.exchange(foreground) == foreground) return;
  Notify([foreground](AppStateObserver* o) { o->OnForegroundChanged(foreground); });
}

ObserverRegistration AppState::AddObserver(AppStateObserver* observer) {
  {
    absl::MutexLock lock(&mu_);
    observers_.push_back(observer);
  }
  return ObserverRegistration([this, observer] {
    absl::MutexLock lock(&mu_);
    observers_.erase(std::remove(observers_.begin(), observers_.end(), observer),
                     observers_.end());
  });
}

void AppState::ResetForTesting() {
  absl::MutexLock lock(&mu_);
  live_.clear();
  visible_scene_.store(kDefaultScene);
  foreground_.store(true);
}

}  // namespace matrix
