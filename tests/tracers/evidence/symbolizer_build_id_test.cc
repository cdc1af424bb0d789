// What names a frame off the host (matrix/trace/symbolizer.h): the module's
// GNU build id (from its ELF notes, in memory and in the file) and the
// frame's address in the ELF file's own address space, for PIE and non-PIE
// modules; and raw frames (Symbolizer::SetRawFrames), which carry only those.

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "matrix/trace/symbolizer.h"

namespace symbolizer_build_id_test {
__attribute__((noinline)) uintptr_t HereInTheExecutable() {
  uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");
  return pc;
}
}  // namespace symbolizer_build_id_test

namespace matrix {
namespace {

// One ELF note: header, name padded to 4, descriptor padded to 4.
std::string Note(uint32_t type, const std::string& name, const std::string& desc) {
  Elf64_Nhdr header{static_cast<Elf64_Word>(name.size()), static_cast<Elf64_Word>(desc.size()),
                    type};
  std::string note(reinterpret_cast<const char*>(&header), sizeof(header));
  note += name;
  note.resize((note.size() + 3) & ~size_t{3}, '\0');
  note += desc;
  note.resize((note.size() + 3) & ~size_t{3}, '\0');
  return note;
}

TEST(BuildIdNotesTest, TheGnuBuildIdNote_IsReadAsLowercaseHex_AfterOtherNotes) {
  const std::string abi_tag = Note(NT_GNU_ABI_TAG, std::string("GNU\0", 4), std::string(16, '\1'));
  const std::string build_id =
      Note(NT_GNU_BUILD_ID, std::string("GNU\0", 4), std::string("\x9f\x1c\x00\xe4\xAB", 5));
  EXPECT_EQ(internal::BuildIdFromNotes(abi_tag + build_id), "9f1c00e4ab");
  // Another vendor's note of the same type is not a GNU build id.
  const std::string other = Note(NT_GNU_BUILD_ID, std::string("Go\0\0", 4), "abcd");
  EXPECT_EQ(internal::BuildIdFromNotes(other), "");
  EXPECT_EQ(internal::BuildIdFromNotes(other + build_id), "9f1c00e4ab");
  // No build id, or notes cut short: none.
  EXPECT_EQ(internal::BuildIdFromNotes(abi_tag), "");
  EXPECT_EQ(internal::BuildIdFromNotes(build_id.substr(0, build_id.size() - 4)), "");
  EXPECT_EQ(internal::BuildIdFromNotes(""), "");
}

// This test binary's build id, as readelf prints it.
std::string ReadelfBuildId(const std::string& path) {
  std::string id;
  FILE* pipe = popen(("readelf -n " + path + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return id;
  char line[512];
  while (fgets(line, sizeof(line), pipe) != nullptr) {
    const char* at = strstr(line, "Build ID: ");
    if (at != nullptr) id = std::string(at + 10, strcspn(at + 10, " \n"));
  }
  pclose(pipe);
  return id;
}

TEST(BuildIdNotesTest, FileAndMemory_GiveTheBuildIdReadelfShows) {
  // The file's own path: in readelf, /proc/self/exe is readelf.
  const std::string id = ReadelfBuildId(std::filesystem::read_symlink("/proc/self/exe"));
  if (id.empty()) GTEST_SKIP() << "this test binary was linked without a build id";
  std::optional<internal::ElfFileInfo> file = internal::ElfFileInfo::Read("/proc/self/exe");
  ASSERT_TRUE(file.has_value());
  EXPECT_EQ(file->build_id, id);
  EXPECT_TRUE(file->pie);
  // In memory (PT_NOTE through dl_iterate_phdr), for a frame of ours.
  Symbolizer symbolizer;
  const SymbolInfo info = symbolizer.Symbolize(symbolizer_build_id_test::HereInTheExecutable());
  EXPECT_EQ(info.build_id, id);
  EXPECT_FALSE(info.no_build_id);
  EXPECT_EQ(internal::ElfFileInfo::Read("/nonexistent/module"), std::nullopt);
}

// The mapping of /proc/self/maps that holds `pc`: its start and file offset.
struct Mapping {
  uintptr_t start = 0;
  uint64_t offset = 0;
};
std::optional<Mapping> MappingOf(uintptr_t pc) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.size() < 3) continue;
    std::vector<std::string> range = absl::StrSplit(fields[0], '-');
    uint64_t begin = 0, end = 0, offset = 0;
    if (range.size() != 2 || !absl::SimpleHexAtoi(range[0], &begin) ||
        !absl::SimpleHexAtoi(range[1], &end) || !absl::SimpleHexAtoi(fields[2], &offset)) {
      continue;
    }
    if (pc >= begin && pc < end) return Mapping{static_cast<uintptr_t>(begin), offset};
  }
  return std::nullopt;
}

// What a tool outside the process computes from /proc/PID/maps (file offset)
// and the PT_LOAD headers is the frame's elf_address (pc - load bias), which
// the in-process capture takes from the loader: for this PIE, not the pc.
TEST(ElfAddressTest, Pie_FileOffsetThroughPtLoad_IsTheFramesElfAddress) {
  const uintptr_t pc = symbolizer_build_id_test::HereInTheExecutable();
  std::optional<Mapping> mapping = MappingOf(pc);
  ASSERT_TRUE(mapping.has_value());
  std::optional<internal::ElfFileInfo> file = internal::ElfFileInfo::Read("/proc/self/exe");
  ASSERT_TRUE(file.has_value());
  ASSERT_TRUE(file->pie);
  std::optional<uint64_t> address =
      file->ElfAddressOfFileOffset(pc - mapping->start + mapping->offset);
  ASSERT_TRUE(address.has_value());
  Symbolizer symbolizer;
  const SymbolInfo info = symbolizer.Symbolize(pc);
  EXPECT_EQ(*address, info.module_offset);
  EXPECT_NE(*address, pc);  // A PIE is loaded away from its link address.
  EXPECT_EQ(pc - info.module_offset, static_cast<uintptr_t>(_r_debug.r_map->l_addr));
}

// A non-PIE executable's segments are linked at 0x400000: the ELF address
// of a byte is its absolute address, p_vaddr + (offset - p_offset), and an
// offset in no PT_LOAD segment (section headers, say) has none.
TEST(ElfAddressTest, NonPie_FileOffsetThroughPtLoad_IsTheAbsoluteAddress) {
  internal::ElfFileInfo file;
  file.pie = false;
  file.loads = {{.offset = 0, .vaddr = 0x400000, .filesz = 0x5b8},
                {.offset = 0x1000, .vaddr = 0x401000, .filesz = 0x2a1},
                {.offset = 0x2df0, .vaddr = 0x403df0, .filesz = 0x230}};
  EXPECT_EQ(file.ElfAddressOfFileOffset(0x1136), 0x401136u);
  EXPECT_EQ(file.ElfAddressOfFileOffset(0x2e00), 0x403e00u);
  EXPECT_EQ(file.ElfAddressOfFileOffset(0x5b8), std::nullopt);  // Past the first segment.
  EXPECT_EQ(file.ElfAddressOfFileOffset(0x9000), std::nullopt);
}

TEST(RawFramesTest, RawFrames_CarryModuleBuildIdAndElfAddress_AndNoName) {
  const uintptr_t pc = symbolizer_build_id_test::HereInTheExecutable() - 1;
  Symbolizer named;
  const SymbolInfo full = named.Symbolize(pc);
  ASSERT_FALSE(full.function.empty());
  Symbolizer raw;
  raw.SetRawFrames(true);
  const SymbolInfo info = raw.Symbolize(pc);
  EXPECT_EQ(info.function, "");
  EXPECT_EQ(info.file, "");
  EXPECT_EQ(info.module, full.module);
  EXPECT_EQ(info.module_offset, full.module_offset);
  EXPECT_EQ(info.build_id, full.build_id);
  // The function's start still comes from the unwind info in memory (what a
  // stripped module keeps), so captures at any pc of it compare as one.
  ASSERT_GT(full.function_offset, 0u);
  EXPECT_EQ(info.function_offset, full.function_offset);
  const uintptr_t start = pc - full.function_offset;
  EXPECT_EQ(raw.Symbolize(start).function_offset, 0u);
  EXPECT_EQ(raw.Symbolize(start + 1).function_offset, 1u);
  EXPECT_EQ(raw.PreloadModules(), 0u);  // Nothing is read in the process.
  raw.SetRawFrames(false);
  EXPECT_EQ(raw.Symbolize(pc).function, full.function);
}

}  // namespace
}  // namespace matrix
