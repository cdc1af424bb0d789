// node (V8) under matrix-run --perf-map (tests/agent/node_jit_target.js): an
// ANR in a JavaScript function names it from node's /tmp/perf-PID.map, with
// its script and line, and the frame-pointer walk past the JIT frames shows
// node's native frames below it down to the start of the process
// (docs/stacks.md, "JIT frames"). Two runs (node started directly,
// then through /usr/bin/env: flags on node's command line, then in
// NODE_OPTIONS) key the ANR the same.
//
// node's main() is a tail call (jmp node::Start), so no node stack has a
// main frame: the bottom is node::Start, called from libc's
// __libc_start_call_main.

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

// The 1-based line of `needle` in `path`, 0 if absent.
int LineOf(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(needle) != std::string::npos) return n;
  }
  return 0;
}

struct AnrRun {
  agent_test::RunResult run;
  std::vector<matrix::report::IssueRecord> anrs;
};

// V8's log for `pid` in the working directory (isolate-0x...-PID-v8.log),
// removed; whether there was one.
bool RemoveV8Log(int pid) {
  bool found = false;
  const std::string suffix = absl::StrCat("-", pid, "-v8.log");
  for (const auto& entry : std::filesystem::directory_iterator(".")) {
    const std::string file = entry.path().filename().string();
    if (absl::StartsWith(file, "isolate-") && absl::EndsWith(file, suffix)) {
      std::filesystem::remove(entry.path());
      found = true;
    }
  }
  return found;
}

// `via_env`: node started by /usr/bin/env (not node itself: matrix-run passes
// the flags through NODE_OPTIONS).
AnrRun RunBusyNode(const std::string& name, bool via_env) {
  const std::string dir = agent_test::NewReportDir(name);
  AnrRun result;
  // ANR at 1 s; busyLoop spins 2 s.
  std::vector<std::string> args = {MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "1000",
                                   "--lag", "900", "--perf-map", "--quiet", "--"};
  if (via_env) args.push_back("/usr/bin/env");
  args.insert(args.end(), {NODE_PATH, NODE_JIT_TARGET_PATH, "2000"});
  result.run = agent_test::Run(args);
  for (auto& record : agent_test::ReadIssues(dir)) {
    if (record.TagDetail() == "Trace_EvilMethod/ANR") result.anrs.push_back(std::move(record));
  }
  std::filesystem::remove_all(dir);
  if (!result.anrs.empty()) {
    const int pid = static_cast<int>(result.anrs[0].pid());
    // matrix-run removed node's perf map.
    EXPECT_FALSE(std::filesystem::exists(absl::StrCat("/tmp/perf-", pid, ".map")));
    // On node's command line, --logfile=/dev/null: no V8 log (NODE_OPTIONS
    // cannot say so: there node writes one).
    EXPECT_EQ(RemoveV8Log(pid), via_env);
  }
  return result;
}

std::string Frames(const matrix::proto::ThreadStack& stack) {
  std::string text;
  for (const auto& f : stack.frames()) {
    absl::StrAppend(&text, f.pc(), " ", f.function(), " (", f.module(), ") ", f.file(), ":",
                    f.line(), "\n");
  }
  return text;
}

TEST(NodeJitTest, AnrNamesTheJavaScriptFunctionAndTheNativeFramesBelowIt) {
  if (!std::filesystem::exists(NODE_PATH)) GTEST_SKIP() << NODE_PATH << " missing: make deps";
  const int busy_line = LineOf(NODE_JIT_TARGET_PATH, "function busyLoop(");
  ASSERT_GT(busy_line, 0);
  std::vector<std::string> keys;
  for (const char* name : {"node-jit-1", "node-jit-2"}) {
    const AnrRun r = RunBusyNode(name, /*via_env=*/std::string(name) == "node-jit-2");
    ASSERT_EQ(r.run.exit_code(), 0) << r.run.out << r.run.err;
    EXPECT_THAT(r.run.out, ::testing::HasSubstr("done ")) << r.run.err;
    ASSERT_EQ(r.anrs.size(), 1u) << r.run.err;
    const auto& stack = r.anrs[0].issue.anr().thread_stack();
    const std::string frames =
        absl::StrCat(Frames(stack), "error: ", stack.error(), "\n", r.run.err);
    int js = -1;
    for (int i = 0; i < stack.frames_size(); ++i) {
      if (stack.frames(i).function() == "busyLoop") {
        js = i;
        break;
      }
    }
    ASSERT_GE(js, 0) << frames;
    const auto& frame = stack.frames(js);
    EXPECT_EQ(frame.module(), "[jit]") << frames;
    EXPECT_EQ(frame.file(), NODE_JIT_TARGET_PATH) << frames;
    EXPECT_EQ(frame.line(), static_cast<uint32_t>(busy_line)) << frames;
    // Below it, node's native frames: the event loop, down to the start.
    std::vector<std::string> below;
    for (int i = js + 1; i < stack.frames_size(); ++i) below.push_back(stack.frames(i).function());
    EXPECT_THAT(below, ::testing::Contains("uv_run")) << frames;
    EXPECT_THAT(below, ::testing::Contains("node::Start(int, char**)")) << frames;
    EXPECT_THAT(below, ::testing::Contains("__libc_start_call_main")) << frames;
    std::printf("run %s: busyLoop is frame %d of %d (%d below it), key %s\n%s", name, js,
                stack.frames_size(), stack.frames_size() - js - 1, r.anrs[0].key.c_str(),
                frames.c_str());
    keys.push_back(r.anrs[0].issue.anr().stack_key());
    EXPECT_EQ(r.anrs[0].key, keys.back());
  }
  EXPECT_EQ(keys[0], "busyLoop");
  EXPECT_EQ(keys[1], keys[0]);
}

}  // namespace
