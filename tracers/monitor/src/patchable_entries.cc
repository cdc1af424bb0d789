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
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
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
using internal::kReturnSiteBytes;
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

using Mechanism = PatchableEntries::Mechanism;

// A patchable entry: its stub for each mechanism (placed on first use), and
// the mechanism it is patched with (kAuto: not patched).
struct Site {
  uintptr_t stub = 0;  // The wrapping stub.
  uint8_t rel[4] = {};
  uintptr_t rs_stub = 0;  // The return-site stub.
  uint8_t rs_rel[4] = {};
  bool patched = false;
  Mechanism mechanism = Mechanism::kAuto;
  std::vector<uintptr_t> returns;  // Its return sites, when all have exit stubs.
};

// A return site: the five-byte nop 0f 1f 44 00 00, patched as the call
// e8 1f 44 hi0 hi1 to its own exit stub, placed where that rel32 lands.
struct ReturnSite {
  uintptr_t exit_stub = 0;
  uint8_t hi[2] = {};
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
  absl::flat_hash_map<uintptr_t, ReturnSite> returns ABSL_GUARDED_BY(mu);
  std::map<uintptr_t, uintptr_t> stub_ranges ABSL_GUARDED_BY(mu);  // start -> end
  absl::flat_hash_set<uintptr_t> stub_pages ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<uintptr_t> bad_pages ABSL_GUARDED_BY(mu);
  size_t patched = 0;  // Written under mu; read racily by PatchedCount().
  // Every wrapping stub (stub, entry), all in the one unwind table registered.
  std::vector<std::pair<uintptr_t, uintptr_t>> wrap_stubs ABSL_GUARDED_BY(mu);
  void* unwind_table ABSL_GUARDED_BY(mu) = nullptr;
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

// The module's sections found on disk by name: for each module, the
// in-memory address ranges of its __patchable_function_entries and
// __return_loc sections (read from its section headers).
struct SiteSections {
  std::vector<std::pair<uintptr_t, size_t>> entries;
  std::vector<std::pair<uintptr_t, size_t>> returns;
};

SiteSections SiteSectionsOf(const Module& m) {
  SiteSections out;
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
          const char* name = names.c_str() + s.sh_name;
          if (strcmp(name, "__patchable_function_entries") == 0) {
            out.entries.emplace_back(m.bias + s.sh_addr, s.sh_size);
          } else if (strcmp(name, "__return_loc") == 0) {
            out.returns.emplace_back(m.bias + s.sh_addr, s.sh_size);
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

// Chooses the place of a stub of `size` bytes for the entry at `entry`: rel32
// made of harmless one-byte instructions.
//
// The low byte r0 fixes where the stub starts in its 64-byte line: the
// choices are tried earliest in the line first. The stub is the target of
// the entry's jump, and a target late in a line costs the front end an
// extra fetch on every traced call (BM_TracedCall/patched_looper_thread:
// +0.27 ns with the stub 37 bytes into its line, none at 10, 13, 14 or 17).
bool PlaceStub(State& s, uintptr_t entry, size_t size, uintptr_t* stub_out, uint8_t rel_out[4])
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
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
          if (!StubRangeFree(s, stub, stub + size)) continue;
          if (!EnsureStubPages(s, stub, stub + size)) continue;
          s.stub_ranges[stub] = stub + size;
          *stub_out = stub;
          rel_out[0] = r0;
          rel_out[1] = r1;
          rel_out[2] = r2;
          rel_out[3] = r3;
          return true;
        }
      }
    }
  }
  return false;
}

// Return sites. A site's nop 0f 1f 44 00 00 becomes the call
// e8 1f 44 hi0 hi1: its rel32 keeps the nop's second and third bytes, so
// that writing hi0 hi1 first leaves a nop (they are its SIB and disp8), and
// the one byte e8 written last makes it the call. The call's target, at
// site + 5 + 0x441f + hi * 65536, is the site's own exit stub (sites closer
// than a stub's size take different hi).
constexpr uint8_t kReturnNop[kReturnSiteBytes] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
constexpr uint8_t kCall = 0xe8;

