#include "matrix/trace/symbolizer.h"

#include "matrix/core/file_path.h"

// Symbolizer, part 3 of 3: the front. Finds the loaded module of a pc
// (dl_iterate_phdr), asks its ELF symbols (symbolizer_elf.cc), DWARF
// (symbolizer_dwarf.cc) or a perf map, and caches the answer.

#include <cxxabi.h>
#include <dlfcn.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/base/options.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "matrix/trace/perf_map.h"

namespace matrix {
namespace internal {

// One loaded ELF object: where it is mapped and, once needed, its symbols.
class SymbolModule {
 public:
  SymbolModule(std::string path, std::string open_path, uintptr_t bias,
               std::vector<std::pair<uintptr_t, uintptr_t>> ranges, std::string build_id)
      : path_(std::move(path)),
        open_path_(std::move(open_path)),
        bias_(bias),
        ranges_(std::move(ranges)),
        build_id_(std::move(build_id)) {}

  const std::string& path() const { return path_; }
  const std::string& build_id() const { return build_id_; }
  uintptr_t bias() const { return bias_; }
  uintptr_t low() const { return ranges_.empty() ? 0 : ranges_.front().first; }

  bool Contains(uintptr_t pc) const {
    for (const auto& [begin, end] : ranges_) {
      if (pc >= begin && pc < end) return true;
    }
    return false;
  }

  const ElfSymbolTable& Symbols(const std::vector<std::string>& debug_directories) {
    if (!loaded_) {
      symbols_ = ElfSymbolTable::Load(open_path_, debug_directories);
      loaded_ = true;
    }
    return symbols_;
  }

  // The module's DWARF, opened on first use; null when unreadable.
  DwarfModule* Dwarf(const std::vector<std::string>& debug_directories) {
    if (!dwarf_loaded_) {
      dwarf_ = DwarfModule::Open(path_, open_path_, debug_directories);
      dwarf_loaded_ = true;
    }
    return dwarf_.get();
  }

 private:
  std::string path_;       // Reported path.
  std::string open_path_;  // Path to read (differs for the main executable).
  uintptr_t bias_;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges_;  // PT_LOAD, sorted.
  std::string build_id_;  // Hex, "" when none.
  bool loaded_ = false;
  ElfSymbolTable symbols_;
  bool dwarf_loaded_ = false;
  std::unique_ptr<DwarfModule> dwarf_;
};

}  // namespace internal

namespace {

struct ScannedModule {
  std::string name;
  uintptr_t bias;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  std::string build_id;
};

struct ScanResult {
  std::vector<ScannedModule> modules;
  unsigned long long adds = 0;
  unsigned long long subs = 0;
};

bool HasLoadCounters(size_t size) {
  return size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(dl_phdr_info::dlpi_subs);
}

int CollectModule(dl_phdr_info* info, size_t size, void* data) {
  auto* result = static_cast<ScanResult*>(data);
  if (HasLoadCounters(size)) {
    result->adds = info->dlpi_adds;
    result->subs = info->dlpi_subs;
  }
  ScannedModule module{info->dlpi_name != nullptr ? info->dlpi_name : "", info->dlpi_addr, {}, {}};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_LOAD || phdr.p_memsz == 0) continue;
    uintptr_t begin = info->dlpi_addr + phdr.p_vaddr;
    module.ranges.emplace_back(begin, begin + phdr.p_memsz);
  }
  std::sort(module.ranges.begin(), module.ranges.end());
  // The build id, from the notes in memory: read once per scan, which
  // happens only when objects were loaded or unloaded. Only notes inside a
  // loaded segment are read (they always are, for the linkers' output).
  for (int i = 0; i < info->dlpi_phnum && module.build_id.empty(); ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_NOTE) continue;
    const uintptr_t begin = info->dlpi_addr + phdr.p_vaddr;
    for (const auto& [low, high] : module.ranges) {
      if (begin < low || begin >= high || phdr.p_memsz > high - begin) continue;
      module.build_id = internal::BuildIdFromNotes(
          absl::string_view(reinterpret_cast<const char*>(begin), phdr.p_memsz));
      break;
    }
  }
  if (!module.ranges.empty()) result->modules.push_back(std::move(module));
  return 0;
}

int ReadCounters(dl_phdr_info* info, size_t size, void* data) {
  auto* result = static_cast<ScanResult*>(data);
  if (HasLoadCounters(size)) {
    result->adds = info->dlpi_adds;
    result->subs = info->dlpi_subs;
  }
  return 1;  // Stop after the first object: the counters are global.
}

std::string ExecutablePath() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buffer, static_cast<size_t>(n));
}

// pc minus the start of the function holding it, from the FDE that covers pc
// in the loaded modules' `.eh_frame_hdr` (memory already mapped, no file
// read); 0 when no FDE covers it. libgcc looks up the FDE of its argument
// minus one (made for return addresses), so it is asked about pc + 1.
uintptr_t UnwindFunctionOffset(uintptr_t pc) {
  auto start =
      reinterpret_cast<uintptr_t>(_Unwind_FindEnclosingFunction(reinterpret_cast<void*>(pc + 1)));
  if (start == 0 || start > pc || pc - start >= (uintptr_t{1} << 24)) return 0;
  return pc - start;
}

}  // namespace

