#include "matrix/trace/call_tree.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"

namespace matrix {
namespace {

constexpr int kNone = -1;

// A call while the tree is being built. Children form an intrusive singly
// linked list (first_child .. last_child via next_sibling), so building and
// merging a full buffer allocates nothing per call.
struct RawCall {
  uintptr_t address = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // The call's last (re)entry, and the time of its earlier calls when later
  // repeats were folded into it (a full tree: Options::max_calls).
  int64_t open_ns = 0;
  int64_t folded_ns = 0;
  int64_t cost_ns = 0;
  // Calls under this one dropped because the tree was full.
  int dropped = 0;
  int first_child = kNone;
  int last_child = kNone;
  int next_sibling = kNone;
  int count = 1;
  MethodKind kind = MethodKind::kFunction;
  bool running = false;
  bool entered_before_window = false;
  bool unwound = false;
};

// Decides which calls survive Trim(target) for a tree in pre-order
// (`parent[i] < i`). Removing the cheapest leaf (latest first) over and over
// keeps exactly the `target` calls with the largest (cost, -index): a call
// never costs more than its parent (its time lies inside the parent's, and
// merged children sum calls that lie inside the merged parent's calls), and
// among equal costs the later, deeper call goes first. So this selects
// instead of simulating, in O(n). Returns the keep mask.
std::vector<bool> SelectSurvivors(const std::vector<int64_t>& cost, const std::vector<int>& parent,
                                  size_t target) {
  const size_t n = cost.size();
  std::vector<bool> keep(n, target >= n);
  if (target >= n || target == 0) return keep;
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  std::nth_element(order.begin(), order.begin() + target, order.end(), [&cost](int a, int b) {
    return cost[a] != cost[b] ? cost[a] > cost[b] : a < b;
  });
  for (size_t k = 0; k < target; ++k) keep[order[k]] = true;
  // Never a call without its parent. A no-op given the invariant above;
  // it keeps the tree consistent even if a future change broke it.
  for (size_t i = n; i-- > 0;) {
    if (keep[i] && parent[i] != kNone) keep[parent[i]] = true;
  }
  return keep;
}

class Builder {
 public:
  Builder(const CallTree::Options& options, CallTree::Stats* stats)
      : options_(options), stats_(stats) {
    calls_.emplace_back();  // kRoot: the virtual parent of top-level calls.
  }

  void Decode(absl::Span<const uint64_t> records);
  void Merge();
  std::vector<CallNode> Flatten(std::optional<size_t> trim_to) const;

 private:
  static constexpr int kRoot = 0;

  // Whether a call of `kind` at `address` repeats `a` (dispatches never do).
  static bool Repeats(const RawCall& a, MethodKind kind, uintptr_t address) {
    return a.kind != MethodKind::kDispatch && a.kind == kind && a.address == address;
  }

  // A stack entry below kNone is a dropped call: -2 - its index in
  // phantoms_. Dropped calls are always the innermost entries.
  static bool IsPhantom(int entry) { return entry < kNone; }
  // The innermost open call that is in the tree (kRoot when none is).
  int InnermostKept() const {
    const size_t kept = stack_.size() - phantoms_.size();
    return kept == 0 ? kRoot : stack_[kept - 1];
  }
  bool Full() const { return options_.max_calls != 0 && calls_.size() > options_.max_calls; }

  void AppendChild(int parent, int child);
  void Open(MethodKind kind, uintptr_t address, int64_t t);
  void Close(MethodKind kind, uintptr_t address, int64_t t);
  void CloseAsUnwound(int id, int64_t t);
  void MergeInto(int dst, int src);
  void MergeAdjacentChildren(int parent);
  void MergeChildrenByMethod(int parent);

