// QML/JavaScript frames in Qt Quick's qml runtime (Debian's qml-qt6, Qt
// 6.4.2) under matrix-run and Xvfb: a Timer calls handleTick(), which calls
// busy(), a JavaScript function that spins for 6 s. Exactly one ANR, keyed
// by busy (not by the engine's QV4::Runtime::CallQmlContextPropertyLookup
// frame), whose stack shows busy and handleTick with the .qml file and their
// lines, each just inside the libQt6Qml frames that run it. And a slow
// handler that quits the loop keeps its JavaScript name (the engine is
// destroyed right after).

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent_test_util.h"
#include "gtest/gtest.h"

namespace {

constexpr char kQmlModule[] = "[qml]";  // matrix::kQmlFrameModule

// busy() starts on line 7, its loop is on line 11, handleTick()'s call on
// line 15, the Timer handler's call on line 21.
constexpr char kQml[] = R"(import QtQuick
import QtQuick.Window
Window {
    width: 320; height: 240; visible: true; title: "matrix-qml-hang"
    property int spins: 0
    // A JavaScript function that holds the main thread for `ms`.
    function busy(ms) {
        var end = Date.now() + ms
        var x = 0
        spins = 0
        while (Date.now() < end) { x = (x + 1) % 7; spins++ }
        return x
    }
    function handleTick() {
        return busy(6000)
    }
    Timer {
        interval: 1500; running: true; repeat: false
        onTriggered: {
            console.log("start busy " + Date.now())
            handleTick()
            Qt.quit()
        }
    }
}
)";
constexpr int kBusyFirstLine = 7;
constexpr int kBusyLoopLine = 11;
constexpr int kHandleTickCallLine = 15;

int Find(const matrix::proto::ThreadStack& stack, const std::string& function, int from = 0) {
  for (int i = from; i < stack.frames_size(); ++i) {
    if (stack.frames(i).function() == function) return i;
  }
  return -1;
}

std::string Text(const matrix::proto::ThreadStack& stack) {
  std::string text;
  for (const auto& frame : stack.frames()) {
    absl::StrAppend(&text, frame.function(), " (", frame.module(), ")");
    if (!frame.file().empty()) absl::StrAppend(&text, " at ", frame.file(), ":", frame.line());
    text += "\n";
  }
  return text;
}

bool IsQmlEngine(const matrix::proto::StackFrame& frame) {
  return absl::StrContains(frame.module(), "libQt6Qml.so");
}

TEST(QmlProgramTest, AnrIsKeyedByTheHangingJavaScriptFunction) {
  const std::string dir = agent_test::NewReportDir("qml-hang");
  const std::string qml = dir + "-hang.qml";
  std::ofstream(qml) << kQml;
  const agent_test::RunResult run =
      agent_test::Run({"/usr/bin/timeout", "-s", "TERM", "40", MATRIX_RUN_PATH, "--report-dir", dir,
                       "--anr", "1000", "--lag", "800", "--", PROGRAM_PATH, qml});
  const std::string output = run.out + run.err;
  const size_t busy_at = output.find("start busy ");
  ASSERT_NE(busy_at, std::string::npos) << output;
  const int64_t busy_start = std::atoll(output.c_str() + busy_at + 11);

  std::vector<matrix::report::IssueRecord> anrs;
  for (auto& record : agent_test::ReadIssues(dir)) {
    if (record.TagDetail() == "Trace_EvilMethod/ANR") anrs.push_back(std::move(record));
  }
  ASSERT_EQ(anrs.size(), 1u) << output;
  EXPECT_GE(anrs[0].time_ms(), busy_start);
  const auto& anr = anrs[0].issue.anr();
  const auto& stack = anr.thread_stack();
  const std::string text = Text(stack);
  std::printf("ANR key %s; stack:\n%s", anr.stack_key().c_str(), text.c_str());

  const int busy = Find(stack, "busy");
  ASSERT_GE(busy, 0) << text;
  EXPECT_EQ(stack.frames(busy).module(), kQmlModule);
  EXPECT_EQ(stack.frames(busy).file(), qml);
  const uint32_t busy_line = stack.frames(busy).line();
  EXPECT_TRUE(busy_line == kBusyLoopLine || busy_line == kBusyFirstLine) << text;
  // Just inside the engine frames that run it (VME::interpret, VME::exec).
  ASSERT_GT(stack.frames_size(), busy + 2) << text;
  EXPECT_TRUE(IsQmlEngine(stack.frames(busy + 1))) << text;
  EXPECT_TRUE(IsQmlEngine(stack.frames(busy + 2))) << text;
  // handleTick further out, with native engine frames between (the call).
  const int tick = Find(stack, "handleTick", busy + 1);
  ASSERT_GT(tick, busy + 3) << text;
  EXPECT_EQ(stack.frames(tick).module(), kQmlModule);
  EXPECT_EQ(stack.frames(tick).file(), qml);
  EXPECT_EQ(stack.frames(tick).line(), static_cast<uint32_t>(kHandleTickCallLine)) << text;
  EXPECT_GE(Find(stack,
                 "QV4::Runtime::CallQmlContextPropertyLookup::call(QV4::ExecutionEngine*, "
                 "unsigned int, QV4::Value*, int)",
                 busy),
            0)
      << text;
  // The Timer's signal handler, then native frames out to main.
  const int handler = Find(stack, "expression for onTriggered", tick + 1);
  ASSERT_GT(handler, tick) << text;
  EXPECT_EQ(stack.frames(handler).line(), 21u) << text;
  EXPECT_GT(Find(stack, "QQmlBoundSignalExpression::evaluate(void**)", handler), handler) << text;

  EXPECT_EQ(anr.stack_key(), "busy") << text;
  EXPECT_EQ(anrs[0].key, "busy");
}

