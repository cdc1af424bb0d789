#include "matrix/trace/symbolizer.h"

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
namespace {

std::string DirName(absl::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

std::string BaseNameOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A read-only private mapping of a whole file.
class MappedFile {
 public:
  static std::optional<MappedFile> Open(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
      close(fd);
      return std::nullopt;
    }
    void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) return std::nullopt;
    return MappedFile(static_cast<const uint8_t*>(data), static_cast<size_t>(st.st_size));
  }
  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      Unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~MappedFile() { Unmap(); }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  void Unmap() {
    if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
  }
  const uint8_t* data_;
  size_t size_;
};

// Bounds-checked access to a 64-bit native-endian ELF image. Every accessor
// returns null / empty for anything outside the file, so a truncated or
// corrupt file yields no symbols rather than a crash.
class ElfView {
 public:
  static std::optional<ElfView> Parse(const uint8_t* data, size_t size) {
    ElfView view(data, size);
    const Elf64_Ehdr* ehdr = view.At<Elf64_Ehdr>(0);
    if (ehdr == nullptr || memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0 ||
        ehdr->e_ident[EI_CLASS] != ELFCLASS64) {
      return std::nullopt;
    }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (ehdr->e_ident[EI_DATA] != ELFDATA2LSB) return std::nullopt;
#else
    if (ehdr->e_ident[EI_DATA] != ELFDATA2MSB) return std::nullopt;
#endif
    if (ehdr->e_shoff == 0 || ehdr->e_shentsize != sizeof(Elf64_Shdr)) return std::nullopt;
    view.ehdr_ = ehdr;
    const Elf64_Shdr* first = view.At<Elf64_Shdr>(ehdr->e_shoff);
    if (first == nullptr) return std::nullopt;
    // Extended numbering: the real counts live in section 0.
    uint64_t count = ehdr->e_shnum != 0 ? ehdr->e_shnum : first->sh_size;
    uint32_t shstrndx = ehdr->e_shstrndx != SHN_XINDEX ? ehdr->e_shstrndx : first->sh_link;
    view.sections_ = view.At<Elf64_Shdr>(ehdr->e_shoff, count);
    if (view.sections_ == nullptr) return std::nullopt;
    view.section_count_ = count;
    view.shstrndx_ = shstrndx;
    return view;
  }

  const Elf64_Ehdr& header() const { return *ehdr_; }
  uint64_t section_count() const { return section_count_; }
  const Elf64_Shdr* Section(uint64_t index) const {
    return index < section_count_ ? &sections_[index] : nullptr;
  }

  // The bytes of a section; empty for SHT_NOBITS or out-of-file sections.
  absl::string_view SectionData(const Elf64_Shdr& section) const {
    if (section.sh_type == SHT_NOBITS) return {};
    const char* bytes = At<char>(section.sh_offset, section.sh_size);
    return bytes == nullptr ? absl::string_view() : absl::string_view(bytes, section.sh_size);
  }

  absl::string_view SectionName(const Elf64_Shdr& section) const {
    const Elf64_Shdr* names = Section(shstrndx_);
    if (names == nullptr) return {};
    return StringAt(SectionData(*names), section.sh_name);
  }

  const Elf64_Shdr* FindSection(absl::string_view name) const {
    for (uint64_t i = 0; i < section_count_; ++i) {
      if (SectionName(sections_[i]) == name) return &sections_[i];
    }
    return nullptr;
  }

  const Elf64_Shdr* FindSectionOfType(uint32_t type) const {
    for (uint64_t i = 0; i < section_count_; ++i) {
      if (sections_[i].sh_type == type) return &sections_[i];
    }
    return nullptr;
  }

  // The NUL-terminated string at `offset` of a string table.
  static absl::string_view StringAt(absl::string_view table, uint64_t offset) {
    if (offset >= table.size()) return {};
    absl::string_view rest = table.substr(offset);
    size_t end = rest.find('\0');
    return end == absl::string_view::npos ? absl::string_view() : rest.substr(0, end);
  }

  // The GNU build id as lowercase hex, or "".
  std::string BuildId() const {
    for (uint64_t i = 0; i < section_count_; ++i) {
      if (sections_[i].sh_type != SHT_NOTE) continue;
      absl::string_view notes = SectionData(sections_[i]);
      while (notes.size() >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr note;
        memcpy(&note, notes.data(), sizeof(note));
        uint64_t name_size = (uint64_t{note.n_namesz} + 3) & ~uint64_t{3};
        uint64_t desc_size = (uint64_t{note.n_descsz} + 3) & ~uint64_t{3};
        if (sizeof(note) + name_size + desc_size > notes.size()) break;
        absl::string_view name = notes.substr(sizeof(note), note.n_namesz);
        absl::string_view desc = notes.substr(sizeof(note) + name_size, note.n_descsz);
        if (note.n_type == NT_GNU_BUILD_ID && name == absl::string_view("GNU\0", 4) &&
            !desc.empty()) {
          std::string hex;
          for (unsigned char byte : desc) absl::StrAppendFormat(&hex, "%02x", byte);
          return hex;
        }
        notes.remove_prefix(sizeof(note) + name_size + desc_size);
      }
    }
    return "";
  }

