// A small call graph for comparing method-tracing mechanisms: call_graph.cc
// is built twice, once with -finstrument-functions (namespace hooked_graph)
// and once with patchable entries (namespace patched_graph).

#ifndef MATRIX_TESTS_TRACERS_INSTRUMENTED_CALL_GRAPH_H_
#define MATRIX_TESTS_TRACERS_INSTRUMENTED_CALL_GRAPH_H_

#include <cstdint>

#define MATRIX_DECLARE_CALL_GRAPH(ns)                                                    \
  namespace ns {                                                                         \
  /* Root() -> Nested() -> {Leaf(), Leaf()}, Recurse(3), Catcher(). */                   \
  int Root(int x);                                                                       \
  int Nested(int x);                                                                     \
  int Leaf(int x);                                                                       \
  int Recurse(int depth);                                                                \
  /* Catcher() -> Middle() -> Thrower(), which throws; Catcher() catches. */             \
  bool Catcher();                                                                        \
  void Middle();                                                                         \
  void Thrower();                                                                        \
  /* Every argument register and both return registers in use. */                       \
  double ManyArgs(int a, int b, int c, int d, int e, int f, int g, double x, double y,   \
                  double z);                                                             \
  struct Pair {                                                                          \
    int64_t a;                                                                           \
    int64_t b;                                                                           \
  };                                                                                     \
  Pair ReturnsPair(int64_t a, int64_t b);                                                \
  int Varargs(int n, ...);                                                               \
  /* Calls fn(arg), then returns 1. */                                                   \
  int CallsBack(void (*fn)(void*), void* arg);                                           \
  }  // namespace ns

MATRIX_DECLARE_CALL_GRAPH(hooked_graph)
MATRIX_DECLARE_CALL_GRAPH(patched_graph)

#endif  // MATRIX_TESTS_TRACERS_INSTRUMENTED_CALL_GRAPH_H_
