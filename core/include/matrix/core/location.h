// File: matrix/core/location.h
//
// Location records where a task was posted from (function, file, line). It is
// captured for free as a default argument, and identifies messages in reports
// and in Printer lines.
//
//   handler.Post([] { Work(); });          // posted_from = this line
//   handler.Post(task, MATRIX_FROM_HERE);  // the same, spelled out
//
// Thread safety: a value type holding pointers to string literals.

#ifndef MATRIX_CORE_LOCATION_H_
#define MATRIX_CORE_LOCATION_H_

#include <string>

namespace matrix {

class Location {
 public:
  constexpr Location() = default;
  constexpr Location(const char* function, const char* file, int line)
      : function_(function), file_(file), line_(line) {}

  // The caller's location, when used as a default argument.
  static constexpr Location Current(const char* function = __builtin_FUNCTION(),
                                    const char* file = __builtin_FILE(),
                                    int line = __builtin_LINE()) {
    return Location(function, file, line);
  }

  constexpr bool has_source_info() const { return file_ != nullptr; }
  constexpr const char* function_name() const { return function_ ? function_ : ""; }
  constexpr const char* file_name() const { return file_ ? file_ : ""; }
  constexpr int line_number() const { return line_; }
  // As given (null when unknown): for recorders that copy the words as they
  // are and decode them later.
  constexpr const char* raw_function() const { return function_; }
  constexpr const char* raw_file() const { return file_; }

  // "function@file:line" with the file's directory removed, or "unknown".
  std::string ToString() const;

 private:
  const char* function_ = nullptr;
  const char* file_ = nullptr;
  int line_ = 0;
};

}  // namespace matrix

#define MATRIX_FROM_HERE ::matrix::Location::Current()

#endif  // MATRIX_CORE_LOCATION_H_
