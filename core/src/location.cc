#include "matrix/core/location.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace matrix {

std::string Location::ToString() const {
  if (!has_source_info()) return "unknown";
  const char* slash = std::strrchr(file_, '/');
  return absl::StrCat(function_name(), "@", slash ? slash + 1 : file_, ":", line_);
}

}  // namespace matrix
