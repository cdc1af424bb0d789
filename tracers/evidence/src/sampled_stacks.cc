#include "matrix/trace/sampled_stacks.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "internal/frame_id.h"
#include "matrix/trace/stack_key.h"

namespace matrix {
namespace {

using internal::FrameId;
using internal::IdOf;

// The frame `depth` levels in from the outermost one, or null.
const StackFrame* FrameAtDepth(const SymbolizedStack& stack, size_t depth) {
  const size_t n = stack.frames.size();
  return depth < n ? &stack.frames[n - 1 - depth] : nullptr;
}

bool IsProgramFrame(const StackFrame& frame) {
  const SymbolInfo& s = frame.symbol;
  return !s.function.empty() && !IsSystemOrRuntimeFrame(s.module, s.function, s.file);
}

std::string FrameName(const StackFrame& frame) {
  const SymbolInfo& s = frame.symbol;
  if (!s.function.empty()) return s.function;
  // Unnamed: samples of one function are one node (IdOf), named by its start.
  if (!s.module.empty()) return UnnamedFrameKey(s.module, UnnamedFunctionStart(s));
  return absl::StrFormat("0x%x", frame.pc);
}

// The samples' weights, each at least 1 ns so that samples of a dispatch
// stopped throughout still count.
std::vector<absl::Duration> Weights(absl::Span<const WeightedStack> samples) {
  std::vector<absl::Duration> weights;
  weights.reserve(samples.size());
  for (const WeightedStack& s : samples) {
    weights.push_back(std::max(s.weight, absl::Nanoseconds(1)));
  }
  return weights;
}

}  // namespace

std::vector<DominantFrame> DominantCallPath(absl::Span<const WeightedStack> samples) {
  const std::vector<absl::Duration> weights = Weights(samples);
  absl::Duration total;
  std::vector<size_t> group;  // The samples inside the path so far.
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].stack == nullptr || samples[i].stack->frames.empty()) continue;
    total += weights[i];
    group.push_back(i);
  }
  // Down the dominant path: at each depth, the frame with the most time.
  std::vector<DominantFrame> path;
  for (size_t depth = 0; !group.empty(); ++depth) {
    struct Candidate {
      FrameId id;
      size_t sample;
      absl::Duration weight;
    };
    std::vector<Candidate> candidates;
    for (size_t i : group) {
      const StackFrame* frame = FrameAtDepth(*samples[i].stack, depth);
      if (frame == nullptr) continue;
      const FrameId id = IdOf(*frame);
      auto it = std::find_if(candidates.begin(), candidates.end(),
                             [&](const Candidate& c) { return c.id == id; });
      if (it == candidates.end()) {
        candidates.push_back({id, i, weights[i]});
      } else {
        it->weight += weights[i];
      }
    }
    auto best = std::max_element(
        candidates.begin(), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return a.weight < b.weight; });
    if (best == candidates.end() || best->weight * 2 <= total) break;
    std::vector<size_t> inside;
    for (size_t i : group) {
      const StackFrame* frame = FrameAtDepth(*samples[i].stack, depth);
      if (frame != nullptr && IdOf(*frame) == best->id) inside.push_back(i);
    }
    path.push_back({best->sample, samples[best->sample].stack->frames.size() - 1 - depth,
                    inside.size(), best->weight});
    group = std::move(inside);
  }
  return path;
}

std::string SampledStackKey(absl::Span<const WeightedStack> samples) {
  const std::vector<DominantFrame> path = DominantCallPath(samples);
  absl::flat_hash_set<std::string> named_modules;
  for (const WeightedStack& sample : samples) {
    if (sample.stack == nullptr) continue;
    for (const std::string& module : NamedModules(sample.stack->frames)) {
      named_modules.insert(module);
    }
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const StackFrame& frame = samples[it->sample].stack->frames[it->frame];
    if (std::string key = ProgramFrameKey(frame.symbol, named_modules); !key.empty()) return key;
  }
  // No program frame holds the majority: the heaviest sample's own.
  const std::vector<absl::Duration> weights = Weights(samples);
  size_t heaviest = samples.size();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].stack == nullptr || samples[i].stack->frames.empty()) continue;
    if (heaviest == samples.size() || weights[i] > weights[heaviest]) heaviest = i;
  }
  if (heaviest == samples.size()) return "";
  const std::vector<StackFrame>& frames = samples[heaviest].stack->frames;
  for (const StackFrame& frame : frames) {
    if (std::string key = ProgramFrameKey(frame.symbol, named_modules); !key.empty()) return key;
  }
  // Where a capture happens to land in the C runtime or the vDSO differs
  // from run to run: never the key while any other frame is named.
  for (const StackFrame& frame : frames) {
    const SymbolInfo& s = frame.symbol;
    if (!s.function.empty() && !IsCRuntimeFrame(s.module)) return s.function;
  }
  for (const StackFrame& frame : frames) {
    const SymbolInfo& s = frame.symbol;
    if (!s.function.empty() && !IsVdsoFrame(s.module, s.function)) return s.function;
  }
  return "";
}

