// How matrix-report's commands read one command-line option: "--name=value"
// splits at its first '='; any other option is all name, and its value (when
// it takes one) is the next argument.

#ifndef MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_
#define MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_

#include <optional>
#include <string>

#include "absl/strings/match.h"

namespace matrix::report::internal {

struct SplitOption {
  std::string name;
  std::optional<std::string> value;  // Given with '='.
};

inline SplitOption SplitOptionArgument(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || !absl::StartsWith(arg, "--")) return {arg, std::nullopt};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

}  // namespace matrix::report::internal

#endif  // MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_