  // The file name in .gnu_debuglink, or "".
  std::string DebugLink() const {
    const Elf64_Shdr* link = FindSection(".gnu_debuglink");
    if (link == nullptr) return "";
    return std::string(StringAt(SectionData(*link), 0));
  }

 private:
  ElfView(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  const T* At(uint64_t offset, uint64_t count = 1) const {
    if (count == 0 || offset > size_ || count > (size_ - offset) / sizeof(T)) return nullptr;
    if (offset % alignof(T) != 0) return nullptr;
    return reinterpret_cast<const T*>(data_ + offset);
  }

  const uint8_t* data_;
  size_t size_;
  const Elf64_Ehdr* ehdr_ = nullptr;
  const Elf64_Shdr* sections_ = nullptr;
  uint64_t section_count_ = 0;
  uint32_t shstrndx_ = 0;
};

// A candidate symbol before deduplication.
struct RawSymbol {
  uintptr_t address;
  uintptr_t size;
  uintptr_t section_end;  // End of the containing section; bounds sizeless symbols.
  int binding_rank;       // 0 global, 1 weak, 2 local.
  absl::string_view name;
};

// Drops a symbol version: "clock_nanosleep@@GLIBC_2.17" -> "clock_nanosleep".
absl::string_view WithoutVersion(absl::string_view name) {
  size_t at = name.find('@');
  return at == absl::string_view::npos || at == 0 ? name : name.substr(0, at);
}

// Among symbols at one address (aliases), the name to show: one with a size,
// then global over weak over local, then not glibc's internal "__GI_" alias,
// then the fewest leading underscores ("clone3" over "__clone3"), then the
// shortest, then alphabetical (for determinism).
bool BetterAlias(const RawSymbol& a, const RawSymbol& b) {
  auto key = [](const RawSymbol& s) {
    size_t underscores = s.name.find_first_not_of('_');
    return std::make_tuple(s.size == 0, s.binding_rank, absl::StartsWith(s.name, "__GI_"),
                           underscores == absl::string_view::npos ? s.name.size() : underscores,
                           s.name.size(), s.name);
  };
  return key(a) < key(b);
}

// Reads the function symbols of one symbol table section.
std::vector<RawSymbol> ReadSymbols(const ElfView& elf, const Elf64_Shdr& table) {
  std::vector<RawSymbol> symbols;
  if (table.sh_entsize != sizeof(Elf64_Sym)) return symbols;
  const Elf64_Shdr* strings = elf.Section(table.sh_link);
  if (strings == nullptr) return symbols;
  absl::string_view string_data = elf.SectionData(*strings);
  absl::string_view data = elf.SectionData(table);
  size_t count = data.size() / sizeof(Elf64_Sym);
  symbols.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    Elf64_Sym sym;
    memcpy(&sym, data.data() + i * sizeof(Elf64_Sym), sizeof(sym));
    int type = ELF64_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    absl::string_view name = WithoutVersion(ElfView::StringAt(string_data, sym.st_name));
    if (name.empty()) continue;
    uintptr_t section_end = UINTPTR_MAX;
    if (sym.st_shndx < SHN_LORESERVE) {
      if (const Elf64_Shdr* section = elf.Section(sym.st_shndx)) {
        section_end = section->sh_addr + section->sh_size;
      }
    }
    int binding = ELF64_ST_BIND(sym.st_info);
    int binding_rank = binding == STB_GLOBAL ? 0 : binding == STB_WEAK ? 1 : 2;
    symbols.push_back({sym.st_value, sym.st_size, section_end, binding_rank, name});
  }
  return symbols;
}

bool HasSymtab(const ElfView& elf) {
  const Elf64_Shdr* symtab = elf.FindSectionOfType(SHT_SYMTAB);
  return symtab != nullptr && symtab->sh_size > 0 && symtab->sh_type != SHT_NOBITS;
}

