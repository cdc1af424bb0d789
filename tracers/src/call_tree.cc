#include "matrix/trace/call_tree.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {
namespace {

// A call while the tree is being built: children are indices into the arena.
struct RawCall {
  MethodKind kind = MethodKind::kFunction;
  uintptr_t address = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t cost_ns = 0;
  int count = 1;
  bool open = true;
  bool running = false;
  bool entered_before_window = false;
  bool unwound = false;
  std::vector<int> children;
};

class Builder {
 public:
  Builder(const CallTree::Options& options, CallTree::Stats* stats)
      : options_(options), stats_(stats) {}

  void Decode(absl::Span<const uint64_t> records);
  void Merge();
  std::vector<CallNode> Flatten() const;

 private:
  static bool SameMethod(const RawCall& a, const RawCall& b) {
    return a.kind == b.kind && a.address == b.address;
  }
  static bool Mergeable(const RawCall& a, const RawCall& b) {
    return a.kind != MethodKind::kDispatch && SameMethod(a, b);
  }

  void Open(MethodKind kind, uintptr_t address, int64_t t);
  void Close(MethodKind kind, uintptr_t address, int64_t t);
  void CloseAsUnwound(int id, int64_t t);
  void MergeInto(int dst, int src);
  // Rewrites `list` merging adjacent repeats (kAdjacent) or every repeat
  // (kByMethod, for the children of already merged calls).
  enum class Mode { kAdjacent, kByMethod };
  void MergeList(std::vector<int>* list, Mode mode);

  const CallTree::Options& options_;
  CallTree::Stats* stats_;
  std::vector<RawCall> calls_;
  std::vector<int> roots_;
  std::vector<int> stack_;  // Open calls, innermost last.
  int64_t first_time_ns_ = 0;
};

void Builder::Open(MethodKind kind, uintptr_t address, int64_t t) {
  const int id = static_cast<int>(calls_.size());
  RawCall call;
  call.kind = kind;
  call.address = address;
  call.start_ns = t;
  calls_.push_back(std::move(call));
  (stack_.empty() ? roots_ : calls_[stack_.back()].children).push_back(id);
  stack_.push_back(id);
}

void Builder::CloseAsUnwound(int id, int64_t t) {
  RawCall& call = calls_[id];
  call.end_ns = t;
  call.open = false;
  call.unwound = true;
  ++stats_->unwound_calls;
}

void Builder::Close(MethodKind kind, uintptr_t address, int64_t t) {
  for (int k = static_cast<int>(stack_.size()) - 1; k >= 0; --k) {
    RawCall& call = calls_[stack_[k]];
    if (call.kind != kind || call.address != address) continue;
    for (int j = static_cast<int>(stack_.size()) - 1; j > k; --j) CloseAsUnwound(stack_[j], t);
    call.end_ns = t;
    call.open = false;
    stack_.resize(k);
    return;
  }
  // The enter is not in the records: this call began before the window and
  // everything recorded so far ran inside it. Calls still open under it had
  // no exit of their own.
  ++stats_->unmatched_exits;
  for (int j = static_cast<int>(stack_.size()) - 1; j >= 0; --j) CloseAsUnwound(stack_[j], t);
  stack_.clear();
  const int id = static_cast<int>(calls_.size());
  RawCall call;
  call.kind = kind;
  call.address = address;
  call.start_ns = first_time_ns_;
  call.end_ns = t;
  call.open = false;
  call.entered_before_window = true;
  call.children = std::move(roots_);
  calls_.push_back(std::move(call));
  roots_ = {id};
}

void Builder::Decode(absl::Span<const uint64_t> records) {
  bool have_time = false;
  int64_t time_record_ns = 0;  // Last time record: the epoch of what follows.
  int64_t now_ns = 0;          // Monotonic clamp of every decoded time.
  for (const uint64_t r : records) {
    const RecordKind kind = GetRecordKind(r);
    if (kind == RecordKind::kInvalid) {
      ++stats_->invalid_records;
      continue;
    }
    if (IsTimeRecord(r)) {
      time_record_ns = GetRecordTimeNs(r);
      if (!have_time) {
        have_time = true;
        first_time_ns_ = now_ns = time_record_ns;
      }
      now_ns = std::max(now_ns, time_record_ns);
      if (kind == RecordKind::kDispatchBegin) {
        Open(MethodKind::kDispatch, 0, now_ns);
      } else if (kind == RecordKind::kDispatchEnd) {
        Close(MethodKind::kDispatch, 0, now_ns);
      }
      continue;
    }
    if (!have_time) {
      ++stats_->untimed_records;
      continue;
    }
    now_ns = std::max(now_ns, DecodeRecordTime(r, time_record_ns));
    const uintptr_t address = GetRecordAddress(r);
    switch (kind) {
      case RecordKind::kEnter:
        Open(MethodKind::kFunction, address, now_ns);
        break;
      case RecordKind::kExit:
        Close(MethodKind::kFunction, address, now_ns);
        break;
      case RecordKind::kScopeEnter:
        Open(MethodKind::kScope, address, now_ns);
        break;
      case RecordKind::kScopeExit:
        Close(MethodKind::kScope, address, now_ns);
        break;
      default:
        break;
    }
  }
  const int64_t end_ns = std::max(now_ns, options_.end_time.ToNanoseconds());
  for (const int id : stack_) {
    calls_[id].end_ns = end_ns;
    calls_[id].open = false;
    calls_[id].running = true;
    ++stats_->running_calls;
  }
  stack_.clear();
  for (RawCall& call : calls_) call.cost_ns = std::max<int64_t>(0, call.end_ns - call.start_ns);
}

void Builder::MergeInto(int dst, int src) {
  RawCall& d = calls_[dst];
  RawCall& s = calls_[src];
  d.count += s.count;
  d.cost_ns += s.cost_ns;
  d.running |= s.running;
  d.entered_before_window |= s.entered_before_window;
  d.unwound |= s.unwound;
  d.children.insert(d.children.end(), s.children.begin(), s.children.end());
  s.children.clear();
}

void Builder::MergeList(std::vector<int>* list, Mode mode) {
  std::vector<int> out;
  out.reserve(list->size());
  if (mode == Mode::kAdjacent) {
    for (const int c : *list) {
      if (!out.empty() && Mergeable(calls_[out.back()], calls_[c])) {
        MergeInto(out.back(), c);
      } else {
        out.push_back(c);
      }
    }
  } else {
    absl::flat_hash_map<std::pair<MethodKind, uintptr_t>, size_t> first;
    for (const int c : *list) {
      const RawCall& call = calls_[c];
      if (call.kind != MethodKind::kDispatch) {
        auto [it, inserted] =
            first.try_emplace(std::make_pair(call.kind, call.address), out.size());
        if (!inserted) {
          MergeInto(out[it->second], c);
          continue;
        }
      }
      out.push_back(c);
    }
  }
  *list = std::move(out);
}

// Iterative, so a very deep recursion in the traced program cannot overflow
// the analysing thread's stack.
void Builder::Merge() {
  if (!options_.merge) return;
  MergeList(&roots_, Mode::kAdjacent);
  std::vector<int> work(roots_.begin(), roots_.end());
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    // The children of a merged call are an aggregate of several calls'
    // children: merge them by method. Otherwise keep call order and merge
    // only adjacent repeats.
    MergeList(&calls_[id].children, calls_[id].count > 1 ? Mode::kByMethod : Mode::kAdjacent);
    for (const int c : calls_[id].children) work.push_back(c);
  }
}

