#include "matrix/core/app_identity.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace matrix {
namespace {

struct VersionState {
  absl::Mutex mu;
  std::optional<std::string> version ABSL_GUARDED_BY(mu);
};

VersionState& Version() {
  static VersionState* const state = new VersionState;
  return *state;
}

std::string ReadMachineId() {
  for (const char* path : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    std::ifstream in(path);
    std::string id;
    if (in && std::getline(in, id)) {
      absl::StripAsciiWhitespace(&id);
      if (!id.empty()) return id;
    }
  }
  return "";
}

// FNV-1a, 64 bits: stable across builds and machines.
uint64_t Fnv1a(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

int FindBuildId(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<std::string*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + phdr.p_vaddr);
    const char* end = p + phdr.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
          std::string(name, 3) == "GNU" && desc + note->n_descsz <= end) {
        for (uint32_t b = 0; b < note->n_descsz; ++b) {
          absl::StrAppendFormat(out, "%02x", static_cast<unsigned char>(desc[b]));
        }
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // Only the first object (the main program) is looked at.
}

}  // namespace

namespace internal {

std::string HostIdFromMachineId(absl::string_view machine_id) {
  if (machine_id.empty()) return "";
  return absl::StrFormat("%016x", Fnv1a(absl::StrCat("matrix-cpp/host:", machine_id)));
}

std::string MainBuildId() {
  std::string id;
  dl_iterate_phdr(&FindBuildId, &id);
  return id;
}

}  // namespace internal

void SetAppVersion(absl::string_view version) {
  VersionState& state = Version();
  absl::MutexLock lock(&state.mu);
  state.version = std::string(version);
}

proto::AppIdentity CurrentAppIdentity() {
  static const proto::AppIdentity* const fixed = [] {
    auto* identity_ptr = new proto::AppIdentity;
    proto::AppIdentity& identity = *identity_ptr;
    identity.set_host_id(internal::HostIdFromMachineId(ReadMachineId()));
    identity.set_build_id(internal::MainBuildId());
    if (const char* ask = std::getenv("MATRIX_REPORT_HOSTNAME");
        ask != nullptr && std::string(ask) == "1") {
      char name[256] = {0};
      if (gethostname(name, sizeof(name) - 1) == 0) identity.set_host_name(name);
    }
    return identity_ptr;
  }();
  proto::AppIdentity identity = *fixed;
  VersionState& state = Version();
  absl::MutexLock lock(&state.mu);
  if (state.version.has_value()) {
    identity.set_version(*state.version);
  } else if (const char* env = std::getenv("MATRIX_APP_VERSION"); env != nullptr) {
    identity.set_version(env);
  }
  return identity;
}

}  // namespace matrix
