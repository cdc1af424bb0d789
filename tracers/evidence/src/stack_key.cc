#include "matrix/trace/stack_key.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "internal/frame_id.h"
#include "matrix/core/file_path.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

using internal::IdOf;

// NativeStackKey()'s rule over any frame type: the innermost named frame that
// is not a system or runtime frame, else the innermost named one.
struct NamedFrame {
  std::string_view module;
  std::string_view function;
  std::string_view file;
  // For an unnamed frame's key: its function's start in the ELF file when
  // known, else its own ELF address.
  uint64_t key_address = 0;
};

// An unnamed frame's key address from its ELF address and its offset in the
// function. An offset of 0, or as large as the address (an unnamed frame's
// offset is its ELF address when the start is unknown), leaves the address.
uint64_t KeyAddress(uint64_t elf_address, uint64_t function_offset) {
  return function_offset != 0 && function_offset < elf_address ? elf_address - function_offset
                                                               : elf_address;
}

// KeyAddress() of a report's frame. Reports of older versions carry no
// elf_address: their unnamed frames' offset is the address.
uint64_t ReportKeyAddress(const proto::StackFrame& frame) {
  return frame.elf_address() != 0 ? KeyAddress(frame.elf_address(), frame.offset())
                                  : frame.offset();
}

// The key of `f` when it is the program's own (named, or unnamed in a
// module outside `named_modules`), else "".
std::string ProgramKey(const NamedFrame& f, const absl::flat_hash_set<std::string>& named_modules) {
  if (f.module.empty() && f.function.empty()) return "";
  if (IsSystemOrRuntimeFrame(f.module, f.function, f.file)) return "";
  if (!f.function.empty()) return std::string(f.function);
  if (named_modules.contains(std::string(f.module))) return "";
  return UnnamedFrameKey(f.module, f.key_address);
}

template <typename Frames, typename Name>
std::string FirstNamedFrame(const Frames& frames, Name name) {
  absl::flat_hash_set<std::string> named_modules;
  for (const auto& frame : frames) {
    const NamedFrame f = name(frame);
    if (!f.function.empty()) named_modules.insert(std::string(f.module));
  }
  for (const auto& frame : frames) {
    if (std::string key = ProgramKey(name(frame), named_modules); !key.empty()) return key;
  }
  for (const auto& frame : frames) {
    const NamedFrame f = name(frame);
    if (!f.function.empty() && !IsCRuntimeFrame(f.module)) return std::string(f.function);
  }
  for (const auto& frame : frames) {
    const NamedFrame f = name(frame);
    if (!f.function.empty() && !IsVdsoFrame(f.module, f.function)) return std::string(f.function);
  }
  return "unknown";
}

constexpr std::string_view kCRuntimeFileNames[] = {
    "libc.so", "libc-", "libpthread", "libm.so", "libdl", "librt", "ld-linux",
    "libstdc++", "libgcc_s", "linux-vdso", "[vdso]"};

// File name prefixes: the same libraries when only a base name is known (block
// files), the loader and vDSO, matrix-cpp's own libraries, and the
// executables of language runtimes, which carry the interpreter or VM.
constexpr std::string_view kSystemFileNames[] = {
    // C and C++ runtime, loader, vDSO.
    "libc.so", "libc-", "libpthread", "libstdc++", "libgcc_s", "ld-linux", "linux-vdso", "[vdso]",
    "libm.so", "libdl", "librt", "libffi",
    // matrix-cpp and what it is built on.
    "libabsl_", "libspdlog", "libfmt", "libprotobuf", "libmatrix", "libdw", "libelf",
    // Toolkits and graphics.
    "libglib-", "libgobject-", "libgio-", "libgtk-", "libgdk-", "libQt", "libtcl", "libtk",
    "libSDL", "libX11", "libxcb", "libGL", "libEGL", "libGLX", "libvulkan", "libuv",
    // Language runtimes.
    "libpython", "libnode", "libluajit", "liblua", "libjvm", "libruby", "libperl"};

// Executables of language runtimes (they carry the interpreter or VM), by
// name, optionally followed by a version: python3.11, lua5.4, tclsh8.6.
constexpr std::string_view kRuntimeExecutables[] = {
    "python", "node", "nodejs", "luajit", "lua", "java", "ruby", "perl", "tclsh", "wish", "gjs",
    "qml", "qmlscene"};

bool IsRuntimeExecutable(std::string_view base) {
  for (std::string_view name : kRuntimeExecutables) {
    if (!base.starts_with(name)) continue;
    if (base.size() == name.size()) return true;
    const char next = base[name.size()];
    if ((next >= '0' && next <= '9') || next == '.' || next == '-') return true;
  }
  return false;
}

