#include "matrix/plugins/block_canary_plugin.h"

// BlockCanaryPlugin, the verdict and the files: a block the sampler handed
// over becomes a BlockInfo (static device info, CPU rates, merged stack
// samples, the interceptors' verdict), is written to its log file and
// reported; LoadBlockLogs() and Upload() read the files back. The sampling
// itself is in block_canary_plugin.cc.

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "internal/block_canary_block.h"
#include "matrix/core/app_state.h"
#include "matrix/core/file_path.h"
#include "matrix/core/handler.h"
#include "matrix/core/logging.h"
#include "matrix/core/looper.h"
#include "matrix/core/matrix.h"
#include "matrix/plugins/trace_plugin.h"
#include "matrix/trace/dispatch_heartbeat.h"
#include "matrix/trace/report_context.h"
#include "matrix/trace/stack_key.h"
#include "matrix/trace/stopped_time.h"

namespace matrix {

namespace internal {

std::vector<BlockFrame> ToBlockFrames(const std::vector<StackFrame>& frames,
                                      std::vector<BlockModule>& modules) {
  std::vector<BlockFrame> out;
  out.reserve(frames.size());
  for (const StackFrame& frame : frames) {
    const SymbolInfo& symbol = frame.symbol;
    BlockFrame f;
    f.function = symbol.function;
    f.offset = symbol.function.empty() ? symbol.module_offset : symbol.function_offset;
    f.module = BaseName(symbol.module);
    f.file = symbol.file;
    f.line = symbol.line;
    // The unwind info's start of an unnamed frame's function (0: unknown).
    const uint64_t start = UnnamedFunctionStart(symbol);
    if (f.function.empty() && start != symbol.module_offset) f.function_start = start;
    if (f.function.empty() && !f.module.empty() && !symbol.build_id.empty()) {
      const auto named = [&modules](const std::string& name) {
        return std::find_if(modules.begin(), modules.end(),
                            [&name](const BlockModule& m) { return m.name == name; });
      };
      auto listed = named(f.module);
      // Another module of this file name (a plugin of the same name in
      // another directory): the path tells them apart.
      if (listed != modules.end() && listed->build_id != symbol.build_id) {
        f.module = symbol.module;
        listed = named(f.module);
      }
      if (listed == modules.end()) modules.push_back({f.module, symbol.build_id});
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace internal

namespace {

absl::Time FloorToMillis(absl::Time t) { return absl::FromUnixMillis(absl::ToUnixMillis(t)); }

int Percent(double value) { return static_cast<int>(std::lround(value)); }

// "model name : Intel(R) Xeon(R) ..." from cpuinfo (x86); other
// architectures name the CPU differently.
std::string ReadCpuModel(const std::string& proc_root) {
  absl::StatusOr<std::string> cpuinfo = internal::ReadFileToString(proc_root + "/cpuinfo");
  if (cpuinfo.ok()) {
    for (const char* key : {"model name", "Hardware", "Model", "cpu model", "uarch"}) {
      for (absl::string_view line : absl::StrSplit(*cpuinfo, '\n')) {
        if (!absl::StartsWith(line, key)) continue;
        const size_t colon = line.find(':');
        if (colon == absl::string_view::npos) continue;
        absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
        if (!value.empty()) return std::string(value);
      }
    }
  }
  utsname u;
  if (uname(&u) == 0) return u.machine;
  return "unknown";
}

std::string ReadKernel() {
  utsname u;
  if (uname(&u) != 0) return "unknown";
  return absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
}

}  // namespace

void BlockCanaryPlugin::FillStaticInfo(BlockInfo* info) {
  if (!static_info_read_) {
    static_info_read_ = true;
    model_ = ReadCpuModel(hooks_.proc_root);
    api_level_ = ReadKernel();
    absl::StatusOr<std::string> name = proc_.ReadProcessName();
    process_name_ = name.ok() ? *name : std::string(program_invocation_short_name);
    cpu_cores_ = NumCpuCores(hooks_.sys_root);
  }
  info->qualifier = config_.qualifier();
  info->version_name = config_.version_name();
  info->version_code = config_.version_code();
  info->uid = config_.uid();
  info->network = config_.network();
  info->model = model_;
  info->api_level = api_level_;
  info->cpu_cores = cpu_cores_;
  info->process = process_name_;
  info->pid = proc_.pid() != 0 ? proc_.pid() : static_cast<int>(getpid());
  DeviceLevel level = DeviceLevel::kUnknown;
  if (absl::StatusOr<SystemMemory> mem = proc_.ReadSystemMemory(); mem.ok()) {
    info->free_memory_kb = mem->mem_available_kb;
    info->total_memory_kb = mem->mem_total_kb;
    level = ComputeDeviceLevel(mem->mem_total_kb * 1024, cpu_cores_);
  }
  info->machine = std::string(DeviceLevelName(level));
  if (absl::StatusOr<ProcessMemory> mem = proc_.ReadProcessMemory(); mem.ok()) {
    info->vm_rss_kb = mem->vm_rss_kb;
  }
}

void BlockCanaryPlugin::BuildAndReport(const PendingBlock& block) {
  auto wall = [&block](TimeTicks t) { return block.wall_anchor - (block.mono_anchor - t); };
  BlockInfo info;
  FillStaticInfo(&info);
  // The cost is the time it ran: stopped time is reported apart. The two
  // add up to the block's wall time in whole milliseconds.
  info.stopped_ms = absl::ToInt64Milliseconds(block.stopped);
  info.time_cost_ms = absl::ToInt64Milliseconds(block.end - block.begin) - info.stopped_ms;
  info.time_start = FloorToMillis(wall(block.begin));
  info.time_end = info.time_start + absl::Milliseconds(info.time_cost_ms + info.stopped_ms);
  info.message = block.message;
  AppState* app_state =
      context().app_state != nullptr ? context().app_state : AppState::Get();
  info.scene = std::string(app_state->SceneName(block.scene));

  // CPU: the readings taken with the samples and the one at the end.
  std::vector<const BlockCanarySample*> cpu;
  for (const BlockCanarySample& s : block.samples) {
    if (s.cpu_ok) cpu.push_back(&s);
  }
  const BlockCanarySample* first_cpu = cpu.empty() ? nullptr : cpu.front();
  if (block.end_cpu.cpu_ok) cpu.push_back(&block.end_cpu);
  auto rate = [](const BlockCanarySample& a, const BlockCanarySample& b)
      -> std::optional<BlockCpuRate> {
    std::optional<CpuUsage> u =
        ComputeCpuUsage(a.system, b.system, a.process_ticks, b.process_ticks);
    if (!u) return std::nullopt;
    BlockCpuRate r;
    r.cpu = Percent(u->busy_percent);
    r.app = Percent(u->process_percent);
    r.user = Percent(u->user_percent);
    r.system = Percent(u->system_percent);
    r.iowait = Percent(u->iowait_percent);
    return r;
  };
  for (size_t i = 1; i < cpu.size(); ++i) {
    if (std::optional<BlockCpuRate> r = rate(*cpu[i - 1], *cpu[i])) {
      r->time = FloorToMillis(wall(cpu[i]->at));
      info.cpu_rate.push_back(*r);
    }
  }
  if (cpu.size() >= 2) {
    info.block_cpu = rate(*cpu.front(), *cpu.back());
    if (std::optional<CpuUsage> u = ComputeCpuUsage(cpu.front()->system, cpu.back()->system,
                                                     cpu.front()->process_ticks,
                                                     cpu.back()->process_ticks)) {
      info.cpu_busy = u->busy_percent >= config_.cpu_busy_percent();
    }
  }
  // Thread CPU from the first reading (at most one interval into the block)
  // to the end; -1 when the sampler never saw the block running.
  info.thread_time_ms =
      first_cpu != nullptr
          ? std::max<int64_t>(0, absl::ToInt64Milliseconds(block.thread_cpu_end -
                                                           first_cpu->thread_cpu))
          : -1;

  for (const BlockCanarySample& s : block.samples) {
    // A capture that came after the block ended shows the next thing.
    if (!s.stack_ok || s.at > block.end) continue;
    BlockStackSample sample;
    sample.time = FloorToMillis(wall(s.at));
    sample.frames = internal::ToBlockFrames(SymbolizeStack(s.stack).frames, info.modules);
    info.samples.push_back(std::move(sample));
  }
  int key_count = 0;
  info.key = KeyStackLine(info, config_.concern_packages(), &key_count);
  Finish(std::move(info), key_count, block.end_cpu.at);
}

void BlockCanaryPlugin::Finish(BlockInfo info, int key_count, TimeTicks detected_at) {
  const bool white_listed =
      !config_.white_list().empty() && IsWhiteListed(info, config_.white_list());
  const bool non_concern = config_.filter_non_concern_stack() &&
                           !HasConcernedFrame(info, config_.concern_packages());
  // BlockCanary writes every block and filters when listing; a white-listed
  // block's file is deleted at once when configured.
  if (log_writer_ != nullptr && !(white_listed && config_.delete_files_in_white_list())) {
    absl::StatusOr<std::string> path = log_writer_->Write(info, WallNow());
    if (path.ok()) {
      info.log_file = *path;
      stats_.written.fetch_add(1, std::memory_order_relaxed);
      log_writer_->CleanObsolete(WallNow()).IgnoreError();
    } else {
      stats_.write_failures.fetch_add(1, std::memory_order_relaxed);
      Logger()->error("BlockCanary: cannot write the block file: {}", path.status().ToString());
    }
  }
  if (white_listed) {
    stats_.white_listed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (non_concern) {
    stats_.non_concern.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  stats_.reported.fetch_add(1, std::memory_order_relaxed);

  std::vector<std::shared_ptr<BlockInterceptor>> interceptors;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = group_index_.try_emplace(info.key, groups_.size());
    if (inserted) groups_.emplace_back();
    groups_[it->second].Add(info);
    interceptors = interceptors_;
  }
  if (config_.display_notification()) {
    // BlockCanary's notification: "blocked N ms".
    Logger()->warn("BlockCanary: blocked {} ms at {} ({} samples){}{}", info.time_cost_ms,
                   info.key, info.samples.size(), info.log_file.empty() ? "" : ": ",
                   info.log_file);
  }
  for (const auto& interceptor : interceptors) interceptor->OnBlock(info);

  Issue issue;
  issue.mutable_proto()->set_tag(kTagBlockCanary);
  issue.mutable_proto()->set_key(info.key);
  proto::BlockReport* report = issue.mutable_proto()->mutable_block();
  *report = ToBlockReport(info);
  report->set_key_sample_count(key_count);
  // The TracePlugin's flight recorder, when one runs beside us: the looper's
  // last seconds up to when the sampler saw the block end.
  if (Matrix::IsInstalled()) {
    if (const TracePlugin* trace = Matrix::With().GetPluginByClass<TracePlugin>();
        trace != nullptr && trace->state() == State::kStarted) {
      trace->AttachTimeline(issue, detected_at, "BlockCanary sampler (block end)",
                            info.time_end - info.time_start);
    }
  }
  OnDetectIssue(std::move(issue));
}

BlockCanaryPlugin::LoadedBlocks BlockCanaryPlugin::LoadBlockLogs() const {
  LoadedBlocks loaded;
  if (log_writer_ == nullptr) return loaded;
  absl::StatusOr<std::vector<std::string>> files = log_writer_->ListLogFiles();
  if (!files.ok()) {
    loaded.errors.push_back(files.status());
    return loaded;
  }
  for (const std::string& file : *files) {
    absl::StatusOr<BlockInfo> info = ReadBlockLog(file, log_writer_->options().time_zone);
    if (!info.ok()) {
      // Never deleted: a file we cannot read is still someone's evidence.
      Logger()->warn("BlockCanary: {}", info.status().ToString());
      loaded.errors.push_back(info.status());
      continue;
    }
    if (!config_.white_list().empty() && IsWhiteListed(*info, config_.white_list())) {
      ++loaded.white_listed;
      if (config_.delete_files_in_white_list()) log_writer_->Delete(file).IgnoreError();
      continue;
    }
    if (config_.filter_non_concern_stack() &&
        !HasConcernedFrame(*info, config_.concern_packages())) {
      ++loaded.non_concern;
      continue;
    }
    info->key = KeyStackLine(*info, config_.concern_packages());
    loaded.blocks.push_back(std::move(*info));
  }
  return loaded;
}

absl::Status BlockCanaryPlugin::Upload(
    const std::function<absl::Status(const std::vector<std::string>& files)>& uploader) {
  if (log_writer_ == nullptr) return absl::FailedPreconditionError("BlockCanary: no log path");
  absl::StatusOr<std::vector<std::string>> files = log_writer_->ListLogFiles();
  if (!files.ok()) return files.status();
  if (absl::Status status = uploader(*files); !status.ok()) return status;
  absl::Status deleted;
  for (const std::string& file : *files) {
    absl::Status status = log_writer_->Delete(file);
    if (!absl::IsNotFound(status)) deleted.Update(status);
  }
  return deleted;
}

}  // namespace matrix