uintptr_t ExitStubAt(uintptr_t site, int hi) {
  const int32_t rel = static_cast<int32_t>((static_cast<uint32_t>(hi) << 16) | 0x441f);
  return static_cast<uintptr_t>(static_cast<int64_t>(site + kReturnSiteBytes) + rel);
}

// Places the exit stub of `site` below `floor` (the lowest address of the
// site's module).
bool PlaceExitStub(State& s, uintptr_t site, uintptr_t floor, ReturnSite* out)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  constexpr size_t kSize = internal::kReturnSiteExitSize;
  const int64_t highest =
      (static_cast<int64_t>(floor) - static_cast<int64_t>(ExitStubAt(site, 0)) - 2 * 65536) / 65536;
  for (int64_t hi = std::min<int64_t>(highest, 32767); hi >= -32768; --hi) {
    const uintptr_t t = ExitStubAt(site, static_cast<int>(hi));
    if (t <= kPage) break;
    if (!StubRangeFree(s, t, t + kSize)) continue;
    if (!EnsureStubPages(s, t, t + kSize)) continue;
    s.stub_ranges[t] = t + kSize;
    out->exit_stub = t;
    out->hi[0] = static_cast<uint8_t>(hi);
    out->hi[1] = static_cast<uint8_t>(static_cast<uint64_t>(hi) >> 8);
    return true;
  }
  return false;
}