// A handler that is slow and then quits the loop (a slow save on quit):
// the program destroys its engine right after, freeing the compiled
// JavaScript. The slow dispatch is still keyed by its JavaScript function,
// with its QML frame named: the agent delivers the reports in flight when
// QCoreApplication::exec() returns. Without that, its frames were resolved
// after the engine was gone, unnamed placeholders, and the key fell to a Qt
// frame (QDateTime::currentMSecsSinceEpoch(), QV4::Moth::VME::interpret),
// another each run.
constexpr char kQuitQml[] = R"(import QtQuick
import QtQuick.Window
Window {
    width: 320; height: 240; visible: true; title: "matrix-qml-quit"
    function saveDocument(ms) {
        var end = Date.now() + ms
        var x = 0
        while (Date.now() < end) { x = (x + 1) % 7 }
        return x
    }
    Timer {
        interval: 1000; running: true; repeat: false
        onTriggered: { saveDocument(1200); Qt.quit() }
    }
}
)";

TEST(QmlProgramTest, ASlowHandlerThatQuitsKeepsItsJavaScriptName) {
  for (int run_index = 0; run_index < 2; ++run_index) {
    SCOPED_TRACE(run_index);
    const std::string dir = agent_test::NewReportDir(absl::StrCat("qml-quit-", run_index));
    const std::string qml = dir + "-quit.qml";
    std::ofstream(qml) << kQuitQml;
    const agent_test::RunResult run = agent_test::Run(
        {"/usr/bin/timeout", "-s", "TERM", "40", MATRIX_RUN_PATH, "--report-dir", dir, "--evil",
         "300", "--lag", "4000", "--anr", "5000", "--", PROGRAM_PATH, qml});
    ASSERT_EQ(run.exit_code(), 0) << run.out << run.err;
    std::vector<matrix::report::IssueRecord> slow;
    for (auto& record : agent_test::ReadIssues(dir)) {
      if (record.TagDetail() == "Trace_EvilMethod/NORMAL") slow.push_back(std::move(record));
    }
    ASSERT_EQ(slow.size(), 1u) << run.err;
    const auto& stack = slow[0].issue.evil_method().thread_stack();
    const std::string text = Text(stack);
    EXPECT_EQ(slow[0].key, "saveDocument") << text;
    const int save = Find(stack, "saveDocument");
    ASSERT_GE(save, 0) << text;
    EXPECT_EQ(stack.frames(save).module(), kQmlModule);
    EXPECT_EQ(stack.frames(save).file(), qml);
  }
}

}  // namespace
