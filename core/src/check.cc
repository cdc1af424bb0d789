#include "matrix/core/check.h"

#include <cstdio>
#include <cstdlib>

#include "matrix/core/logging.h"

namespace matrix::internal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "[matrix] FATAL %s:%d: check failed: %s: %s\n", file, line, condition,
               message);
  std::fflush(stderr);
  FlushLogs();
  std::abort();
}

}  // namespace matrix::internal
