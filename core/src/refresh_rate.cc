#include "matrix/core/refresh_rate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace matrix {

std::string RefreshRate::ToString() const {
  if (mhz_ % 1000 == 0) return absl::StrCat(mhz_ / 1000, "Hz");
  std::string s = absl::StrFormat("%.3f", hz());
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s + "Hz";
}

}  // namespace matrix
