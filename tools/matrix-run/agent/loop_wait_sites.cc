#include "loop_wait_sites.h"

namespace matrix::agent {

namespace {

// Whether two return addresses are in the same function, as far as the rule
// can tell without symbols.
bool SameFunction(uintptr_t a, uintptr_t b) {
  return (a > b ? a - b : b - a) <= LoopWaitSites::kSameFunctionBytes;
}

}  // namespace

const LoopWaitSites::Entry* LoopWaitSites::Find(const CallSite& site) const {
  for (int i = 0; i < used_; ++i) {
    const Entry& e = entries_[i];
    if (e.used && e.site.frame == site.frame && e.site.fd == site.fd &&
        SameFunction(e.site.return_address, site.return_address)) {
      return &e;
    }
  }
  return nullptr;
}

bool LoopWaitSites::IsLoopWait(const CallSite& site) const {
  const Entry* e = Find(site);
  return e != nullptr && e->loop;
}

LoopWaitSites::Entry* LoopWaitSites::Add(const CallSite& site) {
  Entry* slot = nullptr;
  if (used_ < kCapacity) {
    slot = &entries_[used_++];
  } else {
    // Full: replace the next entry that is not a learned loop wait.
    for (int tries = 0; tries < kCapacity && slot == nullptr; ++tries) {
      Entry& e = entries_[next_replaced_];
      next_replaced_ = (next_replaced_ + 1) % kCapacity;
      if (!e.loop) slot = &e;
    }
    if (slot == nullptr) return nullptr;  // kCapacity loop waits: learn no more.
  }
  *slot = Entry{.site = site, .used = true};
  return slot;
}

void LoopWaitSites::CountWait(const CallSite& site, int64_t waited_ns, uintptr_t poll_loop_frame) {
  Entry* e = Find(site);
  if (e == nullptr) e = Add(site);
  if (e == nullptr) return;
  if (waited_ns >= kBlockedNanos) {
    ++e->blocked_balance;
  } else if (e->blocked_balance > 0) {
    --e->blocked_balance;
  }
  const bool in_poll_loop_handler = poll_loop_frame != 0 && site.frame < poll_loop_frame;
  if (e->blocked_balance >= kBlockedWaitsToLearn && !in_poll_loop_handler && MayBeLoop(e->site)) {
    e->loop = true;
  }
}

bool LoopWaitSites::MayBeLoop(const CallSite& site) const {
  bool deeper_than_a_loop = false;
  for (int i = 0; i < used_; ++i) {
    const Entry& e = entries_[i];
    if (!e.used || !e.loop) continue;
    if (SameFunction(e.site.return_address, site.return_address)) return true;  // Nested.
    if (site.frame < e.site.frame) deeper_than_a_loop = true;
  }
  return !deeper_than_a_loop;
}

void LoopWaitSites::OnBoundary(uintptr_t frame) {
  for (int i = 0; i < used_; ++i) {
    Entry& e = entries_[i];
    if (e.used && e.site.frame < frame) {
      e.blocked_balance = 0;
      e.loop = false;
    }
  }
}

int LoopWaitSites::LoopWaitCount() const {
  int n = 0;
  for (int i = 0; i < used_; ++i) n += entries_[i].used && entries_[i].loop ? 1 : 0;
  return n;
}

}  // namespace matrix::agent
