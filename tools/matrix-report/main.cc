// matrix-report: reads, groups, shows and exports matrix-cpp issue files.
// See docs/matrix-report.md and `matrix-report --help`.

#include <iostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "matrix/report/cli.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  return matrix::report::RunMatrixReport(std::vector<std::string>(argv + 1, argv + argc), std::cin,
                                         std::cout, std::cerr,
                                         {.now = absl::Now(), .local_zone = absl::LocalTimeZone()});
}