std::vector<CallNode> Builder::Flatten() const {
  std::vector<CallNode> nodes;
  // (raw id, depth, parent index in `nodes`), pushed in reverse so that
  // children come out in call order.
  std::vector<std::tuple<int, int, int>> work;
  for (auto it = roots_.rbegin(); it != roots_.rend(); ++it) work.emplace_back(*it, 0, -1);
  while (!work.empty()) {
    const auto [id, depth, parent] = work.back();
    work.pop_back();
    const RawCall& call = calls_[id];
    CallNode node;
    node.depth = depth;
    node.parent = parent;
    node.kind = call.kind;
    node.address = call.address;
    if (call.kind == MethodKind::kDispatch) node.name = "dispatch";
    node.count = call.count;
    node.cost = absl::Nanoseconds(call.cost_ns);
    node.start = TimeTicks::FromNanoseconds(call.start_ns);
    node.running = call.running;
    node.entered_before_window = call.entered_before_window;
    node.unwound = call.unwound;
    const int index = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
    for (auto it = call.children.rbegin(); it != call.children.rend(); ++it) {
      work.emplace_back(*it, depth + 1, index);
    }
  }
  return nodes;
}

std::string FlagsString(const CallNode& node) {
  std::string flags;
  if (node.running) flags += 'R';
  if (node.entered_before_window) flags += 'E';
  if (node.unwound) flags += 'U';
  if (node.trimmed_descendants > 0) flags += 'T';
  return flags.empty() ? "-" : flags;
}

std::string DisplayName(const CallNode& node) {
  return node.name.empty() ? absl::StrFormat("0x%x", node.address) : node.name;
}

}  // namespace

CallTree CallTree::Build(absl::Span<const uint64_t> records, const Options& options) {
  CallTree tree;
  Builder builder(options, &tree.stats_);
  builder.Decode(records);
  builder.Merge();
  tree.nodes_ = builder.Flatten();
  return tree;
}

