// Python frames on a real CPython 3.11 embedded in the test (libpython3.11,
// python3.11-dev): a Python thread recursing 30 deep then spinning is
// captured by StackCapturer from another thread; the stack names every
// Python frame at its line, interleaved with the eval frames, and the read's
// cost is measured (printed). Skipped when the build has no Python headers.

#if __has_include(<Python.h>)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define MATRIX_HAVE_PYTHON 1
#endif

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "matrix/trace/python_frames.h"
#include "matrix/trace/stack_capture.h"

namespace matrix {
namespace {

#ifdef MATRIX_HAVE_PYTHON

// leaf() tells the test it is spinning (flags[0] = 1) and spins until the
// test says stop (flags[1] = 1): no sleeping on either side.
constexpr char kScript[] =
    "import ctypes\n"                                                  // 1
    "def leaf(flags):\n"                                               // 2
    "    ctypes.c_int.from_address(flags).value = 1\n"                 // 3
    "    while ctypes.c_int.from_address(flags + 4).value == 0: pass\n"  // 4
    "def recurse(n, flags):\n"                                         // 5
    "    if n == 0:\n"                                                 // 6
    "        return leaf(flags)\n"                                     // 7
    "    return recurse(n - 1, flags)\n"                               // 8
    "def start(flags):\n"                                              // 9
    "    return recurse(30, flags)\n";                                 // 10

std::atomic<pid_t> g_python_tid{0};
int g_flags[2] = {0, 0};  // Written by the Python thread through ctypes.

TEST(PythonFramesEmbeddedTest, CapturesARealInterpretersFrames) {
  if (PY_VERSION_HEX >> 16 != 0x030b) GTEST_SKIP() << "not CPython 3.11 headers";
  Py_InitializeEx(0);
  ASSERT_EQ(PyRun_SimpleString(kScript), 0);
  PyThreadState* main_state = PyEval_SaveThread();  // Release the GIL.

  std::thread worker([] {
    PyGILState_STATE gil = PyGILState_Ensure();
    g_python_tid = static_cast<pid_t>(syscall(SYS_gettid));
    const std::string call =
        "start(" + std::to_string(reinterpret_cast<uintptr_t>(&g_flags[0])) + ")\n";
    PyRun_SimpleString(call.c_str());
    PyGILState_Release(gil);
  });
  while (__atomic_load_n(&g_flags[0], __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();

  ASSERT_TRUE(StackCapturer::Get()->Install().ok());
  ASSERT_NE(CurrentPythonRuntime(), nullptr);
  RawStack raw;
  ASSERT_TRUE(StackCapturer::Get()->Capture(g_python_tid.load(), &raw).ok());
  EXPECT_EQ(raw.python.error, PythonReadError::kNone)
      << PythonReadErrorName(raw.python.error);
  // leaf, recurse x31, start, <module> of the "start(...)" string.
  EXPECT_EQ(raw.python.depth, 34);
  SymbolizedStack stack = SymbolizeStack(raw);
  int leaf = -1, recursions = 0, evals_after_leaf = 0;
  for (size_t i = 0; i < stack.frames.size(); ++i) {
    const SymbolInfo& symbol = stack.frames[i].symbol;
    if (symbol.function == "leaf" && leaf < 0) {
      leaf = static_cast<int>(i);
      EXPECT_EQ(symbol.module, kPythonFrameModule);
      EXPECT_EQ(symbol.file, "<string>");
      EXPECT_EQ(symbol.line, 4);
    }
    if (symbol.function == "recurse") {
      ++recursions;
      EXPECT_EQ(symbol.line, recursions == 1 ? 7 : 8) << recursions;
    }
    if (leaf >= 0 && symbol.function.rfind("_PyEval_EvalFrameDefault", 0) == 0) {
      ++evals_after_leaf;
    }
  }
  EXPECT_GE(leaf, 0) << stack.ToString();
  EXPECT_EQ(recursions, 31) << stack.ToString();
  // Python-to-Python calls stay in one eval loop: the whole chain is before
  // the first eval frame after it (PyRun_SimpleString's).
  EXPECT_GE(evals_after_leaf, 1);
  std::printf("%s", stack.ToString().substr(0, 1500).c_str());

  // Cost: the read alone (what the handler adds), and whole captures.
  RawPythonStack python;
  constexpr int kRounds = 500;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) ReadPythonStack(*CurrentPythonRuntime(), g_python_tid, &python);
  const double read_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      kRounds;
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) (void)StackCapturer::Get()->Capture(g_python_tid.load(), &raw);
  const double capture_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      100;
  std::printf("real chain of %d frames: ReadPythonStack %.1f us, Capture() %.1f us (%d native)\n",
              python.depth, read_us, capture_us, raw.depth);

  __atomic_store_n(&g_flags[1], 1, __ATOMIC_RELEASE);  // leaf() returns.
  worker.join();
  PyEval_RestoreThread(main_state);
  EXPECT_EQ(Py_FinalizeEx(), 0);
}

#else

TEST(PythonFramesEmbeddedTest, CapturesARealInterpretersFrames) {
  GTEST_SKIP() << "built without Python headers (python3.11-dev)";
}

#endif

}  // namespace
}  // namespace matrix
