// Builders for matrix-report tests: issues of every report kind made with
// the proto API, turned into lines by matrix::Issue::ToJson() exactly as the
// JSON-lines sink writes them, and scratch directories.

#ifndef MATRIX_TESTS_TOOLS_REPORT_TEST_UTIL_H_
#define MATRIX_TESTS_TOOLS_REPORT_TEST_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "matrix/core/issue.h"
#include "matrix/proto/issue.pb.h"
#include "matrix/report/cli.h"
#include "matrix/report/issue_record.h"

namespace matrix::report::test_util {

// 2025-11-21 10:00:00 UTC.
inline constexpr int64_t kBaseTimeMs = 1763719200000;

inline proto::Issue Envelope(const std::string& tag, const std::string& key, int64_t time_ms) {
  proto::Issue issue;
  issue.set_tag(tag);
  issue.set_key(key);
  issue.set_plugin("Trace");
  issue.set_time_ms(time_ms);
  issue.set_process("gallery");
  issue.set_pid(4242);
  proto::DeviceInfo* device = issue.mutable_device();
  device->set_machine(proto::DeviceInfo::HIGH);
  device->set_cpu_cores(8);
  device->set_mem(int64_t{8} << 30);
  device->set_mem_free(int64_t{3} << 20);
  device->set_cpu_app(3.2);
  return issue;
}

inline proto::StackFrame* AddFrame(proto::ThreadStack* stack, const std::string& function,
                                   const std::string& module, uint64_t offset) {
  proto::StackFrame* frame = stack->add_frames();
  frame->set_pc(absl::StrCat("0x55d0c3a1b", stack->frames_size(), "c4"));
  frame->set_function(function);
  frame->set_module(module);
  frame->set_offset(offset);
  return frame;
}

inline void AddCall(google::protobuf::RepeatedPtrField<proto::MethodCall>* calls, int depth,
                    const std::string& name, double cost_ms, int count = 1,
                    bool unfinished = false) {
  proto::MethodCall* call = calls->Add();
  call->set_depth(depth);
  call->set_name(name);
  call->set_cost_ms(cost_ms);
  call->set_count(count);
  call->set_unfinished(unfinished);
}

// A hang (Trace_EvilMethod, anr report) keyed by `key`.
inline proto::Issue AnrIssue(const std::string& key, proto::Detail detail, double cost_ms,
                             int64_t time_ms, const std::string& scene = "Gallery") {
  proto::Issue issue = Envelope(kTagEvilMethod, key, time_ms);
  proto::AnrReport* anr = issue.mutable_anr();
  anr->set_detail(detail);
  anr->set_cost_ms(cost_ms);
  anr->set_scene(scene);
  anr->set_stack_key(key);
  proto::ThreadStack* stack = anr->mutable_thread_stack();
  stack->set_tid(4242);
  stack->set_thread_name("gallery");
  stack->set_captured_at_ms(cost_ms);
  AddFrame(stack, "clock_nanosleep", "/lib/x86_64-linux-gnu/libc.so.6", 101);
  AddFrame(stack, key, "/usr/bin/gallery", 28);
  AddFrame(stack, "app::Main()", "/usr/bin/gallery", 0x120);
  AddCall(anr->mutable_stack(), 0, "dispatch", cost_ms, 1, true);
  AddCall(anr->mutable_stack(), 1, "app::Load()", cost_ms - 1, 1, true);
  AddCall(anr->mutable_stack(), 2, key, cost_ms - 2, 3, true);
  proto::ThreadInfo* thread = anr->mutable_thread();
  thread->set_tid(4242);
  thread->set_name("gallery");
  thread->set_state("S (sleeping)");
  thread->set_priority(20);
  thread->set_nice(-2);
  thread->set_cpu_time_ms(812);
  proto::MemoryInfo* memory = anr->mutable_memory();
  memory->set_vm_size_kb(812344);
  memory->set_vm_rss_kb(90112);
  memory->set_heap_in_use_kb(40210);
  proto::QueueCosts* queues = anr->mutable_queue_costs();
  queues->set_input_ms(1.5);
  queues->set_animation_ms(2.25);
  queues->set_traversal_ms(7.75);
  anr->mutable_message()->set_target("Handler (app::UiHandler) {55d0c3a1}");
  anr->mutable_message()->set_callback("Save@settings.cc:42");
  anr->set_is_process_foreground(true);
  anr->set_cpu_usage(12.5);
  return issue;
}

// A slow method (Trace_EvilMethod, evil_method report, detail NORMAL).
inline proto::Issue EvilMethodIssue(const std::string& key, double cost_ms, int64_t time_ms,
                                    const std::string& scene = "Gallery") {
  proto::Issue issue = Envelope(kTagEvilMethod, key, time_ms);
  proto::EvilMethodReport* e = issue.mutable_evil_method();
  e->set_detail(proto::NORMAL);
  e->set_cost_ms(cost_ms);
  e->set_scene(scene);
  e->set_stack_key(key);
  e->set_cpu_usage(97.5);
  AddCall(e->mutable_stack(), 0, "dispatch", cost_ms);
  AddCall(e->mutable_stack(), 1, "app::LoadGallery()", cost_ms - 0.5);
  AddCall(e->mutable_stack(), 2, "app::ParseManifest()", 148.9);
  AddCall(e->mutable_stack(), 2, key, cost_ms - 150);
  e->mutable_message()->set_target("Handler (app::UiHandler) {55d0c3a1}");
  e->mutable_message()->set_callback("Load@gallery.cc:10");
  e->set_is_process_foreground(true);
  return issue;
}

// A frame report (Trace_FPS) for `scene`.
inline proto::Issue FrameIssue(const std::string& scene, double fps, int64_t time_ms) {
  proto::Issue issue = Envelope(kTagFps, scene, time_ms);
  proto::FrameReport* f = issue.mutable_frame();
  f->set_scene(scene);
  f->set_fps(fps);
  f->set_frames(2620);
  f->set_dropped_frames(238);
  f->mutable_drop_level()->set_best(2600);
  f->mutable_drop_level()->set_normal(14);
  f->mutable_drop_level()->set_middle(5);
  f->mutable_drop_level()->set_high(1);
  f->mutable_drop_sum()->set_best(40);
  f->mutable_drop_sum()->set_normal(61);
  f->mutable_drop_sum()->set_middle(97);
  f->mutable_drop_sum()->set_high(40);
  f->set_refresh_rate(60);
  f->set_window_ms(10003.3);
  f->set_input_ms(0.4);
  f->set_animation_ms(2.1);
  f->set_traversal_ms(6.8);
  f->set_commit_ms(0.2);
  f->set_frame_ms(9.5);
  f->set_worst_dropped_percent(41.7);
  f->set_p95_dropped_percent(18.3);
  f->set_input_latency_median_ms(3.25);
  f->set_input_latency_worst_ms(68.5);
  f->set_input_events(40);
  return issue;
}

// A cold startup (Trace_StartUp).
inline proto::Issue StartupIssue(int64_t time_ms) {
  proto::Issue issue = Envelope(kTagStartup, "cold:Splash", time_ms);
  proto::StartupReport* s = issue.mutable_startup();
  s->set_before_main_ms(41.3);
  s->set_application_create_begin_ms(52.5);
  s->set_application_create_ms(1830.2);
  s->set_application_create_scene("marks");
  s->set_first_scene_created_ms(2100.5);
  s->set_first_scene_create_ms(2410.7);
  s->set_startup_duration_ms(2988.1);
  s->set_is_warm_start_up(false);
  s->set_first_scene("Splash");
  s->add_scenes("Splash");
  s->add_scenes("Home");
  return issue;
}

// A BlockCanary block: 5 stack samples, 3 in `key`, 2 elsewhere.
inline proto::Issue BlockIssue(const std::string& key, int64_t cost_ms, int64_t time_ms) {
  proto::Issue issue = Envelope(kTagBlockCanary, key, time_ms);
  issue.set_plugin("BlockCanary");
  proto::BlockReport* b = issue.mutable_block();
  b->set_qualifier("gallery-1.4.2");
  b->set_version_name("1.4.2");
  b->set_version_code(142);
  b->set_model("AMD EPYC");
  b->set_api_level("Linux 6.1.0 x86_64");
  b->set_cpu_cores(8);
  b->set_free_memory_kb(3145728);
  b->set_total_memory_kb(8388608);
  b->set_vm_rss_kb(90112);
  b->set_cost_ms(cost_ms);
  b->set_thread_time_ms(cost_ms - 100);
  b->set_time_start_ms(time_ms - cost_ms);
  b->set_time_end_ms(time_ms);
  b->set_scene("Gallery");
  b->set_cpu_busy(true);
  b->mutable_block_cpu()->set_cpu_percent(91);
  b->mutable_block_cpu()->set_app_percent(25);
  b->mutable_block_cpu()->set_user_percent(80);
  b->mutable_block_cpu()->set_system_percent(11);
  proto::BlockCpuRate* rate = b->add_cpu_rate();
  rate->set_time_ms(time_ms - cost_ms + 100);
  rate->set_cpu_percent(90);
  rate->set_app_percent(24);
  for (int i = 0; i < 5; ++i) {
    proto::BlockStackSample* sample = b->add_samples();
    sample->set_offset_ms(50 + 100 * i);
    sample->set_time_ms(time_ms - cost_ms + sample->offset_ms());
    proto::ThreadStack frames;
    AddFrame(&frames, i == 0 || i == 4 ? "app::ParseHeader()" : key, "/usr/bin/gallery", 16 + i);
    AddFrame(&frames, "app::Load()", "/usr/bin/gallery", 64);
    *sample->mutable_frames() = frames.frames();
  }
  b->set_key_stack_line(key);
  b->set_key_sample_count(3);
  b->set_log_file("/tmp/blockcanary/looper-2025-11-21_10-00-00.000.log");
  return issue;
}

// The line JsonLinesIssueSink writes for `issue`.
inline std::string Line(const proto::Issue& issue) { return Issue(issue).ToJson(); }

inline IssueRecord Parsed(const proto::Issue& issue, const std::string& file = "issues.jsonl",
                          int64_t line = 1) {
  absl::StatusOr<IssueRecord> record = ParseIssueLine(Line(issue), {file, line});
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *std::move(record) : IssueRecord{};
}

// A fresh directory under the test temp dir, removed on destruction. Its name
// has the pid: builds in other worktrees may run the same test at the same time.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("matrix-report-", info->test_suite_name(), "-", info->name(), "-", name,
                         "-", getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string Write(const std::string& name, const std::vector<std::string>& lines) const {
    const std::string file = (path_ / name).string();
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    for (const std::string& line : lines) out << line << "\n";
    return file;
  }

 private:
  std::filesystem::path path_;
};

// matrix-report run in-process: its exit code, stdout and stderr.
struct RunOutput {
  int code = -1;
  std::string out;
  std::string err;
};
inline RunOutput RunReport(const std::vector<std::string>& args, const std::string& stdin_text,
                           const RunEnvironment& env) {
  std::istringstream in(stdin_text);
  std::ostringstream out;
  std::ostringstream err;
  RunOutput run;
  run.code = RunMatrixReport(args, in, out, err, env);
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace matrix::report::test_util

#endif  // MATRIX_TESTS_TOOLS_REPORT_TEST_UTIL_H_
