#include "matrix/core/interned_string.h"

#include <memory>
#include <unordered_map>

#include "absl/synchronization/mutex.h"

namespace matrix {

const std::string& InternString(std::string_view text) {
  static absl::Mutex* const mu = new absl::Mutex();
  // Keys view the pooled strings themselves, which never move or die.
  static auto* const pool = new std::unordered_map<std::string_view, std::unique_ptr<std::string>>();
  absl::MutexLock lock(mu);
  auto it = pool->find(text);
  if (it != pool->end()) return *it->second;
  auto owned = std::make_unique<std::string>(text);
  const std::string& ref = *owned;
  pool->emplace(std::string_view(ref), std::move(owned));
  return ref;
}

}  // namespace matrix
