#include "matrix/core/observer_list.h"

#include <algorithm>

namespace matrix::internal {

void ObserverListCore::Add(void* observer) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  MATRIX_CHECK(observer != nullptr, "null observer");
  MATRIX_CHECK(!Contains(observer), "observer added twice");
  entries_.push_back(observer);
  ++live_;
}

void ObserverListCore::Remove(void* observer) {
  MATRIX_DCHECK_CALLED_ON_VALID_THREAD(thread_checker_);
  auto it = std::find(entries_.begin(), entries_.end(), observer);
  if (it == entries_.end()) return;
  --live_;
  if (iteration_depth_ > 0) {
    *it = nullptr;  // Keep indices stable for iterations in progress.
    needs_compaction_ = true;
  } else {
    entries_.erase(it);
  }
}

bool ObserverListCore::Contains(const void* observer) const {
  return observer != nullptr &&
         std::find(entries_.begin(), entries_.end(), observer) != entries_.end();
}

void ObserverListCore::Compact() {
  entries_.erase(std::remove(entries_.begin(), entries_.end(), nullptr), entries_.end());
  needs_compaction_ = false;
}

}  // namespace matrix::internal
