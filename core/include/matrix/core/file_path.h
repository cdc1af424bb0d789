// File: matrix/core/file_path.h
//
// The two halves of a '/'-separated path, as POSIX basename(1) and dirname(1)
// split it, for module and report file names. Pure functions on the text: no
// file system access, no allocation (the results view `path`).
//
//   matrix::BaseName("/usr/lib/libgtk-3.so.0")  // "libgtk-3.so.0"
//   matrix::DirName("/usr/lib/libgtk-3.so.0")   // "/usr/lib"
//   matrix::DirName("reports.jsonl")            // "."
//
// Thread safety: thread-safe (no state).

#ifndef MATRIX_CORE_FILE_PATH_H_
#define MATRIX_CORE_FILE_PATH_H_

#include <string_view>

namespace matrix {

// What follows the last '/', or the whole path when there is none ("" for a
// path that ends in '/').
constexpr std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// What precedes the last '/': "." when there is none, "/" for a file at the
// root.
constexpr std::string_view DirName(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace matrix

#endif  // MATRIX_CORE_FILE_PATH_H_