  const CallTree::Options& options_;
  CallTree::Stats* stats_;
  std::vector<RawCall> calls_;
  std::vector<int> stack_;  // Open calls, innermost last.
  // Open calls that were dropped (the tree was full): what their exits match.
  std::vector<std::pair<MethodKind, uintptr_t>> phantoms_;
  int64_t first_time_ns_ = 0;
  absl::flat_hash_map<std::pair<MethodKind, uintptr_t>, int> by_method_;
};

void Builder::AppendChild(int parent, int child) {
  RawCall& p = calls_[parent];
  if (p.last_child == kNone) {
    p.first_child = child;
  } else {
    calls_[p.last_child].next_sibling = child;
  }
  p.last_child = child;
}

void Builder::Open(MethodKind kind, uintptr_t address, int64_t t) {
  if (!phantoms_.empty() || Full()) {
    const int parent = InnermostKept();
    const int last = calls_[parent].last_child;
    if (phantoms_.empty() && last != kNone && Repeats(calls_[last], kind, address)) {
      // A repeat of the finished call before it: fold it in and reopen.
      RawCall& call = calls_[last];
      call.folded_ns += std::max<int64_t>(0, call.end_ns - call.open_ns);
      call.open_ns = t;
      ++call.count;
      stack_.push_back(last);
      ++stats_->folded_calls;
      return;
    }
    ++calls_[parent].dropped;
    ++stats_->dropped_calls;
    phantoms_.emplace_back(kind, address);
    stack_.push_back(-1 - static_cast<int>(phantoms_.size()));
    return;
  }
  const int id = static_cast<int>(calls_.size());
  RawCall& call = calls_.emplace_back();
  call.kind = kind;
  call.address = address;
  call.start_ns = call.open_ns = t;
  AppendChild(stack_.empty() ? kRoot : stack_.back(), id);
  stack_.push_back(id);
}

void Builder::CloseAsUnwound(int id, int64_t t) {
  calls_[id].end_ns = t;
  calls_[id].unwound = true;
  ++stats_->unwound_calls;
}

void Builder::Close(MethodKind kind, uintptr_t address, int64_t t) {
  const int kept = static_cast<int>(stack_.size() - phantoms_.size());
  for (int k = static_cast<int>(stack_.size()) - 1; k >= 0; --k) {
    const int entry = stack_[k];
    const std::pair<MethodKind, uintptr_t> open =
        IsPhantom(entry) ? phantoms_[static_cast<size_t>(-2 - entry)]
                         : std::make_pair(calls_[entry].kind, calls_[entry].address);
    if (open != std::make_pair(kind, address)) continue;
    for (int j = std::min(static_cast<int>(stack_.size()), kept) - 1; j > k; --j) {
      CloseAsUnwound(stack_[j], t);
    }
    if (!IsPhantom(entry)) calls_[entry].end_ns = t;
    stack_.resize(k);
    phantoms_.resize(static_cast<size_t>(std::max(k - kept, 0)));
    return;
  }
  // The enter is not in the records: this call began before the window and
  // everything recorded so far ran inside it. Calls still open under it had
  // no exit of their own.
  ++stats_->unmatched_exits;
  for (int j = kept - 1; j >= 0; --j) CloseAsUnwound(stack_[j], t);
  stack_.clear();
  phantoms_.clear();
  const int id = static_cast<int>(calls_.size());
  RawCall& call = calls_.emplace_back();
  call.kind = kind;
  call.address = address;
  call.start_ns = call.open_ns = first_time_ns_;
  call.end_ns = t;
  call.entered_before_window = true;
  RawCall& root = calls_[kRoot];
  call.first_child = root.first_child;
  call.last_child = root.last_child;
  root.first_child = root.last_child = id;
}

void Builder::Decode(absl::Span<const uint64_t> records) {
  size_t expected = records.size() / 2 + 2;
  if (options_.max_calls != 0) expected = std::min(expected, options_.max_calls + 2);
  calls_.reserve(expected);
  bool have_time = false;
  // The last tick or dispatch-begin record: the epoch of what follows. A
  // dispatch end leaves the writer's epoch as it was (MethodTracer).
  bool have_epoch = false;
  int64_t time_record_ns = 0;
  int64_t now_ns = 0;          // Monotonic clamp of every decoded time.
  for (const uint64_t r : records) {
    const RecordKind kind = GetRecordKind(r);
    if (kind == RecordKind::kInvalid) {
      ++stats_->invalid_records;
      continue;
    }
    if (IsTimeRecord(r)) {
      const int64_t t = GetRecordTimeNs(r);
      if (kind != RecordKind::kDispatchEnd) {
        time_record_ns = t;
        have_epoch = true;
      }
      if (!have_time) {
        have_time = true;
        first_time_ns_ = now_ns = t;
      }
      now_ns = std::max(now_ns, t);
      if (kind == RecordKind::kDispatchBegin) {
        Open(MethodKind::kDispatch, 0, now_ns);
      } else if (kind == RecordKind::kDispatchEnd) {
        Close(MethodKind::kDispatch, 0, now_ns);
      }
      continue;
    }
    if (!have_epoch) {
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
    if (IsPhantom(id)) continue;
    calls_[id].end_ns = end_ns;
    calls_[id].running = true;
    ++stats_->running_calls;
  }
  stack_.clear();
  phantoms_.clear();
  for (size_t i = 1; i < calls_.size(); ++i) {
    RawCall& call = calls_[i];
    call.cost_ns = call.folded_ns + std::max<int64_t>(0, call.end_ns - call.open_ns);
  }
}

// Moves src's count, cost, flags and children into dst. The caller unlinks
// src from its sibling list.
void Builder::MergeInto(int dst, int src) {
  RawCall& d = calls_[dst];
  RawCall& s = calls_[src];
  d.count += s.count;
  d.cost_ns += s.cost_ns;
  d.end_ns = std::max(d.end_ns, s.end_ns);
  d.dropped += s.dropped;
  d.running |= s.running;
  d.entered_before_window |= s.entered_before_window;
  d.unwound |= s.unwound;
  if (s.first_child != kNone) {
    if (d.last_child == kNone) {
      d.first_child = s.first_child;
    } else {
      calls_[d.last_child].next_sibling = s.first_child;
    }
    d.last_child = s.last_child;
  }
  s.first_child = s.last_child = kNone;
}

void Builder::MergeAdjacentChildren(int parent) {
  int prev = kNone;
  for (int c = calls_[parent].first_child; c != kNone;) {
    const int next = calls_[c].next_sibling;
    if (prev != kNone && Repeats(calls_[prev], calls_[c].kind, calls_[c].address)) {
      MergeInto(prev, c);
      calls_[prev].next_sibling = next;
      if (calls_[parent].last_child == c) calls_[parent].last_child = prev;
    } else {
      prev = c;
    }
    c = next;
  }
}

void Builder::MergeChildrenByMethod(int parent) {
  by_method_.clear();
  int prev = kNone;
  for (int c = calls_[parent].first_child; c != kNone;) {
    const int next = calls_[c].next_sibling;
    bool merged = false;
    if (calls_[c].kind != MethodKind::kDispatch) {
      auto [it, inserted] =
          by_method_.try_emplace(std::make_pair(calls_[c].kind, calls_[c].address), c);
      if (!inserted) {
        MergeInto(it->second, c);
        calls_[prev].next_sibling = next;  // prev exists: `it` came before c.
        if (calls_[parent].last_child == c) calls_[parent].last_child = prev;
        merged = true;
      }
    }
    if (!merged) prev = c;
    c = next;
  }
}

// Iterative, so a very deep recursion in the traced program cannot overflow
// the analysing thread's stack.
void Builder::Merge() {
  if (!options_.merge) return;
  std::vector<int> work = {kRoot};
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    // The children of a merged call are an aggregate of several calls'
    // children: merge them by method. Otherwise keep call order and merge
    // only adjacent repeats.
    if (id != kRoot && calls_[id].count > 1) {
      MergeChildrenByMethod(id);
    } else {
      MergeAdjacentChildren(id);
    }
    for (int c = calls_[id].first_child; c != kNone; c = calls_[c].next_sibling) {
      work.push_back(c);
    }
  }
}

std::vector<CallNode> Builder::Flatten(std::optional<size_t> trim_to) const {
  // Pre-order ids, depths and parent positions, children in call order.
  std::vector<int> ids;
  std::vector<int> depth;
  std::vector<int> parent;
  ids.reserve(calls_.size());
  std::vector<std::tuple<int, int, int>> work;  // (id, depth, parent position)
  auto push_children = [&](int id, int d, int position) {
    const size_t mark = work.size();
    for (int c = calls_[id].first_child; c != kNone; c = calls_[c].next_sibling) {
      work.emplace_back(c, d, position);
    }
    std::reverse(work.begin() + mark, work.end());
  };
  push_children(kRoot, 0, kNone);
  while (!work.empty()) {
    const auto [id, d, p] = work.back();
    work.pop_back();
    const int position = static_cast<int>(ids.size());
    ids.push_back(id);
    depth.push_back(d);
    parent.push_back(p);
    push_children(id, d + 1, position);
  }

  std::vector<bool> keep;
  std::vector<int> trimmed(ids.size(), 0);
  if (trim_to && *trim_to < ids.size()) {
    std::vector<int64_t> cost(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) cost[i] = calls_[ids[i]].cost_ns;
    keep = SelectSurvivors(cost, parent, *trim_to);
    // Count each removed call at its nearest kept ancestor.
    std::vector<int> nearest_kept(ids.size(), kNone);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int up = parent[i] == kNone ? kNone : nearest_kept[parent[i]];
      nearest_kept[i] = keep[i] ? static_cast<int>(i) : up;
      if (!keep[i] && up != kNone) trimmed[up] += 1 + calls_[ids[i]].dropped;
    }
  } else {
    keep.assign(ids.size(), true);
  }

