// Built twice (see call_graph.h): MATRIX_CALL_GRAPH_NS names the namespace.

#include "call_graph.h"

#include <cstdarg>
#include <stdexcept>

namespace MATRIX_CALL_GRAPH_NS {

__attribute__((noinline)) int Leaf(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

__attribute__((noinline)) int Nested(int x) { return Leaf(x) + Leaf(x + 1); }

// Real recursion: without hooks, GCC would turn `1 + Recurse(depth - 1)`
// into a loop (patchable entries leave the optimizer free, so it does).
__attribute__((noinline)) int Recurse(int depth) {
  asm volatile("" : "+r"(depth));
  if (depth <= 0) return 0;
  int r = Recurse(depth - 1);
  asm volatile("" : "+r"(r));
  return r + 1;
}

__attribute__((noinline)) void Thrower() { throw std::runtime_error("thrown through traced frames"); }

__attribute__((noinline)) void Middle() {
  Thrower();
  asm volatile("");  // Not a tail call.
}

__attribute__((noinline)) bool Catcher() {
  try {
    Middle();
  } catch (const std::runtime_error&) {
    return true;
  }
  return false;
}

__attribute__((noinline)) int Root(int x) {
  int r = Nested(x);
  r += Recurse(3);
  r += Catcher() ? 1 : 0;
  return r;
}

__attribute__((noinline)) double ManyArgs(int a, int b, int c, int d, int e, int f, int g,
                                          double x, double y, double z) {
  return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + x * y - z;
}

__attribute__((noinline)) Pair ReturnsPair(int64_t a, int64_t b) {
  asm volatile("" : "+r"(a), "+r"(b));
  return Pair{a * 2, b * 3};
}

__attribute__((noinline)) int Varargs(int n, ...) {
  va_list ap;
  va_start(ap, n);
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<int>(va_arg(ap, double));
  va_end(ap);
  return sum;
}

__attribute__((noinline)) int CallsBack(void (*fn)(void*), void* arg) {
  fn(arg);
  return 1;
}

}  // namespace MATRIX_CALL_GRAPH_NS
