// Tests for AppState: scene interning, the visible scene, live scenes,
// foreground, and observers (including ones that change the set while
// being notified).

#include "matrix/core/app_state.h"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/core/observer_list.h"

namespace {

using ::matrix::AppState;
using ::matrix::AppStateObserver;
using ::matrix::ObserverRegistration;
using ::matrix::SceneId;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

class AppStateTest : public ::testing::Test {
 protected:
  AppStateTest() { state_->ResetForTesting(); }
  ~AppStateTest() override { state_->ResetForTesting(); }
  AppState* state_ = AppState::Get();
};

class RecordingObserver : public AppStateObserver {
 public:
  explicit RecordingObserver(std::string name = "O") : name_(std::move(name)) {}
  void OnForegroundChanged(bool foreground) override {
    events.push_back(absl::StrCat(name_, ".foreground:", foreground));
    if (hook) hook();
  }
  void OnSceneCreated(SceneId scene) override {
    events.push_back(absl::StrCat(name_, ".created:", std::string(AppState::Get()->SceneName(scene))));
    if (hook) hook();
  }
  void OnSceneShown(SceneId scene) override {
    events.push_back(absl::StrCat(name_, ".shown:", std::string(AppState::Get()->SceneName(scene))));
    if (hook) hook();
  }
  void OnSceneDestroyed(SceneId scene) override {
    events.push_back(absl::StrCat(name_, ".destroyed:", std::string(AppState::Get()->SceneName(scene))));
    if (hook) hook();
  }
  std::vector<std::string> events;
  std::function<void()> hook;