// Makes the text segments holding `addresses` writable (and still
// executable) for `fn`, then restores them.
template <typename Fn>
absl::Status WithWritableText(const std::vector<Module>& modules,
                              const std::vector<uintptr_t>& addresses, Fn fn) {
  std::vector<const Segment*> segs;
  for (uintptr_t a : addresses) {
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

// Every loaded module's entries, sorted and unique, and its return sites
// with their functions' entries (sites of functions without an entry are
// left out; PATCHABLE builds keep every return in its function's one block).
struct Sites {
  std::vector<uintptr_t> entries;
  std::vector<std::pair<uintptr_t, uintptr_t>> returns;  // (site, entry)
  absl::flat_hash_set<uintptr_t> with_return_sites;      // Entries with at least one.
};

Sites CollectSites(const std::vector<Module>& modules, PatchableEntries::Stats* stats) {
  Sites out;
  std::vector<uintptr_t> candidates;
  for (const Module& m : modules) {
    const SiteSections sections = SiteSectionsOf(m);
    if (sections.entries.empty()) continue;
    ++stats->modules;
    for (const auto& [addr, size] : sections.entries) {
      const auto* p = reinterpret_cast<const uint64_t*>(addr);
      for (size_t i = 0; i < size / sizeof(uint64_t); ++i) out.entries.push_back(p[i]);
    }
    for (const auto& [addr, size] : sections.returns) {
      const auto* p = reinterpret_cast<const uint64_t*>(addr);
      for (size_t i = 0; i < size / sizeof(uint64_t); ++i) {
        if (p[i] != 0) candidates.push_back(p[i]);  // 0: matrix's own padding.
      }
    }
  }
  std::sort(out.entries.begin(), out.entries.end());
  out.entries.erase(std::unique(out.entries.begin(), out.entries.end()), out.entries.end());
  stats->entries = out.entries.size();
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  for (uintptr_t site : candidates) {
    const uintptr_t entry = internal::EntryOfFunctionAt(site, out.entries);
    if (entry == 0) continue;
    out.returns.emplace_back(site, entry);
    out.with_return_sites.insert(entry);
  }
  stats->return_sites = out.returns.size();
  return out;
}

bool HoldsNops(uintptr_t a) {
  uint8_t bytes[kEntryBytes];
  ReadCode(a, bytes, kEntryBytes);
  return std::all_of(bytes, bytes + kEntryBytes, [](uint8_t b) { return b == kNop; });
}

// A return site as the compiler left it, or as Unpatch() leaves it (a nop
// whose SIB and disp8 bytes hold an exit stub's rel32).
bool HoldsReturnNop(uintptr_t site) {
  uint8_t bytes[kReturnSiteBytes];
  ReadCode(site, bytes, kReturnSiteBytes);
  return memcmp(bytes, kReturnNop, 3) == 0;
}

// Gives every entry of `entries` a stub of `mechanism` (placed, written, and
// for the wrapping stub in the unwind table, registered), and with
// kReturnSites an exit stub for each of its return sites; an entry that gets
// no return-site stub or exit stubs gets a wrapping stub. Returns the
// entries to patch; counts the others as skipped.
std::vector<uintptr_t> PrepareStubs(State& s, const std::vector<Module>& modules,
                                    const std::vector<uintptr_t>& entries, const Sites& sites,
                                    Mechanism mechanism, PatchableEntries::Stats* stats)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  const internal::TlsOffsets tls = internal::GetTlsOffsets();
  const size_t wrap_stubs_before = s.wrap_stubs.size();
  // New stubs may go into pages that hold live ones: keep them executable.
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_WRITE | PROT_EXEC);
  }
  absl::flat_hash_map<uintptr_t, std::vector<uintptr_t>> returns_of;
  if (mechanism == Mechanism::kReturnSites) {
    for (const auto& [site, entry] : sites.returns) returns_of[entry].push_back(site);
  }
  auto floor_of = [&](uintptr_t a) {
    uintptr_t floor = a;
    for (const Module& m : modules) {
      for (const Segment& seg : m.text) {
        if (a >= seg.start && a < seg.end) {
          for (const Segment& other : m.text) floor = std::min(floor, other.start);
          return floor - 16 * 1024 * 1024;  // Below the module's other segments too.
        }
      }
    }
    return floor;
  };
  std::vector<uintptr_t> to_patch;
  for (uintptr_t a : entries) {
    auto it = s.sites.find(a);
    if (it != s.sites.end() && it->second.patched) continue;
    if (SegmentOf(modules, a) == nullptr || !HoldsNops(a)) {
      ++stats->skipped;
      continue;
    }
    Site& site = s.sites[a];
    const uintptr_t body = internal::BodyAfterEntry(a);
    site.mechanism = Mechanism::kWrap;
    // A function with no return site listed (a noreturn one, or one from an
    // object or module built without return sites) is wrapped: its
    // method-out records would be missing.
    if (mechanism == Mechanism::kReturnSites && sites.with_return_sites.contains(a)) {
      const std::vector<uintptr_t>& listed = returns_of[a];
      bool ready = site.rs_stub != 0;
      if (!ready && PlaceStub(s, a, internal::kReturnSitesStubSize, &site.rs_stub, site.rs_rel)) {
        uint8_t code[internal::kReturnSitesStubSize];
        internal::BuildReturnSitesStub(site.rs_stub, a, body, tls, code);
        WriteCode(site.rs_stub, code, sizeof(code));
        ready = true;
      }
      std::vector<uintptr_t> returns;
      for (uintptr_t r : listed) {
        if (!ready) break;
        if (SegmentOf(modules, r) == nullptr || !HoldsReturnNop(r)) {
          ready = false;
          break;
        }
        ReturnSite& rs = s.returns[r];
        if (rs.exit_stub == 0) {
          if (!PlaceExitStub(s, r, floor_of(r), &rs)) {
            s.returns.erase(r);
            ready = false;
            break;
          }
          uint8_t code[internal::kReturnSiteExitSize];
          internal::BuildReturnSiteExit(rs.exit_stub, a, tls, code);
          WriteCode(rs.exit_stub, code, sizeof(code));
        }
        returns.push_back(r);
      }
      if (ready) {
        site.mechanism = Mechanism::kReturnSites;
        site.returns = std::move(returns);
      }
    }
    if (site.mechanism == Mechanism::kWrap && site.stub == 0) {
      if (!PlaceStub(s, a, internal::kStubSize, &site.stub, site.rel)) {
        s.sites.erase(a);
        ++stats->skipped;
        continue;
      }
      uint8_t code[internal::kStubSize];
      internal::BuildStub(site.stub, a, body, tls, code);
      WriteCode(site.stub, code, internal::kStubSize);
      s.wrap_stubs.emplace_back(site.stub, a);
    }
    to_patch.push_back(a);
  }
  for (uintptr_t page : s.stub_pages) {
    mprotect(reinterpret_cast<void*>(page), kPage, PROT_READ | PROT_EXEC);
  }
  if (s.wrap_stubs.size() > wrap_stubs_before) {  // Before any jump to the new stubs.
    internal::UnwindTable unwind;
    for (const auto& [stub, entry] : s.wrap_stubs) unwind.AddStub(stub, entry);
    s.unwind_table = unwind.Register(s.unwind_table);
  }
  return to_patch;
}