void FillSampledCallTree(absl::Span<const WeightedStack> samples, size_t max_nodes,
                         google::protobuf::RepeatedPtrField<proto::MethodCall>* out,
                         std::string* text) {
  struct Node {
    FrameId id;
    const StackFrame* frame = nullptr;
    int depth = -1;  // -1: the root above the outermost frames.
    absl::Duration weight;
    int count = 0;
    std::vector<size_t> children;  // In order of first appearance.
    bool kept = false;
  };
  const std::vector<absl::Duration> weights = Weights(samples);
  std::vector<Node> nodes(1);
  int used = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].stack == nullptr || samples[i].stack->frames.empty()) continue;
    ++used;
    size_t at = 0;
    nodes[0].weight += weights[i];
    ++nodes[0].count;
    const std::vector<StackFrame>& frames = samples[i].stack->frames;
    for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
      const FrameId id = IdOf(*f);
      size_t child = nodes.size();
      for (size_t c : nodes[at].children) {
        if (nodes[c].id == id) {
          child = c;
          break;
        }
      }
      if (child == nodes.size()) {
        Node node;
        node.id = id;
        node.frame = &*f;
        node.depth = nodes[at].depth + 1;
        nodes.push_back(std::move(node));
        nodes[at].children.push_back(child);
      }
      nodes[child].weight += weights[i];
      ++nodes[child].count;
      at = child;
    }
  }
  if (used == 0 || max_nodes == 0) return;
  // The roots: the calls inside the innermost frame every sample shares that
  // is a system or runtime frame calling into the program (the loop's
  // dispatcher calling the callback); without one, the outermost frames.
  size_t parent = 0;
  for (size_t n = 0;;) {
    const Node& node = nodes[n];
    const bool shared_system = n != 0 && !IsProgramFrame(*node.frame);
    const bool all_inside_one =
        node.children.size() == 1 && nodes[node.children[0]].count == used;
    if (shared_system && std::any_of(node.children.begin(), node.children.end(), [&](size_t c) {
          return IsProgramFrame(*nodes[c].frame);
        })) {
      parent = n;
    }
    if (!all_inside_one) break;
    n = node.children[0];
  }
  // The heaviest calls under `parent` (callers weigh at least their callees
  // and come first on ties, so a kept call's callers are kept).
  std::vector<size_t> order;
  std::vector<size_t> stack = {parent};
  while (!stack.empty()) {
    const size_t n = stack.back();
    stack.pop_back();
    if (n != parent) order.push_back(n);
    for (size_t c : nodes[n].children) stack.push_back(c);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (nodes[a].weight != nodes[b].weight) return nodes[a].weight > nodes[b].weight;
    return nodes[a].depth < nodes[b].depth;
  });
  if (order.size() > max_nodes) order.resize(max_nodes);
  for (size_t n : order) nodes[n].kept = true;
  // Pre-order, callees in order of first appearance.
  const int base = nodes[parent].depth + 1;
  auto emit = [&](auto&& self, size_t n) -> void {
    if (n != parent) {
      const Node& node = nodes[n];
      proto::MethodCall* call = out->Add();
      call->set_depth(node.depth - base);
      call->set_name(FrameName(*node.frame));
      call->set_count(node.count);
      call->set_cost_ms(absl::ToDoubleMilliseconds(node.weight));
      if (text != nullptr) {
        absl::StrAppendFormat(text, "%d,%s,%d,%.3f\n", call->depth(), call->name(), call->count(),
                              call->cost_ms());
      }
    }
    for (size_t c : nodes[n].children) {
      if (nodes[c].kept) self(self, c);
    }
  };
  emit(emit, parent);
}

}  // namespace matrix
