#include "matrix/trace/symbolizer.h"

#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <stdlib.h>
#include <time.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/debugging/symbolize.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

// Functions with known names live outside any anonymous namespace so their
// names are predictable. Each records a pc inside itself, as a stack frame's
// return address would be.
namespace symbolizer_test_ns {

// The return address of the call to this function: an address inside the
// caller, after the call instruction.
__attribute__((noinline)) uintptr_t ReturnAddress() {
  uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");  // Keep this a real call, not a tail call.
  return pc;
}

struct Widget {
  __attribute__((noinline)) uintptr_t Draw(int x, const char* label) {
    uintptr_t pc = ReturnAddress();
    asm volatile("" : : "r"(x), "r"(label) : "memory");
    return pc;
  }
};

template <typename T>
__attribute__((noinline)) uintptr_t Twice(T value, std::vector<int>* sink) {
  uintptr_t pc = ReturnAddress();
  sink->push_back(static_cast<int>(value * 2));
  return pc;
}

// A file-local function: a LOCAL symbol in .symtab, absent from .dynsym.
__attribute__((noinline)) static uintptr_t StaticHelper(double d) {
  uintptr_t pc = ReturnAddress();
  volatile double keep = d;
  (void)keep;
  return pc;
}

__attribute__((noinline)) int PlainFunction(int a) { return a * 3 + 1; }

}  // namespace symbolizer_test_ns

namespace {
__attribute__((noinline)) uintptr_t AnonymousNamespaceFunction(long n) {
  uintptr_t pc = symbolizer_test_ns::ReturnAddress();
  asm volatile("" : : "r"(n) : "memory");
  return pc;
}
}  // namespace

