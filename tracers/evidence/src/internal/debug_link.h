// DebugLinkCandidates: where a stripped module's debug file may be, by the
// name its .gnu_debuglink section gives, in GDB's search order. The ELF
// symbol reader and libdwfl's debug-info callback both search these.
//
// Thread safety: a pure function.

#ifndef MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_DEBUG_LINK_H_
#define MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_DEBUG_LINK_H_

#include <string>
#include <string_view>
#include <vector>

namespace matrix::internal {

// For the module at `path` whose debug link names `link`: "<dir>/<link>",
// "<dir>/.debug/<link>", then for each debug directory D "D<dir>/<link>" and
// "D/<link>", where <dir> is the module's directory. Empty when `link` is
// empty or holds a '/' (a debug link is a file name).
std::vector<std::string> DebugLinkCandidates(std::string_view path, std::string_view link,
                                             const std::vector<std::string>& debug_directories);

}  // namespace matrix::internal

#endif  // MATRIX_TRACERS_EVIDENCE_SRC_INTERNAL_DEBUG_LINK_H_
