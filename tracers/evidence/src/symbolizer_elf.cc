#include "matrix/trace/symbolizer.h"

// Symbolizer, part 1 of 3: ELF symbol tables (matrix::internal::ElfSymbolTable),
// separate debug files, demangling. The DWARF lines and inlines are in
// symbolizer_dwarf.cc, the module index and cache (Symbolizer) in symbolizer.cc.

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
#include "absl/types/span.h"
#include "internal/debug_link.h"
#include "matrix/core/file_path.h"
#include "matrix/trace/perf_map.h"

namespace matrix {
namespace internal {

std::vector<std::string> DebugLinkCandidates(std::string_view path, std::string_view link,
                                             const std::vector<std::string>& debug_directories) {
  if (link.empty() || link.find('/') != std::string_view::npos) return {};
  const std::string dir(DirName(path));
  const std::string name(link);
  std::vector<std::string> candidates = {absl::StrCat(dir, "/", name),
                                         absl::StrCat(dir, "/.debug/", name)};
  for (const std::string& debug_dir : debug_directories) {
    candidates.push_back(absl::StrCat(debug_dir, dir, "/", name));
    candidates.push_back(absl::StrCat(debug_dir, "/", name));
  }
  return candidates;
}

namespace {

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

  // The GNU build id as lowercase hex (from the SHT_NOTE sections), or "".
  std::string BuildId() const {
    for (uint64_t i = 0; i < section_count_; ++i) {
      if (sections_[i].sh_type != SHT_NOTE) continue;
      std::string id = BuildIdFromNotes(SectionData(sections_[i]));
      if (!id.empty()) return id;
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

// Debug-file candidates for a stripped file, in search order: by build id,
// then by debug link.
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
  for (std::string& candidate : DebugLinkCandidates(path, elf.DebugLink(), directories)) {
    candidates.push_back(std::move(candidate));
  }
  return candidates;
}

// The program headers of a 64-bit native-endian ELF image; empty when it
// is not one or they lie outside it.
absl::Span<const Elf64_Phdr> ProgramHeaders(const uint8_t* data, size_t size) {
  if (size < sizeof(Elf64_Ehdr)) return {};
  Elf64_Ehdr ehdr;
  memcpy(&ehdr, data, sizeof(ehdr));
  if (memcmp(ehdr.e_ident, ELFMAG, SELFMAG) != 0 || ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
      ehdr.e_phentsize != sizeof(Elf64_Phdr) || ehdr.e_phoff % alignof(Elf64_Phdr) != 0 ||
      ehdr.e_phoff > size || ehdr.e_phnum > (size - ehdr.e_phoff) / sizeof(Elf64_Phdr)) {
    return {};
  }
  return absl::MakeConstSpan(reinterpret_cast<const Elf64_Phdr*>(data + ehdr.e_phoff),
                             ehdr.e_phnum);
}

}  // namespace

std::string BuildIdFromNotes(absl::string_view notes) {
  while (notes.size() >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr note;
    memcpy(&note, notes.data(), sizeof(note));
    const uint64_t name_size = (uint64_t{note.n_namesz} + 3) & ~uint64_t{3};
    const uint64_t desc_size = (uint64_t{note.n_descsz} + 3) & ~uint64_t{3};
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
  return "";
}

std::optional<ElfFileInfo> ElfFileInfo::Read(const std::string& path) {
  std::optional<MappedFile> file = MappedFile::Open(path);
  if (!file) return std::nullopt;
  absl::Span<const Elf64_Phdr> phdrs = ProgramHeaders(file->data(), file->size());
  std::optional<ElfView> elf = ElfView::Parse(file->data(), file->size());
  if (phdrs.empty() && !elf) return std::nullopt;
  ElfFileInfo info;
  Elf64_Ehdr ehdr;
  memcpy(&ehdr, file->data(), sizeof(ehdr));
  info.pie = ehdr.e_type == ET_DYN;
  const absl::string_view bytes(reinterpret_cast<const char*>(file->data()), file->size());
  for (const Elf64_Phdr& phdr : phdrs) {
    if (phdr.p_type == PT_LOAD) info.loads.push_back({phdr.p_offset, phdr.p_vaddr, phdr.p_filesz});
    if (phdr.p_type == PT_NOTE && info.build_id.empty() && phdr.p_offset <= bytes.size()) {
      info.build_id = BuildIdFromNotes(bytes.substr(phdr.p_offset, phdr.p_filesz));
    }
  }
  // A debug file keeps its notes as sections (its segments' bytes are gone).
  if (info.build_id.empty() && elf) info.build_id = elf->BuildId();
  return info;
}

std::optional<uint64_t> ElfFileInfo::ElfAddressOfFileOffset(uint64_t file_offset) const {
  for (const Load& load : loads) {
    if (file_offset >= load.offset && file_offset - load.offset < load.filesz) {
      return load.vaddr + (file_offset - load.offset);
    }
  }
  return std::nullopt;
}

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

}  // namespace internal
}  // namespace matrix