namespace matrix {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Return addresses point after the call; name the call itself.
SymbolInfo SymbolizeReturnAddress(Symbolizer& symbolizer, uintptr_t return_address) {
  return symbolizer.Symbolize(return_address - 1);
}

std::string ExecutablePath() { return std::filesystem::read_symlink("/proc/self/exe"); }

TEST(SymbolizerTest, MemberFunction_HasFullNameWithParameters) {
  Symbolizer symbolizer;
  symbolizer_test_ns::Widget widget;
  uintptr_t pc = widget.Draw(3, "x");
  SymbolInfo info = SymbolizeReturnAddress(symbolizer, pc);
  EXPECT_EQ(info.function, "symbolizer_test_ns::Widget::Draw(int, char const*)");
  EXPECT_EQ(info.module, ExecutablePath());
  EXPECT_GT(info.function_offset, 0u);
  EXPECT_LT(info.function_offset, 4096u);
  EXPECT_GT(info.module_offset, info.function_offset);

  // absl::Symbolize alone gives no parameters; we do better.
  char absl_name[1024];
  ASSERT_TRUE(absl::Symbolize(reinterpret_cast<void*>(pc - 1), absl_name, sizeof(absl_name)));
  EXPECT_EQ(std::string(absl_name), "symbolizer_test_ns::Widget::Draw()");
}

TEST(SymbolizerTest, TemplateInstance_HasTemplateArgumentsAndParameters) {
  Symbolizer symbolizer;
  std::vector<int> sink;
  SymbolInfo as_long =
      SymbolizeReturnAddress(symbolizer, symbolizer_test_ns::Twice<long>(21, &sink));
  SymbolInfo as_double =
      SymbolizeReturnAddress(symbolizer, symbolizer_test_ns::Twice<double>(1.5, &sink));
  EXPECT_EQ(as_long.function,
            "unsigned long symbolizer_test_ns::Twice<long>(long, std::vector<int, "
            "std::allocator<int> >*)");
  EXPECT_EQ(as_double.function,
            "unsigned long symbolizer_test_ns::Twice<double>(double, std::vector<int, "
            "std::allocator<int> >*)");
}

TEST(SymbolizerTest, StaticAndAnonymousNamespaceFunctions_AreNamedWithoutRdynamic) {
  Symbolizer symbolizer;
  EXPECT_EQ(SymbolizeReturnAddress(symbolizer, symbolizer_test_ns::StaticHelper(2.5)).function,
            "symbolizer_test_ns::StaticHelper(double)");
  EXPECT_EQ(SymbolizeReturnAddress(symbolizer, AnonymousNamespaceFunction(7)).function,
            "(anonymous namespace)::AnonymousNamespaceFunction(long)");
}

TEST(SymbolizerTest, FunctionStart_HasZeroOffset) {
  Symbolizer symbolizer;
  auto address = reinterpret_cast<uintptr_t>(&symbolizer_test_ns::PlainFunction);
  SymbolInfo info = symbolizer.Symbolize(address);
  EXPECT_EQ(info.function, "symbolizer_test_ns::PlainFunction(int)");
  EXPECT_EQ(info.function_offset, 0u);
  EXPECT_EQ(symbolizer.FunctionName(address), "symbolizer_test_ns::PlainFunction(int)");
}

TEST(SymbolizerTest, SharedLibraryFunction_IsNamed) {
  Symbolizer symbolizer;
  // libc ships stripped of .symtab on Debian: the name comes from .dynsym,
  // or from libc6-dbg's debug file (found by build id) when installed.
  auto address = reinterpret_cast<uintptr_t>(&gnu_get_libc_version);
  SymbolInfo info = symbolizer.Symbolize(address + 1);
  EXPECT_EQ(info.function, "gnu_get_libc_version");
  EXPECT_EQ(info.function_offset, 1u);
  EXPECT_THAT(info.module, HasSubstr("libc.so"));
  EXPECT_THAT(symbolizer.Describe(address + 1),
              StartsWith("gnu_get_libc_version+0x1 (libc.so"));
}

TEST(SymbolizerTest, VersionedLibcSymbol_HasNoVersionSuffix) {
  Symbolizer symbolizer;
  // clock_nanosleep is versioned (clock_nanosleep@@GLIBC_2.17 in libc's
  // .symtab when a debug file is present).
  std::string name = symbolizer.FunctionName(reinterpret_cast<uintptr_t>(&clock_nanosleep));
  EXPECT_EQ(name.find('@'), std::string::npos) << name;
  EXPECT_THAT(name, HasSubstr("clock_nanosleep"));
}

TEST(SymbolizerTest, VdsoFunction_FallsBackToAbslSymbolize) {
  // The vDSO is mapped but is not a file this reader can open, so its names
  // come from absl::Symbolize (which reads the vDSO image in memory).
  void* vdso = dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (vdso == nullptr) GTEST_SKIP() << "no vDSO in the link map";
  void* function = dlsym(vdso, "__vdso_clock_gettime");
  if (function == nullptr) function = dlsym(vdso, "clock_gettime");
  if (function == nullptr) GTEST_SKIP() << "vDSO without clock_gettime";
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(reinterpret_cast<uintptr_t>(function) + 1);
  EXPECT_THAT(info.function, HasSubstr("clock_gettime"));
  EXPECT_EQ(info.module, "linux-vdso.so.1");
  // absl gives no offset; the function start comes from its unwind info.
  EXPECT_EQ(info.function_offset, 1u);
}

TEST(SymbolizerTest, Describe_IsOneLineWithOffsetAndModuleBaseName) {
  Symbolizer symbolizer;
  symbolizer_test_ns::Widget widget;
  uintptr_t pc = widget.Draw(1, "y") - 1;
  SymbolInfo info = symbolizer.Symbolize(pc);
  std::string base_name = std::filesystem::path(ExecutablePath()).filename();
  EXPECT_EQ(symbolizer.Describe(pc), absl::StrFormat("%s+0x%x (%s)", info.function,
                                                     info.function_offset, base_name));
}

TEST(SymbolizerTest, UnmappedAddress_IsUnknownAndPrintedInHex) {
  Symbolizer symbolizer;
  SymbolInfo info = symbolizer.Symbolize(0x10);
  EXPECT_EQ(info.function, "");
  EXPECT_EQ(info.module, "");
  EXPECT_EQ(symbolizer.FunctionName(0x10), "0x10");
  EXPECT_EQ(symbolizer.Describe(0x10), "0x10");
}

TEST(SymbolizerTest, AddressInModuleOutsideAnyFunction_IsModulePlusOffset) {
  Symbolizer symbolizer;
  // The executable's ELF header: mapped, but no function lives there.
  struct Found {
    uintptr_t header = 0;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name == nullptr || info->dlpi_name[0] != '\0') return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_offset == 0) {
            static_cast<Found*>(data)->header = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            return 1;
          }
        }
        return 0;
      },
      &found);
  ASSERT_NE(found.header, 0u);
  uintptr_t address = found.header + 0x10;
  SymbolInfo info = symbolizer.Symbolize(address);
  EXPECT_EQ(info.function, "");
  EXPECT_EQ(info.module, ExecutablePath());
  std::string base_name = std::filesystem::path(ExecutablePath()).filename();
  EXPECT_EQ(symbolizer.FunctionName(address),
            absl::StrFormat("%s+0x%x", base_name, info.module_offset));
  EXPECT_EQ(symbolizer.Describe(address), symbolizer.FunctionName(address));
}

