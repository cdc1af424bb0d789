// How matrix-report's commands and matrix-run read their command-line
// options: a table of OptionFlag (name, whether it takes a value, what it
// sets), looked up by FindOptionFlag(). "--name=value" splits at its first
// '='; any other option is all name, and its value (when it takes one) is the
// next argument.

#ifndef MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_
#define MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
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

// One option of a command: its name, whether it takes a value, and what it
// sets in the command's parse state.
template <typename State>
struct OptionFlag {
  const char* name;
  bool takes_value;
  absl::Status (*set)(State& state, const std::string& value);
};

// The option named `name` in `flags`, or null.
template <typename State, size_t N>
const OptionFlag<State>* FindOptionFlag(const OptionFlag<State> (&flags)[N],
                                        std::string_view name) {
  for (const OptionFlag<State>& flag : flags) {
    if (name == flag.name) return &flag;
  }
  return nullptr;
}

}  // namespace matrix::report::internal

#endif  // MATRIX_TOOLS_MATRIX_REPORT_SRC_INTERNAL_OPTION_SPLIT_H_
