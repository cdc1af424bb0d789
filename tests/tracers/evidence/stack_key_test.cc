// The stack key rule (matrix/trace/stack_key.h): system, toolkit and runtime
// frames are skipped so the key lands in the program's own code, the rule's
// overrides, and keys from several captures of one hang.

#include "matrix/trace/stack_key.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "matrix/trace/report_context.h"

namespace matrix {
namespace {

constexpr char kApp[] = "/home/dev/gallery/build/gallery";
constexpr char kLibc[] = "/usr/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kGtk[] = "/usr/lib/x86_64-linux-gnu/libgtk-3.so.0";
constexpr char kPython[] = "/usr/bin/python3.11";
constexpr char kNode[] = "/usr/bin/node";

StackFrame Frame(std::string function, std::string module, uintptr_t pc = 0x1000,
                 std::string file = "", int line = 0) {
  StackFrame frame;
  frame.pc = pc;
  frame.symbol.function = std::move(function);
  frame.symbol.module = std::move(module);
  frame.symbol.function_offset = frame.symbol.function.empty() ? 0 : 4;
  frame.symbol.file = std::move(file);
  frame.symbol.line = line;
  return frame;
}

SymbolizedStack Stack(std::vector<StackFrame> frames) {
  SymbolizedStack stack;
  stack.tid = 42;
  stack.frames = std::move(frames);
  return stack;
}

std::string Key(const SymbolizedStack& stack, absl::Span<const SymbolizedStack> earlier = {}) {
  return HangStackKey(stack, nullptr, {}, absl::Seconds(5), earlier);
}

class StackKeyTest : public ::testing::Test {
 protected:
  ~StackKeyTest() override { SetStackKeyRule({}); }
};

TEST_F(StackKeyTest, SystemLibrariesToolkitsAndRuntimes_AreSkipped) {
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kLibc, "clock_nanosleep"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kGtk, "gtk_main_do_event"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("libgtk-3.so.0", "gtk_main_do_event"));  // Block files.
  EXPECT_TRUE(IsSystemOrRuntimeFrame("/opt/qt6/lib/libQt6Core.so.6", "QEventLoop::exec"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kPython, "_PyEval_EvalFrameDefault"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("/usr/local/bin/python3", "time_sleep"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kNode, "Runtime_DateCurrentTime"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("/opt/node/bin/node", "uv_run"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kApp, "v8::base::Time::Now()"));  // A runtime linked in.
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kApp, "_PyObject_Malloc"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(kApp, "matrix::Looper::Loop()"));
  // A runtime's own interpreted or JIT code.
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[python]", "mainloop", "/usr/lib/python3.11/tkinter/__init__.py"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[python]", "_call_with_frames_removed", "<frozen importlib._bootstrap>"));
  // A Python library folder wherever the installation is: pyenv, /usr/local, a venv.
  EXPECT_TRUE(IsSystemOrRuntimeFrame(
      "[python]", "run_forever", "/root/.pyenv/versions/3.11.7/lib/python3.11/asyncio/base_events.py"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[python]", "get", "/usr/local/lib/python3.12/queue.py"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(
      "[python]", "send", "/home/dev/app/.venv/lib/python3.11/site-packages/requests/api.py"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[jit]", "listOnTimeout", "node:internal/timers"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[jit]", "Builtin:ArrayMap"));  // No source file.
  // The program's own code, whatever its language.
  EXPECT_FALSE(IsSystemOrRuntimeFrame(kApp, "app::Decode()"));
  EXPECT_FALSE(IsSystemOrRuntimeFrame("/usr/bin/glxgears", "draw"));  // A program, not a library.
  EXPECT_FALSE(IsSystemOrRuntimeFrame("/usr/bin/nodes-editor", "Editor::Save()"));
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[python]", "busy_work", "/home/dev/app/worker.py"));
  // Only a "lib/python<version>/" folder is a library: not a program's own
  // lib/python_helpers/, nor a file named like one.
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[python]", "load", "/home/dev/app/lib/python_helpers/io.py"));
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[python]", "main", "/home/dev/app/lib/python3.py"));
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[jit]", "busyLoop", "/home/dev/app/server.js"));
}