bool IsSystemLibrary(std::string_view module_path) {
  for (std::string_view dir : {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"}) {
    if (module_path.substr(0, dir.size()) == dir) return true;
  }
  // The kernel's vDSO (clock_gettime and friends), which has no file: looking
  // for its DWARF cost the preload 28 M instructions, for nothing.
  return module_path.starts_with("linux-vdso") || module_path.starts_with("linux-gate");
}

Symbolizer::Symbolizer() : Symbolizer(SymbolizerOptions()) {}

Symbolizer::Symbolizer(SymbolizerOptions options)
    : options_(options), debug_directories_{"/usr/lib/debug"} {}

Symbolizer::~Symbolizer() = default;

Symbolizer* Symbolizer::Get() {
  static Symbolizer* const instance = new Symbolizer();
  return instance;
}

void Symbolizer::RescanModulesLocked() {
  ScanResult scan;
  dl_iterate_phdr(&CollectModule, &scan);
  // Keep already-loaded symbol tables of modules that are still mapped at the
  // same place; replace everything else.
  std::vector<std::unique_ptr<internal::SymbolModule>> modules;
  for (ScannedModule& scanned : scan.modules) {
    std::string path = scanned.name;
    std::string open_path = scanned.name;
    if (path.empty()) {  // The main executable.
      path = ExecutablePath();
      // Read through /proc/self/exe: it works even if the file was replaced.
      open_path = "/proc/self/exe";
    }
    std::unique_ptr<internal::SymbolModule> reused;
    for (auto& old : modules_) {
      if (old && old->path() == path && old->bias() == scanned.bias &&
          old->low() == scanned.ranges.front().first && old->build_id() == scanned.build_id) {
        reused = std::move(old);
        break;
      }
    }
    modules.push_back(reused ? std::move(reused)
                             : std::make_unique<internal::SymbolModule>(
                                   std::move(path), std::move(open_path), scanned.bias,
                                   std::move(scanned.ranges), std::move(scanned.build_id)));
  }
  std::sort(modules.begin(), modules.end(),
            [](const auto& a, const auto& b) { return a->low() < b->low(); });
  if (scanned_ && scan.subs != scanned_subs_) cache_.clear();  // Something was unloaded.
  modules_ = std::move(modules);
  scanned_adds_ = scan.adds;
  scanned_subs_ = scan.subs;
  scanned_ = true;
}

internal::SymbolModule* Symbolizer::FindModuleLocked(uintptr_t pc) {
  ScanResult counters;
  dl_iterate_phdr(&ReadCounters, &counters);
  if (!scanned_ || counters.adds != scanned_adds_ || counters.subs != scanned_subs_) {
    RescanModulesLocked();
  }
  for (auto& module : modules_) {
    if (module->Contains(pc)) return module.get();
  }
  return nullptr;
}

SymbolInfo Symbolizer::SymbolizeLocked(uintptr_t pc) {
  if (auto it = registered_names_.find(pc); it != registered_names_.end()) {
    SymbolInfo info;
    info.function = it->second;
    return info;
  }
  if (auto it = cache_.find(pc); it != cache_.end()) return it->second;

  SymbolInfo info;
  internal::SymbolModule* module = FindModuleLocked(pc);
  if (module == nullptr) {
    // JIT code, perhaps: named from the runtime's perf map. Not cached,
    // neither names (the runtime reuses the address for other code after
    // garbage collection) nor misses (the runtime may write the line later).
    LookupPerfMapLocked(pc, &info);
    return info;
  }
  info.module = module->path();
  info.module_offset = pc - module->bias();
  info.build_id = module->build_id();
  info.no_build_id = info.build_id.empty();
  if (!raw_frames_) {
    const internal::ElfSymbolTable& table = module->Symbols(debug_directories_);
    if (const internal::ElfSymbol* symbol = table.Lookup(pc - module->bias())) {
      info.function = internal::Demangle(symbol->name);
      info.function_offset = pc - module->bias() - symbol->address;
    }
    if (options_.source_lines &&
        (options_.system_library_lines || !IsSystemLibrary(module->path()))) {
      if (internal::DwarfModule* dwarf = module->Dwarf(debug_directories_)) {
        dwarf->Lookup(info.module_offset, &info);
      }
    }
  }
  // absl reads the same tables but also knows the vDSO (an image in memory,
  // not a file this reader opens); it gives names without parameters and no
  // offset. Asked only about the vDSO: on files it writes warnings into the
  // host's stderr (ABSL_RAW_LOG, e.g. "too many executable LOAD segments" for
  // /usr/bin/node) and finds nothing the tables above did not.
  const bool absl_fallback = !raw_frames_ && !info.module.empty() && info.module.front() != '/';
  if (info.function.empty() && absl_fallback) {
    char buffer[1024];
    if (absl::Symbolize(reinterpret_cast<const void*>(pc), buffer, sizeof(buffer))) {
      info.function = buffer;
    }
  }
  // Without a symbol (a stripped module, raw frames, the vDSO) the function's
  // start still comes from its unwind info, the FDE of `.eh_frame`, which
  // stripping keeps: every pc of one function then has one start.
  if (info.function_offset == 0 && !info.module.empty()) {
    info.function_offset = UnwindFunctionOffset(pc);
  }
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_.emplace(pc, info);
  return info;
}

bool Symbolizer::LookupPerfMapLocked(uintptr_t pc, SymbolInfo* info) {
  const pid_t pid = getpid();
  if (perf_map_ == nullptr || perf_map_pid_ != pid) {  // First use, or after fork().
    perf_map_ = std::make_unique<PerfMap>(PerfMap::PathForPid(pid));
    perf_map_pid_ = pid;
  }
  std::optional<PerfMapEntry> entry = perf_map_->Lookup(pc);
  if (!entry) return false;
  JitName name = ParseJitName(entry->name);
  info->function = std::move(name.function);
  info->module = kJitModule;
  info->function_offset = pc - entry->start;
  info->module_offset = pc - entry->start;
  info->file = std::move(name.file);
  info->line = name.line;
  info->column = name.column;
  return true;
}

SymbolInfo Symbolizer::Symbolize(uintptr_t pc) {
  absl::MutexLock lock(&mu_);
  return SymbolizeLocked(pc);
}

std::string Symbolizer::FunctionName(uintptr_t address) {
  SymbolInfo info = Symbolize(address);
  if (!info.function.empty()) return info.function;
  if (!info.module.empty()) {
    return absl::StrFormat("%s+0x%x", BaseName(info.module), info.module_offset);
  }
  return absl::StrFormat("0x%x", address);
}

std::string Symbolizer::Describe(uintptr_t pc) {
  SymbolInfo info = Symbolize(pc);
  if (info.function.empty()) {
    if (!info.module.empty()) {
      return absl::StrFormat("%s+0x%x", BaseName(info.module), info.module_offset);
    }
    return absl::StrFormat("0x%x", pc);
  }
  if (info.module.empty()) return info.function;
  return absl::StrFormat("%s+0x%x (%s)", info.function, info.function_offset,
                         BaseName(info.module));
}

void Symbolizer::RegisterName(uintptr_t address, std::string name) {
  absl::MutexLock lock(&mu_);
  registered_names_[address] = std::move(name);
}

void Symbolizer::AddDebugDirectory(std::string directory) {
  absl::MutexLock lock(&mu_);
  // User directories come before the system default (/usr/lib/debug).
  debug_directories_.insert(debug_directories_.end() - 1, std::move(directory));
}

bool Symbolizer::InMatrixSharedObject(uintptr_t pc) {
  static const uintptr_t own_base = [] {
    Dl_info own = {}, executable = {};
    if (dladdr(reinterpret_cast<void*>(&Symbolizer::Get), &own) == 0) return uintptr_t{0};
    // The executable's program headers are in the executable.
    if (dladdr(reinterpret_cast<void*>(getauxval(AT_PHDR)), &executable) != 0 &&
        executable.dli_fbase == own.dli_fbase) {
      return uintptr_t{0};
    }
    return reinterpret_cast<uintptr_t>(own.dli_fbase);
  }();
  if (own_base == 0) return false;
  Dl_info info = {};
  return dladdr(reinterpret_cast<void*>(pc), &info) != 0 &&
         reinterpret_cast<uintptr_t>(info.dli_fbase) == own_base;
}

size_t Symbolizer::PreloadModules() {
  const uintptr_t own_pc = reinterpret_cast<uintptr_t>(&Symbolizer::Get);
  const bool own_shared_object = InMatrixSharedObject(own_pc);
  absl::MutexLock lock(&mu_);
  if (raw_frames_) return 0;  // Nothing is read in the process.
  FindModuleLocked(0);  // Rescans when modules were loaded or unloaded.
  size_t loaded = 0;
  for (auto& module : modules_) {
    if (IsSystemLibrary(module->path())) continue;
    if (own_shared_object && module->Contains(own_pc)) continue;
    module->Symbols(debug_directories_);
    if (options_.source_lines) {
      if (internal::DwarfModule* dwarf = module->Dwarf(debug_directories_)) dwarf->IndexUnits();
    }
    ++loaded;
  }
  return loaded;
}

void Symbolizer::SetRawFrames(bool raw) {
  absl::MutexLock lock(&mu_);
  raw_frames_ = raw;
  cache_.clear();
}

void Symbolizer::ClearCache() {
  absl::MutexLock lock(&mu_);
  cache_.clear();
}

size_t Symbolizer::CacheSizeForTesting() {
  absl::MutexLock lock(&mu_);
  return cache_.size();
}

}  // namespace matrix