// Source files of a runtime's own interpreted or JIT code.
constexpr std::string_view kRuntimeSourcePrefixes[] = {"/usr/lib/python", "/usr/lib64/python",
                                                       "<frozen ", "node:", "/usr/share/nodejs/",
                                                       "/usr/lib/node_modules/"};

// Function names of matrix-cpp, the standard library and runtimes linked in.
constexpr std::string_view kSystemFunctionPrefixes[] = {
    "matrix::", "std::", "void std::", "absl::", "__", "v8::", "node::", "_Py", "PyEval_",
    "PyObject_"};

// Whether `file` is in a Python installation's library folder, wherever
// that installation lives: /usr/lib/python3.11/, /usr/local/lib/python3.12/,
// a pyenv's or conda's lib/python3.11/, a venv's lib/python3.11/site-packages/.
// That is the standard library and installed packages, not the program.
bool IsPythonLibraryFile(std::string_view file) {
  constexpr std::string_view kLib = "/lib/python";
  for (size_t at = file.find(kLib); at != std::string_view::npos;
       at = file.find(kLib, at + 1)) {
    std::string_view rest = file.substr(at + kLib.size());  // "3.11/..." or "3/dist-packages/..."
    size_t i = 0;
    while (i < rest.size() && ((rest[i] >= '0' && rest[i] <= '9') || rest[i] == '.')) ++i;
    if (i > 0 && i < rest.size() && rest[i] == '/') return true;
  }
  return false;
}

// Whether `file` is QML of Qt's own modules (QtQuick.Controls, Dialogs, ...):
// installed under a qt6/qml/ (or qt5/qml/) folder, or compiled into Qt's
// libraries under qrc:/qt-project.org/.
bool IsQtQmlModuleFile(std::string_view file) {
  return file.starts_with("qrc:/qt-project.org/") ||
         file.find("/qt6/qml/") != std::string_view::npos ||
         file.find("/qt5/qml/") != std::string_view::npos;
}

bool IsBracketed(std::string_view module) { return !module.empty() && module.front() == '['; }

// Whether `pattern` (a directory or a file name prefix) matches the module,
// or the source file of a bracketed module's frame.
bool Matches(std::string_view pattern, std::string_view module, std::string_view file) {
  if (pattern.back() == '/') {
    return module.starts_with(pattern) || (IsBracketed(module) && file.starts_with(pattern));
  }
  return !IsBracketed(module) && BaseName(module).starts_with(pattern);
}

bool AnyMatches(const std::vector<std::string>& patterns, std::string_view module,
                std::string_view file) {
  for (const std::string& p : patterns) {
    if (Matches(p, module, file)) return true;
  }
  return false;
}

struct RuleHolder {
  absl::Mutex mu;
  StackKeyRule rule ABSL_GUARDED_BY(mu);
};

RuleHolder& Holder() {
  static RuleHolder* const holder = new RuleHolder;  // Never destroyed.
  return *holder;
}

}  // namespace

uint64_t UnnamedFunctionStart(const SymbolInfo& symbol) {
  return KeyAddress(symbol.module_offset, symbol.function_offset);
}

std::string UnnamedFrameKey(std::string_view module, uint64_t elf_address) {
  if (module.empty()) return "";
  return absl::StrFormat("%s+0x%x", BaseName(module), elf_address);
}

std::string UnnamedFrameKey(const proto::StackFrame& frame) {
  return UnnamedFrameKey(frame.module(), ReportKeyAddress(frame));
}

absl::flat_hash_set<std::string> NamedModules(absl::Span<const StackFrame> frames) {
  absl::flat_hash_set<std::string> named;
  for (const StackFrame& frame : frames) {
    if (!frame.symbol.function.empty()) named.insert(frame.symbol.module);
  }
  return named;
}

std::string ProgramFrameKey(const SymbolInfo& symbol,
                            const absl::flat_hash_set<std::string>& named_modules) {
  return ProgramKey({symbol.module, symbol.function, symbol.file, UnnamedFunctionStart(symbol)},
                    named_modules);
}

absl::Status StackKeyRule::Validate() const {
  for (const auto* list : {&skip_modules, &program_modules}) {
    for (const std::string& p : *list) {
      const size_t slash = p.find('/');
      const bool directory = !p.empty() && p.front() == '/' && p.back() == '/';
      if (p.empty() || (slash != std::string::npos && !directory)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stack key module pattern \"", p,
            "\": expected a directory (\"/opt/app/\", with both slashes) or a file name prefix "
            "(\"libfoo\")"));
      }
    }
  }
  return absl::OkStatus();
}

void SetStackKeyRule(StackKeyRule rule) {
  RuleHolder& holder = Holder();
  absl::MutexLock lock(&holder.mu);
  holder.rule = std::move(rule);
}

StackKeyRule GetStackKeyRule() {
  RuleHolder& holder = Holder();
  absl::MutexLock lock(&holder.mu);
  return holder.rule;
}

