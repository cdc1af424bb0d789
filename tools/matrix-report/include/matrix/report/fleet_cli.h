// File: matrix/report/fleet_cli.h
//
// The fleet commands of matrix-report (docs/fleet.md):
//
//   matrix-report push --clickhouse URL [--database matrix] [--follow] DIR...
//   matrix-report fleet --clickhouse URL top|new --since VERSION|fps|show KEY
//   matrix-report html --clickhouse URL [-o FILE]
//
// RunMatrixReport hands these command lines here (IsFleetCommandLine).
//
//   if (IsFleetCommandLine(args)) return RunFleetCommand(args, std::cout, std::cerr);
//
// Thread safety: call from one thread (push --follow installs SIGINT and
// SIGTERM handlers that end the follow loop).

#ifndef MATRIX_REPORT_FLEET_CLI_H_
#define MATRIX_REPORT_FLEET_CLI_H_

#include <ostream>
#include <string>
#include <vector>

#include "matrix/report/cli.h"

namespace matrix::report {

// True for `push ...`, `fleet ...` and `html ... --clickhouse ...`.
bool IsFleetCommandLine(const std::vector<std::string>& args);

// Runs one; exit status as RunMatrixReport's (1 also when the server gave up).
int RunFleetCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const RunEnvironment& env);

// The fleet commands' part of `matrix-report --help`.
const char* FleetUsageText();

}  // namespace matrix::report

#endif  // MATRIX_REPORT_FLEET_CLI_H_
