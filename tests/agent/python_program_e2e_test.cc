// Python frames in a real CPython 3.11 program (tests/agent/python_target.py,
// an asyncio loop, no GUI) under matrix-run: the ANR stack names the Python
// function that hangs, with its file and line, interleaved with the native
// frames (each run of Python frames before the _PyEval_EvalFrameDefault frame
// that executes it), and the key is that function on every run. Debian 12's
// /usr/bin/python3.11; skipped without it.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

constexpr char kPython[] = "/usr/bin/python3.11";
constexpr char kPythonModule[] = "[python]";  // matrix::kPythonFrameModule

// The 1-based line of `path` containing `marker`, 0 if none.
int LineOf(const std::string& path, const std::string& marker) {
  std::ifstream in(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (absl::StrContains(line, marker)) return number;
  }
  return 0;
}

// The index of the first frame named `function` at or after `from`, -1 if none.
int Find(const matrix::proto::ThreadStack& stack, const std::string& function, int from = 0) {
  for (int i = from; i < stack.frames_size(); ++i) {
    if (stack.frames(i).function() == function) return i;
  }
  return -1;
}

// Runs python_target.py twice under `python` and checks both ANRs.
void CheckHangingFunctionIsNamed(const std::string& python, const std::string& stdlib_dir) {
  const int hang_line = LineOf(PYTHON_TARGET_PATH, "# HANG_LINE");
  ASSERT_GT(hang_line, 0);
  std::vector<std::string> keys;
  for (int run_index = 0; run_index < 2; ++run_index) {
    const std::string dir = agent_test::NewReportDir("python-" + std::to_string(run_index));
    const agent_test::RunResult run =
        agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "1000", "--lag", "800",
                         "--", python, PYTHON_TARGET_PATH, "300", "2000"});
    ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
    const size_t busy_at = run.out.find("start busy ");
    ASSERT_NE(busy_at, std::string::npos) << run.out << run.err;
    const int64_t busy_start = std::atoll(run.out.c_str() + busy_at + 11);
    std::vector<matrix::report::IssueRecord> anrs;
    for (auto& record : agent_test::ReadIssues(dir)) {
      if (record.time_ms() < busy_start) continue;  // Only the callback's hang.
      if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
    }
    ASSERT_EQ(anrs.size(), 1u) << run.err;
    const auto& anr = anrs[0].issue.anr();
    const auto& stack = anr.thread_stack();
    const std::string text = agent_test::StackText(anrs[0]);

    // hang_here, called by Worker.handle, called by busy_callback, then the
    // native eval loop frame that runs them; the asyncio loop and the
    // script's <module> further out.
    const int hang = Find(stack, "hang_here");
    ASSERT_GE(hang, 0) << text;
    const auto& top = stack.frames(hang);
    EXPECT_EQ(top.module(), kPythonModule);
    EXPECT_EQ(top.file(), PYTHON_TARGET_PATH);
    EXPECT_EQ(top.line(), static_cast<uint32_t>(hang_line)) << text;
    ASSERT_EQ(Find(stack, "Worker.handle"), hang + 1) << text;
    EXPECT_EQ(stack.frames(hang + 1).line(),
              static_cast<uint32_t>(LineOf(PYTHON_TARGET_PATH, "        hang_here(ms)")));
    ASSERT_EQ(Find(stack, "busy_callback"), hang + 2) << text;
    EXPECT_TRUE(absl::StartsWith(stack.frames(hang + 3).function(), "_PyEval_EvalFrameDefault"))
        << text;
    const int run_forever = Find(stack, "BaseEventLoop.run_forever", hang + 3);
    ASSERT_GT(run_forever, hang + 3) << text;
    EXPECT_TRUE(absl::StartsWith(stack.frames(run_forever).file(), stdlib_dir))
        << stack.frames(run_forever).file();
    const int module = Find(stack, "<module>", run_forever);
    ASSERT_GT(module, run_forever) << text;
    EXPECT_EQ(stack.frames(module).line(),
              static_cast<uint32_t>(LineOf(PYTHON_TARGET_PATH, "loop.run_forever()")));
    EXPECT_GT(Find(stack, "Py_RunMain", module), module) << text;  // Native frames kept.
    if (::testing::Test::HasFailure()) return;

    EXPECT_EQ(anr.stack_key(), "hang_here") << text;
    keys.push_back(anrs[0].key);
  }
  EXPECT_EQ(keys[0], keys[1]);
  EXPECT_EQ(keys[0], "hang_here");
}

TEST(PythonProgramTest, AnrStackNamesTheHangingPythonFunction) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  CheckHangingFunctionIsNamed(kPython, "/usr/lib/python3.11/");
}

