// File: plugins/src/internal/block_canary_block.h
//
// BlockCanaryPlugin's record of one block as the sampler hands it over:
// the samples the watchdog took while the looper thread was blocked, and the
// block itself. Written by the sampler (block_canary_plugin.cc) on the
// matrix-watchdog thread, read by BuildAndReport (block_canary_report.cc) on
// the worker. Internal to matrix::plugins.
//
// Thread safety: thread-compatible (handed over whole).

#ifndef MATRIX_PLUGINS_SRC_INTERNAL_BLOCK_CANARY_BLOCK_H_
#define MATRIX_PLUGINS_SRC_INTERNAL_BLOCK_CANARY_BLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "matrix/core/app_state.h"
#include "matrix/core/time_ticks.h"
#include "matrix/plugins/block_canary_info.h"
#include "matrix/plugins/block_canary_plugin.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace internal {

// The block file's frames of one symbolized stack, innermost first. An
// unnamed frame (no symbol: named off the host later) lists its module in
// `modules` with the module's build id, once; a frame's module is its file's
// base name, or its path when another module of that base name with another
// build id is listed already, so that each such frame is named from its own
// module's debug file.
std::vector<BlockFrame> ToBlockFrames(const std::vector<StackFrame>& frames,
                                      std::vector<BlockModule>& modules);

// One tick's evidence: the looper thread's stack and the CPU counters.
struct BlockCanarySample {
  TimeTicks at;
  bool stack_ok = false;
  RawStack stack;
  bool cpu_ok = false;
  SystemCpuTimes system;
  uint64_t process_ticks = 0;
  absl::Duration thread_cpu;
};

}  // namespace internal

using internal::BlockCanarySample;

struct BlockCanaryPlugin::PendingBlock {
  TimeTicks begin;
  TimeTicks end;
  absl::Duration stopped;  // The process was stopped (left out of the cost).
  absl::Duration thread_cpu_end;
  std::vector<BlockCanarySample> samples;  // By capture time.
  BlockCanarySample end_cpu;               // Read when the end was seen.
  TimeTicks mono_anchor;                   // Read together with wall_anchor.
  absl::Time wall_anchor;
  std::string message;
  SceneId scene = AppState::kDefaultScene;
};

}  // namespace matrix

#endif  // MATRIX_PLUGINS_SRC_INTERNAL_BLOCK_CANARY_BLOCK_H_
