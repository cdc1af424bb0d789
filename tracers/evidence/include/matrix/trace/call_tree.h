// File: matrix/trace/call_tree.h
//
// CallTree turns a sequence of method records (method_record.h, copied out of
// a MethodTracer) into the call tree a slow-method or hang report shows: a
// pre-order list of calls with depth, method, name, call count and cost. It
// is matrix-cpp's analog of Tencent Matrix's TraceDataUtils
// (structuredDataToStack, trimStack, getTreeKey, stackToString), with these
// differences:
//   * depths come from the tree's structure, so a sequence that starts
//     mid-call never yields an empty tree (Matrix's "first node depth is not
//     0" failure);
//   * an exit whose enter is not in the records (the buffer wrapped, or the
//     copy lost its head) becomes a call that started before the window and
//     contains everything recorded before it: its cost is a lower bound;
//   * enters without exits are still-running calls whose cost runs to the
//     given end time (the ANR case);
//   * calls left by an exception without an exit record (clang) are closed
//     when an ancestor exits;
//   * trimming removes only leaves, so no call ever loses its parent.
//
//   matrix::RecordCopy copy = tracer->Copy(mark, tracer->Mark());
//   matrix::CallTree tree = matrix::CallTree::Build(
//       copy.records, {.end_time = now, .trim_to = matrix::CallTree::kDefaultTargetCount});
//   tree.ResolveNames([&](uintptr_t pc) { return symbolizer.Name(pc); });
//   std::optional<size_t> key = tree.KeyIndex(dispatch_cost);
//   std::string stack = tree.ToString();   // ".A() 1 800ms\n..B() 1 800ms\n"
//
// Thread safety: a value type; thread-compatible. Every method can be called
// from any thread, one at a time per instance. Build it off the looper thread
// (it allocates).

#ifndef MATRIX_TRACE_CALL_TREE_H_
#define MATRIX_TRACE_CALL_TREE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "matrix/core/time_ticks.h"

namespace matrix {

// What a call's identity (CallNode::address) refers to.
enum class MethodKind : uint8_t {
  kFunction,  // An instrumented function: its entry address.
  kScope,     // A MATRIX_TRACE_SCOPE: the address of its TraceSite.
  kDispatch,  // A looper dispatch (DispatchBegin/DispatchEnd); address 0.
};

struct CallNode {
  int depth = 0;
  // Index of the parent in CallTree::nodes(), or -1 for a top-level call.
  int parent = -1;
  MethodKind kind = MethodKind::kFunction;
  uintptr_t address = 0;
  // Empty until CallTree::ResolveNames(), except for dispatches ("dispatch").
  std::string name;
  // Adjacent repeated calls merged into this one.
  int count = 1;
  // Inclusive cost, summed over `count` calls.
  absl::Duration cost;
  // When the (first) call began.
  TimeTicks start;
  // When the (last) call ended (start + cost for a single call).
  TimeTicks end;
  // No exit was recorded: the call was still running; cost runs to the end
  // time given to Build().
  bool running = false;
  // The enter was not in the records (it was overwritten, or came before the
  // copy): the call began no later than `start`; cost is a lower bound.
  bool entered_before_window = false;
  // No exit of its own: closed when an ancestor exited (exception or
  // longjmp through code whose exit hook did not run).
  bool unwound = false;
  // Descendants removed by Trim(), or dropped while building because the
  // tree was full (Options::max_calls).
  int trimmed_descendants = 0;
};

class CallTree {
 public:
  // Matrix's TARGET_EVIL_METHOD_STACK.
  static constexpr size_t kDefaultTargetCount = 30;
  // Options::max_calls: 32 Ki calls (72 bytes each while building).
  static constexpr size_t kDefaultMaxCalls = size_t{1} << 15;
  // Matrix's FILTER_STACK_KEY_ALL_PERCENT.
  static constexpr double kKeyCostShare = 0.3;