  std::vector<CallNode> nodes;
  nodes.reserve(static_cast<size_t>(std::count(keep.begin(), keep.end(), true)));
  std::vector<int> new_index(ids.size(), kNone);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!keep[i]) continue;
    const RawCall& call = calls_[ids[i]];
    new_index[i] = static_cast<int>(nodes.size());
    CallNode& node = nodes.emplace_back();
    node.depth = depth[i];
    node.parent = parent[i] == kNone ? kNone : new_index[parent[i]];
    node.kind = call.kind;
    node.address = call.address;
    if (call.kind == MethodKind::kDispatch) node.name = "dispatch";
    node.count = call.count;
    node.cost = absl::Nanoseconds(call.cost_ns);
    node.start = TimeTicks::FromNanoseconds(call.start_ns);
    node.end = TimeTicks::FromNanoseconds(std::max(call.end_ns, call.start_ns));
    node.running = call.running;
    node.entered_before_window = call.entered_before_window;
    node.unwound = call.unwound;
    node.trimmed_descendants = trimmed[i] + call.dropped;
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
  tree.nodes_ = builder.Flatten(options.trim_to);
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
  const size_t n = nodes_.size();
  if (n <= target_count) return;
  std::vector<int64_t> cost(n);
  std::vector<int> parent(n);
  for (size_t i = 0; i < n; ++i) {
    cost[i] = absl::ToInt64Nanoseconds(nodes_[i].cost);
    parent[i] = nodes_[i].parent;
  }
  const std::vector<bool> keep = SelectSurvivors(cost, parent, target_count);
  // Count each removed call (and what earlier trims removed under it) at its
  // nearest kept ancestor, then compact. Parents precede children.
  std::vector<int> nearest_kept(n, kNone);
  for (size_t i = 0; i < n; ++i) {
    const int up = parent[i] == kNone ? kNone : nearest_kept[parent[i]];
    nearest_kept[i] = keep[i] ? static_cast<int>(i) : up;
    if (!keep[i] && up != kNone) {
      nodes_[up].trimmed_descendants += 1 + nodes_[i].trimmed_descendants;
    }
  }
  std::vector<int> new_index(n, kNone);
  std::vector<CallNode> kept;
  kept.reserve(target_count);
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    new_index[i] = static_cast<int>(kept.size());
    CallNode node = std::move(nodes_[i]);
    if (node.parent != kNone) node.parent = new_index[node.parent];
    kept.push_back(std::move(node));
  }
  nodes_ = std::move(kept);
}

