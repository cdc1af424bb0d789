#include "matrix/trace/symbolizer.h"

// Symbolizer, part 2 of 3: source lines and inlined frames from DWARF
// (matrix::internal::DwarfModule, through elfutils' libdwfl). ELF symbols are
// in symbolizer_elf.cc, the module index and cache in symbolizer.cc.

#include <cxxabi.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/options.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "internal/debug_link.h"
#include "matrix/core/file_path.h"
#include "matrix/trace/perf_map.h"

namespace matrix {
namespace internal {
namespace {

}  // namespace

// libdwfl state of one module. The callbacks and the search path must
// outlive the Dwfl: it keeps pointers to them.
// An address range of code and the DIE it belongs to (a unit, or a function
// with code), sorted by `low`. Ranges of one index do not overlap in
// practice; lookups take the last range starting at or before the address
// and check its end.
struct DwarfRange {
  Dwarf_Addr low = 0;
  Dwarf_Addr high = 0;  // Exclusive.
  Dwarf_Die die{};
  Dwarf_Addr bias = 0;  // Units only: the unit's bias (dwfl_module_nextcu).
};

struct DwarfModule::Handle {
  using Range = DwarfRange;
  ~Handle() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
  std::string debuginfo_path;
  char* debuginfo_path_ptr = nullptr;
  std::vector<std::string> debug_directories;
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;

  bool units_indexed = false;
  std::vector<Range> units;
  // Per unit (by its DIE offset): its functions with code.
  absl::flat_hash_map<Dwarf_Off, std::vector<Range>> functions;
};

namespace {

// The name of a function's DIE qualified with its enclosing namespaces and
// classes ("(anonymous namespace)::Clamp"), for functions without a linkage
// name (internal linkage). `die` is followed through DW_AT_abstract_origin
// and DW_AT_specification to its declaration.
std::string QualifiedDieName(Dwarf_Die* die) {
  Dwarf_Die declaration = *die;
  for (int i = 0; i < 4; ++i) {
    Dwarf_Attribute attr;
    Dwarf_Die next;
    if (dwarf_formref_die(dwarf_attr(&declaration, DW_AT_abstract_origin, &attr), &next) ==
            nullptr &&
        dwarf_formref_die(dwarf_attr(&declaration, DW_AT_specification, &attr), &next) ==
            nullptr) {
      break;
    }
    declaration = next;
  }
  const char* name = dwarf_diename(&declaration);
  if (name == nullptr) return "";
  std::string qualified;
  Dwarf_Die* scopes = nullptr;
  // scopes[0] is the declaration itself, the last one its compile unit.
  const int count = dwarf_getscopes_die(&declaration, &scopes);
  for (int i = count - 1; i >= 1; --i) {
    const int tag = dwarf_tag(&scopes[i]);
    const char* scope = dwarf_diename(&scopes[i]);
    switch (tag) {
      case DW_TAG_namespace:
        if (scope == nullptr) scope = "(anonymous namespace)";
        break;
      case DW_TAG_class_type:
      case DW_TAG_structure_type:
        // A lambda is an unnamed class (clang) or struct (GCC). An unnamed
        // struct with member functions is rare.
        if (scope == nullptr) scope = "{lambda}";
        break;
      case DW_TAG_union_type:
        if (scope == nullptr) scope = "(anonymous union)";
        break;
      case DW_TAG_subprogram:  // A local class's (a lambda's) enclosing function.
        break;
      default:
        scope = nullptr;
        break;
    }
    if (scope != nullptr) absl::StrAppend(&qualified, scope, "::");
  }
  free(scopes);
  return qualified + name;
}

// A function's name from its DIE (following DW_AT_abstract_origin and
// DW_AT_specification): the demangled linkage name, else the qualified
// source name (no parameters).
std::string DieFunctionName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (linkage == nullptr) {
    linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  }
  if (linkage != nullptr) return Demangle(linkage);
  return QualifiedDieName(die);
}

// The DW_AT_call_file / call_line / call_column of an inlined subroutine.
InlinedFrame CallSite(Dwarf_Die* inlined, Dwarf_Files* files, size_t file_count) {
  InlinedFrame site;
  Dwarf_Attribute attr;
  Dwarf_Word value = 0;
  if (files != nullptr &&
      dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &value) == 0 &&
      value < file_count) {
    const char* file = dwarf_filesrc(files, value, nullptr, nullptr);
    if (file != nullptr) site.file = file;
  }
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &value) == 0) {
    site.line = static_cast<int>(value);
  }
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_column, &attr), &value) == 0) {
    site.column = static_cast<int>(value);
  }
  return site;
}