// Debug-file candidates for a stripped file, in search order.
std::vector<std::string> DebugFileCandidates(const std::string& path, const ElfView& elf,
                                             const std::vector<std::string>& directories) {
  std::vector<std::string> candidates;
  std::string build_id = elf.BuildId();
  if (build_id.size() > 2) {
    for (const std::string& dir : directories) {
      candidates.push_back(absl::StrCat(dir, "/.build-id/", build_id.substr(0, 2), "/",
                                        build_id.substr(2), ".debug"));
    }
  }
  std::string link = elf.DebugLink();
  if (!link.empty() && link.find('/') == std::string::npos) {
    std::string dir = DirName(path);
    candidates.push_back(absl::StrCat(dir, "/", link));
    candidates.push_back(absl::StrCat(dir, "/.debug/", link));
    for (const std::string& debug_dir : directories) {
      candidates.push_back(absl::StrCat(debug_dir, dir, "/", link));
      candidates.push_back(absl::StrCat(debug_dir, "/", link));
    }
  }
  return candidates;
}

}  // namespace

std::string StripCloneSuffixes(absl::string_view name) {
  // Compilers name specialized copies "<name>.<kind>[.<n>]", possibly
  // repeated ("foo.isra.0.cold"). Itanium names never contain '.'.
  static constexpr absl::string_view kKinds[] = {
      "isra", "constprop", "part", "cold", "lto_priv", "localalias", "llvm", "clone", "specialized",
  };
  for (;;) {
    size_t dot = name.rfind('.');
    if (dot == absl::string_view::npos || dot == 0) return std::string(name);
    absl::string_view last = name.substr(dot + 1);
    absl::string_view kind = last;
    size_t kind_dot = dot;
    if (!last.empty() && std::all_of(last.begin(), last.end(), absl::ascii_isdigit)) {
      // A number: the kind is the component before it.
      kind_dot = name.substr(0, dot).rfind('.');
      if (kind_dot == absl::string_view::npos || kind_dot == 0) return std::string(name);
      kind = name.substr(kind_dot + 1, dot - kind_dot - 1);
    }
    if (std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) {
      return std::string(name);
    }
    name = name.substr(0, kind_dot);
  }
}

#define MATRIX_SYMBOLIZER_STR2(x) #x
#define MATRIX_SYMBOLIZER_STR(x) MATRIX_SYMBOLIZER_STR2(x)

std::string Demangle(const std::string& symbol) {
  std::string mangled = StripCloneSuffixes(symbol);
  if (mangled.size() < 2 || mangled[0] != '_' || mangled[1] != 'Z') return mangled;
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) {
    free(demangled);
    return mangled;
  }
  std::string result(demangled);
  free(demangled);
  // Abseil's inline namespace ("absl::debian3::Duration") is build
  // configuration, not part of the name a reader knows: show "absl::Duration".
  static const std::string kAbslInline =
      std::string("absl::") + MATRIX_SYMBOLIZER_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME) + "::";
  for (size_t pos = result.find(kAbslInline); pos != std::string::npos;
       pos = result.find(kAbslInline, pos)) {
    result.replace(pos, kAbslInline.size(), "absl::");
  }
  return result;
}

ElfSymbolTable ElfSymbolTable::Load(const std::string& path,
                                    const std::vector<std::string>& debug_directories) {
  ElfSymbolTable table;
  std::optional<MappedFile> file = MappedFile::Open(path);
  if (!file) return table;
  std::optional<ElfView> elf = ElfView::Parse(file->data(), file->size());
  if (!elf) return table;

  // Where the symbols come from: this file's .symtab, a separate debug
  // file's .symtab, or this file's .dynsym.
  std::optional<MappedFile> debug_file;
  std::optional<ElfView> debug_elf;
  const ElfView* source_elf = &*elf;
  const Elf64_Shdr* source = nullptr;
  if (HasSymtab(*elf)) {
    source = elf->FindSectionOfType(SHT_SYMTAB);
    table.source_ = Source::kSymtab;
    table.symbol_file_ = path;
  } else {
    for (const std::string& candidate : DebugFileCandidates(path, *elf, debug_directories)) {
      if (candidate == path) continue;
      debug_file = MappedFile::Open(candidate);
      if (!debug_file) continue;
      debug_elf = ElfView::Parse(debug_file->data(), debug_file->size());
      if (debug_elf && HasSymtab(*debug_elf)) {
        std::string id = elf->BuildId();
        if (id.empty() || debug_elf->BuildId().empty() || debug_elf->BuildId() == id) {
          source_elf = &*debug_elf;
          source = debug_elf->FindSectionOfType(SHT_SYMTAB);
          table.source_ = Source::kSymtab;
          table.symbol_file_ = candidate;
          break;
        }
      }
      debug_elf.reset();
      debug_file.reset();
    }
    if (source == nullptr) {
      source = elf->FindSectionOfType(SHT_DYNSYM);
      if (source == nullptr) return table;
      table.source_ = Source::kDynsym;
      table.symbol_file_ = path;
    }
  }

  std::vector<RawSymbol> raw = ReadSymbols(*source_elf, *source);
  std::sort(raw.begin(), raw.end(), [](const RawSymbol& a, const RawSymbol& b) {
    return a.address != b.address ? a.address < b.address : BetterAlias(a, b);
  });
  table.symbols_.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (i > 0 && raw[i].address == raw[i - 1].address) continue;  // An alias; keep the best.
    uintptr_t size = raw[i].size;
    if (size == 0) {
      // Assembly without .size: up to the next symbol, within its section.
      uintptr_t end = raw[i].section_end;
      for (size_t j = i + 1; j < raw.size(); ++j) {
        if (raw[j].address > raw[i].address) {
          end = std::min(end, raw[j].address);
          break;
        }
      }
      size = end > raw[i].address && end != UINTPTR_MAX ? end - raw[i].address : 1;
    }
    table.symbols_.push_back({raw[i].address, size, std::string(raw[i].name)});
  }
  return table;
}