TEST_F(StackKeyTest, QmlFrames_QtsOwnQmlIsRuntimeTheProgramsIsNot) {
  EXPECT_TRUE(IsSystemOrRuntimeFrame(
      "[qml]", "clicked", "/usr/lib/x86_64-linux-gnu/qt6/qml/QtQuick/Controls/Basic/Button.qml"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame(
      "[qml]", "open", "qrc:/qt-project.org/imports/QtQuick/Dialogs/quickimpl/qml/FileDialog.qml"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[qml]", "<anonymous>", ""));  // No file: the engine's.
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[qml]", "busy", "/home/dev/app/main.qml"));
  EXPECT_FALSE(IsSystemOrRuntimeFrame("[qml]", "load", "qrc:/app/Loader.js"));
  // Qt's libraries and the qml runtime are system frames around them.
  EXPECT_TRUE(IsSystemOrRuntimeFrame("/usr/lib/x86_64-linux-gnu/libQt6Qml.so.6",
                                     "QV4::Runtime::CallQmlContextPropertyLookup::call"));
  EXPECT_TRUE(IsSystemOrRuntimeFrame("/usr/lib/qt6/bin/qml", ""));
}

TEST_F(StackKeyTest, KeyIsTheInnermostFrameOfTheProgram) {
  // A Python program: interpreter frames around the Python functions.
  const SymbolizedStack python = Stack({
      Frame("_PyObject_Malloc", kPython), Frame("_PyEval_EvalFrameDefault", kPython),
      Frame("busy_work", "[python]", 0, "/home/dev/app/worker.py", 12),
      Frame("on_click", "[python]", 0, "/home/dev/app/worker.py", 30),
      Frame("_PyEval_EvalFrameDefault", kPython),
      Frame("mainloop", "[python]", 0, "/usr/lib/python3.11/tkinter/__init__.py", 1485),
      Frame("Py_RunMain", kPython), Frame("main", kPython)});
  EXPECT_EQ(Key(python), "busy_work");
  // A C++ program stuck in a toolkit call it made.
  EXPECT_EQ(Key(Stack({Frame("poll", kLibc), Frame("g_main_context_iteration", "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0"),
                       Frame("app::Window::Flush()", kApp), Frame("gtk_main", kGtk),
                       Frame("main", kApp)})),
            "app::Window::Flush()");
}

TEST_F(StackKeyTest, AllSystemStack_FallsBackToTheInnermostNamedFrameOutsideTheCRuntime) {
  EXPECT_EQ(Key(Stack({Frame("", kLibc), Frame("clock_nanosleep", kLibc),
                       Frame("_PyEval_EvalFrameDefault", kPython), Frame("main", kPython)})),
            "_PyEval_EvalFrameDefault");
  // Only the C runtime: its innermost named frame.
  EXPECT_EQ(Key(Stack({Frame("", kLibc), Frame("clock_nanosleep", kLibc)})), "clock_nanosleep");
  EXPECT_EQ(Key(Stack({})), "unknown");
}

TEST_F(StackKeyTest, RuleOverrides_ProgramModulesWinAndSkipModulesAdd) {
  const SymbolizedStack stack = Stack({Frame("vendor_spin", "/opt/vendor/libvendor.so.2"),
                                       Frame("Plugin::Run()", "/usr/lib/gallery/libplugin.so"),
                                       Frame("app::Main()", kApp)});
  EXPECT_EQ(Key(stack), "vendor_spin");  // Built in: /usr/lib is the system's.
  SetStackKeyRule({.skip_modules = {"libvendor"}, .program_modules = {"/usr/lib/gallery/"}});
  EXPECT_EQ(Key(stack), "Plugin::Run()");
  SetStackKeyRule({.skip_modules = {"/opt/vendor/", "libplugin"}});
  EXPECT_EQ(Key(stack), "app::Main()");
  // A program module wins over a skip pattern that also matches it.
  SetStackKeyRule({.skip_modules = {"/opt/"}, .program_modules = {"libvendor"}});
  EXPECT_EQ(Key(stack), "vendor_spin");
  // Python source directories work for bracketed frames.
  SetStackKeyRule({.skip_modules = {"/home/dev/app/vendored/"}});
  EXPECT_TRUE(IsSystemOrRuntimeFrame("[python]", "f", "/home/dev/app/vendored/lib.py"));
}

TEST_F(StackKeyTest, RuleValidation_NamesTheBadPattern) {
  EXPECT_TRUE((StackKeyRule{.skip_modules = {"libfoo", "/opt/x/"}}).Validate().ok());
  const absl::Status empty = StackKeyRule{.program_modules = {""}}.Validate();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  const absl::Status half = StackKeyRule{.skip_modules = {"lib/foo"}}.Validate();
  EXPECT_EQ(half.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(half.message()), testing::HasSubstr("\"lib/foo\""));
  EXPECT_FALSE((StackKeyRule{.skip_modules = {"/opt/x"}}).Validate().ok());
}

// One capture lands wherever the loop is: the stalled function's clock
// helper in one capture, the function itself in another.
TEST_F(StackKeyTest, SeveralCaptures_KeyOnTheDeepestSharedFrame) {
  auto stalled = [](std::vector<StackFrame> inner) {
    std::vector<StackFrame> frames = std::move(inner);
    frames.push_back(Frame("app::Stall()", kApp, 0x2010));
    frames.push_back(Frame("app::OnClick()", kApp, 0x3010));
    frames.push_back(Frame("main", kApp, 0x4010));
    return Stack(std::move(frames));
  };
  const SymbolizedStack in_clock =
      stalled({Frame("clock_gettime", "linux-vdso.so.1"), Frame("app::NowMicros()", kApp, 0x1010)});
  const SymbolizedStack in_stall = stalled({});
  const SymbolizedStack in_hash = stalled({Frame("app::Hash(int)", kApp, 0x5010)});
  // Alone, the crossing capture keys on the helper.
  EXPECT_EQ(Key(in_clock), "app::NowMicros()");
  EXPECT_EQ(SharedOuterFrames(in_clock, {in_stall, in_hash}), 3u);
  const std::vector<SymbolizedStack> earlier = {in_stall, in_hash};
  EXPECT_EQ(Key(in_clock, earlier), "app::Stall()");
  EXPECT_EQ(Key(in_hash, std::vector<SymbolizedStack>{in_clock}), "app::Stall()");
  // The same function at another pc is the same frame.
  SymbolizedStack moved = in_stall;
  moved.frames[0].pc += 0x40;
  EXPECT_EQ(SharedOuterFrames(in_stall, {moved}), 3u);
  // Failed captures are ignored; captures that share nothing leave the
  // crossing stack alone.
  EXPECT_EQ(Key(in_clock, std::vector<SymbolizedStack>{Stack({})}), "app::NowMicros()");
  const SymbolizedStack elsewhere = Stack({Frame("other_main", "/usr/bin/other")});
  EXPECT_EQ(Key(in_clock, std::vector<SymbolizedStack>{elsewhere}), "app::NowMicros()");
}

TEST_F(StackKeyTest, SeveralCaptures_PythonFramesCompareByFunctionNotLine) {
  auto python = [](int line, std::vector<StackFrame> inner) {
    std::vector<StackFrame> frames = std::move(inner);
    frames.push_back(Frame("_PyEval_EvalFrameDefault", kPython, 0x7000));
    frames.push_back(Frame("spin", "[python]", 0, "/home/dev/app/a.py", line));
    frames.push_back(Frame("main", "[python]", 0, "/home/dev/app/a.py", 40));
    return Stack(std::move(frames));
  };
  const SymbolizedStack a = python(12, {Frame("_PyObject_Malloc", kPython, 0x6000)});
  const SymbolizedStack b = python(14, {Frame("time_monotonic", kPython, 0x6800)});
  EXPECT_EQ(Key(a, std::vector<SymbolizedStack>{b}), "spin");
}

// A stripped program: its frames have a module and an ELF address but no
// name. The innermost of them keys the report as "module+0xaddress" (stable
// for one build), never the toolkit frame around it; unnamed C runtime and
// vDSO frames are still skipped.
TEST_F(StackKeyTest, AnUnnamedFrameOfTheProgram_KeysByModuleAndElfAddress) {
  constexpr char kGlib[] = "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0";
  auto unnamed = [](std::string module, uintptr_t elf_address) {
    StackFrame frame = Frame("", std::move(module), 0x55d0c0de0000 + elf_address);
    frame.symbol.module_offset = elf_address;
    return frame;
  };
  const SymbolizedStack stack =
      Stack({unnamed("linux-vdso.so.1", 0x9a0), unnamed(kLibc, 0xe1234),
             Frame("g_get_monotonic_time", kGlib), unnamed("/opt/myapp/bin/myapp", 0x1a2b),
             Frame("g_main_context_dispatch", kGlib), unnamed("/opt/myapp/bin/myapp", 0x1100)});
  EXPECT_EQ(Key(stack), "myapp+0x1a2b");
  EXPECT_EQ(UnnamedFrameKey("/opt/myapp/bin/myapp", 0x1a2b), "myapp+0x1a2b");
  EXPECT_EQ(UnnamedFrameKey("", 0x1a2b), "");
  const absl::flat_hash_set<std::string> named = NamedModules(stack.frames);
  EXPECT_EQ(ProgramFrameKey(stack.frames[3].symbol, named), "myapp+0x1a2b");
  EXPECT_EQ(ProgramFrameKey(stack.frames[1].symbol, named), "");  // libc: never the key.
  EXPECT_EQ(ProgramFrameKey(stack.frames[0].symbol, named), "");  // The vDSO neither.
  // A module that names other frames has symbols: its unnamed frame (a stub,
  // padding) never keys; its named one does.
  SymbolizedStack with_names = stack;
  with_names.frames[5].symbol.function = "main";
  EXPECT_EQ(Key(with_names), "main");

  // The report's form: elf_address, else the offset of older reports (an
  // unnamed frame's offset is the same address).
  proto::ThreadStack report;
  FillThreadStack(stack, &report);
  ASSERT_EQ(report.frames_size(), 6);
  EXPECT_EQ(report.frames(3).elf_address(), 0x1a2bu);
  EXPECT_EQ(NativeStackKey(report), "myapp+0x1a2b");
  report.mutable_frames(3)->clear_elf_address();
  EXPECT_EQ(NativeStackKey(report), "myapp+0x1a2b");
  // A program frame with a name still wins over an unnamed one further out.
  report.mutable_frames(5)->set_function("main");
  report.mutable_frames(3)->set_function("app::Layout()");
  EXPECT_EQ(NativeStackKey(report), "app::Layout()");
}

// A stripped program's captures land at different pcs of one function: in
// its own loop in one capture, at its return from a clock read in another.
// The unwind info gives each unnamed frame its function's start
// (function_offset), so the captures share the function and the key is its
// start, whichever pc the crossing capture holds.
TEST_F(StackKeyTest, UnnamedFramesOfOneFunction_ShareItsStartAndKeyByIt) {
  constexpr char kMyApp[] = "/opt/myapp/bin/myapp";
  constexpr uintptr_t kBias = 0x55d0c0de0000;
  auto unnamed = [](std::string module, uintptr_t start, uintptr_t offset) {
    StackFrame frame = Frame("", std::move(module), kBias + start + offset);
    frame.symbol.module_offset = start + offset;
    frame.symbol.function_offset = offset;
    return frame;
  };
  auto hang = [&](std::vector<StackFrame> inner) {
    std::vector<StackFrame> frames = std::move(inner);
    frames.push_back(unnamed(kMyApp, 0x1280, 0x57));  // OnLayoutTimeout's call.
    frames.push_back(
        Frame("g_main_context_dispatch", "/usr/lib/x86_64-linux-gnu/libglib-2.0.so.0"));
    frames.push_back(unnamed(kMyApp, 0x1100, 0x20));  // main.
    return Stack(std::move(frames));
  };
  // ComputeLayoutForever starts at 0x1240.
  const SymbolizedStack in_loop = hang({unnamed(kMyApp, 0x1240, 0x31)});
  const SymbolizedStack in_clock =
      hang({unnamed("linux-vdso.so.1", 0x9a0, 0x12), unnamed(kMyApp, 0x1240, 0x5d)});
  EXPECT_EQ(SharedOuterFrames(in_loop, {in_clock}), 4u);
  EXPECT_EQ(Key(in_loop, std::vector<SymbolizedStack>{in_clock}), "myapp+0x1240");
  EXPECT_EQ(Key(in_clock, std::vector<SymbolizedStack>{in_loop}), "myapp+0x1240");
  // Without a start (no unwind info), unnamed frames compare by pc: the
  // captures then share only the caller, and a frame keys at its address.
  SymbolizedStack no_start = in_loop;
  no_start.frames[0].symbol.function_offset = 0;
  SymbolizedStack no_start_clock = in_clock;
  no_start_clock.frames[1].symbol.function_offset = 0;
  EXPECT_EQ(SharedOuterFrames(no_start, {no_start_clock}), 3u);
  EXPECT_EQ(Key(no_start, std::vector<SymbolizedStack>{no_start_clock}), "myapp+0x1280");
  EXPECT_EQ(Key(no_start), "myapp+0x1271");

  // The report carries the offset in the function; its key is the start.
  proto::ThreadStack report;
  FillThreadStack(in_clock, &report);
  ASSERT_EQ(report.frames_size(), 5);
  EXPECT_EQ(report.frames(1).elf_address(), 0x129du);
  EXPECT_EQ(report.frames(1).offset(), 0x5du);
  EXPECT_EQ(NativeStackKey(report), "myapp+0x1240");
  // Without a known start the offset is the address itself, as in reports
  // of older versions, and the frame keys at its address.
  report.mutable_frames(1)->set_offset(0x129d);
  EXPECT_EQ(NativeStackKey(report), "myapp+0x129d");
}

}  // namespace
}  // namespace matrix