// libdwfl's find_debuginfo callback: its standard search on this host,
// without its last step. elfutils 0.188's dwfl_standard_find_debuginfo
// ends by dlopen()ing libdebuginfod, and with it libcurl and the TLS
// libraries (about 6 MB of RSS), into every process where a module lacks
// DWARF; a debug server is asked off the host (matrix-report symbolize).
// By build id under the search path's absolute directories
// (dwfl_build_id_find_debuginfo), then by the .gnu_debuglink name in the
// module's directory, its .debug subdirectory and each debug directory
// (the symbol search's order): a file whose build id differs is not it.
int FindDebuginfoOnHost(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base,
                        const char* file_name, const char* debuglink_file,
                        GElf_Word debuglink_crc, char** debuginfo_file_name) {
  const int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
                                              debuglink_file, debuglink_crc, debuginfo_file_name);
  if (fd >= 0 || debuglink_file == nullptr || file_name == nullptr || *userdata == nullptr) {
    return fd;
  }
  const auto& debug_directories = *static_cast<const std::vector<std::string>*>(*userdata);
  const std::string path = file_name;
  const std::vector<std::string> candidates =
      DebugLinkCandidates(path, debuglink_file, debug_directories);
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  const int length = dwfl_module_build_id(mod, &bits, &vaddr);
  std::string build_id;
  for (int i = 0; i < length; ++i) absl::StrAppend(&build_id, absl::Hex(bits[i], absl::kZeroPad2));
  for (const std::string& candidate : candidates) {
    if (candidate == path) continue;
    const std::optional<ElfFileInfo> info = ElfFileInfo::Read(candidate);
    if (!info.has_value()) continue;
    if (!build_id.empty() && !info->build_id.empty() && info->build_id != build_id) continue;
    const int debug_fd = open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (debug_fd < 0) continue;
    *debuginfo_file_name = strdup(candidate.c_str());  // libdwfl frees it.
    return debug_fd;
  }
  return -1;
}

}  // namespace

DwarfModule::DwarfModule(std::unique_ptr<Handle> handle) : handle_(std::move(handle)) {}

DwarfModule::~DwarfModule() = default;

std::unique_ptr<DwarfModule> DwarfModule::Open(const std::string& path,
                                               const std::string& open_path,
                                               const std::vector<std::string>& debug_directories) {
  auto handle = std::make_unique<Handle>();
  // libdwfl's search path: "" is the module's directory, ".debug" its
  // subdirectory, absolute entries are searched by build id and by the
  // debuglink name. A leading '+' checks debuglink CRCs.
  handle->debuginfo_path = absl::StrCat("+:.debug:", absl::StrJoin(debug_directories, ":"));
  handle->debuginfo_path_ptr = handle->debuginfo_path.data();
  handle->callbacks.find_elf = dwfl_build_id_find_elf;
  handle->debug_directories = debug_directories;
  handle->callbacks.find_debuginfo = FindDebuginfoOnHost;
  handle->callbacks.section_address = dwfl_offline_section_address;
  handle->callbacks.debuginfo_path = &handle->debuginfo_path_ptr;
  handle->dwfl = dwfl_begin(&handle->callbacks);
  if (handle->dwfl == nullptr) return nullptr;
  int fd = open(open_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  dwfl_report_begin(handle->dwfl);
  // ET_DYN placed at its own p_vaddr (bias 0): Dwfl addresses are file
  // addresses. On success the Dwfl owns `fd`.
  handle->module =
      dwfl_report_elf(handle->dwfl, std::string(BaseName(path)).c_str(), path.c_str(), fd,
                      /*base=*/0, /*add_p_vaddr=*/true);
  if (handle->module == nullptr) close(fd);
  dwfl_report_end(handle->dwfl, nullptr, nullptr);
  if (handle->module == nullptr) return nullptr;
  // FindDebuginfoOnHost() finds the debug directories through the module.
  void** userdata = nullptr;
  dwfl_module_info(handle->module, &userdata, nullptr, nullptr, nullptr, nullptr, nullptr,
                   nullptr);
  if (userdata != nullptr) *userdata = &handle->debug_directories;
  return std::unique_ptr<DwarfModule>(new DwarfModule(std::move(handle)));
}

bool DwarfModule::HasDwarf() {
  Dwarf_Addr bias = 0;
  return dwfl_module_getdwarf(handle_->module, &bias) != nullptr;
}

namespace {

using Range = DwarfRange;

// Appends `die`'s address ranges (DW_AT_low_pc/high_pc or DW_AT_ranges).
void AppendRanges(Dwarf_Die* die, Dwarf_Addr bias, std::vector<Range>* out) {
  Dwarf_Addr base = 0, low = 0, high = 0;
  ptrdiff_t offset = 0;
  while ((offset = dwarf_ranges(die, offset, &base, &low, &high)) > 0) {
    if (high > low) out->push_back(Range{low, high, *die, bias});
  }
}

void SortRanges(std::vector<Range>* ranges) {
  std::sort(ranges->begin(), ranges->end(),
            [](const Range& a, const Range& b) { return a.low < b.low; });
}

// The range holding `address`, or null.
const Range* FindRange(const std::vector<Range>& ranges, Dwarf_Addr address) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), address,
                             [](Dwarf_Addr a, const Range& r) { return a < r.low; });
  if (it == ranges.begin()) return nullptr;
  --it;
  return address < it->high ? &*it : nullptr;
}