std::optional<size_t> CallTree::KeyIndex(absl::Duration total_cost) const {
  if (nodes_.empty()) return std::nullopt;
  const absl::Duration total = std::max(total_cost, MaxTopLevelCost());
  const absl::Duration limit = total * kKeyCostShare;
  // The costliest child of every call (the first one on ties); the last slot
  // stands for the virtual root above the top-level calls.
  constexpr int kNone = -1;
  std::vector<int> costliest_child(nodes_.size() + 1, kNone);
  std::optional<size_t> costliest;  // Costliest non-dispatch call, the fallback.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const CallNode& node = nodes_[i];
    const size_t parent = node.parent < 0 ? nodes_.size() : static_cast<size_t>(node.parent);
    int& child = costliest_child[parent];
    if (child == kNone || node.cost > nodes_[child].cost) child = static_cast<int>(i);
    if (node.kind != MethodKind::kDispatch &&
        (!costliest || node.cost > nodes_[*costliest].cost)) {
      costliest = i;
    }
  }
  // Follow the costliest child down while it holds at least the limit.
  int at = kNone;
  for (int next = costliest_child[nodes_.size()]; next != kNone && nodes_[next].cost >= limit;
       next = costliest_child[next]) {
    at = next;
  }
  if (at != kNone && nodes_[at].kind != MethodKind::kDispatch) return static_cast<size_t>(at);
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
