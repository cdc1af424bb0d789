// foreign-loop: matrix-cpp on a loop that is not matrix's own Looper: a plain
// game loop (as with SDL, GLFW, a render thread or an engine's tick). Each
// iteration is reported as one dispatch that draws one frame, through
// LooperMonitor's and UIThreadMonitor's public hooks. FPS reports, slow frames
// (slow method) and hangs (ANR with the loop thread's stack) work as they do on
// the matrix Looper.
//
//   ./build/samples/foreign_loop/foreign-loop

#include <cstdio>
#include <memory>

#include "absl/time/clock.h"
#include "matrix/core/app_state.h"
#include "matrix/core/matrix.h"
#include "matrix/core/refresh_rate.h"
#include "matrix/plugins/issue_sinks.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/patchable_entries.h"

namespace {

__attribute__((no_instrument_function)) void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

__attribute__((noinline)) void PollInput() { Spin(absl::Microseconds(200)); }
__attribute__((noinline)) void UpdateWorld() { Spin(absl::Milliseconds(2)); }
// Blocks (a driver call, a file read): built without tracing on purpose, so
// the ANR finds it on the native stack.
__attribute__((noinline, no_instrument_function)) void LoadShaders() {
  absl::SleepFor(absl::Milliseconds(1500));
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void RenderScene(int frame) {
  // Every 50th frame renders slowly; frame 150 stalls long enough for an ANR.
  if (frame == 150) {
    std::printf("[foreign-loop] frame %d stalls for 1.5 s in LoadShaders\n", frame);
    LoadShaders();
  } else {
    Spin(frame % 50 == 49 ? absl::Milliseconds(60) : absl::Milliseconds(4));
  }
}

class Console : public matrix::PluginListener {
 public:
  void OnReportIssue(const matrix::Issue& issue) override {
    std::printf("[issue] %s\n", matrix::SummarizeIssue(issue).c_str());
    std::fflush(stdout);
  }
};

}  // namespace

int main() {
  // Built PATCHABLE (samples/foreign_loop/CMakeLists.txt): the loop's code
  // runs untraced until its entries are patched. Patch() first times both
  // mechanisms on this CPU and uses the cheaper.
  if (absl::StatusOr<matrix::PatchableEntries::Stats> patched = matrix::PatchableEntries::Patch();
      patched.ok() && patched->patched > 0) {
    const bool return_sites =
        patched->mechanism == matrix::PatchableEntries::Mechanism::kReturnSites;
    std::printf(
        "[foreign-loop] %zu functions patched with %s (a small traced call: %.1f ns with return "
        "sites, "
        "%.1f ns wrapped)\n",
        patched->patched, return_sites ? "return sites" : "wrapping stubs",
        patched->return_sites_ns, patched->wrap_ns);
  } else {
    std::printf("[foreign-loop] method tracing with -finstrument-functions hooks\n");
  }
  // The loop is not a matrix Looper: say so, and let the loop report frames.
  absl::StatusOr<matrix::TraceConfig> config =
      matrix::TraceConfig::Builder()
          .SetLooperSource(matrix::LooperMonitor::Source::kForeign)
          .UseChoreographer(false)
          .EnableFps(true)
          .SetFpsTimeSlice(absl::Seconds(2))
          .EnableEvilMethodTrace(true)
          .SetEvilThreshold(absl::Milliseconds(50))
          .EnableAnrTrace(true)
          .SetLagThreshold(absl::Milliseconds(500))
          .SetAnrThreshold(absl::Seconds(1))
          .Build();
  if (!config.ok()) return 1;
  auto trace = std::make_unique<matrix::TracePlugin>(*config);
  matrix::TracePlugin* plugin = trace.get();
  if (!matrix::Matrix::Init(matrix::Matrix::Builder()
                                .AddPlugin(std::move(trace))
                                .SetPluginListener(std::make_shared<Console>())
                                .Build())
           .ok() ||
      !plugin->Start().ok()) {  // On the loop's thread: the monitors bind to it.
    return 1;
  }
  matrix::LooperMonitor* dispatches = plugin->GetLooperMonitor();
  matrix::UIThreadMonitor* frames = plugin->GetUIThreadMonitor();
  matrix::AppState::Get()->OnSceneShown("Level1");

  const matrix::RefreshRate rate = matrix::RefreshRate::FromHz(60);
  const matrix::TimeTicks start = matrix::MonotonicNow();
  int64_t vsync_index = 0;
  for (int frame = 0; frame < 240; ++frame) {
    // Wait for the next vsync tick (a real loop would block in SwapBuffers).
    matrix::TimeTicks now = matrix::MonotonicNow();
    vsync_index = std::max(vsync_index + 1, rate.IntervalsIn(now - start) + 1);
    const matrix::TimeTicks vsync = rate.TickAfter(start, vsync_index);
    if (vsync > now) absl::SleepFor(vsync - now);

    // One iteration: one dispatch, one frame, three phases.
    dispatches->DispatchBegin("game-loop");
    frames->MarkFrame(vsync, rate, frame);
    frames->MarkPhase(matrix::UIThreadMonitor::Phase::kInput, matrix::MonotonicNow());
    PollInput();
    frames->MarkPhase(matrix::UIThreadMonitor::Phase::kAnimation, matrix::MonotonicNow());
    UpdateWorld();
    frames->MarkPhase(matrix::UIThreadMonitor::Phase::kTraversal, matrix::MonotonicNow());
    RenderScene(frame);
    dispatches->DispatchEnd();
  }
  plugin->GetFrameTracer()->FlushReports();
  absl::SleepFor(absl::Milliseconds(300));  // Let the worker deliver the last reports.
  matrix::Matrix::Shutdown();
  std::printf("[foreign-loop] done\n");
  return 0;
}