// Patches the prepared entries `to_patch`: first the return sites of those
// that use them (a call in flight then writes a method-out record with no
// method-in, never the other way round), then every entry.
absl::Status PatchPrepared(State& s, const std::vector<Module>& modules,
                           const std::vector<uintptr_t>& to_patch)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  if (to_patch.empty()) return absl::OkStatus();
  std::vector<uintptr_t> returns;
  for (uintptr_t a : to_patch) {
    const Site& site = s.sites[a];
    if (site.mechanism == Mechanism::kReturnSites) {
      returns.insert(returns.end(), site.returns.begin(), site.returns.end());
    }
  }
  std::vector<std::array<uint8_t, 2>> his;
  for (uintptr_t r : returns) his.push_back({s.returns[r].hi[0], s.returns[r].hi[1]});
  std::vector<std::array<uint8_t, 4>> rels;
  for (uintptr_t a : to_patch) {
    const Site& site = s.sites[a];
    const uint8_t* rel = site.mechanism == Mechanism::kReturnSites ? site.rs_rel : site.rel;
    rels.push_back({rel[0], rel[1], rel[2], rel[3]});
  }
  SyncCores();  // Stubs are visible before any jump to them.
  absl::Status status = WithWritableText(modules, returns, [&] {
    for (size_t i = 0; i < returns.size(); ++i) WriteCode(returns[i] + 3, his[i].data(), 2);
    SyncCores();
    for (uintptr_t r : returns) WriteCode(r, &kCall, 1);
    SyncCores();
  });
  if (!status.ok()) return status;
  for (uintptr_t r : returns) s.returns[r].patched = true;
  status = WithWritableText(modules, to_patch, [&] {
    for (size_t i = 0; i < to_patch.size(); ++i) WriteCode(to_patch[i] + 1, rels[i].data(), 4);
    SyncCores();
    for (uintptr_t a : to_patch) WriteCode(a, &kJmp, 1);
    SyncCores();
  });
  if (!status.ok()) return status;
  for (uintptr_t a : to_patch) s.sites[a].patched = true;
  __atomic_fetch_add(&s.patched, to_patch.size(), __ATOMIC_RELAXED);
  return absl::OkStatus();
}

