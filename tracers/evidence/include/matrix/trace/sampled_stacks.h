// File: matrix/trace/sampled_stacks.h
//
// What a series of stack samples of one slow dispatch says: the function
// that held the thread (the report's key) and the call tree of the samples.
// Each sample stands for the time until the next one (the last: until the
// dispatch ended), less the time the process was stopped.
//
//   std::vector<matrix::WeightedStack> samples = ...;  // Symbolized, by time.
//   std::string key = matrix::SampledStackKey(samples);
//   matrix::FillSampledCallTree(samples, matrix::CallTree::kDefaultTargetCount,
//                               report.mutable_stack(), report.mutable_stack_text());
//
// Thread safety: pure functions over their arguments; any thread (the
// worker: they read the stack-key rule, which takes a mutex).

#ifndef MATRIX_TRACE_SAMPLED_STACKS_H_
#define MATRIX_TRACE_SAMPLED_STACKS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "matrix/proto/common.pb.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {

// One sample and the time it stands for. `stack` is not owned.
struct WeightedStack {
  const SymbolizedStack* stack = nullptr;
  absl::Duration weight;
};

// One frame of the dominant call path: `samples[sample].stack->frames[frame]`
// (the first sample inside it), and the samples and time inside it.
struct DominantFrame {
  size_t sample = 0;
  size_t frame = 0;
  size_t samples_inside = 0;
  absl::Duration time_inside;
};

// DominantCallPath()
//
// Descending from the outermost frame, each frame that more than half of the
// sampled time was inside, outermost first; each is inside the one before.
// Empty when no outermost frame holds the majority (samples of different
// threads or truncated stacks). BlockCanary's key takes its frame from it.
std::vector<DominantFrame> DominantCallPath(absl::Span<const WeightedStack> samples);

// SampledStackKey()
//
// The dominant function: descending from the outermost frame, the deepest
// frame that more than half of the sampled time was inside; from it
// outwards, the first frame of the program (HangStackKey's rule: named, not
// a system or runtime frame, stack_key.h). A callee that ran for less than
// half of the time never takes the key from its caller. Falls back to the
// innermost program frame of the heaviest sample, then to its innermost
// named frame outside the C runtime, then to one that is not the vDSO's
// (NativeStackKey's order); "" when no sample has such a frame.
std::string SampledStackKey(absl::Span<const WeightedStack> samples);

// FillSampledCallTree()
//
// The samples as a call tree in pre-order, in MethodCall form: a call's
// `cost_ms` is the time of the samples inside it and `count` their number.
// The roots are the calls made by the innermost system or runtime frame that
// every sample shares and that calls into the program (the loop's
// dispatcher: g_main_context_dispatch, QObject::event, ...), else the
// outermost frames; the thread stack carries what is outside them. At most `max_nodes` calls
// (the heaviest; a call's callers always stay). The text form, one line per
// call, is "depth,name,count,cost_ms" as FillCallTree()'s. Unnamed frames
// read "module+0xoffset".
void FillSampledCallTree(absl::Span<const WeightedStack> samples, size_t max_nodes,
                         google::protobuf::RepeatedPtrField<proto::MethodCall>* out,
                         std::string* text);

}  // namespace matrix

#endif  // MATRIX_TRACE_SAMPLED_STACKS_H_
