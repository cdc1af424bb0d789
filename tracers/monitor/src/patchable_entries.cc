// Patchable function entries: finding them in the loaded modules and
// patching them (see patchable_entries.h and docs/method-tracing.md,
// "Patchable entries"). The stubs' code is in patchable_trampolines.cc and
// patchable_stubs.cc.
//
// Patching while other threads run the code. A thread may have been
// preempted between two of the five nops. We never make it execute half an
// instruction: the rel32 of each jump is chosen so that each of its four
// bytes is itself a harmless one-byte instruction (nop, cmc, clc, stc, cld:
// flags are dead and DF is 0 at a function entry), i.e. the stub is placed
// at one of 5^4 addresses 50 MB to 1.9 GB below the function. Patching writes
// bytes A+1..A+4 first (every mix of old and new bytes is one-byte
// instructions), serializes every core of the process (membarrier
// SYNC_CORE), then writes the single byte A = e9. Unpatching reverses it.
// This is the ordering the kernel's text_poke_bp uses, without needing int3.

#include "matrix/trace/patchable_entries.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "matrix/core/check.h"
#include "matrix/trace/method_record.h"
#include "patchable_internal.h"

#if defined(MATRIX_PATCHABLE_SUPPORTED)
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace matrix {
namespace {

using internal::kEntryBytes;
using internal::kStubSize;

constexpr uint8_t kNop = 0x90;
constexpr uint8_t kJmp = 0xe9;
// One-byte instructions that are harmless at a function entry: nop, cmc,
// clc, stc, cld (flags are dead at a call; DF is 0 by the ABI). Not sahf:
// the first x86-64 CPUs lacked it in 64-bit mode.
constexpr uint8_t kSafeBytes[] = {0x90, 0xf5, 0xf8, 0xf9, 0xfc};
// Most-significant byte: the nearest stubs (50-60 MB below) first.
constexpr uint8_t kSafeHighBytes[] = {0xfc, 0xf9, 0xf8, 0xf5, 0x90};
constexpr uintptr_t kPage = 4096;

struct Site {
  uintptr_t stub = 0;
  uint8_t rel[4] = {};
  bool patched = false;
};

struct Segment {
  uintptr_t start = 0;  // Page-aligned.
  uintptr_t end = 0;
  int prot = 0;
};

struct State {
  absl::Mutex mu;
  absl::flat_hash_map<uintptr_t, Site> sites ABSL_GUARDED_BY(mu);
  std::map<uintptr_t, uintptr_t> stub_ranges ABSL_GUARDED_BY(mu);  // start -> end
  absl::flat_hash_set<uintptr_t> stub_pages ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<uintptr_t> bad_pages ABSL_GUARDED_BY(mu);
  size_t patched = 0;  // Written under mu; read racily by PatchedCount().
};

State& GetState() {
  static State* const state = new State;
  return *state;
}

std::atomic<bool> g_membarrier_registered{false};

// Code bytes are written and read outside the sanitizers' view: stubs live in
// pages they do not know about, and text is not theirs to check.
__attribute__((no_sanitize("address", "thread", "undefined"))) MATRIX_NO_INSTRUMENT void
WriteCode(uintptr_t at, const uint8_t* bytes, size_t n) {
  auto* p = reinterpret_cast<volatile uint8_t*>(at);
  for (size_t i = 0; i < n; ++i) p[i] = bytes[i];
}

__attribute__((no_sanitize("address", "thread", "undefined"))) MATRIX_NO_INSTRUMENT void
ReadCode(uintptr_t at, uint8_t* out, size_t n) {
  auto* p = reinterpret_cast<const volatile uint8_t*>(at);
  for (size_t i = 0; i < n; ++i) out[i] = p[i];
}

// Every thread of the process executes a serializing instruction before this
// returns, so none runs code bytes it fetched before the call.
void SyncCores() {
  if (!g_membarrier_registered.load(std::memory_order_relaxed)) {
    g_membarrier_registered.store(
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0,
        std::memory_order_relaxed);
  }
  if (g_membarrier_registered.load(std::memory_order_relaxed)) {
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
  } else {
    // No membarrier (Linux < 4.16): other cores serialize at their next
    // interrupt or context switch; a thread may run the old bytes until then.
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
}

struct Module {
  std::string path;
  uintptr_t bias = 0;
  std::vector<Segment> text;
};

std::vector<Module> LoadedModules() {
  std::vector<Module> modules;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<Module>*>(data);
        Module m;
        m.path = (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') ? "/proc/self/exe"
                                                                             : info->dlpi_name;
        m.bias = info->dlpi_addr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
          Segment seg;
          seg.start = (m.bias + ph.p_vaddr) & ~(kPage - 1);
          seg.end = (m.bias + ph.p_vaddr + ph.p_memsz + kPage - 1) & ~(kPage - 1);
          seg.prot = PROT_EXEC | ((ph.p_flags & PF_R) ? PROT_READ : 0);
          m.text.push_back(seg);
        }
        // The main program is first; later empty names are not files.
        if (!out->empty() && m.path == "/proc/self/exe") return 0;
        if (!m.text.empty()) out->push_back(std::move(m));
        return 0;
      },
      &modules);
  return modules;
}

bool PreadAll(int fd, void* buf, size_t n, off_t at) {
  return pread(fd, buf, n, at) == static_cast<ssize_t>(n);
}

// The in-memory address ranges of the module's __patchable_function_entries
// sections (read from its section headers on disk).
std::vector<std::pair<uintptr_t, size_t>> EntrySections(const Module& m) {
  std::vector<std::pair<uintptr_t, size_t>> out;
  const int fd = open(m.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  ElfW(Ehdr) eh;
  if (PreadAll(fd, &eh, sizeof(eh), 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_shentsize == sizeof(ElfW(Shdr)) &&
      eh.e_shnum > 0 && eh.e_shstrndx < eh.e_shnum) {
    std::vector<ElfW(Shdr)> sh(eh.e_shnum);
    if (PreadAll(fd, sh.data(), sh.size() * sizeof(ElfW(Shdr)), eh.e_shoff)) {
      const ElfW(Shdr)& strtab = sh[eh.e_shstrndx];
      std::string names(strtab.sh_size, '\0');
      if (PreadAll(fd, names.data(), names.size(), strtab.sh_offset)) {
        for (const ElfW(Shdr)& s : sh) {
          if (s.sh_name >= names.size() || (s.sh_flags & SHF_ALLOC) == 0) continue;
          if (strcmp(names.c_str() + s.sh_name, "__patchable_function_entries") == 0) {
            out.emplace_back(m.bias + s.sh_addr, s.sh_size);
          }
        }
      }
    }
  }
  close(fd);
  return out;
}

const Segment* SegmentOf(const std::vector<Module>& modules, uintptr_t a) {
  for (const Module& m : modules) {
    for (const Segment& seg : m.text) {
      if (a >= seg.start && a + kEntryBytes <= seg.end) return &seg;
    }
  }
  return nullptr;
}

bool EnsureStubPages(State& s, uintptr_t from, uintptr_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  for (uintptr_t page = from & ~(kPage - 1); page < to; page += kPage) {
    if (s.stub_pages.contains(page)) continue;
    if (s.bad_pages.contains(page)) return false;
    void* got = mmap(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE | PROT_EXEC,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == reinterpret_cast<void*>(page)) {
      s.stub_pages.insert(page);
      continue;
    }
    if (got != MAP_FAILED) munmap(got, kPage);  // A kernel without MAP_FIXED_NOREPLACE.
    s.bad_pages.insert(page);
    return false;
  }
  return true;
}

bool StubRangeFree(State& s, uintptr_t from, uintptr_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  auto it = s.stub_ranges.lower_bound(to);  // First range starting at or after `to`.
  if (it == s.stub_ranges.begin()) return true;
  --it;
  return it->second <= from;
}

// The thread-pointer offsets (initial-exec TLS: the same for every thread)


// Chooses the stub's place: rel32 made of harmless one-byte instructions.
//
// The low byte r0 fixes where the stub starts in its 64-byte line: the
// choices are tried earliest in the line first. The stub is the target of
// the entry's jump, and a target late in a line costs the front end an
// extra fetch on every traced call (BM_TracedCall/patched_looper_thread:
// +0.27 ns with the stub 37 bytes into its line, none at 10, 13, 14 or 17).
bool PlaceStub(State& s, uintptr_t entry, Site* site) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  std::array<uint8_t, 5> low_bytes;
  std::copy(std::begin(kSafeBytes), std::end(kSafeBytes), low_bytes.begin());
  std::stable_sort(low_bytes.begin(), low_bytes.end(), [entry](uint8_t a, uint8_t b) {
    return (entry + kEntryBytes + a) % 64 < (entry + kEntryBytes + b) % 64;
  });
  for (uint8_t r3 : kSafeHighBytes) {
    for (uint8_t r2 : kSafeBytes) {
      for (uint8_t r1 : kSafeBytes) {
        for (uint8_t r0 : low_bytes) {
          const uint32_t u = uint32_t{r0} | (uint32_t{r1} << 8) | (uint32_t{r2} << 16) |
                             (uint32_t{r3} << 24);
          const int64_t rel = static_cast<int32_t>(u);
          const int64_t at = static_cast<int64_t>(entry + kEntryBytes) + rel;
          if (at <= static_cast<int64_t>(kPage)) continue;
          const uintptr_t stub = static_cast<uintptr_t>(at);
          if (!StubRangeFree(s, stub, stub + kStubSize)) continue;
          if (!EnsureStubPages(s, stub, stub + kStubSize)) continue;
          s.stub_ranges[stub] = stub + kStubSize;
          site->stub = stub;
          site->rel[0] = r0;
          site->rel[1] = r1;
          site->rel[2] = r2;
          site->rel[3] = r3;
          return true;
        }
      }
    }
  }
  return false;
}

// Makes the text segments holding `entries` writable (and still executable)
// for `fn`, then restores them.
template <typename Fn>
absl::Status WithWritableText(const std::vector<Module>& modules,
                              const std::vector<uintptr_t>& entries, Fn fn) {
  std::vector<const Segment*> segs;
  for (uintptr_t a : entries) {
    const Segment* seg = SegmentOf(modules, a);
    if (seg != nullptr && std::find(segs.begin(), segs.end(), seg) == segs.end()) {
      segs.push_back(seg);
    }
  }
  for (const Segment* seg : segs) {
    if (mprotect(reinterpret_cast<void*>(seg->start), seg->end - seg->start,
                 PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "mprotect(PROT_WRITE|PROT_EXEC) of text failed: errno ", errno));
    }
  }
  fn();
  for (const Segment* seg : segs) {
    mprotect(reinterpret_cast<void*>(seg->start), seg->end - seg->start, seg->prot);
  }
  return absl::OkStatus();
}

// The entries of every loaded module's __patchable_function_entries
// sections, sorted and unique.
std::vector<uintptr_t> CollectEntries(const std::vector<Module>& modules,
                                      PatchableEntries::Stats* stats) {
  std::vector<uintptr_t> entries;
  for (const Module& m : modules) {
    const auto sections = EntrySections(m);
    if (!sections.empty()) ++stats->modules;
    for (const auto& [addr, size] : sections) {
      const auto* p = reinterpret_cast<const uint64_t*>(addr);
      for (size_t i = 0; i < size / sizeof(uint64_t); ++i) entries.push_back(p[i]);
    }
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  stats->entries = entries.size();
  return entries;
}

// Gives every unpatched entry of `entries` that still holds five nops a
// stub (placed, written, in the unwind table, registered) and returns
// them; counts the others as skipped.
std::vector<uintptr_t> PrepareStubs(State& s, const std::vector<Module>& modules,
                                    const std::vector<uintptr_t>& entries,
                                    PatchableEntries::Stats* stats)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  const internal::TlsOffsets tls = internal::GetTlsOffsets();
  internal::UnwindTable unwind;
  // New stubs may go into pages that hold live ones: keep them executable.
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE | PROT_EXEC);
  }
  std::vector<uintptr_t> to_patch;
  for (uintptr_t a : entries) {
    auto it = s.sites.find(a);
    if (it != s.sites.end() && it->second.patched) continue;
    uint8_t bytes[kEntryBytes];
    if (SegmentOf(modules, a) == nullptr) {
      ++stats->skipped;
      continue;
    }
    ReadCode(a, bytes, kEntryBytes);
    if (std::any_of(bytes, bytes + kEntryBytes, [](uint8_t b) { return b != kNop; })) {
      ++stats->skipped;
      continue;
    }
    Site& site = s.sites[a];
    if (site.stub == 0) {
      if (!PlaceStub(s, a, &site)) {
        s.sites.erase(a);
        ++stats->skipped;
        continue;
      }
      uint8_t code[kStubSize];
      internal::BuildStub(site.stub, a, tls, code);
      WriteCode(site.stub, code, kStubSize);
      unwind.AddStub(site.stub, a);
    }
    to_patch.push_back(a);
  }
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_EXEC);
  }
  unwind.Register();  // Before any jump to the new stubs.
  return to_patch;
}

}  // namespace