// Restores the nops of the patched entries among `entries` (every patched
// one when `entries` is null), then of their return sites.
absl::Status UnpatchLocked(State& s, const std::vector<Module>& modules,
                           const absl::flat_hash_set<uintptr_t>* entries)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  std::vector<uintptr_t> to_unpatch;
  std::vector<uintptr_t> returns;
  size_t unpatched = 0;
  for (auto& [a, site] : s.sites) {
    if (!site.patched || (entries != nullptr && !entries->contains(a))) continue;
    site.patched = false;
    ++unpatched;
    if (site.mechanism == Mechanism::kReturnSites) {
      for (uintptr_t r : site.returns) {
        ReturnSite& rs = s.returns[r];
        if (!rs.patched) continue;
        rs.patched = false;
        uint8_t bytes[kReturnSiteBytes];
        if (SegmentOf(modules, r) == nullptr) continue;
        ReadCode(r, bytes, kReturnSiteBytes);
        if (bytes[0] == kCall && memcmp(bytes + 3, rs.hi, 2) == 0) returns.push_back(r);
      }
    }
    // Only what is still ours: a module may have been unloaded.
    if (SegmentOf(modules, a) == nullptr) continue;
    uint8_t bytes[kEntryBytes];
    ReadCode(a, bytes, kEntryBytes);
    const uint8_t* rel = site.mechanism == Mechanism::kReturnSites ? site.rs_rel : site.rel;
    if (bytes[0] != kJmp || memcmp(bytes + 1, rel, 4) != 0) continue;
    to_unpatch.push_back(a);
  }
  __atomic_fetch_sub(&s.patched, unpatched, __ATOMIC_RELAXED);
  static constexpr uint8_t kNops[4] = {kNop, kNop, kNop, kNop};
  absl::Status status = absl::OkStatus();
  if (!to_unpatch.empty()) {
    status = WithWritableText(modules, to_unpatch, [&] {
      for (uintptr_t a : to_unpatch) WriteCode(a, &kNop, 1);
      SyncCores();
      for (uintptr_t a : to_unpatch) WriteCode(a + 1, kNops, 4);
      SyncCores();
    });
  }
  if (!returns.empty()) {
    // The one byte back: 0f 1f 44 hi0 hi1 is a nop again.
    const absl::Status back = WithWritableText(modules, returns, [&] {
      for (uintptr_t r : returns) WriteCode(r, kReturnNop, 1);
      SyncCores();
    });
    if (status.ok()) status = back;
  }
  return status;
}

absl::Status PatchLocked(State& s, const std::vector<Module>& modules, const Sites& sites,
                         const std::vector<uintptr_t>& entries, Mechanism mechanism,
                         PatchableEntries::Stats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  // Entries patched with the other mechanism are unpatched first.
  absl::flat_hash_set<uintptr_t> other;
  for (uintptr_t a : entries) {
    auto it = s.sites.find(a);
    if (it == s.sites.end() || !it->second.patched) continue;
    const bool wanted =
        it->second.mechanism == mechanism ||
        (mechanism == Mechanism::kReturnSites && !sites.with_return_sites.contains(a));
    if (!wanted) other.insert(a);
  }
  if (!other.empty()) {
    if (absl::Status st = UnpatchLocked(s, modules, &other); !st.ok()) return st;
  }
  return PatchPrepared(s, modules, PrepareStubs(s, modules, entries, sites, mechanism, stats));
}

}  // namespace

// Calibration: the same leaf twice (patchable_calibration.cc), one patched
// with each mechanism, timed on a thread of its own with a scratch writer.
namespace internal {
int PatchCalibrationLeafA(int x);
int PatchCalibrationLeafB(int x);
}  // namespace internal

namespace {

using LeafFn = int (*)(int);

__attribute__((noinline)) int64_t TimeChunk(LeafFn leaf, int calls) {
  int x = 1;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) x = leaf(x) & 0xff;
  const auto end = std::chrono::steady_clock::now();
  asm volatile("" : : "r"(x));
  return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
}

// The fastest of `rounds` interleaved chunks of each leaf, in ns per call.
std::pair<double, double> TimeLeaves(LeafFn a, LeafFn b) {
  constexpr int kCalls = 4096;
  constexpr int kRounds = 24;
  int64_t best_a = INT64_MAX, best_b = INT64_MAX;
  std::thread timer([&] {
    internal::WithScratchWriter([&] {
      for (int r = 0; r < kRounds; ++r) {
        best_a = std::min(best_a, TimeChunk(a, kCalls));
        best_b = std::min(best_b, TimeChunk(b, kCalls));
      }
    });
  });
  timer.join();
  return {static_cast<double>(best_a) / kCalls, static_cast<double>(best_b) / kCalls};
}

