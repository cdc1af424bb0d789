#include "matrix/report/symbolize.h"

#include <elfutils/debuginfod.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "internal/redact_url.h"
#include "matrix/trace/stack_key.h"
#include "matrix/trace/symbolizer.h"

namespace matrix::report {

// A build id's symbols and DWARF, from the file that had them.
struct FrameSymbolizer::DebugInfo {
  std::string path;
  matrix::internal::ElfSymbolTable symbols;
  std::unique_ptr<matrix::internal::DwarfModule> dwarf;  // Null when unreadable.
};

namespace {

// A module that is a file (not JIT or interpreted code, not the vDSO).
bool IsElfModule(const std::string& module) { return !module.empty() && module.front() == '/'; }

// A raw frame that a build id may name: a file's frame, or a BlockCanary
// frame (its module a base name) with its module's build id.
bool IsNameable(const proto::StackFrame& frame) {
  return frame.function().empty() && (IsElfModule(frame.module()) || !frame.build_id().empty());
}

// The address that names a raw frame: elf_address, or the offset of reports
// written before it existed (an unnamed frame's offset is the same address).
uint64_t AddressOf(const proto::StackFrame& frame) {
  return frame.elf_address() != 0 ? frame.elf_address() : frame.offset();
}

// Whether `path` is an ELF file with `build_id`.
bool HasBuildId(const std::string& path, const std::string& build_id) {
  std::optional<matrix::internal::ElfFileInfo> info = matrix::internal::ElfFileInfo::Read(path);
  return info.has_value() && info->build_id == build_id;
}

std::string DebuginfodError(int rc) {
  return rc == -ENOSYS ? "no server configured" : std::strerror(-rc);
}

// The key of `stack` computed again after its frames were named: when it
// was a raw frame's key, that frame's name; when it was a fallback (a system
// frame's function, "unknown"), the usual rule. `raw_keys` are the frames'
// keys before (empty for named frames).
std::string KeyAfterNaming(const std::string& key, const std::vector<std::string>& raw_keys,
                           const proto::ThreadStack& stack) {
  for (int i = 0; i < stack.frames_size() && i < static_cast<int>(raw_keys.size()); ++i) {
    if (raw_keys[i].empty() || raw_keys[i] != key) continue;
    const proto::StackFrame& frame = stack.frames(i);
    if (frame.function().empty()) return key;  // Still raw.
    if (!IsSystemOrRuntimeFrame(frame.module(), frame.function(), frame.file())) {
      return frame.function();
    }
    return NativeStackKey(stack);
  }
  bool fallback = key.empty() || key == "unknown";
  for (const proto::StackFrame& frame : stack.frames()) {
    if (!fallback && frame.function() == key) {
      fallback = IsSystemOrRuntimeFrame(frame.module(), frame.function(), frame.file());
    }
  }
  return fallback ? NativeStackKey(stack) : key;
}

}  // namespace

FrameSymbolizer::FrameSymbolizer(SymbolizeOptions options) : options_(std::move(options)) {
  std::vector<std::string> urls = options_.debuginfod_urls;
  if (const char* env = std::getenv(DEBUGINFOD_URLS_ENV_VAR); env != nullptr) {
    for (absl::string_view url : absl::StrSplit(env, ' ', absl::SkipWhitespace())) {
      urls.emplace_back(url);
    }
  }
  urls_ = absl::StrJoin(urls, " ");
  shown_urls_ = absl::StrJoin(urls, " ", [](std::string* out, const std::string& url) {
    out->append(internal::RedactUrl(url));
  });
}

FrameSymbolizer::~FrameSymbolizer() = default;

FrameSymbolizer::DebugInfo* FrameSymbolizer::FromDebugServers(const std::string& build_id,
                                                              std::string* why) {
  if (urls_.empty()) return nullptr;
  // libdebuginfod reads its servers from the environment at each query.
  setenv(DEBUGINFOD_URLS_ENV_VAR, urls_.c_str(), /*overwrite=*/1);
  debuginfod_client* client = debuginfod_begin();
  if (client == nullptr) {
    absl::StrAppend(why, "; debuginfod: cannot start its client");
    server_failed_ = true;
    return nullptr;
  }
  char* path = nullptr;
  const int fd = debuginfod_find_debuginfo(
      client, reinterpret_cast<const unsigned char*>(build_id.c_str()), 0, &path);
  debuginfod_end(client);
  if (fd < 0) {
    if (fd != -ENOENT) server_failed_ = true;
    absl::StrAppend(why, "; debuginfod ", shown_urls_, ": ",
                    fd == -ENOENT ? "not found" : DebuginfodError(fd));
    return nullptr;
  }
  close(fd);
  std::string file(path);
  free(path);
  auto info = std::make_unique<DebugInfo>();
  info->path = file;
  info->symbols = matrix::internal::ElfSymbolTable::Load(file, {});
  info->dwarf = matrix::internal::DwarfModule::Open(file, file, {});
  DebugInfo* result = info.get();
  debug_info_[build_id] = std::move(info);
  return result;
}

FrameSymbolizer::DebugInfo* FrameSymbolizer::Find(const std::string& build_id,
                                                  const std::string& module, std::string* why) {
  if (auto it = debug_info_.find(build_id); it != debug_info_.end()) return it->second.get();
  if (auto it = not_found_.find(build_id); it != not_found_.end()) {
    *why = it->second;
    return nullptr;
  }
  auto load = [&](const std::string& path) {
    auto info = std::make_unique<DebugInfo>();
    info->path = path;
    info->symbols = matrix::internal::ElfSymbolTable::Load(path, {});
    info->dwarf = matrix::internal::DwarfModule::Open(path, path, {});
    DebugInfo* result = info.get();
    debug_info_[build_id] = std::move(info);
    return result;
  };
  const std::string relative = absl::StrCat(".build-id/", build_id.substr(0, 2), "/",
                                            build_id.substr(std::min<size_t>(2, build_id.size())),
                                            ".debug");
  for (const std::string& dir : options_.debug_dirs) {
    const std::string path = absl::StrCat(dir, "/", relative);
    if (HasBuildId(path, build_id)) return load(path);
  }
  *why = options_.debug_dirs.empty()
             ? "no --debug-dir"
             : absl::StrCat("no ", relative, " in ", absl::StrJoin(options_.debug_dirs, ", "));
  if (DebugInfo* info = FromDebugServers(build_id, why)) return info;
  if (urls_.empty()) absl::StrAppend(why, "; no debuginfod server (--debuginfod, DEBUGINFOD_URLS)");
  // The module itself, when this host has the same build.
  if (HasBuildId(module, build_id)) {
    DebugInfo* info = load(module);
    if (info->symbols.size() > 0) return info;
    absl::StrAppend(why, "; ", module, " here has no symbols");
  } else {
    absl::StrAppend(why, "; ", module,
                    access(module.c_str(), F_OK) == 0 ? " here is another build"
                                                      : " is not on this host");
  }
  debug_info_.erase(build_id);
  not_found_[build_id] = *why;
  return nullptr;
}

void FrameSymbolizer::NoteProblem(const proto::StackFrame& frame, const std::string& why) {
  for (Problem& problem : problems_) {
    if (problem.module == frame.module() && problem.build_id == frame.build_id()) {
      ++problem.frames;
      return;
    }
  }
  problems_.push_back({frame.module(), frame.build_id(), why, 1});
}

bool FrameSymbolizer::NameFrame(proto::StackFrame* frame, bool return_address) {
  if (!IsNameable(*frame)) return false;
  ++counts_.raw_frames;
  const uint64_t address = AddressOf(*frame);
  if (frame->build_id().empty()) {
    if (frame->no_build_id()) ++counts_.no_build_id;
    NoteProblem(*frame, frame->no_build_id()
                            ? "the module has no build id (link it with --build-id)"
                            : "the report carries no build id (written by an older matrix-cpp)");
    return false;
  }
  std::string why;
  DebugInfo* info = Find(frame->build_id(), frame->module(), &why);
  if (info == nullptr) {
    NoteProblem(*frame, why);
    return false;
  }
  // A return address names the instruction after the call, which may be on
  // the next line or in the next function: look up the call itself.
  const uint64_t lookup = return_address && address > 0 ? address - 1 : address;
  SymbolInfo symbol;
  if (const matrix::internal::ElfSymbol* s = info->symbols.Lookup(lookup)) {
    symbol.function = matrix::internal::Demangle(s->name);
    symbol.function_offset = address - s->address;
  }
  if (info->dwarf != nullptr) info->dwarf->Lookup(lookup, &symbol);
  if (symbol.function.empty()) {
    NoteProblem(*frame, absl::StrFormat("%s has no function at 0x%x", info->path, address));
    return false;
  }
  frame->set_function(symbol.function);
  frame->set_offset(symbol.function_offset);
  frame->set_elf_address(address);
  frame->set_file(symbol.file);
  frame->set_line(static_cast<uint32_t>(std::max(symbol.line, 0)));
  frame->set_column(static_cast<uint32_t>(std::max(symbol.column, 0)));
  frame->clear_inlined();
  for (const InlinedFrame& inlined : symbol.inlined) {
    proto::InlinedFrame* i = frame->add_inlined();
    i->set_function(inlined.function);
    i->set_file(inlined.file);
    i->set_line(static_cast<uint32_t>(std::max(inlined.line, 0)));
    i->set_column(static_cast<uint32_t>(std::max(inlined.column, 0)));
  }
  ++counts_.named_frames;
  return true;
}

bool FrameSymbolizer::NameStack(proto::ThreadStack* stack) {
  // The innermost frame of a capture is the interrupted instruction; every
  // other one a return address.
  bool changed = false;
  for (int i = 0; i < stack->frames_size(); ++i) {
    changed |= NameFrame(stack->mutable_frames(i), /*return_address=*/i > 0);
  }
  return changed;
}

bool FrameSymbolizer::SymbolizeIssue(proto::Issue* issue) {
  proto::ThreadStack* stack = nullptr;
  std::string* stack_key = nullptr;
  google::protobuf::RepeatedPtrField<proto::MethodCall>* calls = nullptr;
  bool changed = false;
  if (issue->has_anr()) {
    stack = issue->mutable_anr()->mutable_thread_stack();
    stack_key = issue->mutable_anr()->mutable_stack_key();
    calls = issue->mutable_anr()->mutable_stack();
    for (proto::ThreadStack& thread : *issue->mutable_anr()->mutable_all_threads()) {
      changed |= NameStack(&thread);
    }
  } else if (issue->has_evil_method()) {
    stack = issue->mutable_evil_method()->mutable_thread_stack();
    stack_key = issue->mutable_evil_method()->mutable_stack_key();
    calls = issue->mutable_evil_method()->mutable_stack();
  } else if (issue->has_block()) {
    return SymbolizeBlock(issue);
  }
  if (stack == nullptr) return changed;
  std::vector<std::string> raw_keys;
  for (const proto::StackFrame& frame : stack->frames()) {
    raw_keys.push_back(IsNameable(frame) ? UnnamedFrameKey(frame) : "");
  }
  if (!NameStack(stack)) return changed;
  // Call-tree nodes named like a raw frame get its name too.
  absl::flat_hash_map<std::string, std::string> renamed;
  for (int i = 0; i < stack->frames_size(); ++i) {
    if (!raw_keys[i].empty() && !stack->frames(i).function().empty()) {
      renamed.emplace(raw_keys[i], stack->frames(i).function());
    }
  }
  for (proto::MethodCall& call : *calls) {
    if (auto it = renamed.find(call.name()); it != renamed.end()) call.set_name(it->second);
  }
  const std::string old_key = *stack_key;
  const std::string key = KeyAfterNaming(old_key, raw_keys, *stack);
  if (key != old_key) {
    *stack_key = key;
    if (issue->key() == old_key || issue->key().empty()) issue->set_key(key);
    ++counts_.keys_changed;
  }
  return true;
}

bool FrameSymbolizer::SymbolizeBlock(proto::Issue* issue) {
  proto::BlockReport* block = issue->mutable_block();
  absl::flat_hash_map<std::string, std::string> renamed;  // A raw frame's key: its name.
  bool changed = false;
  for (proto::BlockStackSample& sample : *block->mutable_samples()) {
    // The innermost frame is the interrupted instruction; every other one a
    // return address.
    for (int i = 0; i < sample.frames_size(); ++i) {
      proto::StackFrame* frame = sample.mutable_frames(i);
      const std::string raw_key = IsNameable(*frame) ? UnnamedFrameKey(*frame) : "";
      if (!NameFrame(frame, /*return_address=*/i > 0)) continue;
      changed = true;
      renamed.emplace(raw_key, frame->function());
    }
  }
  // A stripped program's block keys by its unnamed frame (BlockFrame::Name()).
  const std::string old_key = block->key_stack_line();
  if (auto it = renamed.find(old_key); it != renamed.end()) {
    block->set_key_stack_line(it->second);
    if (issue->key() == old_key || issue->key().empty()) issue->set_key(it->second);
    ++counts_.keys_changed;
  }
  return changed;
}

std::vector<std::string> FrameSymbolizer::problems() const {
  std::vector<std::string> lines;
  for (const Problem& p : problems_) {
    lines.push_back(absl::StrCat(p.frames, p.frames == 1 ? " frame" : " frames", " of ", p.module,
                                 p.build_id.empty() ? "" : absl::StrCat(" (build id ", p.build_id,
                                                                        ")"),
                                 " left raw: ", p.why, "\n"));
  }
  return lines;
}

}  // namespace matrix::report