TEST(SymbolizerTest, RegisteredName_WinsForExactAddressOnly) {
  Symbolizer symbolizer;
  auto address = reinterpret_cast<uintptr_t>(&symbolizer_test_ns::PlainFunction);
  symbolizer.RegisterName(address, "ManualScope::Frame");
  EXPECT_EQ(symbolizer.FunctionName(address), "ManualScope::Frame");
  EXPECT_EQ(symbolizer.Describe(address), "ManualScope::Frame");
  EXPECT_EQ(symbolizer.FunctionName(address + 1), "symbolizer_test_ns::PlainFunction(int)");
  symbolizer.RegisterName(0x42, "synthetic");
  EXPECT_EQ(symbolizer.FunctionName(0x42), "synthetic");
  symbolizer.RegisterName(0x42, "renamed");
  EXPECT_EQ(symbolizer.FunctionName(0x42), "renamed");
}

TEST(SymbolizerTest, RepeatedLookups_AreCachedOnce) {
  Symbolizer symbolizer;
  auto address = reinterpret_cast<uintptr_t>(&symbolizer_test_ns::PlainFunction);
  SymbolInfo first = symbolizer.Symbolize(address + 2);
  size_t size = symbolizer.CacheSizeForTesting();
  for (int i = 0; i < 10; ++i) EXPECT_EQ(symbolizer.Symbolize(address + 2).function, first.function);
  EXPECT_EQ(symbolizer.CacheSizeForTesting(), size);
}

TEST(SymbolizerTest, GetIsASingleton) { EXPECT_EQ(Symbolizer::Get(), Symbolizer::Get()); }

TEST(DemangleTest, ItaniumNamesAndPlainNames) {
  EXPECT_EQ(internal::Demangle("_ZN3app6Widget4DrawEiPKc"), "app::Widget::Draw(int, char const*)");
  EXPECT_EQ(internal::Demangle("main"), "main");
  EXPECT_EQ(internal::Demangle("_Znotvalid"), "_Znotvalid");
  EXPECT_EQ(internal::Demangle("_Z3fooi.cold"), "foo(int)");
  EXPECT_EQ(internal::Demangle("_Z3fooi.isra.0.cold"), "foo(int)");
  EXPECT_EQ(internal::Demangle("_Z3fooi.constprop.12"), "foo(int)");
  EXPECT_EQ(internal::Demangle("_Z3fooi.llvm.8812374"), "foo(int)");
  EXPECT_EQ(internal::Demangle("helper.part.0"), "helper");
}

TEST(DemangleTest, UnknownSuffixesAndDotsAreKept) {
  EXPECT_EQ(internal::StripCloneSuffixes("name.with.dots"), "name.with.dots");
  EXPECT_EQ(internal::StripCloneSuffixes("v.12"), "v.12");
  EXPECT_EQ(internal::StripCloneSuffixes(".cold"), ".cold");
  EXPECT_EQ(internal::StripCloneSuffixes("x.cold"), "x");
}

