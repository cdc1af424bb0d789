// File: matrix/core/app_identity.h
//
// What a fleet groups reports by (docs/fleet.md): the machine (a stable host
// id, not its name), the program's build and the version the app gives.
// Every issue carries it (Issue.app), filled by Plugin::OnDetectIssue.
//
//   matrix::SetAppVersion("2.3.1");  // Before Matrix::Init, or any time.
//   const matrix::proto::AppIdentity identity = matrix::CurrentAppIdentity();
//
// Environment: MATRIX_APP_VERSION is the version when SetAppVersion was not
// called (matrix-run --app-version sets it); MATRIX_REPORT_HOSTNAME=1 adds
// the host name.
//
// Thread safety: thread-safe; any thread may call.

#ifndef MATRIX_CORE_APP_IDENTITY_H_
#define MATRIX_CORE_APP_IDENTITY_H_

#include <string>

#include "absl/strings/string_view.h"
#include "matrix/proto/issue.pb.h"

namespace matrix {

// Sets the version string later issues carry. Any thread.
void SetAppVersion(absl::string_view version);

// This process's identity: host id, build id, version (and host name when
// asked for). The host and build ids are computed once. Any thread.
proto::AppIdentity CurrentAppIdentity();

namespace internal {

// The host id of a machine id: 16 hex digits of a hash of
// "matrix-cpp/host:" + `machine_id` (so the id the OS shares with other
// software is not sent as is); empty for an empty machine id.
std::string HostIdFromMachineId(absl::string_view machine_id);

// The GNU build id of the main executable, hex; empty when it has none.
std::string MainBuildId();

}  // namespace internal
}  // namespace matrix

#endif  // MATRIX_CORE_APP_IDENTITY_H_