 private:
  std::string name_;
};

TEST_F(AppStateTest, Get_IsOneProcessWideInstance) { EXPECT_EQ(AppState::Get(), state_); }

TEST_F(AppStateTest, DefaultScene_IsNamedDefault) {
  EXPECT_EQ(state_->visible_scene_id(), AppState::kDefaultScene);
  EXPECT_EQ(state_->visible_scene(), "default");
  EXPECT_EQ(state_->InternScene("default"), AppState::kDefaultScene);
}

TEST_F(AppStateTest, InternScene_GivesStableIdsAndNames) {
  const SceneId gallery = state_->InternScene("Gallery");
  const SceneId settings = state_->InternScene("Settings");
  EXPECT_NE(gallery, settings);
  EXPECT_NE(gallery, AppState::kDefaultScene);
  EXPECT_EQ(state_->InternScene("Gallery"), gallery);
  EXPECT_EQ(state_->InternScene(std::string("Gallery")), gallery);

  const std::string_view name = state_->SceneName(gallery);
  EXPECT_EQ(name, "Gallery");
  // The view stays valid however many scenes are interned after it.
  for (int i = 0; i < 1000; ++i) state_->InternScene(absl::StrCat("Scene", i));
  EXPECT_EQ(name, "Gallery");
  EXPECT_EQ(state_->SceneName(gallery).data(), name.data());
  EXPECT_EQ(state_->InternScene("Gallery"), gallery);
}

TEST_F(AppStateTest, SceneName_ForAnUnknownId_IsUnknown) {
  EXPECT_EQ(state_->SceneName(0xFFFFFFF0u), "unknown");
}

TEST_F(AppStateTest, VisibleScene_FollowsShownScenesNotCreatedOnes) {
  state_->OnSceneCreated("Home");
  EXPECT_EQ(state_->visible_scene(), "default");
  state_->OnSceneShown("Home");
  EXPECT_EQ(state_->visible_scene(), "Home");
  EXPECT_EQ(state_->visible_scene_id(), state_->InternScene("Home"));
  state_->OnSceneCreated("Detail");
  state_->OnSceneShown("Detail");
  EXPECT_EQ(state_->visible_scene(), "Detail");
  state_->OnSceneDestroyed("Detail");
  state_->OnSceneShown("Home");
  EXPECT_EQ(state_->visible_scene(), "Home");
  state_->SetVisibleScene("Dialog");  // Without a lifecycle event.
  EXPECT_EQ(state_->visible_scene(), "Dialog");
}

TEST_F(AppStateTest, LiveSceneCount_CountsCreatedNotYetDestroyed) {
  EXPECT_EQ(state_->live_scene_count(), 0);
  state_->OnSceneCreated("A");
  state_->OnSceneCreated("B");
  state_->OnSceneCreated("B");  // Two instances of one scene.
  EXPECT_EQ(state_->live_scene_count(), 3);
  state_->OnSceneDestroyed("B");
  EXPECT_EQ(state_->live_scene_count(), 2);
  state_->OnSceneDestroyed("B");
  state_->OnSceneDestroyed("B");  // More destroys than creates: no negative count.
  state_->OnSceneDestroyed("Never");
  EXPECT_EQ(state_->live_scene_count(), 1);
  state_->OnSceneDestroyed("A");
  EXPECT_EQ(state_->live_scene_count(), 0);
  state_->OnSceneCreated("B");
  EXPECT_EQ(state_->live_scene_count(), 1);
}

TEST_F(AppStateTest, Foreground_StartsTrueAndFollowsSetForeground) {
  EXPECT_TRUE(state_->is_foreground());
  state_->SetForeground(false);
  EXPECT_FALSE(state_->is_foreground());
  state_->SetForeground(true);
  EXPECT_TRUE(state_->is_foreground());
}

TEST_F(AppStateTest, Observers_HearEveryChangeInOrderUntilUnregistered) {
  RecordingObserver observer;
  ObserverRegistration registration = state_->AddObserver(&observer);
  state_->OnSceneCreated("Home");
  state_->OnSceneShown("Home");
  state_->SetForeground(false);
  state_->SetForeground(false);  // Not a change.
  state_->SetForeground(true);
  state_->OnSceneDestroyed("Home");
  EXPECT_THAT(observer.events,
              ElementsAre("O.created:Home", "O.shown:Home", "O.foreground:0", "O.foreground:1",
                          "O.destroyed:Home"));

  registration.Reset();
  state_->OnSceneShown("Home");
  EXPECT_THAT(observer.events, ::testing::SizeIs(5));
}

TEST_F(AppStateTest, SetVisibleScene_NotifiesNoOne) {
  RecordingObserver observer;
  ObserverRegistration registration = state_->AddObserver(&observer);
  state_->SetVisibleScene("Quiet");
  EXPECT_THAT(observer.events, IsEmpty());
}

TEST_F(AppStateTest, ObserverRemovingItselfDuringNotification_IsNotCalledAgain) {
  RecordingObserver self_removing("A"), other("B");
  ObserverRegistration ra = state_->AddObserver(&self_removing);
  ObserverRegistration rb = state_->AddObserver(&other);
  self_removing.hook = [&] { ra.Reset(); };
  state_->OnSceneShown("X");
  state_->OnSceneShown("Y");
  EXPECT_THAT(self_removing.events, ElementsAre("A.shown:X"));
  EXPECT_THAT(other.events, ElementsAre("B.shown:X", "B.shown:Y"));
}

TEST_F(AppStateTest, ObserverRemovedByAnotherDuringNotification_IsNotCalled) {
  RecordingObserver remover("A"), victim("B");
  ObserverRegistration ra = state_->AddObserver(&remover);
  ObserverRegistration rb = state_->AddObserver(&victim);
  remover.hook = [&] { rb.Reset(); };
  // The removed observer may already be gone (its owner destroyed it after
  // unregistering): it must not be called for the change in progress.
  state_->OnSceneShown("X");
  EXPECT_THAT(victim.events, IsEmpty());
}

TEST_F(AppStateTest, ObserverAddedDuringNotification_HearsTheNextChange) {
  RecordingObserver adder("A"), late("L");
  ObserverRegistration ra = state_->AddObserver(&adder);
  ObserverRegistration rl;
  adder.hook = [&] {
    if (!rl.active()) rl = state_->AddObserver(&late);
  };
  state_->OnSceneShown("X");
  EXPECT_THAT(late.events, IsEmpty());
  state_->OnSceneShown("Y");
  EXPECT_THAT(late.events, ElementsAre("L.shown:Y"));
}

TEST_F(AppStateTest, ObserverChangingStateDuringNotification_Works) {
  RecordingObserver observer;
  ObserverRegistration registration = state_->AddObserver(&observer);
  bool once = true;
  observer.hook = [&] {
    if (once) {
      once = false;
      state_->OnSceneShown("Nested");  // Re-entrant change from a callback.
    }
  };
  state_->SetForeground(false);
  EXPECT_THAT(observer.events, ElementsAre("O.foreground:0", "O.shown:Nested"));
  EXPECT_EQ(state_->visible_scene(), "Nested");
}

TEST_F(AppStateTest, ResetForTesting_RestoresDefaultsButKeepsIds) {
  const SceneId id = state_->InternScene("Kept");
  state_->OnSceneCreated("Kept");
  state_->OnSceneShown("Kept");
  state_->SetForeground(false);
  state_->ResetForTesting();
  EXPECT_EQ(state_->visible_scene(), "default");
  EXPECT_TRUE(state_->is_foreground());
  EXPECT_EQ(state_->live_scene_count(), 0);
  EXPECT_EQ(state_->InternScene("Kept"), id);
}

}  // namespace