bool PatchableEntries::Supported() { return true; }

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch() {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  Stats stats;
  const std::vector<Module> modules = LoadedModules();
  const std::vector<uintptr_t> to_patch =
      PrepareStubs(s, modules, CollectEntries(modules, &stats), &stats);
  if (!to_patch.empty()) {
    std::vector<std::array<uint8_t, 4>> rels;
    for (uintptr_t a : to_patch) {
      const Site& site = s.sites[a];
      rels.push_back({site.rel[0], site.rel[1], site.rel[2], site.rel[3]});
    }
    SyncCores();  // Stubs are visible before any jump to them.
    const absl::Status status = WithWritableText(modules, to_patch, [&] {
      for (size_t i = 0; i < to_patch.size(); ++i) WriteCode(to_patch[i] + 1, rels[i].data(), 4);
      SyncCores();
      for (uintptr_t a : to_patch) WriteCode(a, &kJmp, 1);
      SyncCores();
    });
    if (!status.ok()) return status;
    for (uintptr_t a : to_patch) s.sites[a].patched = true;
    __atomic_fetch_add(&s.patched, to_patch.size(), __ATOMIC_RELAXED);
  }
  stats.patched = __atomic_load_n(&s.patched, __ATOMIC_RELAXED);
  return stats;
}

