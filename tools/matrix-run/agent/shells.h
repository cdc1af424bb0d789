// File: tools/matrix-run/agent/shells.h
//
// Which programs are shells. The agent stays dormant in a shell (a wrapper
// script, a pyenv shim: a launcher that waits for its children in waitpid and
// execs the program, which keeps the pid and is monitored in turn), and
// matrix-run says so when a shell script it launched wrote no report.
//
//   if (matrix::agent::IsShell("/usr/bin/dash")) { /* a launcher */ }
//
// Thread safety: pure functions, any thread.

#ifndef MATRIX_TOOLS_MATRIX_RUN_AGENT_SHELLS_H_
#define MATRIX_TOOLS_MATRIX_RUN_AGENT_SHELLS_H_

#include <string_view>

#include "matrix/core/file_path.h"

namespace matrix::agent {

// Whether `executable` (a path, or a bare name) names a POSIX-style shell or
// busybox: bash, rbash, dash, sh, zsh, ksh, ksh93, mksh, posh, yash, fish.
inline bool IsShell(std::string_view executable) {
  const std::string_view name = BaseName(executable);
  for (std::string_view shell : {"bash", "rbash", "dash", "sh", "zsh", "ksh", "ksh93", "mksh",
                                 "posh", "yash", "fish", "busybox"}) {
    if (name == shell) return true;
  }
  return false;
}

}  // namespace matrix::agent

#endif  // MATRIX_TOOLS_MATRIX_RUN_AGENT_SHELLS_H_
