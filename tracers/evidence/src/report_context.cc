#include "matrix/trace/report_context.h"

#include <unistd.h>

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "matrix/core/handler.h"
#include "matrix/trace/method_record.h"
#include "matrix/trace/method_tracer.h"
#include "matrix/trace/symbolizer.h"

namespace matrix {
namespace {

proto::DeviceInfo::Level ToProtoLevel(DeviceLevel level) {
  switch (level) {
    case DeviceLevel::kBest: return proto::DeviceInfo::BEST;
    case DeviceLevel::kHigh: return proto::DeviceInfo::HIGH;
    case DeviceLevel::kMiddle: return proto::DeviceInfo::MIDDLE;
    case DeviceLevel::kLow: return proto::DeviceInfo::LOW;
    case DeviceLevel::kBad: return proto::DeviceInfo::BAD;
    default: return proto::DeviceInfo::LEVEL_UNKNOWN;
  }
}

}  // namespace

void FillDeviceInfo(const ProcReader& proc, proto::DeviceInfo* out) {
  const int cores = NumCpuCores();
  out->set_cpu_cores(cores);
  if (auto mem = proc.ReadSystemMemory(); mem.ok()) {
    out->set_mem(mem->mem_total_kb * 1024);
    out->set_mem_free(mem->mem_available_kb);
    out->set_machine(ToProtoLevel(ComputeDeviceLevel(mem->mem_total_kb * 1024, cores)));
  }
  auto process = proc.ReadProcessStat();
  auto system = proc.ReadSystemCpuTimes();
  if (process.ok() && system.ok() && system->Total() > 0) {
    const double app = static_cast<double>(process->utime + process->stime) +
                       static_cast<double>(process->cutime + process->cstime);
    out->set_cpu_app(100.0 * app / static_cast<double>(system->Total()));
  }
}

void FillMemoryInfo(const ProcReader& proc, proto::MemoryInfo* out) {
  if (auto mem = proc.ReadProcessMemory(); mem.ok()) {
    out->set_vm_size_kb(mem->vm_size_kb);
    out->set_vm_rss_kb(mem->vm_rss_kb);
  }
  out->set_heap_in_use_kb(static_cast<int64_t>(HeapInUseBytes() / 1024));
}

void FillThreadInfo(const ProcReader& proc, pid_t tid, proto::ThreadInfo* out) {
  out->set_tid(tid);
  if (auto stat = proc.ReadThreadStat(tid); stat.ok()) {
    out->set_name(stat->comm);
    out->set_state(absl::StrCat(std::string(1, stat->state), " (",
                                std::string(ThreadStateName(stat->state)), ")"));
    out->set_priority(static_cast<int32_t>(stat->priority));
    out->set_nice(static_cast<int32_t>(stat->nice));
    const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
    out->set_cpu_time_ms(1000.0 * static_cast<double>(stat->utime + stat->stime) / hz);
  }
}

void FillThreadStack(const SymbolizedStack& stack, proto::ThreadStack* out) {
  out->set_tid(stack.tid);
  for (const StackFrame& frame : stack.frames) {
    proto::StackFrame* f = out->add_frames();
    f->set_pc(absl::StrFormat("0x%x", frame.pc));
    f->set_function(frame.symbol.function);
    f->set_module(frame.symbol.module);
    const bool start_known = !frame.symbol.function.empty() || frame.symbol.function_offset != 0;
    f->set_offset(start_known ? frame.symbol.function_offset : frame.symbol.module_offset);
    const bool elf_module = !frame.symbol.module.empty() && frame.symbol.module.front() != '[';
    if (elf_module) {  // Not JIT or interpreted code: named off the host by these.
      f->set_build_id(frame.symbol.build_id);
      f->set_no_build_id(frame.symbol.no_build_id);
      f->set_elf_address(frame.symbol.module_offset);
    }
    f->set_file(frame.symbol.file);
    f->set_line(static_cast<uint32_t>(std::max(frame.symbol.line, 0)));
    f->set_column(static_cast<uint32_t>(std::max(frame.symbol.column, 0)));
    for (const InlinedFrame& inlined : frame.symbol.inlined) {
      proto::InlinedFrame* i = f->add_inlined();
      i->set_function(inlined.function);
      i->set_file(inlined.file);
      i->set_line(static_cast<uint32_t>(std::max(inlined.line, 0)));
      i->set_column(static_cast<uint32_t>(std::max(inlined.column, 0)));
    }
  }
  if (stack.truncated) out->set_error("truncated: deeper frames were not captured");
}

void FillCallTree(const CallTree& tree, google::protobuf::RepeatedPtrField<proto::MethodCall>* out,
                  std::string* text) {
  for (const CallNode& node : tree.nodes()) {
    proto::MethodCall* call = out->Add();
    call->set_depth(node.depth);
    call->set_name(node.name.empty() ? absl::StrFormat("0x%x", node.address) : node.name);
    call->set_count(node.count);
    call->set_cost_ms(absl::ToDoubleMilliseconds(node.cost));
    call->set_unfinished(node.running);
    if (node.kind == MethodKind::kScope && node.address != 0) {
      const auto* site = reinterpret_cast<const TraceSite*>(node.address);
      if (site->file != nullptr) call->set_file(site->file);
      call->set_line(static_cast<uint32_t>(std::max(site->line, 0)));
    } else if (node.kind == MethodKind::kFunction && node.address != 0) {
      // The function's entry: its definition line (cached by the Symbolizer).
      SymbolInfo info = Symbolizer::Get()->Symbolize(node.address);
      call->set_file(info.file);
      call->set_line(static_cast<uint32_t>(std::max(info.line, 0)));
    }
    if (text != nullptr) {
      absl::StrAppendFormat(text, "%d,%s,%d,%.3f\n", node.depth, call->name(), node.count,
                            call->cost_ms());
    }
  }
}

TracedCallTree BuildCallTree(absl::Span<const uint64_t> records, TimeTicks end,
                             absl::Duration total_cost) {
  TracedCallTree result;
  CallTree::Options options;
  options.end_time = end;
  options.trim_to = CallTree::kDefaultTargetCount;  // Trimming while building is cheaper.
  result.tree = CallTree::Build(records, options);
  result.tree.ResolveNames(
      [](uintptr_t address) { return Symbolizer::Get()->FunctionName(address); });
  if (std::optional<size_t> k = result.tree.KeyIndex(total_cost);
      k && result.tree.nodes()[*k].kind != MethodKind::kDispatch) {
    result.key = result.tree.nodes()[*k].name;
  }
  return result;
}

absl::Status CaptureStack(const ThreadHandle& thread, RawStack* out) {
  return StackCapturer::Get()->Capture(thread, out);
}

SymbolizedStack FillCapturedStack(const RawStack& stack, const absl::Status& status, pid_t tid,
                                  proto::ThreadStack* out) {
  SymbolizedStack symbolized;
  if (status.ok()) {
    symbolized = SymbolizeStack(stack);
    FillThreadStack(symbolized, out);
  } else {
    out->set_tid(tid);
    out->set_error(status.ToString());
  }
  return symbolized;
}

void FillMessageInfo(const DispatchHeartbeat::Snapshot& s, proto::MessageInfo* out) {
  if (s.target_name != nullptr) out->set_target(s.TargetString());
  if (s.posted_from.has_source_info()) {
    out->set_callback(s.has_callback ? s.posted_from.ToString() : "null");
  } else if (!s.log_line.empty()) {
    out->set_callback(s.log_line);
  } else if (s.label != nullptr) {
    out->set_callback(s.label);
  }
  out->set_what(s.what);
}

absl::flat_hash_set<uintptr_t> TracedFunctions(const SymbolizedStack& stack,
                                               absl::Span<const uint64_t> records) {
  absl::flat_hash_set<uintptr_t> candidates;
  for (const StackFrame& frame : stack.frames) {
    if (!frame.symbol.function.empty()) candidates.insert(frame.pc - frame.symbol.function_offset);
  }
  absl::flat_hash_set<uintptr_t> traced;
  if (candidates.empty()) return traced;
  for (uint64_t r : records) {
    if (GetRecordKind(r) != RecordKind::kEnter) continue;
    const uintptr_t address = GetRecordAddress(r);
    if (candidates.contains(address)) traced.insert(address);
  }
  return traced;
}

}  // namespace matrix