bool IsSystemOrRuntimeFrame(std::string_view module, std::string_view fn, std::string_view file) {
  RuleHolder& holder = Holder();
  {
    absl::MutexLock lock(&holder.mu);
    if (AnyMatches(holder.rule.program_modules, module, file)) return false;
    if (AnyMatches(holder.rule.skip_modules, module, file)) return true;
  }
  if (IsBracketed(module)) {
    // Interpreted or JIT code without a source file is the runtime's own
    // (V8's builtins, stubs and bytecode handlers).
    if (file.empty()) return true;
    for (std::string_view prefix : kRuntimeSourcePrefixes) {
      if (file.starts_with(prefix)) return true;
    }
    if (module == "[python]" && IsPythonLibraryFile(file)) return true;
    if (module == "[qml]" && IsQtQmlModuleFile(file)) return true;
  } else {
    if (IsSystemLibrary(module)) return true;
    const std::string_view base = BaseName(module);
    for (std::string_view name : kSystemFileNames) {
      if (base.starts_with(name)) return true;
    }
    if (IsRuntimeExecutable(base)) return true;
  }
  for (std::string_view prefix : kSystemFunctionPrefixes) {
    if (fn.starts_with(prefix)) return true;
  }
  return false;
}

bool IsCRuntimeFrame(std::string_view module) {
  const std::string_view base = BaseName(module);
  for (std::string_view name : kCRuntimeFileNames) {
    if (base.starts_with(name)) return true;
  }
  return false;
}

bool IsVdsoFrame(std::string_view module, std::string_view function) {
  const std::string_view base = BaseName(module);
  return base.starts_with("linux-vdso") || base == "[vdso]" || function.starts_with("__vdso_");
}

size_t SharedOuterFrames(const SymbolizedStack& stack, absl::Span<const SymbolizedStack> others) {
  const size_t n = stack.frames.size();
  size_t shared = n;
  for (const SymbolizedStack& other : others) {
    if (other.frames.empty()) continue;
    const size_t m = other.frames.size();
    size_t k = 0;
    while (k < std::min(shared, m) && IdOf(stack.frames[n - 1 - k]) == IdOf(other.frames[m - 1 - k])) {
      ++k;
    }
    shared = k;
  }
  return shared;
}

std::string HangStackKey(const SymbolizedStack& stack, const CallTree* tree,
                         const absl::flat_hash_set<uintptr_t>& traced, absl::Duration total_cost,
                         absl::Span<const SymbolizedStack> earlier) {
  absl::flat_hash_map<uintptr_t, absl::Duration> cost_of;  // Entry address -> largest cost.
  if (tree != nullptr) {
    for (const CallNode& node : tree->nodes()) {
      if (node.kind != MethodKind::kFunction) continue;
      absl::Duration& cost = cost_of[node.address];
      cost = std::max(cost, node.cost);
    }
  }
  // The frames every capture shares, from the outermost one in.
  size_t shared = SharedOuterFrames(stack, earlier);
  if (shared == 0) shared = stack.frames.size();
  const absl::Span<const StackFrame> frames =
      absl::MakeConstSpan(stack.frames).subspan(stack.frames.size() - shared);

  const absl::Duration costly = total_cost * CallTree::kKeyCostShare;
  const absl::flat_hash_set<std::string> named_modules = NamedModules(frames);
  for (const StackFrame& frame : frames) {
    const SymbolInfo& sym = frame.symbol;
    std::string key = ProgramFrameKey(sym, named_modules);
    if (key.empty()) continue;
    if (sym.function.empty()) return key;  // Unnamed: nothing tells it was traced.
    const uintptr_t entry = frame.pc - sym.function_offset;
    if (!traced.contains(entry)) return sym.function;  // Not traced: stuck here.
    auto it = cost_of.find(entry);  // Trimmed away: cheap.
    if (it != cost_of.end() && it->second >= costly) return sym.function;
  }
  if (tree != nullptr) {
    if (std::optional<size_t> k = tree->KeyIndex(total_cost);
        k && tree->nodes()[*k].kind != MethodKind::kDispatch) {
      const CallNode& node = tree->nodes()[*k];
      if (!node.name.empty()) return node.name;
    }
  }
  return FirstNamedFrame(frames, [](const StackFrame& frame) {
    return NamedFrame{frame.symbol.module, frame.symbol.function, frame.symbol.file,
                      UnnamedFunctionStart(frame.symbol)};
  });
}

std::string NativeStackKey(const proto::ThreadStack& stack) {
  return FirstNamedFrame(stack.frames(), [](const proto::StackFrame& frame) {
    return NamedFrame{frame.module(), frame.function(), frame.file(), ReportKeyAddress(frame)};
  });
}

}  // namespace matrix