// Tells patchable_exceptions.cc which entries are patched with return sites.
void PublishReturnSites(State& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  std::vector<uintptr_t> entries;
  for (const auto& [a, site] : s.sites) {
    if (site.patched && site.mechanism == Mechanism::kReturnSites) entries.push_back(a);
  }
  internal::PublishReturnSiteEntries(std::move(entries));
}

}  // namespace

bool PatchableEntries::Supported() { return true; }

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch(const Options& options) {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  Stats stats;
  const std::vector<Module> modules = LoadedModules();
  const Sites sites = CollectSites(modules, &stats);
  Mechanism mechanism = options.mechanism;
  // Without the exceptions' method-out records, return sites are not exact.
  if (!internal::ReturnSiteExceptionsCovered()) mechanism = Mechanism::kWrap;
  if (mechanism == Mechanism::kAuto) {
    // The leaves as the mechanisms leave them: A wrapped, B with its return
    // sites. Both are in this module, built PATCHABLE.
    const auto leaf_a = reinterpret_cast<uintptr_t>(&internal::PatchCalibrationLeafA);
    const auto leaf_b = reinterpret_cast<uintptr_t>(&internal::PatchCalibrationLeafB);
    Stats scratch;
    absl::Status st = PatchLocked(s, modules, sites, {leaf_a}, Mechanism::kWrap, &scratch);
    if (st.ok()) st = PatchLocked(s, modules, sites, {leaf_b}, Mechanism::kReturnSites, &scratch);
    const auto a = s.sites.find(leaf_a);
    const auto b = s.sites.find(leaf_b);
    mechanism = Mechanism::kWrap;
    if (st.ok() && a != s.sites.end() && a->second.patched &&
        a->second.mechanism == Mechanism::kWrap && b != s.sites.end() && b->second.patched &&
        b->second.mechanism == Mechanism::kReturnSites) {
      const auto [wrap_ns, returns_ns] =
          TimeLeaves(&internal::PatchCalibrationLeafA, &internal::PatchCalibrationLeafB);
      stats.wrap_ns = wrap_ns;
      stats.return_sites_ns = returns_ns;
      if (returns_ns < wrap_ns) mechanism = Mechanism::kReturnSites;
    }
  }
  stats.mechanism = mechanism;
  const absl::Status st = PatchLocked(s, modules, sites, sites.entries, mechanism, &stats);
  PublishReturnSites(s);
  if (!st.ok()) return st;
  stats.patched = __atomic_load_n(&s.patched, __ATOMIC_RELAXED);
  for (const auto& [a, site] : s.sites) {
    if (site.patched && site.mechanism == Mechanism::kReturnSites) ++stats.with_return_sites;
  }
  return stats;
}

absl::Status PatchableEntries::Unpatch() {
  State& s = GetState();
  absl::MutexLock lock(&s.mu);
  const absl::Status st = UnpatchLocked(s, LoadedModules(), nullptr);
  PublishReturnSites(s);
  return st;
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

absl::StatusOr<PatchableEntries::Stats> PatchableEntries::Patch(const Options&) {
  return absl::UnimplementedError("patchable entries need x86-64 Linux");
}

absl::Status PatchableEntries::Unpatch() { return absl::OkStatus(); }

size_t PatchableEntries::PatchedCount() { return 0; }

void PatchableEntries::ReadEntryBytes(const void* fn, uint8_t out[5]) {
  memcpy(out, fn, 5);
}

}  // namespace matrix

#endif  // MATRIX_PATCHABLE_SUPPORTED