absl::Status PatchableEntries::Unpatch() {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  const std::vector<Module> modules = LoadedModules();
  std::vector<uintptr_t> to_unpatch;
  for (auto& [a, site] : s.sites) {
    if (!site.patched) continue;
    site.patched = false;
    // Only what is still ours: a module may have been unloaded.
    if (SegmentOf(modules, a) == nullptr) continue;
    uint8_t bytes[kEntryBytes];
    ReadCode(a, bytes, kEntryBytes);
    if (bytes[0] != kJmp || memcmp(bytes + 1, site.rel, 4) != 0) continue;
    to_unpatch.push_back(a);
  }
  __atomic_store_n(&s.patched, 0, __ATOMIC_RELAXED);
  if (to_unpatch.empty()) return absl::OkStatus();
  static constexpr uint8_t kNops[4] = {kNop, kNop, kNop, kNop};
  return WithWritableText(modules, to_unpatch, [&] {
    for (uintptr_t a : to_unpatch) WriteCode(a, &kNop, 1);
    SyncCores();
    for (uintptr_t a : to_unpatch) WriteCode(a + 1, kNops, 4);
    SyncCores();
  });
}

size_t PatchableEntries::PatchedCount() {
  return __atomic_load_n(&GetState().patched, __ATOMIC_RELAXED);
}

void PatchableEntries::ReadEntryBytes(const void* fn, uint8_t out[5]) {
  ReadCode(reinterpret_cast<uintptr_t>(fn), out, kEntryBytes);
}

}  // namespace matrix

#else  // !MATRIX_PATCHABLE_SUPPORTED

namespace matrix {

bool PatchableEntries::Supported() { return false; }

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch() {
  return absl::UnimplementedError("patchable entries need x86-64 Linux");
}

absl::Status PatchableEntries::Unpatch() { return absl::OkStatus(); }

size_t PatchableEntries::PatchedCount() { return 0; }

void PatchableEntries::ReadEntryBytes(const void* fn, uint8_t out[5]) {
  memcpy(out, fn, 5);
}

}  // namespace matrix

#endif  // MATRIX_PATCHABLE_SUPPORTED