  struct Options {
    // Calls still running at the end of the records end here. Null (or
    // earlier than the last record): at the time of the last record.
    TimeTicks end_time;
    // Merge adjacent repeated calls of the same method under the same
    // parent (count, summed cost). Dispatches are never merged.
    bool merge = true;
    // If set, Trim(trim_to) is applied before the tree is materialized:
    // the same result, much cheaper for a full buffer (reports use
    // kDefaultTargetCount).
    std::optional<size_t> trim_to;
    // The most calls the tree holds while it is built, so that its memory
    // stays bounded whatever the records (a full 8 MiB buffer of short
    // calls is half a million). Once full, a call that repeats the finished
    // call before it under the same parent is folded into it (count, summed
    // cost: what `merge` would do later); any other call, and what it calls,
    // is dropped and counted in its parent's trimmed_descendants and in
    // stats().dropped_calls. 0: no bound.
    size_t max_calls = kDefaultMaxCalls;
  };

  // What Build() had to work around (for reports and tests).
  struct Stats {
    // Records before the first time record: they cannot be timed.
    int64_t untimed_records = 0;
    int64_t invalid_records = 0;
    // Exits whose enter was not in the records.
    int64_t unmatched_exits = 0;
    // Calls closed by an ancestor's exit.
    int64_t unwound_calls = 0;
    // Calls still running at the end.
    int64_t running_calls = 0;
    // Calls folded into the repeat before them, and calls dropped, because
    // the tree was full (Options::max_calls).
    int64_t folded_calls = 0;
    int64_t dropped_calls = 0;
  };

  CallTree() = default;

  // Build()
  //
  // Decodes `records` (oldest first) into a call tree, merging adjacent
  // repeated calls. Never fails: malformed input yields the calls that can
  // be recovered and counts the rest in stats().
  static CallTree Build(absl::Span<const uint64_t> records, const Options& options);
  static CallTree Build(absl::Span<const uint64_t> records) { return Build(records, Options()); }

  // The calls in pre-order (each parent before its children, siblings in
  // call order).
  const std::vector<CallNode>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  const Stats& stats() const { return stats_; }

  // The largest cost of a top-level call (what Matrix's stackToString
  // returns and tracers compare with the measured dispatch cost).
  absl::Duration MaxTopLevelCost() const;

  // Trim()
  //
  // Removes the cheapest leaf calls (latest first among equal costs) until
  // at most `target_count` calls remain. Only leaves are removed, so every
  // remaining call keeps its parent and depths stay contiguous; the removed
  // count is added to the nearest remaining ancestor's trimmed_descendants.
  // O(n) (a call never costs more than its parent, so the survivors are the
  // `target_count` costliest calls).
  void Trim(size_t target_count = kDefaultTargetCount);

  // KeyIndex()
  //
  // The call that best names the problem: the end of the hot path. From the
  // top, step into the costliest child while it costs at least 30% of
  // max(total_cost, MaxTopLevelCost()) (Matrix's threshold); the last call
  // reached is the key, unless it is a dispatch. If no non-dispatch call is
  // reached, the costliest non-dispatch call; a dispatch only if there is
  // nothing else. nullopt if the tree is empty.
  //
  // Matrix's getTreeKey instead ranks every call over 30% by
  // (depth + 1) * cost. That ranking flips with the number of wrapper frames
  // (std::invoke, lambdas, unoptimized builds) between the message and the
  // culprit: an 1100 ms handler seven frames down outranks the 800 ms
  // function three frames below it. The hot path does not depend on depth.
  std::optional<size_t> KeyIndex(absl::Duration total_cost) const;

  // ResolveNames()
  //
  // Names every function call with `resolver(address)` (called once per
  // distinct address; expected to return a demangled C++ name). Scope calls
  // take their TraceSite's name and dispatches are named "dispatch" without
  // calling the resolver. Trim first: resolving is the expensive part.
  using NameResolver = absl::FunctionRef<std::string(uintptr_t address)>;
  void ResolveNames(NameResolver resolver);

  // ToString()
  //
  // One line per call: depth dots, name (or 0x address), count, cost in ms,
  // and any flags, e.g.
  //   dispatch 1 1100ms
  //   .W() 1 300ms
  //   .A() 1 800ms
  //   ..B() 1 800ms
  //   ...C() 1 800ms
  std::string ToString() const;

  // ToMachineString()
  //
  // One line per call: "depth,count,cost_us,flags,name" where flags is a
  // string of R (running), E (entered before window), U (unwound), T
  // (descendants trimmed) or "-". The name is last: it may contain commas.
  std::string ToMachineString() const;

 private:
  std::vector<CallNode> nodes_;
  Stats stats_;
};

}  // namespace matrix

#endif  // MATRIX_TRACE_CALL_TREE_H_