// CPython 3.12's frame layout (entry shim frames instead of is_entry), with
// a 3.12 found at configure time (Debian's or a pyenv build).
TEST(PythonProgramTest, Python312AnrStackNamesTheHangingPythonFunction) {
  const std::string python = PYTHON312_PATH;
  if (python.empty() || access(python.c_str(), X_OK) != 0) GTEST_SKIP() << "no CPython 3.12";
  // Its standard library: /usr/lib/python3.12/ or <prefix>/lib/python3.12/.
  const std::string prefix = python.substr(0, python.rfind("/bin/"));
  CheckHangingFunctionIsNamed(
      python, prefix == "/usr" ? "/usr/lib/python3.12/" : prefix + "/lib/python3.12/");
}

// An asyncio coroutine that blocks its loop in time.sleep, again and again
// (8 x 250 ms), is one hang of 2 s: an ANR keyed by its function. The sleeps
// come from one call site deeper than the loop's epoll_wait, in a dispatch
// that epoll_wait began: a handler's waits. Learned as the loop's wait after
// three of them, they split the hang into 250 ms dispatches: no report.
constexpr char kBlockingCoroutine[] = R"(import asyncio, time
def fetch_blocking():
    for i in range(8):
        time.sleep(0.25)
async def handler():
    for i in range(5):
        await asyncio.sleep(0.05)
    print("start blocking", flush=True)
    fetch_blocking()
async def main():
    task = asyncio.create_task(handler())
    await asyncio.sleep(3)
asyncio.run(main())
)";

TEST(PythonProgramTest, AsyncioLoopBlockedByRepeatedSleepsIsAnAnr) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  const std::string dir = agent_test::NewReportDir("python-asyncio-sleeps");
  const std::string script = dir + ".py";
  std::ofstream(script) << kBlockingCoroutine;
  const agent_test::RunResult run =
      agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "1000", "--lag", "800", "--",
                       kPython, script});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  ASSERT_TRUE(absl::StrContains(run.out, "start blocking")) << run.out << run.err;
  std::vector<matrix::report::IssueRecord> anrs;
  for (auto& record : agent_test::ReadIssues(dir)) {
    if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
  }
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  EXPECT_EQ(anrs[0].key, "fetch_blocking");
  EXPECT_GE(Find(anrs[0].issue.anr().thread_stack(), "fetch_blocking"), 0);
}

// A time.sleep in a callback is work, not the loop's wait: an ANR keyed by the
// function that sleeps, with the sleep on the stack. CPython retries the
// clock_nanosleep that each of the agent's slow-dispatch samples (from 700 ms,
// 50 ms apart) interrupts, from the same call site; were those cut-short waits
// counted, the site would be learned as the loop's wait after three samples
// and the dispatch would end at about 800 ms, without LAG or ANR.
TEST(PythonProgramTest, SleepInCallbackIsAnAnrNotTheLoopsWait) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " missing";
  const std::string dir = agent_test::NewReportDir("python-sleep");
  const agent_test::RunResult run =
      agent_test::Run({MATRIX_RUN_PATH, "--report-dir", dir, "--anr", "1500", "--lag", "1000", "--",
                       kPython, PYTHON_TARGET_PATH, "300", "2500", "sleep"});
  ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
  const size_t busy_at = run.out.find("start busy ");
  ASSERT_NE(busy_at, std::string::npos) << run.out << run.err;
  const int64_t busy_start = std::atoll(run.out.c_str() + busy_at + 11);
  std::vector<matrix::report::IssueRecord> anrs;
  for (auto& record : agent_test::ReadIssues(dir)) {
    if (record.time_ms() < busy_start) continue;  // Only the callback's hang.
    if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
  }
  ASSERT_EQ(anrs.size(), 1u) << run.err;
  const auto& stack = anrs[0].issue.anr().thread_stack();
  const std::string text = agent_test::StackText(anrs[0]);
  const int sleeper = Find(stack, "sleep_here");
  ASSERT_GE(sleeper, 0) << text;
  EXPECT_EQ(stack.frames(sleeper).line(),
            static_cast<uint32_t>(LineOf(PYTHON_TARGET_PATH, "# SLEEP_LINE")));
  EXPECT_EQ(Find(stack, "Worker.handle"), sleeper + 1) << text;
  const int sleep_call = Find(stack, "clock_nanosleep");
  EXPECT_GE(sleep_call, 0) << text;
  EXPECT_LT(sleep_call, sleeper) << text;
  EXPECT_EQ(anrs[0].key, "sleep_here") << text;
  EXPECT_GE(anrs[0].issue.anr().cost_ms(), 1500) << text;
}

}  // namespace