TEST(ElfSymbolTableTest, NonElfAndMissingFiles_GiveEmptyTables) {
  EXPECT_EQ(internal::ElfSymbolTable::Load("/nonexistent/file", {}).size(), 0u);
  EXPECT_EQ(internal::ElfSymbolTable::Load("/proc/self/status", {}).size(), 0u);
  std::string text = ::testing::TempDir() + "/not_elf.txt";
  FILE* f = fopen(text.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("\x7f" "ELF but truncated", f);
  fclose(f);
  internal::ElfSymbolTable table = internal::ElfSymbolTable::Load(text, {});
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.source(), internal::ElfSymbolTable::Source::kNone);
  std::filesystem::remove(text);
}

TEST(ElfSymbolTableTest, ExecutableSymtab_HasLocalFunctions) {
  internal::ElfSymbolTable table = internal::ElfSymbolTable::Load("/proc/self/exe", {});
  EXPECT_EQ(table.source(), internal::ElfSymbolTable::Source::kSymtab);
  EXPECT_GT(table.size(), 100u);
}

// A stripped copy of this test binary finds its symbols in a separate debug
// file, by .gnu_debuglink and by build id. Uses binutils' objcopy.
class StrippedBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (system("objcopy --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no objcopy";
    std::string pattern = ::testing::TempDir() + "/stripped_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    binary_ = dir_ + "/app";
    std::filesystem::copy_file("/proc/self/exe", binary_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void Run(const std::string& command) {
    ASSERT_EQ(system((command + " 2>&1").c_str()), 0) << command;
  }

  std::string dir_;
  std::string binary_;
};

TEST_F(StrippedBinaryTest, WithoutDebugFile_FallsBackToDynsymOrNothing) {
  Run(absl::StrCat("objcopy --strip-all ", binary_, " ", binary_, ".stripped"));
  internal::ElfSymbolTable table = internal::ElfSymbolTable::Load(binary_ + ".stripped", {});
  EXPECT_NE(table.source(), internal::ElfSymbolTable::Source::kSymtab);
  // A PIE test binary exports few functions: the static ones are gone.
  internal::ElfSymbolTable full = internal::ElfSymbolTable::Load(binary_, {});
  EXPECT_LT(table.size(), full.size());
}

TEST_F(StrippedBinaryTest, DebugLink_FindsSymbolsNextToTheBinary) {
  Run(absl::StrCat("objcopy --only-keep-debug ", binary_, " ", binary_, ".debug"));
  Run(absl::StrCat("cd ", dir_, " && objcopy --strip-all --add-gnu-debuglink=app.debug app ",
                   "app.stripped"));
  internal::ElfSymbolTable table = internal::ElfSymbolTable::Load(binary_ + ".stripped", {});
  EXPECT_EQ(table.source(), internal::ElfSymbolTable::Source::kSymtab);
  EXPECT_EQ(table.symbol_file(), dir_ + "/app.debug");
  EXPECT_EQ(table.size(), internal::ElfSymbolTable::Load(binary_, {}).size());
}

TEST_F(StrippedBinaryTest, BuildId_FindsSymbolsInDebugDirectory) {
  // The build id, from the copy's notes, via readelf.
  std::string id_file = dir_ + "/id";
  Run(absl::StrCat("readelf -n ", binary_, " | sed -n 's/.*Build ID: //p' > ", id_file));
  std::string id;
  if (FILE* f = fopen(id_file.c_str(), "r")) {
    char buffer[128] = {};
    if (fgets(buffer, sizeof(buffer), f) != nullptr) id = buffer;
    fclose(f);
  }
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  if (id.size() < 4) GTEST_SKIP() << "test binary has no build id";
  std::string debug_dir = dir_ + "/symbols";
  std::string target = absl::StrCat(debug_dir, "/.build-id/", id.substr(0, 2));
  std::filesystem::create_directories(target);
  Run(absl::StrCat("objcopy --only-keep-debug ", binary_, " ", target, "/", id.substr(2),
                   ".debug"));
  Run(absl::StrCat("objcopy --strip-all ", binary_, " ", binary_, ".stripped"));
  internal::ElfSymbolTable table =
      internal::ElfSymbolTable::Load(binary_ + ".stripped", {debug_dir});
  EXPECT_EQ(table.source(), internal::ElfSymbolTable::Source::kSymtab);
  EXPECT_EQ(table.symbol_file(), absl::StrCat(target, "/", id.substr(2), ".debug"));
}

}  // namespace
}  // namespace matrix
