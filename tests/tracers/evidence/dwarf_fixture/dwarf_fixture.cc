// A module built with -g that tracers_symbolizer_dwarf_test loads copies of
// (with debug info, stripped with separate debug files, fully stripped) to
// check source lines and inlined frames. Each function returns a return
// address inside itself and the source line of that call (__LINE__).

#include <cstdint>

namespace {

// The address this function returns to: an instruction of the caller right
// after the call, whose line is the call's.
__attribute__((noinline)) uintptr_t ReturnAddress() {
  uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  asm volatile("" ::: "memory");  // Not a leaf the compiler may fold.
  return pc;
}

__attribute__((always_inline)) inline uintptr_t InlinedHelper(int* inner_line) {
  *inner_line = __LINE__ + 1;
  uintptr_t pc = ReturnAddress();
  asm volatile("" ::: "memory");  // Keeps the call from becoming a tail call.
  return pc;
}

}  // namespace

extern "C" __attribute__((visibility("default"), noinline)) uintptr_t DwarfFixtureKnownLine(
    int* line) {
  *line = __LINE__ + 1;
  uintptr_t pc = ReturnAddress();
  asm volatile("" ::: "memory");
  return pc;
}

extern "C" __attribute__((visibility("default"), noinline)) uintptr_t DwarfFixtureInlined(
    int* inner_line, int* outer_line) {
  *outer_line = __LINE__ + 1;
  uintptr_t pc = InlinedHelper(inner_line);
  asm volatile("" ::: "memory");
  return pc;
}

// A lambda inlined into its caller (internal linkage: GCC gives it no
// linkage name).
extern "C" __attribute__((visibility("default"), noinline)) uintptr_t DwarfFixtureLambda(
    int* inner_line) {
  auto lambda = [inner_line]() __attribute__((always_inline)) {
    *inner_line = __LINE__ + 1;
    uintptr_t pc = ReturnAddress();
    asm volatile("" ::: "memory");
    return pc;
  };
  uintptr_t pc = lambda();
  asm volatile("" ::: "memory");
  return pc;
}
