/* The peer benchmark's program (tools/bench-peers.sh): times chunks of
 * 32,768 calls to plain_leaf() (never instrumented) and traced_leaf() (built
 * with the instrumentation under test), alternately, and prints per call the
 * fastest chunk of each and the mean over all chunks. */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int plain_leaf(int x);
int traced_leaf(int x);

enum { kChunk = 32768 };

static long long NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  const int chunks = argc > 1 ? atoi(argv[1]) : 200;
  long long plain_min = LLONG_MAX, traced_min = LLONG_MAX, plain_sum = 0, traced_sum = 0;
  volatile int sink = 0;
  for (int c = 0; c < chunks; ++c) {
    int s = 0;
    const long long t0 = NowNs();
    for (int i = 0; i < kChunk; ++i) s += plain_leaf(i);
    const long long t1 = NowNs();
    for (int i = 0; i < kChunk; ++i) s += traced_leaf(i);
    const long long t2 = NowNs();
    sink += s;
    if (t1 - t0 < plain_min) plain_min = t1 - t0;
    if (t2 - t1 < traced_min) traced_min = t2 - t1;
    plain_sum += t1 - t0;
    traced_sum += t2 - t1;
  }
  const double p = (double)plain_min / kChunk, t = (double)traced_min / kChunk;
  const double pm = (double)plain_sum / chunks / kChunk, tm = (double)traced_sum / chunks / kChunk;
  printf("plain_ns=%.2f traced_ns=%.2f delta_ns=%.2f ratio=%.2f mean_delta_ns=%.2f mean_ratio=%.2f\n",
         p, t, t - p, p > 0 ? t / p : 0, tm - pm, pm > 0 ? tm / pm : 0);
  return 0;
}