// The functions with code in a unit, top-level or in namespaces and classes
// (where GCC puts out-of-line member functions and lambdas' call operators).
int CollectFunction(Dwarf_Die* function, void* arg) {
  AppendRanges(function, 0, static_cast<std::vector<Range>*>(arg));
  return DWARF_CB_OK;
}

}  // namespace

size_t DwarfModule::IndexUnits() {
  Handle& h = *handle_;
  if (h.units_indexed) return h.units.size();
  h.units_indexed = true;
  Dwarf_Addr bias = 0;
  for (Dwarf_Die* unit = dwfl_module_nextcu(h.module, nullptr, &bias); unit != nullptr;
       unit = dwfl_module_nextcu(h.module, unit, &bias)) {
    AppendRanges(unit, bias, &h.units);
  }
  SortRanges(&h.units);
  return h.units.size();
}

bool DwarfModule::Lookup(uintptr_t file_address, SymbolInfo* info) {
  // Dwfl addresses are file addresses (see Open()); the debug file may have
  // its own bias.
  const Dwarf_Addr address = file_address;
  Dwarf_Addr cu_bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(handle_->module, address, &cu_bias);
  Dwarf_Die cu_die;
  if (cu == nullptr) {
    // No .debug_aranges (clang does not emit them, and libdw before 0.191
    // does not build them from the units): the units' own ranges.
    IndexUnits();
    const Range* unit = FindRange(handle_->units, address);
    if (unit == nullptr) return false;
    cu_die = unit->die;
    cu = &cu_die;
    cu_bias = unit->bias;
  }
  Dwarf_Line* line = dwarf_getsrc_die(cu, address - cu_bias);
  if (line == nullptr) return false;
  InlinedFrame location;  // The current location, innermost first.
  if (const char* file = dwarf_linesrc(line, nullptr, nullptr)) location.file = file;
  dwarf_lineno(line, &location.line);
  dwarf_linecol(line, &location.column);

  std::vector<InlinedFrame> inlined;
  Dwarf_Files* files = nullptr;
  size_t file_count = 0;
  if (dwarf_getsrcfiles(cu, &files, &file_count) != 0) files = nullptr;
  // The inlined calls at the address, innermost first: down from the
  // function that holds it (found in the unit's function index; walking the
  // unit's whole DIE tree with dwarf_getscopes() for each address cost about
  // 30 us per frame) through the blocks and inlined calls that hold it.
  std::vector<Range>& functions = handle_->functions[dwarf_dieoffset(cu)];
  if (functions.empty()) {
    dwarf_getfuncs(cu, &CollectFunction, &functions, 0);
    if (functions.empty()) functions.push_back(Range{});  // Indexed: none.
    SortRanges(&functions);
  }
  std::vector<Dwarf_Die> calls;  // Outermost first.
  if (const Range* function = FindRange(functions, address - cu_bias)) {
    Dwarf_Die scope = function->die;
    for (int depth = 0; depth < 256; ++depth) {
      Dwarf_Die child;
      if (dwarf_child(&scope, &child) != 0) break;
      bool inside = false;
      do {
        const int tag = dwarf_tag(&child);
        if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
            dwarf_haspc(&child, address - cu_bias) == 1) {
          if (tag == DW_TAG_inlined_subroutine) calls.push_back(child);
          inside = true;
          break;
        }
      } while (dwarf_siblingof(&child, &child) == 0);
      if (!inside) break;
      scope = child;
    }
  }
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) {
    location.function = DieFunctionName(&*it);
    InlinedFrame call_site = CallSite(&*it, files, file_count);
    inlined.push_back(std::move(location));
    location = std::move(call_site);
  }
  info->file = std::move(location.file);
  info->line = location.line;
  info->column = location.column;
  info->inlined = std::move(inlined);
  return true;
}

}  // namespace internal
}  // namespace matrix