const ElfSymbol* ElfSymbolTable::Lookup(uintptr_t address) const {
  auto it = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                             [](uintptr_t a, const ElfSymbol& s) { return a < s.address; });
  if (it == symbols_.begin()) return nullptr;
  --it;
  if (address - it->address >= it->size) return nullptr;
  return &*it;
}

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
  handle->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  handle->callbacks.section_address = dwfl_offline_section_address;
  handle->callbacks.debuginfo_path = &handle->debuginfo_path_ptr;
  handle->dwfl = dwfl_begin(&handle->callbacks);
  if (handle->dwfl == nullptr) return nullptr;
  int fd = open(open_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  dwfl_report_begin(handle->dwfl);
  // ET_DYN placed at its own p_vaddr (bias 0): Dwfl addresses are file
  // addresses. On success the Dwfl owns `fd`.
  handle->module = dwfl_report_elf(handle->dwfl, BaseNameOf(path).c_str(), path.c_str(), fd,
                                   /*base=*/0, /*add_p_vaddr=*/true);
  if (handle->module == nullptr) close(fd);
  dwfl_report_end(handle->dwfl, nullptr, nullptr);
  if (handle->module == nullptr) return nullptr;
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

// One loaded ELF object: where it is mapped and, once needed, its symbols.
class SymbolModule {
 public:
  SymbolModule(std::string path, std::string open_path, uintptr_t bias,
               std::vector<std::pair<uintptr_t, uintptr_t>> ranges)
      : path_(std::move(path)),
        open_path_(std::move(open_path)),
        bias_(bias),
        ranges_(std::move(ranges)) {}

  const std::string& path() const { return path_; }
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
  ScannedModule module{info->dlpi_name != nullptr ? info->dlpi_name : "", info->dlpi_addr, {}};
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& phdr = info->dlpi_phdr[i];
    if (phdr.p_type != PT_LOAD || phdr.p_memsz == 0) continue;
    uintptr_t begin = info->dlpi_addr + phdr.p_vaddr;
    module.ranges.emplace_back(begin, begin + phdr.p_memsz);
  }
  std::sort(module.ranges.begin(), module.ranges.end());
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

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

bool IsSystemLibrary(std::string_view module_path) {
  for (std::string_view dir : {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"}) {
    if (module_path.substr(0, dir.size()) == dir) return true;
  }
  return false;
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
          old->low() == scanned.ranges.front().first) {
        reused = std::move(old);
        break;
      }
    }
    modules.push_back(reused ? std::move(reused)
                             : std::make_unique<internal::SymbolModule>(
                                   std::move(path), std::move(open_path), scanned.bias,
                                   std::move(scanned.ranges)));
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
  {
    info.module = module->path();
    info.module_offset = pc - module->bias();
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
  const bool absl_fallback = !info.module.empty() && info.module.front() != '/';
  if (info.function.empty() && absl_fallback) {
    char buffer[1024];
    if (absl::Symbolize(reinterpret_cast<const void*>(pc), buffer, sizeof(buffer))) {
      info.function = buffer;
      // The function's start from its unwind info (FDE), when it has one.
      auto start = reinterpret_cast<uintptr_t>(
          _Unwind_FindEnclosingFunction(reinterpret_cast<void*>(pc)));
      if (start != 0 && start <= pc && pc - start < (uintptr_t{1} << 24)) {
        info.function_offset = pc - start;
      }
    }
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

size_t Symbolizer::PreloadModules() {
  absl::MutexLock lock(&mu_);
  FindModuleLocked(0);  // Rescans when modules were loaded or unloaded.
  size_t loaded = 0;
  for (auto& module : modules_) {
    if (IsSystemLibrary(module->path())) continue;
    module->Symbols(debug_directories_);
    if (options_.source_lines) {
      if (internal::DwarfModule* dwarf = module->Dwarf(debug_directories_)) dwarf->IndexUnits();
    }
    ++loaded;
  }
  return loaded;
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