absl::Duration CallTree::MaxTopLevelCost() const {
  absl::Duration max = absl::ZeroDuration();
  for (const CallNode& node : nodes_) {
    if (node.depth == 0) max = std::max(max, node.cost);
  }
  return max;
}

void CallTree::Trim(size_t target_count) {
  if (nodes_.size() <= target_count) return;
  const size_t n = nodes_.size();
  std::vector<int> live_children(n, 0);
  for (const CallNode& node : nodes_) {
    if (node.parent >= 0) ++live_children[node.parent];
  }
  // Min-heap of leaves: cheapest first, then latest (largest index) first.
  using Entry = std::pair<absl::Duration, int>;
  auto later_is_smaller = [](const Entry& a, const Entry& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later_is_smaller)> leaves(
      later_is_smaller);
  for (size_t i = 0; i < n; ++i) {
    if (live_children[i] == 0) leaves.emplace(nodes_[i].cost, static_cast<int>(i));
  }
  std::vector<bool> removed(n, false);
  size_t remaining = n;
  while (remaining > target_count && !leaves.empty()) {
    const int i = leaves.top().second;
    leaves.pop();
    removed[i] = true;
    --remaining;
    const int parent = nodes_[i].parent;
    if (parent >= 0) {
      nodes_[parent].trimmed_descendants += 1 + nodes_[i].trimmed_descendants;
      if (--live_children[parent] == 0) leaves.emplace(nodes_[parent].cost, parent);
    }
  }
  std::vector<int> new_index(n, -1);
  std::vector<CallNode> kept;
  kept.reserve(remaining);
  for (size_t i = 0; i < n; ++i) {
    if (removed[i]) continue;
    new_index[i] = static_cast<int>(kept.size());
    CallNode node = std::move(nodes_[i]);
    // Parents come before children in pre-order and are never removed
    // before them, so the parent's new index is known.
    if (node.parent >= 0) node.parent = new_index[node.parent];
    kept.push_back(std::move(node));
  }
  nodes_ = std::move(kept);
}

std::optional<size_t> CallTree::KeyIndex(absl::Duration total_cost) const {
  if (nodes_.empty()) return std::nullopt;
  const absl::Duration total = std::max(total_cost, MaxTopLevelCost());
  const absl::Duration limit = total * kKeyCostShare;
  std::optional<size_t> best;       // Best above the limit, by (depth+1)*cost.
  std::optional<size_t> costliest;  // Costliest non-dispatch call.
  double best_score = -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const CallNode& node = nodes_[i];
    if (node.kind == MethodKind::kDispatch) continue;
    if (!costliest || node.cost > nodes_[*costliest].cost) costliest = i;
    if (node.cost < limit) continue;
    const double score = (node.depth + 1) * absl::ToDoubleNanoseconds(node.cost);
    if (score > best_score) {
      best_score = score;
      best = i;
    }
  }
  if (best) return best;
  if (costliest) return costliest;
  return size_t{0};
}

void CallTree::ResolveNames(NameResolver resolver) {
  absl::flat_hash_map<uintptr_t, std::string> cache;
  for (CallNode& node : nodes_) {
    switch (node.kind) {
      case MethodKind::kDispatch:
        node.name = "dispatch";
        break;
      case MethodKind::kScope:
        node.name = reinterpret_cast<const TraceSite*>(node.address)->name;
        break;
      case MethodKind::kFunction: {
        auto [it, inserted] = cache.try_emplace(node.address);
        if (inserted) it->second = resolver(node.address);
        node.name = it->second;
        break;
      }
    }
  }
}

std::string CallTree::ToString() const {
  std::string out;
  for (const CallNode& node : nodes_) {
    absl::StrAppend(&out, std::string(node.depth, '.'), DisplayName(node), " ", node.count, " ",
                    std::llround(absl::ToDoubleMilliseconds(node.cost)), "ms");
    if (node.running) absl::StrAppend(&out, " running");
    if (node.entered_before_window) absl::StrAppend(&out, " entered-before-window");
    if (node.unwound) absl::StrAppend(&out, " unwound");
    if (node.trimmed_descendants > 0) {
      absl::StrAppend(&out, " +", node.trimmed_descendants, " trimmed");
    }
    out += '\n';
  }
  return out;
}

std::string CallTree::ToMachineString() const {
  std::string out;
  for (const CallNode& node : nodes_) {
    absl::StrAppend(&out, node.depth, ",", node.count, ",",
                    std::llround(absl::ToDoubleMicroseconds(node.cost)), ",", FlagsString(node),
                    ",", DisplayName(node), "\n");
  }
  return out;
}

}  // namespace matrix
