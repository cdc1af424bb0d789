// File: matrix/trace/report_context.h
//
// Fills the evidence shared by every report from what the tracers capture:
// Matrix's device context, process memory, the looper thread's state, a
// native stack and a method-trace call tree, in their protobuf forms. Used on
// the worker thread when a report is built (it reads /proc and symbolizes).
//
//   matrix::proto::AnrReport anr;
//   matrix::FillThreadStack(matrix::SymbolizeStack(raw), anr.mutable_thread_stack());
//   matrix::FillCallTree(tree, anr.mutable_stack(), anr.mutable_stack_text());
//   anr.set_stack_key(matrix::NativeStackKey(*anr.mutable_thread_stack()));
//
// Thread safety: thread-safe; never call on the looper thread's hot path.

#ifndef MATRIX_TRACE_REPORT_CONTEXT_H_
#define MATRIX_TRACE_REPORT_CONTEXT_H_

#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"

#include "google/protobuf/repeated_field.h"
#include "matrix/proto/common.pb.h"
#include "matrix/trace/call_tree.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/proc_stats.h"
#include "matrix/trace/stack_capture.h"
#include "matrix/trace/stack_key.h"  // HangStackKey(), NativeStackKey(): the key of a report.

namespace matrix {

// Matrix's DeviceUtil.getDeviceInfo: machine level, cpu_app, mem, mem_free,
// cores. Missing /proc data leaves fields at their defaults.
void FillDeviceInfo(const ProcReader& proc, proto::DeviceInfo* out);

// VmSize, VmRSS and the malloc heap in use, in KiB.
void FillMemoryInfo(const ProcReader& proc, proto::MemoryInfo* out);

// The thread's state, priority, nice and CPU time from /proc.
void FillThreadInfo(const ProcReader& proc, pid_t tid, proto::ThreadInfo* out);

// A symbolized stack as frames with demangled names, source lines and
// inlined frames.
void FillThreadStack(const SymbolizedStack& stack, proto::ThreadStack* out);

// The call tree (pre-order) and its text form "depth,name,count,cost_ms" per
// line. Names must have been resolved. Each call's file:line is its trace
// scope's, or its function's definition line (Symbolizer::Get(), cached).
void FillCallTree(const CallTree& tree, google::protobuf::RepeatedPtrField<proto::MethodCall>* out,
                  std::string* text);

// A call tree from method-trace records, as the reports use it: trimmed to
// CallTree::kDefaultTargetCount while it is built, names resolved with the
// Symbolizer, and its key (CallTree::KeyIndex: the end of the hot path of
// the work that cost `total_cost`), or "" when no traced call explains it.
struct TracedCallTree {
  CallTree tree;
  std::string key;
};
TracedCallTree BuildCallTree(absl::Span<const uint64_t> records, TimeTicks end,
                             absl::Duration total_cost);

// The default stack capture: StackCapturer::Get()->Capture(thread, out).
absl::Status CaptureStack(const ThreadHandle& thread, RawStack* out);

// A captured stack into a report: symbolized and filled in when `status` is
// ok, otherwise the thread id and the reason. Returns the symbolized stack
// (empty on failure) for the stack key.
SymbolizedStack FillCapturedStack(const RawStack& stack, const absl::Status& status, pid_t tid,
                                  proto::ThreadStack* out);

// The message a dispatch was running, from a heartbeat snapshot.
void FillMessageInfo(const DispatchHeartbeat::Snapshot& snapshot, proto::MessageInfo* out);

// TracedFunctions()
//
// Which of the functions on `stack` (by entry address) appear in the
// method-trace `records`, i.e. were built with tracing. One pass over the
// records, looking up only the stack's own functions.
absl::flat_hash_set<uintptr_t> TracedFunctions(const SymbolizedStack& stack,
                                               absl::Span<const uint64_t> records);

}  // namespace matrix

#endif  // MATRIX_TRACE_REPORT_CONTEXT_H_
